"""Issue 32, point 1 and the failed swap of point 12: quant-report removes only the staging and swap folders it
made itself (they carry its marker), never a user's folder that happens to be named like one, and a swap that
fails leaves the earlier report exactly as it was and none of our folders behind."""

import errno
import fcntl
import os
from pathlib import Path

import pytest

from reporter.core import files
from reporter.core.errors import QuantReportError

USER_FOLDERS = (".venv.old-py310", ".photos.partial-2024", ".myapp.old-config",
                ".myapp.partial-abcd1234", ".other.old-zz99yy88")  # the last two: named exactly like ours


def _user_folders(out: Path) -> dict:
    """A user's dot folders (with files inside) named like quant-report's; returns {path: bytes} to compare."""
    made = {}
    for name in USER_FOLDERS:
        folder = out / name
        (folder / "sub").mkdir(parents=True)
        (folder / "keep.txt").write_bytes(b"user data " + name.encode())
        (folder / "sub" / "more.bin").write_bytes(os.urandom(64))
        made.update({p: p.read_bytes() for p in folder.rglob("*") if p.is_file()})
    return made


def _ours(out: Path, name: str, kind: str = "partial", locked: bool = False):
    """A folder like the one a killed (or, when `locked`, a live) run of ours left: marker inside."""
    folder = out / f".{name}.{kind}-k1lled00"
    folder.mkdir()
    (folder / "report.json").write_text("{}")
    (folder / files.MARKER).write_text("")
    fd = None
    if locked:
        fd = os.open(folder, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)
    return folder, fd


def _assert_intact(made: dict):
    for path, data in made.items():
        assert path.is_file() and path.read_bytes() == data, path
    assert not any((path.parent / files.MARKER).exists() for path in made)  # we never marked a user folder


@pytest.mark.parametrize("name", [None, "myapp", "venv", "photos", "other"])
def test_a_users_dot_folders_survive_the_clean_up(tmp_path, name):
    made = _user_folders(tmp_path)
    assert files.clean_leftovers(tmp_path, name) == []
    _assert_intact(made)


def test_a_users_dot_folders_survive_a_real_staged_run(tmp_path):
    made = _user_folders(tmp_path)
    for round_ in range(2):  # the second replaces the first: the swap folder is made and removed too
        with files.staged_folder(tmp_path, "myapp") as tmp:
            (tmp / "report.json").write_text(str(round_))
    _assert_intact(made)
    assert (tmp_path / "myapp" / "report.json").read_text() == "1"
    assert sorted(p.name for p in (tmp_path / "myapp").iterdir()) == [files.REPORT_MARKER, "report.json"]  # no
    # staging marker in the report; the report marker, which lets a later run replace it, stays
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*USER_FOLDERS, "myapp"])


def test_a_marker_that_is_a_symlink_or_a_folder_that_is_a_symlink_is_not_ours(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / files.MARKER).write_text("")
    (elsewhere / "precious.txt").write_text("x")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".m.partial-l1nk0000").symlink_to(elsewhere)  # a link to a folder that holds a marker
    fake = out / ".m.old-l1nk0001"
    fake.mkdir()
    (fake / "precious.txt").write_text("y")
    (fake / files.MARKER).symlink_to(elsewhere / files.MARKER)  # a marker that is a link
    assert files.clean_leftovers(out) == [] and files.clean_leftovers(out, "m") == []
    assert (elsewhere / "precious.txt").read_text() == "x" and (fake / "precious.txt").read_text() == "y"


@pytest.mark.parametrize("kind", ["partial", "old"])
@pytest.mark.parametrize("name", [None, "myapp"])
def test_our_own_leftover_is_removed_and_a_live_runs_stays(tmp_path, kind, name):
    made = _user_folders(tmp_path)
    dead, _ = _ours(tmp_path, "myapp", kind)
    live, held = _ours(tmp_path, "live" if name is None else "myapp", "old" if kind == "partial" else "partial",
                       locked=True)
    try:
        assert files.clean_leftovers(tmp_path, name) == [dead]
        assert not dead.exists()
        assert (live / "report.json").is_file()
    finally:
        os.close(held)
    _assert_intact(made)


def test_a_staged_run_removes_a_killed_runs_folder_of_its_name(tmp_path):
    dead, _ = _ours(tmp_path, "myapp")
    with files.staged_folder(tmp_path, "myapp") as tmp:
        (tmp / "report.json").write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["myapp"]


def test_the_staging_folder_carries_the_marker_while_it_is_used(tmp_path):
    with files.staged_folder(tmp_path, "m") as tmp:
        assert (tmp / files.MARKER).is_file() and not (tmp / files.MARKER).is_symlink()
        assert files.clean_leftovers(tmp_path) == []  # ours, but held by this live run
    assert not (tmp_path / "m" / files.MARKER).exists()


def _earlier_report(out: Path) -> dict:
    with files.staged_folder(out, "myapp") as tmp:
        (tmp / "report.json").write_text('{"earlier": true}')
        (tmp / "summary.md").write_bytes(os.urandom(128))
    return {p: p.read_bytes() for p in (out / "myapp").rglob("*")}


