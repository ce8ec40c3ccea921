"""Waiting on the user's code (a data function): a "still waiting (N s)" line every 30 s, and an optional
time limit.

The limit is a SIGALRM timer in the main thread: its handler raises `TimedOut` inside the user's function,
which stops Python code wherever it is (a loop, a `time.sleep`, a socket read); a call stuck inside a C
extension stops when it returns to Python. `TimedOut` is a BaseException, so the user's `except Exception`
does not swallow it; and if the user's code catches it anyway and raises something else, the block still
ends in `TimedOut`. Outside the main thread (Python runs signal handlers only there) the limit cannot be
kept: the block runs without it and says so.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Callable, Optional

STILL_WAITING_EVERY = 30.0  # seconds between "still waiting" lines


class TimedOut(BaseException):
    """The block ran past its time limit."""


@contextlib.contextmanager
def waiting(what: str, say: Optional[Callable[[str], None]], timeout: Optional[float] = None,
            every: Optional[float] = None):
    """Runs the block while `say` prints "still waiting for WHAT (N s)" every `every` seconds (default
    STILL_WAITING_EVERY); with `timeout` (seconds), the block is stopped after that long and `TimedOut` raised."""
    every = STILL_WAITING_EVERY if every is None else every
    done = threading.Event()
    ticker = None
    if say is not None:
        ticker = threading.Thread(target=_tick, args=(what, say, every, done), name="quant-report-waiting",
                                  daemon=True)
        ticker.start()
    try:
        with _limit(timeout, what, say):
            yield
    finally:
        done.set()
        if ticker is not None:
            ticker.join()


def _tick(what: str, say: Callable[[str], None], every: float, done: threading.Event):
    t0 = time.monotonic()
    while not done.wait(every):
        say(f"still waiting for {what} ({time.monotonic() - t0:.0f} s)")


@contextlib.contextmanager
def _limit(timeout: Optional[float], what: str, say: Optional[Callable[[str], None]]):
    if timeout is None:
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        if say is not None:
            say(f"the time limit for {what} is not kept: it is called outside the main thread")
        yield
        return
    fired: list = []

    def expire(signum, frame):
        if not fired:
            fired.append(signum)
            raise TimedOut()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    except TimedOut:
        raise
    except BaseException as exc:  # the user's code caught `TimedOut` and raised something else
        if fired:
            raise TimedOut() from exc
        raise
    else:
        if fired:  # caught and swallowed: the function returned after its limit
            raise TimedOut()
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous)
