"""A wall around the user's code (data functions, metric modules and functions): a `sys.exit` or a
KeyboardInterrupt it raises itself becomes one InputError naming it, instead of ending quant-report with the
user's exit code (exit 3 reads as a failed gate, exit 0 as success with nothing written). A real Ctrl-C or
SIGTERM arriving meanwhile is not the user's code: it still goes through."""

from __future__ import annotations

import contextlib
import signal
import threading

from reporter.core.errors import InputError


@contextlib.contextmanager
def wall(name: str, what: str, must: str):
    """Runs the user's code in the `with` block: SystemExit and KeyboardInterrupt raised by it become
    InputError(name, "WHAT called sys.exit(3); MUST"). A SIGINT or SIGTERM received meanwhile (Ctrl-C, a CI
    timeout) is not the user's code: its exception passes through unchanged."""
    with _signals_seen() as seen:
        try:
            yield
        except SystemExit as exc:
            if seen:
                raise
            code = "" if exc.code is None else repr(exc.code).splitlines()[0][:80]
            raise InputError(name, f"{what} called sys.exit({code}); {must}") from None
        except KeyboardInterrupt:
            if seen:
                raise
            raise InputError(name, f"{what} raised KeyboardInterrupt; {must}") from None


@contextlib.contextmanager
def _signals_seen():
    """Records SIGINT and SIGTERM received inside the block (the handlers in place still run); in the main
    thread only, where Python runs signal handlers."""
    seen: list = []
    saved = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(sig)
            if not callable(previous):  # the default or ignored: no exception that could be mistaken
                continue

            def noted(signum, frame, previous=previous):
                seen.append(signum)
                return previous(signum, frame)

            saved[sig] = previous
            signal.signal(sig, noted)
    try:
        yield seen
    finally:
        for sig, previous in saved.items():
            signal.signal(sig, previous)
