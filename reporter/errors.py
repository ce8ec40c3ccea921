"""Errors the user can fix: each carries one line that names the file and the problem."""


class QuantReportError(Exception):
    """A problem with the user's input or settings, shown as one line without a traceback."""


class InputError(QuantReportError):
    """A model or data file that cannot be used, with the file named in the message."""

    def __init__(self, path, problem):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
