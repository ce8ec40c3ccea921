"""Python's cyclic garbage collector kept off the libraries' objects.

TensorFlow's import leaves ~560,000 objects that live as long as the process. Python's full (generation 2)
collections walk every one of them: 0.3 s each once TensorFlow is in, 0.6 s of collections during its import
alone and ~1 s later in a MobileNetV2's run (its charts and PDF allocate enough to start three or four), in each
process that imports it. Those objects are never garbage, so:

* `imports()`: collection paused while a big library imports (it allocates much and frees little), and what exists
  afterwards frozen (`gc.freeze`): later collections skip it. Objects freed later are still freed by their reference
  counts; only a cycle among the frozen objects would stay, and imports make next to none.
* `freeze()`: what exists now frozen (after the model and the reporting libraries are loaded).
* `paused()`: collection paused for a block that allocates many short-lived objects in cycles (the PDF's layout).
* `frozen_for_the_run()`: the run's process unfreezes at the run's end what it froze (a notebook's objects go back to
  ordinary collection), and freezes nothing when something else in the process already uses `gc.freeze`.

The same objects, the same results: only when the collector looks at them changes.
"""

from __future__ import annotations

import contextlib
import gc

_OWNED = [False]  # this process's freezing is quant-report's (nobody froze before it)


@contextlib.contextmanager
def imports():
    """Collection paused for the block, then every object that exists frozen (see the module's text)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        freeze()
        if enabled:
            gc.enable()


def freeze() -> None:
    """Every object that exists now is skipped by later collections (a no-op where something else froze first)."""
    if _OWNED[0] or gc.get_freeze_count() == 0:
        _OWNED[0] = True
        gc.freeze()


@contextlib.contextmanager
def paused():
    """Collection paused for the block (and resumed after it, as it was): for a library that allocates many short-lived
    objects in cycles (WeasyPrint's boxes: a 13-page PDF's layout went 1.27 -> 1.12 s). What it leaves is freed by the
    next collection after the block."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def frozen_for_the_run():
    """The run's process: freezing allowed in the block (unless the process froze objects of its own before), and
    everything frozen in it returned to ordinary collection at its end."""
    ours = gc.get_freeze_count() == 0
    _OWNED[0] = ours
    try:
        yield
    finally:
        if ours and _OWNED[0]:
            gc.unfreeze()
        _OWNED[0] = False
