"""TFLite Micro's interpreter over samples, in a child process of its own (it imports numpy and tflite_micro only,
so the child starts in a fraction of a second): a model TFLite Micro cannot prepare prints its reason to stderr
and may abort, and neither may end the run."""

from __future__ import annotations

import os
import re
import tempfile

import numpy as np

ARENA_LINE = re.compile(r"Arena allocation total (\d+) bytes")
# The arena a model is run in when the device's is not given: generous, so that TFLite Micro's default (10x the
# model's bytes) never decides whether a model runs; the arena it used is measured from its allocation report.
MEASURING_ARENA = 64 << 20


def measuring_arena(model: bytes) -> int:
    return max(MEASURING_ARENA, 10 * len(model))


class _Stderr:
    """The process's stderr (file descriptor 2, where TFLite Micro's C++ writes) captured into one file for the
    whole run; `call(fn)` gives fn's result or exception and the text written meanwhile."""

    def __enter__(self):
        self._saved = os.dup(2)
        self._sink = tempfile.TemporaryFile()
        os.dup2(self._sink.fileno(), 2)
        return self

    def call(self, fn):
        start = self._sink.seek(0, os.SEEK_END)
        try:
            result, error = fn(), None
        except Exception as exc:  # noqa: BLE001 - returned with what TFLite Micro printed
            result, error = None, exc
        self._sink.seek(start)
        return result, error, self._sink.read().decode("utf-8", "replace")

    def __exit__(self, *exc):
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._sink.close()


def run(model: bytes, inputs: list, outputs: int, arena_size=None) -> dict:
    """Every sample of `inputs` (one array per model input, in the model's input order, already in its dtype)
    through TFLite Micro, one invoke each (reset between samples: no state carries over), in a tensor arena of
    `arena_size` bytes (None: measuring_arena, enough for any model here). Returns {"outputs": [array per output],
    "arena_bytes": int or None} or {"error": one line, TFLite Micro's own words}. The arena used is read from the
    allocation report TFLite Micro prints (its Python interpreter returns no such value)."""
    from tflite_micro import runtime

    with _Stderr() as stderr:
        arena_size = arena_size or measuring_arena(model)
        made, error, text = stderr.call(lambda: runtime.Interpreter.from_bytes(bytes(model), arena_size=arena_size))
        if error is not None:
            return {"error": _reason(error, text)}
        it = made
        n = len(inputs[0]) if inputs else 0
        found = [[] for _ in range(outputs)]
        arena = None
        for i in range(n):
            for position, array in enumerate(inputs):
                it.set_input(np.ascontiguousarray(array[i:i + 1]), position)
            _, error, text = stderr.call(it.invoke)
            if error is not None:
                return {"error": _reason(error, text)}
            for j in range(outputs):
                found[j].append(np.array(it.get_output(j)))
            if arena is None:
                _, _, text = stderr.call(it.print_allocations)
                match = ARENA_LINE.search(text)
                arena = int(match.group(1)) if match else None
            it.reset()
    return {"outputs": [np.concatenate(rows) if rows else np.zeros((0,)) for rows in found], "arena_bytes": arena}


def _reason(error: Exception, text: str) -> str:
    """TFLite Micro's reason in one line: what its C++ printed (the kernel's own message), else the exception."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = "; ".join(line for line in lines if not line.startswith("[RecordingMicroAllocator]"))[:400]
    return said or f"{type(error).__name__}: {error}"
