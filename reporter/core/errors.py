"""Errors the user can fix: each carries one line that names the file and the problem."""

from __future__ import annotations

import errno
import os
import re
from typing import Optional


class QuantReportError(Exception):
    """A problem with the user's input or settings, shown as one line without a traceback."""


class InputError(QuantReportError):
    """A model or data file that cannot be used, with the file named in the message."""

    def __init__(self, path, problem):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UsageError(QuantReportError):
    """A bad flag, value or setting: nothing ran (exit code 2)."""


class RenderError(QuantReportError):
    """One or more report formats could not be rendered; the others were written to `folder`."""

    def __init__(self, folder, errors: dict):
        self.folder = str(folder)
        self.errors = dict(errors)
        what = "; ".join(f"{fmt}: {error}" for fmt, error in self.errors.items())
        super().__init__(f"{self.folder}: could not render {what} (the other formats were written)")


class FloatNotMeasuredError(QuantReportError):
    """The float model, every comparison's reference, could not be measured; the report was written and
    says why, but the run did not work (exit code 1)."""

    def __init__(self, folder, error: str):
        self.folder = str(folder)
        super().__init__(f"{self.folder}: the float model could not be measured ({error}); the report there says"
                         " so, and nothing was compared with it")


def first_line(exc: BaseException) -> str:
    """An exception's text as one line for a message naming a file: its first line (its type's name when it has
    no text), cut to 300 characters."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def one_line(exc: BaseException) -> str:
    """An exception as one line for a report or a progress line: its type and the first line of its text."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:300] if first else type(exc).__name__


# What a sentence leaves out of a recorded failure (the raw text stays in run.log and report.json): exception class
# names, MLIR source locations, the runtime's source positions and node numbers.
_CLASS_NAME = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Crash)|TimedOut|Crashed)"
                         r"(?::\s*|\s*$)")  # the child runner's own classes too (reporter.core.children)
_SOURCE_POSITION = re.compile(r"\S+\.(?:cc|cpp|h):\d+\s*")
_NODE = re.compile(r"\s*Node number \d+ \((\w+)\) failed to (\w+)\.?")


def plain(text: Optional[str]) -> str:
    """A recorded failure said in the user's terms for a sentence: the cause without exception class names
    ("RuntimeError: "), MLIR locations (loc("model/dense/MatMul"): ) or the runtime's source positions and node
    numbers ("Node number 1 (CONV_2D) failed to prepare" reads "CONV_2D failed to prepare")."""
    text = _CLASS_NAME.sub("", _without_locations(text or ""))
    text = _NODE.sub(lambda m: f"; {m.group(1)} failed to {m.group(2)}", _SOURCE_POSITION.sub("", text))
    text = re.sub(r"^[;:\s]+|(?<=: );\s*|\s+(?=[;,])", "", text).strip()
    return text or "no reason given (run.log has the traceback)"


def _without_locations(text: str) -> str:
    """`text` without MLIR's loc(...) prefixes (nested parentheses included) and the ": " after each."""
    out, i = [], 0
    while True:
        start = text.find("loc(", i)
        if start < 0 or (start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_")):
            if start < 0:
                return "".join(out) + text[i:]
            out.append(text[i:start + 4])
            i = start + 4
            continue
        depth, j = 0, start + 3
        while j < len(text):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        out.append(text[i:start])
        i = j + 2 if text[j:j + 2] == ": " else j


# What the disk said, in a user's words: a full disk or a file-size limit must not read as a broken model.
_STORAGE = {
    errno.ENOSPC: "no space left on the device",
    errno.EFBIG: "file too large (a file-size limit such as `ulimit -f`, or the file system's largest file)",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
}


class StorageError(QuantReportError):
    """The disk refused a write (no space, a file-size limit, a quota, a read-only file system, permissions):
    the path and the reason, whatever library was writing."""

    def __init__(self, path: str, reason: str):
        self.path, self.reason = path, reason
        super().__init__(f"{path}: cannot write: {reason}")

    def at(self, path: str) -> "StorageError":
        """The same refusal, the path named another way (as the user knows it)."""
        return StorageError(path, self.reason)


def storage_problem(exc: BaseException) -> Optional[StorageError]:
    """The storage failure behind `exc` (an OSError with such an errno anywhere in its chain, or TensorFlow's
    error text "PATH; File too large"), or None when `exc` is something else."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _STORAGE:
            return StorageError(str(exc.filename or "the output folder"), _STORAGE[exc.errno])
        text = str(exc)
        for code, reason in _STORAGE.items():
            found = re.search(r"(\S+); " + re.escape(os.strerror(code)), text)
            if found:
                return StorageError(found.group(1), reason)
        exc = exc.__cause__ or exc.__context__
    return None
