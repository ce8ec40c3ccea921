"""How long quant-report's processes live: children die with their parent, SIGTERM cleans up like Ctrl-C, and
the temporary files TensorFlow's autograph writes go even when the process ends with `os._exit`.

* `die_with_parent(parent)` is called first thing in every child the run or a batch starts (the side
  converter, batch workers, the .tflite check): on Linux the kernel sends the child SIGKILL when its parent
  dies (`prctl(PR_SET_PDEATHSIG)`); elsewhere, or if that fails, a daemon thread watches the parent's pid.
  Either way a parent killed with SIGKILL leaves no child behind, nor (its pipe then closed by every holder)
  the multiprocessing resource tracker.
* `terminate_raises()` turns SIGTERM into `Terminated` for the duration of a `with` block: every `finally`
  and staging clean-up then runs as it does for Ctrl-C; the command exits with `TERMINATED_EXIT` (143).
  Library code may catch the `Terminated` raised inside it and raise something else (Keras's loader turns
  it into an AttributeError): the signal is remembered, so `terminating()` still says so, `stop_if_terminated()`
  (called at every stage) raises it again, and the block ends in `Terminated` whatever escaped it.
* `remove_autograph_files()` deletes the `__autograph_generated_file*.py` modules this process loaded
  (TensorFlow deletes them in an atexit hook, which `os._exit` skips).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from reporter.core.exit_codes import ExitCode  # noqa: E402

TERMINATED_EXIT = int(ExitCode.TERMINATED)  # 143: what a shell reports for a process ended by SIGTERM
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
AUTOGRAPH_PREFIX = "__autograph_generated_file"


class Terminated(BaseException):
    """SIGTERM arrived. A BaseException (as KeyboardInterrupt is): no `except Exception` swallows it, and code
    that walls off user code's KeyboardInterrupt does not take it for the user's."""


_received: list[int] = []  # SIGTERM received inside a `terminate_raises` block of this process


def terminating() -> bool:
    """True once SIGTERM arrived inside a `terminate_raises` block, even if the `Terminated` it raised was
    caught and replaced by library code on its way up."""
    return bool(_received)


def stop_if_terminated(cause: BaseException | None = None):
    """Raises `Terminated` (from `cause`) when SIGTERM arrived: an error that only followed from it is not
    reported as the model's failure, and a run whose `Terminated` was swallowed stops at its next stage."""
    if _received:
        raise Terminated() from cause


def die_with_parent(parent: int, poll_seconds: float = 1.0) -> str:
    """Makes this process die when `parent` (the pid that started it) does. Returns how: "prctl" or
    "watcher". Exits at once when the parent is already gone (it died before this ran)."""
    how = "prctl" if _pdeathsig() else "watcher"
    if os.getppid() != parent:  # re-parented: the parent died before the kernel was told to watch it
        os._exit(TERMINATED_EXIT)
    if how == "watcher":
        threading.Thread(target=_watch, args=(parent, poll_seconds), name="quant-report-parent-watch",
                         daemon=True).start()
    return how


def _pdeathsig() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int, poll_seconds: float):
    import time

    while os.getppid() == parent:
        time.sleep(poll_seconds)
    os._exit(TERMINATED_EXIT)


@contextlib.contextmanager
def terminate_raises():
    """Within the block, SIGTERM raises `Terminated` in the main thread (once: a second SIGTERM during the
    clean-up is ignored, SIGKILL still ends it). The previous handler is restored afterwards. Outside the
    main thread (signal handlers cannot be set there) it does nothing."""
    def handler(signum, frame):
        if not _received:
            _received.append(signum)
            raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    _received.clear()
    try:
        yield
    except Terminated:
        raise
    except BaseException as exc:  # what a library raised in place of the `Terminated` it caught
        stop_if_terminated(exc)
        raise
    else:
        stop_if_terminated()
    finally:
        signal.signal(signal.SIGTERM, previous)
        _received.clear()


def remove_autograph_files() -> list[str]:
    """Deletes the files behind the autograph modules this process loaded (each one TensorFlow registered for
    deletion at exit); returns their paths. Only this process's own: they are found in `sys.modules`."""
    removed = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) if name.startswith(AUTOGRAPH_PREFIX) else None
        if not path or not os.path.basename(path).startswith(AUTOGRAPH_PREFIX):
            continue
        with contextlib.suppress(OSError):
            os.remove(path)
            removed.append(path)
    return removed


@contextlib.contextmanager
def spawn_without_main():
    """The run's child processes (calibration, side conversions) are spawned: a spawned child imports the parent's
    main script first, so a script that calls `reporter.run` at its top level (no `if __name__ == "__main__"`)
    would run again in each child. The script's path is hidden from them while the run lasts; their code is
    quant-report's own."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path
