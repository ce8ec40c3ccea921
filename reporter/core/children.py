"""The one child-process runner: every process quant-report starts is started, timed, stopped and read here.

* `Child()` is a spawned Python process that runs module-level functions sent to it, one at a time (`call`
  waits, `submit` queues and returns a Future). It leads a process group of its own and dies with its parent
  (`lifetime.die_with_parent`), so stopping it (`close`, a timeout, the run's end) ends whatever it started too,
  and a run killed with SIGKILL leaves nothing behind. What it prints (stdout, stderr, a faulthandler traceback)
  goes to a log whose name is removed as soon as it is open, and is copied to the parent's stderr (run.log).
* A call that raises in the child raises `ChildError` (the traceback is in the log); a child that dies of a
  signal or exits raises `Crashed` naming the signal and the last lines of its log; one that does not answer in
  time raises `TimedOut` after its whole process group is killed.
* `run_once(fn, *args, timeout=...)` is a Child for one call; `run_command(args, timeout=...)` runs
  `python args...` (a tool's command line, such as Vela's) in a process group of its own, with the same timeout
  and the same clean-up.
Only multiprocessing's and subprocess's public API are used."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import queue as queue_mod
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Optional

TAIL_LINES = 3  # lines of the child's log quoted in a crash's one-line message
STOP_SECONDS = 5.0  # a child asked to stop gets this long before it is killed
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
LOG_PREFIX = "quant-report-child-"  # a child's log in TMPDIR: its name goes as soon as the child opens it
AT_START: list[Callable] = []  # what every child runs first, added by the entry points (`at_start`)


def at_start(fn: Callable) -> None:
    """Every child started from now on runs `fn()` (a module-level function) first: a child is composed as the
    entry point composed its parent (reporter.plugins registers the built-in plug-ins so); this module calls none
    of its own."""
    if fn not in AT_START:
        AT_START.append(fn)


class Crashed(RuntimeError):
    """The child died (a signal, an exit) while running a call."""

    def __init__(self, what: str, how: str, tail: list):
        self.what, self.how, self.tail = what, how, tail
        last = " | ".join(line[-120:] for line in tail)
        super().__init__(f"{what} crashed ({how})" + (f"; last lines of its log: {last}" if last else ""))


class TimedOut(RuntimeError):
    """The child did not answer within its time; it and everything it started were killed."""


class ChildError(RuntimeError):
    """The function raised in the child: "Type: message" (its traceback is in the log)."""


def signal_name(exitcode: Optional[int]) -> str:
    """'SIGSEGV' for a process ended by signal 11 (exit code -11), else 'exit code N'."""
    if exitcode is not None and exitcode < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-exitcode).name
        return f"signal {-exitcode}"
    return f"exit code {exitcode}"


class Child:
    """One spawned process that runs calls one at a time; dead after a crash or a timeout.

    `initializer(*initargs)` runs first in the child (e.g. importing TensorFlow while the parent works; a batch
    worker's message queue, which can only be handed over at start). `what` names the child in messages. A child
    that starts children of its own (a batch worker) is not a daemon: multiprocessing forbids that."""

    def __init__(self, what: str = "the child process", initializer: Optional[Callable] = None,
                 initargs: tuple = (), name: str = "quant-report-child", daemon: bool = True):
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.what = what
        self._log, self._log_path = tempfile.mkstemp(prefix=LOG_PREFIX, suffix=".log")
        self._read = 0
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(target=_serve, args=(child_conn, os.getpid(), self._log_path, initializer,
                                                             initargs, tuple(AT_START)), name=name, daemon=daemon)
        self._process.start()
        child_conn.close()
        self.failed: Optional[Exception] = None
        self._lock = threading.Lock()  # one call at a time on the pipe
        self._queue: Optional[queue_mod.Queue] = None  # `submit`'s calls, sent in order by one thread

    @property
    def pid(self) -> Optional[int]:
        return self._process.pid

    def alive(self) -> bool:
        return self._process.is_alive()

    @property
    def exitcode(self) -> Optional[int]:
        return self._process.exitcode

    def call(self, fn: Callable, *args, timeout: Optional[float] = None, what: Optional[str] = None):
        """`fn(*args)` in the child. Raises Crashed, TimedOut (the child is then killed) or ChildError."""
        what = what or self.what
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):  # queued behind a call that hangs
            raise self._fail(TimedOut(f"{what} did not finish within {timeout:g} s"), kill=True)
        try:
            if self.failed is not None:
                raise self.failed
            try:
                self._conn.send((fn, args))
                if not self._conn.poll(None if deadline is None else max(0.0, deadline - time.monotonic())):
                    raise self._fail(TimedOut(f"{what} did not finish within {timeout:g} s"), kill=True)
                kind, value = self._conn.recv()
            except (EOFError, OSError, BrokenPipeError):
                self._process.join(30)
                raise self._fail(self._crash(what)) from None
            except BaseException:  # SIGTERM or Ctrl-C while it works: it is killed now, not when it is done
                self._fail(ChildError(f"{what} was stopped"), kill=True)
                raise
            finally:
                self._copy_log()
        finally:
            self._lock.release()
        if kind == "error":
            raise ChildError(value)
        return value

    def _fail(self, error: Exception, kill: bool = False) -> Exception:
        """The child's first failure, kept: every later call raises it."""
        if kill:
            self.kill()
        if self.failed is None:
            self.failed = error
        return error

    def _crash(self, what: str) -> Crashed:
        return Crashed(what, signal_name(self._process.exitcode), self._tail())

    def submit(self, fn: Callable, *args, what: Optional[str] = None) -> concurrent.futures.Future:
        """`fn(*args)` queued for the child; its Future holds the result or the exception `call` raises (naming
        the child `what`, as `call` does)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self._queue is None:
            self._queue = queue_mod.Queue()
            threading.Thread(target=self._send_queued, name="quant-report-child-calls", daemon=True).start()
        self._queue.put((future, functools.partial(self.call, fn, what=what), args))
        return future

    def _send_queued(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, call, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
                future.set_exception(exc)

    def terminate(self):
        """SIGTERM to the child's whole process group: it cleans up and ends (a batch worker removes its staging
        folder)."""
        self._signal(signal.SIGTERM)

    def kill(self):
        """SIGKILL to the child's whole process group."""
        self._signal(signal.SIGKILL)
        self._process.join(STOP_SECONDS)

    def _signal(self, signum: int):
        pid = self._process.pid
        if pid is None:
            return
        try:
            os.killpg(pid, signum)  # the child leads its group: what it started goes with it
        except (ProcessLookupError, PermissionError):  # not yet its own group, or gone already
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def close(self, grace: float = STOP_SECONDS):
        """Stops the child: asked to end when it is idle, terminated when it does not within `grace`, killed
        (its whole group) when it still has not; its log removed."""
        if self._queue is not None:
            while True:  # calls not yet sent are cancelled
                try:
                    item = self._queue.get_nowait()
                except queue_mod.Empty:
                    break
                if item is not None:
                    item[0].cancel()
            self._queue.put(None)
        if self._process.is_alive() and not self._lock.locked():
            with contextlib.suppress(Exception):
                self._conn.send(None)
                self._process.join(grace)
        if self._process.is_alive():
            self.terminate()
            self._process.join(grace)
        if self._process.is_alive() or self._group_alive():
            self.kill()
        with contextlib.suppress(Exception):
            self._conn.close()
        with contextlib.suppress(OSError):
            os.remove(self._log_path)  # gone already once the child opened it
        with contextlib.suppress(OSError):
            os.close(self._log)
            self._log = -1

    def _group_alive(self) -> bool:
        pid = self._process.pid
        if pid is None:
            return False
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _new_text(self) -> str:
        try:
            data = b""
            while True:
                chunk = os.pread(self._log, 1 << 20, self._read + len(data))
                if not chunk:
                    break
                data += chunk
        except OSError:
            return ""
        self._read += len(data)
        return data.decode("utf-8", errors="replace")

    def _copy_log(self):
        text = self._new_text()
        if text:
            sys.stderr.write(text)
            sys.stderr.flush()

    def _tail(self) -> list:
        start = self._read
        text = self._new_text()
        self._read = start  # read again and copied to the run's log by `call`
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        fatal = next((i for i, line in enumerate(lines) if line.startswith("Fatal Python error")), None)
        if fatal is not None:  # faulthandler's dump: the error, then the innermost frames first
            frames = [_frame(line) for line in lines[fatal + 1:] if line.startswith("File ")]
            return [lines[fatal]] + frames[:TAIL_LINES - 1]
        return lines[-TAIL_LINES:]

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, *exc):
        self.close()


