"""Errors the user can fix: each carries one line that names the file and the problem."""


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


def one_line(exc: BaseException) -> str:
    """An exception as one line for a report or a progress line: its type and the first line of its text."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:300] if first else type(exc).__name__
