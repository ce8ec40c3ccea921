"""Terminal progress lines, and keeping TensorFlow's chatter in run.log instead of the terminal."""

from __future__ import annotations

import contextlib
import os
import sys
import time


class Progress:
    """Prints one short line per stage to the user's terminal, even while output is captured."""

    def __init__(self, name: str, stream=None, quiet: bool = False, listener=None):
        self.name = name
        self.quiet = quiet
        self._fd = None
        self._log_path = None  # run.log while `capture` sends the process's output there
        self._stream = stream
        self.timings: dict[str, float] = {}
        self.listener = listener  # called with "stage" or "stage detail" as each stage starts
        self.current = ""

    def _write(self, text: str):
        if self.quiet:
            return
        if self._fd is not None:
            os.write(self._fd, text.encode())
        else:
            stream = self._stream or sys.stderr
            stream.write(text)
            stream.flush()

    def say(self, text: str):
        from reporter.core.files import printable

        self._write(f"[{printable(self.name)}] {printable(text)}\n")

    @contextlib.contextmanager
    def stage(self, key: str, text: str = "", detail: str = ""):
        """Times a stage under `key` (adding up repeats); prints `text` and the duration if given. A run whose
        SIGTERM a library swallowed stops here."""
        from reporter.core.lifetime import stop_if_terminated

        stop_if_terminated()
        self.current = f"{key} {detail}".strip()
        if self.listener:
            self.listener(self.current)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t0
            self.timings[key] = round(self.timings.get(key, 0.0) + dt, 3)
        if text:  # only when the stage worked: "model and data loaded" never precedes the error
            self.say(f"{text} ({dt:.1f} s)")

    @contextlib.contextmanager
    def capture(self, log_path):
        """Sends everything written to fds 1 and 2 (TensorFlow's C++ and Python output) to log_path.

        Progress lines still reach the terminal through a copy of the original stderr.
        """
        sys.stdout.flush()
        sys.stderr.flush()
        saved_out, saved_err = os.dup(1), os.dup(2)
        self._fd = saved_err
        log = open(log_path, "a", encoding="utf-8", errors="replace", buffering=1)
        self._log_path = log_path
        py_out, py_err = sys.stdout, sys.stderr
        try:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            sys.stdout = sys.stderr = log  # Python-level writers too, even when sys.std* are not fds 1/2
            yield
        finally:
            sys.stdout, sys.stderr = py_out, py_err
            log.flush()
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)
            self._fd = None
            self._log_path = None
            log.close()


    # --- a converter's cause, read from what it printed -----------------------------------------------------------
    def mark(self) -> int:
        """Where run.log ends now: `failure` reads what was printed after it."""
        if self._log_path is None:
            return 0
        try:
            return os.path.getsize(self._log_path)
        except OSError:
            return 0

    def failure(self, exc: BaseException, since: int) -> str:
        """`exc` in one line, with the cause TensorFlow's converter printed (its last "error: ..." line since `since`)
        when the exception itself says only its type ("RuntimeError")."""
        from reporter.core.errors import one_line

        said = one_line(exc)
        if self._log_path is None or str(exc).strip():
            return said
        try:
            with open(self._log_path, encoding="utf-8", errors="replace") as log:
                log.seek(since)
                printed = log.read()
        except OSError:
            return said
        causes = [line.split("error:", 1)[1].strip() for line in printed.splitlines() if "error:" in line]
        return f"{said}: {causes[-1]}"[:300] if causes else said
