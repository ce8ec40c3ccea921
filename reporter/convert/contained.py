"""Native crashes contained: a step that runs TensorFlow code known to crash the process (the calibrator
segfaults in `_feed_tensors` on some GRU models) runs in a spawned child process, so that a crash there
fails that step, not the run.

`Child()` starts the process at once (its TensorFlow import overlaps the run's loading and float conversion);
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
import re
import signal
import sys
import tempfile
import traceback
from typing import Callable, Optional

CRASH_ENV = "QUANT_REPORT_CRASH_IN"  # test hook: the step named here dies of SIGSEGV in the child
TAIL_LINES = 3  # lines of the child's log quoted in a crash's one-line message
CALIBRATE = "calibrate"
CONVERT = "convert"
DEBUG = "debug"
STEP_WORDS = {CALIBRATE: "calibration", CONVERT: "conversion", DEBUG: "debugger"}  # how a crash names its step


class NativeCrash(RuntimeError):
    """The child died of a signal (or vanished) while running `step`. A RuntimeError, not an input error: the
    step fails (a variant is recorded as failed), the run goes on."""

    def __init__(self, step: str, how: str, tail: list):
        self.step, self.how, self.tail = step, how, tail
        last = " | ".join(line[-120:] for line in tail)
        said = f"{STEP_WORDS.get(step, step)} crashed ({how})"
        super().__init__(said + (f"; last lines of its log: {last}" if last else ""))


class ContainedError(RuntimeError):
    """`fn` raised in the child (its traceback is in the run's log)."""


def signal_name(exitcode: Optional[int]) -> str:
    """'SIGSEGV' for a process ended by signal 11 (exit code -11), else 'exit code N'."""
    if exitcode is not None and exitcode < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-exitcode).name
        return f"signal {-exitcode}"
    return f"exit code {exitcode}"


class Child:
    """One spawned process that runs steps for the run, one at a time; dead after a crash."""

    def __init__(self):
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        # The child opens its log, then removes its name (see `_serve`): this process reads it through `_log`, and
        # nothing is left in TMPDIR when either is killed (SIGKILL included); `close` removes the name otherwise.
        self._log, self._log_path = tempfile.mkstemp(prefix="quant-report-contained-", suffix=".log")
        self._read = 0
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(target=_serve, args=(child_conn, os.getpid(), self._log_path),
                                        name="quant-report-contained", daemon=True)
        self._process.start()
        child_conn.close()
        self.crashed: Optional[NativeCrash] = None

    def call(self, step: str, fn: Callable, *args):
        """`fn(*args)` in the child. Raises NativeCrash (the child died) or ContainedError (`fn` raised)."""
        if self.crashed is not None:
            raise self.crashed
        try:
            self._conn.send((step, fn, args))
            kind, value = self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            self._process.join(30)
            self.crashed = NativeCrash(step, signal_name(self._process.exitcode), self._tail())
            raise self.crashed from None
        finally:
            self._copy_log()
        if kind == "error":
            raise ContainedError(value)
        return value

    def _new_text(self) -> str:
        try:
            data = b""
            while True:
                chunk = os.pread(self._log, 1 << 20, self._read + len(data))
                if not chunk:
                    break
                data += chunk
        except OSError:
            return ""
        self._read += len(data)
        return data.decode("utf-8", errors="replace")

    def _copy_log(self):
        text = self._new_text()
        if text:
            sys.stderr.write(text)
            sys.stderr.flush()

    def _tail(self) -> list:
        start = self._read
        text = self._new_text()
        self._read = start  # read again and copied to the run's log by `call`
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        fatal = next((i for i, line in enumerate(lines) if line.startswith("Fatal Python error")), None)
        if fatal is not None:  # faulthandler's dump: the error, then the innermost frames first
            frames = [_frame(line) for line in lines[fatal + 1:] if line.startswith("File ")]
            return [lines[fatal]] + frames[:TAIL_LINES - 1]
        return lines[-TAIL_LINES:]

    def close(self):
        """Stops the child (at once if it is busy) and removes its log."""
        with contextlib.suppress(Exception):
            if self._process.is_alive():
                self._conn.send(None)
                self._process.join(5)
        with contextlib.suppress(Exception):
            if self._process.is_alive():
                self._process.terminate()
                self._process.join(5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(5)
        with contextlib.suppress(Exception):
            self._conn.close()
        with contextlib.suppress(OSError):
            os.remove(self._log_path)  # gone already once the child opened it
        with contextlib.suppress(OSError):
            os.close(self._log)


def _frame(line: str) -> str:
    """'File "/a/b/calibrator.py", line 93 in _feed_tensors' as 'calibrator.py:93 in _feed_tensors'."""
    match = re.match(r'File "(.*)", line (\d+) in (.*)', line)
    return f"{os.path.basename(match.group(1))}:{match.group(2)} in {match.group(3)}" if match else line


def _serve(conn, parent: int, log_path: str):
    """The child: dies with the run, writes its output (and a faulthandler traceback on a crash) to
    `log_path`, imports TensorFlow, then runs what it is sent until it is sent None."""
    import faulthandler

    log = open(log_path, "a", encoding="utf-8", errors="replace", buffering=1)
    with contextlib.suppress(OSError):  # the run reads it through its own descriptor: no name left to sweep
        os.remove(log_path)

    from reporter.core.lifetime import die_with_parent, remove_autograph_files

    die_with_parent(parent)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    faulthandler.enable(file=log)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with contextlib.suppress(Exception):
        import tensorflow  # noqa: F401 - imported now, while the run loads and converts float
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message is None:
            break
        step, fn, args = message
        if os.environ.get(CRASH_ENV) == step:
            log.flush()
            os.kill(os.getpid(), signal.SIGSEGV)
        try:
            reply = ("ok", fn(*args))
        except Exception as exc:  # noqa: BLE001 - sent back to the run, which decides
            traceback.print_exc()
            reply = ("error", f"{type(exc).__name__}: {exc}")
        log.flush()
        conn.send(reply)
    log.flush()
    remove_autograph_files()
    os._exit(0)  # TensorFlow's teardown is slow and not needed


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
    import tensorflow as tf

    from reporter.convert.converter import configure

    return bytes(configure(tf.lite.TFLiteConverter.from_saved_model(folder), variant, x_calib).convert())
