"""Native crashes contained: a step that runs TensorFlow code known to crash the process (the calibrator
segfaults in `_feed_tensors` on some GRU models) runs in a spawned child process, so that a crash there
fails that step, not the run.

`Child()` starts the process at once and `warm()` has it import TensorFlow: at once when the run has no side
process, else once the run's own import and loading are done, so that three TensorFlow imports do not share two cores
(the import then overlaps the export and the float conversion);
`call(step, fn, *args)` runs a module-level `fn(*args)` there and returns its result. When the child dies of a
signal, `call` raises `NativeCrash` naming the step, the signal and the last lines the child wrote (its
faulthandler traceback among them); everything the child wrote is also copied into the run's log. An
ordinary exception in the child is raised as `ContainedError` with the child's traceback in the log.

Test hook (documented in the README): `QUANT_REPORT_CRASH_IN=calibrate` makes the child kill itself with
SIGSEGV when asked to run the step named `calibrate` (any step name works), the way the calibrator crashes.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any, Callable, Optional

from reporter.core import children
from reporter.core.children import signal_name  # noqa: F401 - the crash's words, as the run's callers read them

LOWEST_PRIORITY = 19  # nice value of work done `behind` the run
CRASH_ENV = "QUANT_REPORT_CRASH_IN"  # test hook: the step named here dies of SIGSEGV in the child
CALIBRATE = "calibrate"
CONVERT = "convert"
DEBUG = "debug"
LITERT_CALIBRATION = "litert-calibration"
STEP_WORDS = {CALIBRATE: "calibration", CONVERT: "conversion", DEBUG: "debugger",
              LITERT_CALIBRATION: "LiteRT Quantizer's calibration"}  # how a crash names its step


class NativeCrash(children.Crashed):
    """The child died of a signal (or vanished) while running `step`. A RuntimeError, not an input error: the
    step fails (a variant is recorded as failed), the run goes on."""

    def __init__(self, step: str, crashed: children.Crashed):
        self.step = step
        super().__init__(crashed.what, crashed.how, crashed.tail)


class ContainedError(children.ChildError):
    """`fn` raised in the child (its traceback is in the run's log)."""


class Child:
    """One spawned process (reporter.core.children) that runs the run's steps, one at a time; dead after a
    crash. TensorFlow is imported there when `warm()` asks, or by the first step."""

    def __init__(self):
        self._child = children.Child("the contained step", name="quant-report-contained")
        self.crashed: Optional[NativeCrash] = None  # the crash that ended the child, naming the step it ran

    def warm(self):
        """Starts TensorFlow's import in the child and returns at once (a step asked meanwhile waits for it; a
        failed import is raised again by that step's own import)."""
        self._child.submit(_import_tensorflow)

    def call(self, step: str, fn: Callable, *args):
        """`fn(*args)` in the child. Raises NativeCrash (the child died) or ContainedError (`fn` raised)."""
        if self.crashed is not None:
            raise self.crashed
        return self._result(step, lambda: self._child.call(_step, step, fn, args, what=STEP_WORDS.get(step, step)))

    def submit(self, step: str, fn: Callable, *args) -> Callable[[], Any]:
        """Starts `fn(*args)` in the child (after the steps asked before it) and returns at once; calling what it
        returns waits for the result and raises as `call` does."""
        if self.crashed is not None:
            raise self.crashed
        future = self._child.submit(_step, step, fn, args, what=STEP_WORDS.get(step, step))
        return lambda: self._result(step, future.result)

    def _result(self, step: str, wait: Callable[[], Any]):
        try:
            return wait()
        except children.Crashed as crash:
            self.crashed = NativeCrash(step, crash)
            raise self.crashed from None
        except children.ChildError as exc:
            raise ContainedError(str(exc)) from None

    def helper(self):
        """This child as a helper for work that may run beside the run once the measuring is done (the charts,
        render.formats.charts' `helper`: `call(fn, *args)` gives a Future); None after a crash."""
        return None if self.crashed is not None or self._child.failed is not None else _Helper(self._child)

    def close(self):
        """Stops the child (at once if it is busy) and removes its log."""
        self._child.close()


class Background:
    """Work started in the contained child beside the run (LiteRT Quantizer's calibration, a repair rung's prefetch)
    that no latency may be timed during: the run's timing lock (reporter.pipeline.beside.quiet_lock) waits for it."""

    def __init__(self):
        self._pending: list = []

    def add(self, wait: Callable[[], object]) -> None:
        """`wait()` returns (or raises) once that work is done."""
        self._pending.append(wait)

    def wait(self) -> None:
        for wait in self._pending:
            with contextlib.suppress(Exception):  # its failure is said where its result is read
                wait()


class _Helper:
    """`call(fn, *args)`: a Future of `fn(*args)` run in the child, after the steps asked before it."""

    def __init__(self, child: children.Child):
        self._child = child

    def call(self, fn: Callable, *args):
        return self._child.submit(fn, *args)


def _import_tensorflow():
    from reporter.core import heap

    with heap.imports():  # kept out of Python's collections (reporter.core.heap)
        import tensorflow  # noqa: F401 - imported now, while the run exports and converts float


def _step(step: str, fn: Callable, args: tuple):
    """In the child: `fn(*args)`, or the test hook's SIGSEGV when `step` is the one named in CRASH_ENV."""
    if os.environ.get(CRASH_ENV) == step:
        os.kill(os.getpid(), signal.SIGSEGV)
    return fn(*args)


def behind(fn: Callable, *args):
    """In the child: `fn(*args)` on a thread of the lowest CPU priority (Linux: a thread's nice value is its own), so
    that it takes only the time the run's other processes leave (LiteRT Quantizer's calibration while the search
    builds and scores candidates on both cores). Where priorities cannot be set, at the usual one."""
    import threading

    done: dict = {}

    def work():
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_PRIORITY)
        try:
            done["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - raised again in the child's own thread, below
            done["error"] = exc

    thread = threading.Thread(target=work, name="quant-report-behind")
    thread.start()
    thread.join()
    if "error" in done:
        raise done["error"]
    return done["value"]


def calibrate(float_model: bytes, x_calib) -> bytes:
    """What TF's converter does in its calibrate-only path after its own float conversion
    (`add_intermediate_tensors`, then `Calibrator.calibrate`), on the float model already converted."""
    from tensorflow.lite.python.optimize import calibrator

    from reporter.convert.converter import representative_dataset

    model = calibrator.add_intermediate_tensors(float_model)
    return bytes(calibrator.Calibrator(model).calibrate(representative_dataset(x_calib)))


def convert_once(folder: str, variant: str, x_calib) -> bytes:
    """`variant` converted from the SavedModel in `folder` by TF's converter, in a child of its own (a
    calibrated variant after the calibration crashed: the converter calibrates too)."""
    child = Child()
    try:
        return child.call(CONVERT, _convert, folder, variant, x_calib)
    finally:
        child.close()


def _convert(folder: str, variant: str, x_calib) -> bytes:
    from reporter.convert.converter import configure, from_saved_model

    return bytes(configure(from_saved_model(folder), variant, x_calib).convert())
