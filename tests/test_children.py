"""The one child-process runner (reporter/core/children.py): a call's result or error comes back, a crash is named
with its signal, and a child that hangs is ended with everything it started, as is a tool's command line. Checked
against the kernel's own process table (/proc), not the runner's bookkeeping."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reporter.core import children


def _double(x):
    return 2 * x


def _raise():
    raise ValueError("bad value")


def _segfault():
    os.kill(os.getpid(), signal.SIGSEGV)


def _hang_with_grandchild(pid_file: str):
    grandchild = subprocess.Popen(["sleep", "600"])
    Path(pid_file).write_text(str(grandchild.pid))
    time.sleep(600)


def _gone(pid: int, within: float = 10.0) -> bool:
    """The process has ended (no such pid, or a zombie waiting for its reaper)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def _wait_for(path: Path, within: float = 60.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written")


def test_a_call_returns_its_value_and_an_error_its_type_and_message():
    with children.Child() as child:
        assert child.call(_double, 21) == 42
        with pytest.raises(children.ChildError, match="ValueError: bad value"):
            child.call(_raise)
        assert child.call(_double, 2) == 4  # an error in a call leaves the child usable


def test_a_crash_is_named_with_its_signal_and_the_child_stays_failed():
    with children.Child("the calibration") as child:
        with pytest.raises(children.Crashed, match=r"the calibration crashed \(SIGSEGV\)"):
            child.call(_segfault)
        assert child.exitcode == -signal.SIGSEGV
        with pytest.raises(children.Crashed):
            child.call(_double, 1)


def test_a_child_that_hangs_is_ended_with_what_it_started(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    child = children.Child("the tool")
    try:
        future = child.submit(_hang_with_grandchild, str(pid_file))
        grandchild = _wait_for(pid_file)
        with pytest.raises(children.TimedOut, match="the tool did not finish within"):
            child.call(_double, 1, timeout=0.5)  # queued behind the hanging call: times out
    finally:
        child.close(grace=1.0)
    assert _gone(child.pid) and _gone(grandchild)
    with pytest.raises(Exception):
        future.result(timeout=10)


def test_a_call_that_hangs_times_out_and_its_tree_is_killed(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    child = children.Child("TFLite Micro")
    try:
        with pytest.raises(children.TimedOut, match=r"TFLite Micro did not finish within 20 s"):
            child.call(_hang_with_grandchild, str(pid_file), timeout=20)
        grandchild = int(pid_file.read_text())
        assert _gone(child.pid) and _gone(grandchild)
    finally:
        child.close()


def test_a_command_that_hangs_is_killed_with_its_own_children(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    code = ("import subprocess, sys, time; p = subprocess.Popen(['sleep', '600']);"
            f" open({str(pid_file)!r}, 'w').write(str(p.pid)); print('started', flush=True); time.sleep(600)")
    with pytest.raises(children.TimedOut, match="Vela did not finish within 3 s"):
        children.run_command(["-c", code], timeout=3, what="Vela")
    assert _gone(int(pid_file.read_text()))
    done = children.run_command(["-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                                timeout=60, what="a tool")
    assert done.returncode == 3 and "out" in done.output and "err" in done.output


def _started_by(kind: str, pid_file: Path) -> str:
    """A parent's code that starts one kind of child, which writes its pid to `pid_file`, and then waits."""
    if kind == "child":  # a spawned Python child (TFLite Micro's, the contained converter's, the side converter's)
        return ("import sys, time; from reporter.core import children;"
                " c = children.Child(); c.call(int, '1');"
                f" open({str(pid_file)!r}, 'w').write(str(c.pid)); time.sleep(600)")
    tool = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    return ("from reporter.core import children;"  # a tool's command line (Vela's)
            f" children.run_command(['-c', {tool!r}], timeout=600, what='a tool')")


@pytest.mark.parametrize("kind", ["child", "command"])
def test_children_die_with_a_parent_killed_by_sigkill(tmp_path, kind):
    """Each kind of child the runner starts ends when the run is killed by SIGKILL (issue 54, point 2)."""
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", _started_by(kind, pid_file)],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        child = _wait_for(pid_file)
        parent.kill()
        parent.wait()
        assert _gone(child)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_shared_work_is_done_once_each_by_whichever_process_reaches_it():
    """`shared`: a real helper process takes pieces from the first while this process takes them from the last; every
    piece is done exactly once, in its place, and a piece the helper fails on is done here."""
    import concurrent.futures

    child = children.Child("the helper")
    try:
        assert child.call(pow, 2, 2) == 4  # started and ready
        done_here = []

        def here(k):
            time.sleep(0.1)  # slower than the helper: it takes the first pieces
            done_here.append(k)
            return k * k

        squares = children.shared(8, lambda k: child.submit(pow, k, 2), here)
        assert squares == [k * k for k in range(8)]
        assert done_here and done_here == sorted(done_here, reverse=True)  # from the last back
        assert 0 not in done_here  # the helper did the first

        failing = concurrent.futures.Future()
        failing.set_running_or_notify_cancel()  # started, so it cannot be taken back
        failing.set_exception(RuntimeError("the helper died"))
        found = children.shared(2, lambda k: failing, lambda k: f"here {k}",
                                lambda k, value: f"helper {value}")
        assert found == ["here 0", "here 1"]
    finally:
        child.close()
