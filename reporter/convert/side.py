"""Conversions on the second core: a spawned worker process converts the variants TensorFlow's converter makes
from the run's SavedModel (DRQ, float16, 16x8, int8 I/O), and calibrates LiteRT Quantizer on the float model,
while the run converts float, calibrates, measures, debugs and searches; it also exports the Keras model first,
builds the search's next candidates (`call`) and, last, draws some of the report's charts
(reporter.render.formats.charts).

One conversion of a 150-layer MobileNetV2 takes ~6 s and holds Python's lock for much of it, so a thread does
not help; a process does. The worker imports TensorFlow while the run imports its own, converts from the same
SavedModel folder with the same settings (reporter.convert.converter.configure), and returns the same bytes the
run would have made. It is used only where it pays (two or more cores, a model big enough that its conversion
outweighs starting a second TensorFlow) and never while a latency is being timed: the run's timing lock
waits for the worker's conversions to finish (`wait`). Any failure of the worker falls back to converting in
the run's own process.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from concurrent.futures import Future
from pathlib import Path
from typing import Optional

from reporter.convert import litert
from reporter.core import variants

MIN_MODEL_BYTES = 2 * 1024 * 1024  # below this a conversion takes about a second: not worth a second TensorFlow
VARIANTS = variants.SIDE_PROCESS  # made by TensorFlow's converter from the SavedModel (the registry's `side`)
LITERT_CALIBRATION = "litert-calibration"
STOP_SECONDS = 5.0  # a busy worker asked to stop gets this long, then it is killed


def worth_it(model_path: Path, enabled: bool = True) -> bool:
    """Whether a run on this model should convert on the side: allowed, two or more cores, a big model."""
    if not enabled or (os.cpu_count() or 1) < 2:
        return False
    path = Path(model_path)
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size
    return size >= MIN_MODEL_BYTES


class SideConverter:
    """One spawned worker process (reporter.core.children) and the conversions it was asked for, by variant."""

    def __init__(self):
        from reporter.core import children

        # The worker dies with this process (a run killed by SIGKILL leaves no converter writing into its staging
        # folder), imports TensorFlow while the run imports its own and, stopped by `close`, removes its autograph
        # temp files first.
        self._child = children.Child("the side converter", initializer=_start, name="quant-report-side")
        self._futures: dict[str, Future] = {}

    def call(self, fn, *args) -> Future:
        """Runs `fn(*args)` (a module-level function: it is pickled by name) in the worker."""
        return self._child.submit(fn, *args)

    def submit(self, folder: str, variant: str, x_calib=None):
        """Starts converting `variant` from the SavedModel in `folder`."""
        if variant not in self._futures:
            self._futures[variant] = self._child.submit(_convert, folder, variant, x_calib)

    def submit_calibration(self, float_model: bytes, x_calib):
        """Starts LiteRT Quantizer's calibration of the float model (the min/max statistics every LiteRT model of
        the run reads: the recommended layers in 16x8 or dynamic range, a blamed layer's scheme fix)."""
        if LITERT_CALIBRATION not in self._futures:
            self._futures[LITERT_CALIBRATION] = self._child.submit(litert.collect_calibration, bytes(float_model),
                                                                   x_calib)

    def calibration(self):
        """The statistics, or None when the worker failed (the caller calibrates itself)."""
        return self.result(LITERT_CALIBRATION) if LITERT_CALIBRATION in self._futures else None

    def has(self, variant: str) -> bool:
        return variant in self._futures

    def result(self, variant: str) -> Optional[bytes]:
        """The converted model, or None when the worker failed (the caller converts it itself; the worker's
        traceback goes to run.log)."""
        try:
            return self._futures[variant].result()
        except Exception:  # noqa: BLE001 - a genuine conversion error is raised again by the fallback
            traceback.print_exc()
            return None

    def wait(self):
        """Returns when the worker has nothing left to convert (called before a latency is timed)."""
        for future in self._futures.values():
            with contextlib.suppress(Exception):
                future.result()

    def close(self):
        """Stops the worker, whatever it is doing (a failed run does not wait for its conversions)."""
        for future in self._futures.values():
            future.cancel()
        self._child.close(grace=STOP_SECONDS)


def _start():
    """The worker's first step: SIGTERM (from `close`) ends it at once, without TensorFlow's teardown but with its
    autograph temp files removed; then TensorFlow is imported."""
    import signal

    from reporter.core.lifetime import TERMINATED_EXIT, remove_autograph_files

    def stop(signum, frame):
        remove_autograph_files()
        os._exit(TERMINATED_EXIT)

    signal.signal(signal.SIGTERM, stop)
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    from reporter.core import heap

    with heap.imports():  # kept out of Python's collections (reporter.core.heap)
        import tensorflow  # noqa: F401 - the import is the point


def _convert(folder: str, variant: str, x_calib) -> bytes:
    from reporter.convert.converter import configure, from_saved_model

    return bytes(configure(from_saved_model(folder), variant, x_calib).convert())
