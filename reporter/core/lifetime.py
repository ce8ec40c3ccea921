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
* `run_tempdir()` gives a run a temporary folder of its own, `quant-report-tmp-XXXXXXXX` in the user's TMPDIR,
  for the run's process and every process it starts (TMPDIR and `tempfile.tempdir` point there): TensorFlow's
  autograph files and every other temporary file go there, and the folder goes at the run's end. Each process
  using it holds it locked (shared) and it carries a marker file, so that the next run removes the folder of a
  run killed with SIGKILL (marked, ours, held by nobody) and never anything else.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

from reporter.core.exit_codes import ExitCode  # noqa: E402

TERMINATED_EXIT = int(ExitCode.TERMINATED)  # 143: what a shell reports for a process ended by SIGTERM
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
AUTOGRAPH_PREFIX = "__autograph_generated_file"
RUN_TMP_PREFIX = "quant-report-tmp-"  # a run's own temporary folder, in the user's TMPDIR
RUN_TMP_MARKER = ".quant-report-tmp"  # in it, written right after the folder is made and locked
RUN_TMP_LINE = "quant-report: one run's temporary files; removed when the run ends, or by a later run\n"
RUN_TMP_ENV = "QUANT_REPORT_TMPDIR"  # the run's folder, handed to the processes it starts (beside TMPDIR)
_RUN_TMP_NAME = re.compile(r"^quant-report-tmp-[a-z0-9_]{8}$")  # tempfile.mkdtemp's 8 characters


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


_run_tmp_lock = threading.Lock()
_run_tmp: dict = {}  # this process's run folder while a run uses it: folder, fd, made, depth, previous values
_held: list[int] = []  # a started process's hold on the folder its run handed it (released when it ends)


@contextlib.contextmanager
def run_tempdir():
    """The run's own temporary folder for the duration of the block (yielded): this process's temporary files
    and those of the processes it starts go there, TensorFlow's autograph files among them; it is removed at the
    end. Made in the user's TMPDIR, held locked (shared) and marked; the folders of dead runs are removed first
    (`remove_dead_tempdirs`). Nested blocks, and a process started by a run, use the folder already there."""
    with _run_tmp_lock:
        if not _run_tmp:
            _run_tmp.update(_enter_tempdir())
        _run_tmp["depth"] += 1
        folder = _run_tmp["folder"]
    try:
        yield Path(folder)
    finally:
        with _run_tmp_lock:
            _run_tmp["depth"] -= 1
            if _run_tmp["depth"] == 0:
                _leave_tempdir(_run_tmp)
                _run_tmp.clear()


def user_tempdir() -> str:
    """The user's temporary folder: TMPDIR as it was before a run pointed it at the run's own folder."""
    return _run_tmp.get("base") or tempfile.gettempdir()


def hold_inherited_tempdir() -> None:
    """Called first in a process a run started: holds the run's folder (TMPDIR, as `run_tempdir` handed it on)
    locked while this process lives, so that no other run removes it under this one."""
    handed = _handed_down()
    if handed is not None:
        _held.append(handed[1])


def _handed_down():
    """(folder, descriptor holding it) when this process was started by a run and TMPDIR is still that run's
    folder (marked, held by the run), else None."""
    given = os.environ.get(RUN_TMP_ENV)
    if not given or given != os.environ.get("TMPDIR"):
        return None
    fd = _hold_marked(given)
    return None if fd is None else (given, fd)


def _enter_tempdir() -> dict:
    import fcntl

    previous = {"tempdir": tempfile.tempdir, "TMPDIR": os.environ.get("TMPDIR"),
                RUN_TMP_ENV: os.environ.get(RUN_TMP_ENV)}
    handed = _handed_down()
    if handed is not None:  # a process a run started: that run's folder, held, not this one's to remove
        tempfile.tempdir = handed[0]
        return {"folder": handed[0], "fd": handed[1], "made": False, "depth": 0, "previous": previous,
                "base": str(Path(handed[0]).parent)}
    base = tempfile.gettempdir()
    remove_dead_tempdirs(base)
    folder = tempfile.mkdtemp(prefix=RUN_TMP_PREFIX, dir=base)
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        fcntl.flock(fd, fcntl.LOCK_SH)  # held before it is marked: a marked folder nobody holds is a dead run's
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        marker = os.open(RUN_TMP_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        with os.fdopen(marker, "w", encoding="utf-8") as f:
            f.write(RUN_TMP_LINE)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)
        raise
    tempfile.tempdir = os.environ["TMPDIR"] = os.environ[RUN_TMP_ENV] = folder
    return {"folder": folder, "fd": fd, "made": True, "depth": 0, "previous": previous, "base": base}


def _leave_tempdir(state: dict) -> None:
    previous = state["previous"]
    tempfile.tempdir = previous["tempdir"]
    for key in ("TMPDIR", RUN_TMP_ENV):
        if previous[key] is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = previous[key]
    try:
        if state["made"]:
            _remove_marked(Path(state["folder"]))
    finally:
        os.close(state["fd"])


def remove_dead_tempdirs(base) -> list[Path]:
    """Removes from `base` the temporary folders of runs that died (SIGKILL skips every clean-up): only a folder
    named `quant-report-tmp-XXXXXXXX`, owned by this user, holding quant-report's marker (a regular file whose
    first line is ours) and held by no live process. Anything else, however it is named, is never touched."""
    removed = []
    try:
        with os.scandir(base) as found:
            paths = [entry.path for entry in found if _RUN_TMP_NAME.match(entry.name)]
    except OSError:
        return removed
    for path in paths:
        fd = _hold_marked(path, exclusive=True)  # removed while held: no run can take it up meanwhile
        if fd is None:
            continue
        try:
            _remove_marked(Path(path))
            removed.append(Path(path))
        finally:
            os.close(fd)
    return removed


def _hold_marked(folder: str, exclusive: bool = False):
    """An open descriptor of `folder` holding its lock (shared, or exclusive), or None when it is not a run folder
    of this user's that quant-report marked (never following a link), or the lock is taken (a live run holds it
    shared; a run removing it, exclusive)."""
    import fcntl
    import stat

    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_uid != os.getuid():
            raise OSError("another user's")
        marker = os.open(RUN_TMP_MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        with os.fdopen(marker, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode) \
                    or f.readline(len(RUN_TMP_LINE) + 1) != RUN_TMP_LINE.encode("utf-8"):
                raise OSError("not marked")
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _remove_marked(folder: Path) -> None:
    """Removes a run folder, its marker last: a removal cut short leaves a folder the next run still knows."""
    with contextlib.suppress(OSError), os.scandir(folder) as found:
        for entry in found:
            if entry.name == RUN_TMP_MARKER:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    with contextlib.suppress(OSError):
        os.unlink(folder / RUN_TMP_MARKER)
    with contextlib.suppress(OSError):
        os.rmdir(folder)
