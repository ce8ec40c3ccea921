"""Waiting on the user's code (a data function): a "still waiting (N s)" line every 30 s, and an optional
time limit.

The limit is a SIGALRM timer in the main thread: its handler raises `TimedOut` inside the user's function,
which stops Python code wherever it is (a loop, a `time.sleep`, a socket read); a call stuck inside a C
extension stops when it returns to Python. `TimedOut` is a BaseException, so the user's `except Exception`
does not swallow it; and if the user's code catches it anyway and raises something else, the block still
ends in `TimedOut`. Code that catches every exception and goes on (a retry loop) gets it again every
AGAIN_EVERY seconds; still running GIVE_UP_AFTER seconds past the limit, the process ends with one line saying
so (exit code 1): nothing else can stop Python code that refuses to stop. Outside the main thread (Python runs signal handlers only there) the limit cannot be
kept: the block runs without it and says so.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Callable, Optional

STILL_WAITING_EVERY = 30.0  # seconds between "still waiting" lines
AGAIN_EVERY = 0.5  # after the limit, `TimedOut` is raised again this often (a retry loop that caught it)
GIVE_UP_AFTER = 5.0  # seconds past the limit after which code that keeps catching it ends the process


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
        now = time.monotonic()
        if fired and now - fired[0] > GIVE_UP_AFTER:  # the code catches every exception and goes on: end it all
            import os
            import sys

            line = (f"error: {what} did not return within {timeout:g} s and could not be stopped (it catches the"
                    f" time limit's exception and goes on); the run ends")
            if say is not None:  # the terminal (stderr may be the run's log by now)
                say(line)
            else:
                sys.stderr.write(f"quant-report: {line}\n")
                sys.stderr.flush()
            from reporter.core.files import abandon_staged

            abandon_staged()  # nothing half-written left behind
            os._exit(1)
        if not fired:
            fired.append(now)
        raise TimedOut()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout, AGAIN_EVERY)  # again and again until the block ends
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
