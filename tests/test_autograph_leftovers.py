"""TensorFlow's autograph files (`__autograph_generated_file*.py`) go into the run's own temporary folder, which
quant-report makes in TMPDIR, marks and holds locked: a run or batch killed with SIGKILL leaves them there, and the
next run removes that folder. Nothing else in TMPDIR is touched: a user's file, even one named like an autograph
file, a folder named like the run's without its marker, and the folder of a run still going."""

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reporter.core import lifetime

AUTOGRAPH = "__autograph_generated_file"


def _users_files(tmp: Path) -> dict:
    """Files of the user's in TMPDIR, named like quant-report's; returns {path: bytes}."""
    (tmp / f"{AUTOGRAPH}mine0001.py").write_text("# the user's own module\n")
    (tmp / "notes.txt").write_text("a user's notes\n")
    lookalike = tmp / "quant-report-tmp-abcd1234"  # named like a run's folder, but holds no marker
    lookalike.mkdir()
    (lookalike / f"{AUTOGRAPH}mine0002.py").write_text("# kept\n")
    return {p: p.read_bytes() for p in tmp.rglob("*") if p.is_file() and not p.is_symlink()}


def _autograph_files(tmp: Path, users: dict) -> list:
    return sorted(p for p in tmp.rglob(f"{AUTOGRAPH}*.py") if p not in users)


def _unheld(tmp: Path, seconds: float = 20.0):
    """Waits until no process holds a run folder in `tmp` (the killed run's children die with it, a moment later)."""
    deadline = time.monotonic() + seconds
    for folder in tmp.glob("quant-report-tmp-*"):
        fd = os.open(folder, os.O_RDONLY)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    assert time.monotonic() < deadline, f"{folder} still held after the kill"
                    time.sleep(0.1)
        finally:
            os.close(fd)


def _command(how: str, tmp_path: Path, mlp_files) -> list:
    model, data = mlp_files
    out = tmp_path / "out"
    if how == "run":
        return [sys.executable, "-m", "reporter", "run", str(model), "--data", str(data), "--out", str(out),
                "--variants", "float,fiq", "--latency-runs", "0", "--formats", "json", "--quiet"]
    config = tmp_path / "models.toml"
    config.write_text('[defaults]\nlatency_runs = 0\nvariants = ["float", "fiq"]\nformats = ["json"]\n\n'
                      f'[[model]]\nname = "mlp"\npath = "{model}"\ndata = "{data}"\n')
    return [sys.executable, "-m", "reporter", "batch", str(config), "--out", str(out), "--quiet"]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["run", "batch"])
def test_a_killed_runs_autograph_files_are_removed_by_the_next_run(tmp_path, mlp_files, how):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    users = _users_files(tmp)
    env = {**os.environ, "TMPDIR": str(tmp), "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = _command(how, tmp_path, mlp_files)
    killed = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not _autograph_files(tmp, users):  # TensorFlow is converting or debugging: kill it there
        assert killed.poll() is None, "the run ended before TensorFlow wrote an autograph file"
        assert time.monotonic() < deadline, "no autograph file appeared in TMPDIR"
        time.sleep(0.02)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    assert _autograph_files(tmp, users)  # SIGKILL skipped every clean-up
    _unheld(tmp)

    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _autograph_files(tmp, users) == []
    assert {p: p.read_bytes() for p in users} == users  # the user's files, each byte
    assert sorted(p.name for p in tmp.iterdir()) == sorted(
        [f"{AUTOGRAPH}mine0001.py", "notes.txt", "quant-report-tmp-abcd1234"])  # the killed run's folder is gone,
    # and the second run's own


_HOLD = """
import sys
from reporter.core import lifetime
with lifetime.run_tempdir() as folder:
    (folder / "work.txt").write_text("in use")
    print(folder, flush=True)
    if sys.argv[1] == "die":
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.read()
"""


def test_a_live_runs_folder_is_kept_and_a_dead_ones_removed(tmp_path, monkeypatch):
    import tempfile

    linked = tmp_path / "quant-report-tmp-link0000"  # named like ours, its marker a link to a real one: not ours
    linked.mkdir()
    (tmp_path / "marker-copy").write_text(lifetime.RUN_TMP_LINE)
    os.symlink(tmp_path / "marker-copy", linked / lifetime.RUN_TMP_MARKER)
    (linked / f"{AUTOGRAPH}mine0003.py").write_text("# kept\n")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop(lifetime.RUN_TMP_ENV, None)
    start = [sys.executable, "-c", _HOLD]
    dead = subprocess.run(start + ["die"], env=env, capture_output=True, text=True)
    dead_folder = Path(dead.stdout.strip())
    assert dead.returncode == -signal.SIGKILL and (dead_folder / "work.txt").is_file()
    live = subprocess.Popen(start + ["live"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        live_folder = Path(live.stdout.readline().strip())
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        monkeypatch.delenv(lifetime.RUN_TMP_ENV, raising=False)
        with lifetime.run_tempdir() as mine:
            assert tempfile.gettempdir() == str(mine) and os.environ["TMPDIR"] == str(mine)
            assert mine.parent == tmp_path
            assert not dead_folder.exists()  # dead: removed
            assert (live_folder / "work.txt").read_text() == "in use"  # alive: kept
        assert not mine.exists() and tempfile.gettempdir() == str(tmp_path)
    finally:
        live.communicate("", timeout=30)
    assert live.returncode == 0 and not live_folder.exists()  # it removed its own at its end
    assert sorted(p.name for p in tmp_path.iterdir()) == ["marker-copy", linked.name]
    assert (linked / f"{AUTOGRAPH}mine0003.py").read_text() == "# kept\n"