def _frame(line: str) -> str:
    """'File "/a/b/calibrator.py", line 93 in _feed_tensors' as 'calibrator.py:93 in _feed_tensors'."""
    match = re.match(r'File "(.*)", line (\d+) in (.*)', line)
    return f"{os.path.basename(match.group(1))}:{match.group(2)} in {match.group(3)}" if match else line


def _serve(conn, parent: int, log_path: str, initializer: Optional[Callable], initargs: tuple,
           starts: tuple = ()):
    """The child: leads a process group of its own, dies with its parent, writes its output to `log_path`, runs
    `starts` (the parent's `AT_START`) and `initializer`, then the calls it is sent until it is sent None."""
    import faulthandler

    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # its own group: stopped, it takes what it started along
    log = open(log_path, "a", encoding="utf-8", errors="replace", buffering=1)
    with contextlib.suppress(OSError):  # the parent reads it through its own descriptor: no name left to sweep
        os.remove(log_path)

    from reporter.core.lifetime import die_with_parent, hold_inherited_tempdir, remove_autograph_files

    die_with_parent(parent)
    hold_inherited_tempdir()  # the run's temporary folder (TMPDIR), held while this process may write there
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    faulthandler.enable(file=log)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    for start in starts:  # a failure ends the child: its calls would fail on the missing plug-ins anyway
        start()
    if initializer is not None:
        try:
            initializer(*initargs)
        except Exception:  # noqa: BLE001 - a failed warm-up costs time, not the calls
            traceback.print_exc()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message is None:
            break
        fn, args = message
        try:
            reply = ("ok", fn(*args))
        except Exception as exc:  # noqa: BLE001 - sent back to the parent, which decides
            traceback.print_exc()
            reply = ("error", f"{type(exc).__name__}: {exc}")
        log.flush()
        try:
            conn.send(reply)
        except (OSError, BrokenPipeError):
            break
    log.flush()
    remove_autograph_files()
    os._exit(0)  # TensorFlow's teardown is slow and not needed