def _failing_replace(monkeypatch, fail_on: set, err: int):
    """os.replace failing with `err` on the calls numbered in `fail_on` (1-based), like an immutable folder
    (EPERM) or a folder on another device (EXDEV) would."""
    real, calls = os.replace, []

    def replace(src, dst, **kw):
        calls.append((Path(src), Path(dst)))
        if len(calls) in fail_on:
            raise OSError(err, os.strerror(err), str(src))
        return real(src, dst, **kw)

    monkeypatch.setattr(os, "replace", replace)
    return calls


@pytest.mark.parametrize("fail_on,err", [({1}, errno.EPERM), ({2}, errno.EXDEV)])
def test_a_failed_swap_keeps_the_earlier_report_and_leaves_none_of_our_folders(tmp_path, monkeypatch, fail_on,
                                                                                err):
    made = _user_folders(tmp_path)
    earlier = _earlier_report(tmp_path)
    calls = _failing_replace(monkeypatch, fail_on, err)
    with pytest.raises(QuantReportError) as caught:
        with files.staged_folder(tmp_path, "myapp") as tmp:
            (tmp / "report.json").write_text('{"new": true}')
    monkeypatch.undo()
    message = str(caught.value)
    assert message == (f"cannot replace {tmp_path / 'myapp'}: {os.strerror(err)}; the earlier report there is"
                       " left as it was")
    assert "\n" not in message
    assert len(calls) == (1 if fail_on == {1} else 3)  # the second failure moved the earlier report back
    assert {p: p.read_bytes() for p in (tmp_path / "myapp").rglob("*")} == earlier
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".myapp.") and p.name not in USER_FOLDERS]
    _assert_intact(made)


def test_an_earlier_report_that_cannot_be_put_back_is_kept_and_named(tmp_path, monkeypatch):
    earlier = _earlier_report(tmp_path)
    _failing_replace(monkeypatch, {2, 3}, errno.EXDEV)
    with pytest.raises(QuantReportError, match="could not be put back and is in") as caught:
        with files.staged_folder(tmp_path, "myapp") as tmp:
            (tmp / "report.json").write_text('{"new": true}')
    monkeypatch.undo()
    kept = Path(str(caught.value).rsplit(" is in ", 1)[1])
    assert {kept.parent.parent / "myapp" / p.relative_to(kept): p.read_bytes() for p in kept.rglob("*")} == earlier
    assert not (kept.parent / files.MARKER).exists()  # no longer ours to clean up
    assert files.clean_leftovers(tmp_path) == [] and files.clean_leftovers(tmp_path, "myapp") == []
    assert kept.is_dir()


@pytest.mark.slow
def test_a_real_run_and_batch_leave_a_users_dot_folders_alone(tmp_path, mlp_files, run_cli):
    from reporter.cli import main

    out = tmp_path / "out"
    out.mkdir()
    made = _user_folders(out)
    assert run_cli(*mlp_files, out, "--variants", "float,drq", "--formats", "json", name="myapp",
                           latency_runs=2) == 0
    config = tmp_path / "q.toml"
    config.write_text(f'[defaults]\nlatency_runs = 2\nvariants = ["float", "drq"]\nformats = ["json"]\n\n'
                      f'[[model]]\nname = "mlp"\npath = "{mlp_files[0]}"\ndata = "{mlp_files[1]}"\n')
    assert main(["batch", str(config), "--out", str(out), "--quiet"]) == 0
    _assert_intact(made)
    assert (out / "myapp" / "report.json").is_file() and (out / "mlp" / "report.json").is_file()
    assert not [p for p in out.rglob(files.MARKER)]


def test_a_users_folder_or_file_in_the_reports_place_is_never_replaced(tmp_path):
    from reporter.core.errors import QuantReportError
    from reporter.core.files import staged_folder

    out = tmp_path / "out"
    (out / "photos").mkdir(parents=True)
    (out / "photos" / "holiday.jpg").write_bytes(b"\xff\xd8 a user's photo")
    (out / "notes").write_text("a user's file")
    for name in ("photos", "notes"):
        with pytest.raises(QuantReportError, match="left as it is: choose another --name or --out"):
            with staged_folder(out, name) as staged:
                (staged / "run.log").write_text("never reached")
    assert (out / "photos" / "holiday.jpg").read_bytes() == b"\xff\xd8 a user's photo"
    assert (out / "notes").read_text() == "a user's file"
    assert sorted(p.name for p in out.iterdir()) == ["notes", "photos"]  # no staging folder left either


def test_an_earlier_report_or_an_empty_folder_is_replaced(tmp_path):
    from reporter.core.files import staged_folder

    out = tmp_path / "out"
    (out / "empty").mkdir(parents=True)
    (out / "earlier").mkdir()
    (out / "earlier" / "run.log").write_text("the earlier run")
    files.mark_report_folder(out / "earlier")  # an earlier report is one quant-report wrote: it holds the marker
    for name in ("empty", "earlier"):
        with staged_folder(out, name) as staged:
            (staged / "run.log").write_text("this run")
        assert (out / name / "run.log").read_text() == "this run"
