"""The batch's progress on the terminal: which model is at which stage, how many are done, elapsed time."""

from __future__ import annotations

import shutil
import sys
import time

from reporter.batch.worker import Outcome
from reporter.core import variants


class Display:
    """Which model is at which stage, how many are done, elapsed time.

    On a terminal one status line is redrawn in place; otherwise (CI logs) plain lines are printed
    when a model starts a new stage and when it ends.
    """

    def __init__(self, total: int, stream=None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.quiet = quiet
        self.total = total
        self.done = 0
        self.failed = 0
        self.stages: dict[str, str] = {}
        self.t0 = time.monotonic()

    def _elapsed(self) -> str:
        s = int(time.monotonic() - self.t0)
        return f"{s // 60:02d}:{s % 60:02d}"

    def _line(self, text: str):
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\x1b[2K" + text + "\n")
            self._status()
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _status(self):
        if self.quiet or not self.tty:
            return
        running = ", ".join(f"{n}: {s}" for n, s in self.stages.items())
        text = f"[{self._elapsed()}] {self.done}/{self.total} done" + (f", {self.failed} failed" if self.failed else "")
        width = shutil.get_terminal_size((120, 20)).columns - 1
        self.stream.write("\r\x1b[2K" + (text + (" | " + running if running else ""))[:width])
        self.stream.flush()
        self._last_status = time.monotonic()

    def tick(self):
        """Keeps the elapsed time moving during long stages (terminal only, once a second)."""
        if self.tty and time.monotonic() - getattr(self, "_last_status", 0.0) >= 1.0:
            self._status()

    # In plain-line mode only these stages get a line; the measuring sub-steps would flood a CI log.
    MAJOR = ("starting", "load", "convert", "debug", variants.SELECTIVE, "render")

    def stage(self, name: str, stage: str):
        self.stages[name] = stage
        if not self.tty and stage.split(" ")[0] in self.MAJOR:
            self._line(f"[{self._elapsed()}] {name}: {stage}")
        else:
            self._status()

    def finish(self, outcome: Outcome):
        self.stages.pop(outcome.name, None)
        self.done += 1
        if outcome.status == "failed":
            self.failed += 1
            text = f"FAILED at {outcome.stage}: {outcome.error} (log: {outcome.log})"
        elif outcome.status == "skipped":
            text = "unchanged, report kept (--resume)"
        else:
            text = f"done in {outcome.seconds:.1f} s"
        self._line(f"[{self._elapsed()}] {outcome.name}: {text}  ({self.done}/{self.total})")

    def close(self):
        if self.tty and not self.quiet:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