def shared(count: int, helper: Optional[Callable[[int], concurrent.futures.Future]], here: Callable[[int], object],
           received: Callable[[int, object], object] = lambda k, value: value) -> list:
    """`count` pieces of work shared with another process: `helper(k)` (None: no helper) starts piece k there, each
    in order, while this process works from the last back, `here(k)`, taking each piece the helper has not started
    (its Future cancelled); what the helper gives is read by `received(k, value)`. A piece the helper fails on is
    done here (its traceback goes to run.log). Neither waits on the other whatever each piece costs."""
    jobs = [helper(k) for k in range(count)] if helper is not None else []
    found: dict[int, object] = {}
    for k in reversed(range(count)):
        if jobs and not jobs[k].cancel():  # the helper has this one, and every one before it
            break
        found[k] = here(k)
    for k, job in enumerate(jobs):
        if k not in found:
            try:
                found[k] = received(k, job.result())
            except Exception:  # noqa: BLE001 - done here instead
                traceback.print_exc()
                found[k] = here(k)
    return [found[k] for k in range(count)]


def or_none(wait: Callable[[], object]) -> Callable[[], object]:
    """What `wait()` gives, or None when it raises (the traceback goes to run.log): for a result another process
    makes that the caller can make itself instead."""
    def result():
        try:
            return wait()
        except Exception:  # noqa: BLE001 - the caller makes it itself
            traceback.print_exc()
            return None
    return result


def message_queue():
    """A queue children can be handed when they start (a batch worker's stage lines)."""
    import multiprocessing

    return multiprocessing.get_context("spawn").Queue()


def run_once(fn: Callable, *args, timeout: Optional[float] = None, what: str = "the child process"):
    """`fn(*args)` in a Child of its own, stopped afterwards."""
    with Child(what) as child:
        return child.call(fn, *args, timeout=timeout)


@dataclass(frozen=True)
class Done:
    returncode: int
    output: str  # stdout and stderr, in the order written


def run_command(args: list[str], timeout: float, what: str, env: Optional[dict] = None) -> Done:
    """`python args...` in a process group of its own that dies with this process: its return code and output.
    Raises TimedOut after killing the whole group when it has not ended within `timeout` seconds."""
    process = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", env=env, start_new_session=True, preexec_fn=_death_signal())
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TimedOut(f"{what} did not finish within {timeout:g} s") from None
    finally:
        if process.poll() is None or _alive(process.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return Done(process.returncode, output or "")


def _death_signal() -> Optional[Callable[[], None]]:
    """What the command's process runs before the command (Linux): the kernel sends it SIGKILL when this process
    dies. Resolved here, so that the forked process only makes the call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
