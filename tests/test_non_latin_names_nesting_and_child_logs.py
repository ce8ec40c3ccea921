"""Issue 47, point 6 (leftovers and messages): distinct non-Latin names keep distinct folders; every reader of
nested text (report.json, diff, recipes, the batch TOML) says "nested more than N levels deep" in one line; the
contained child's log leaves nothing in TMPDIR, even after SIGKILL."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reporter.core import files
from reporter.model.decode import MAX_DEPTH

DEEP = "[" * 100_000 + "]" * 100_000
NESTED = f"nested more than {MAX_DEPTH} levels deep"


# --- (a) non-Latin names -----------------------------------------------------------------------------------
def test_non_latin_names_keep_distinct_folders(tmp_path):
    names = ["日本", "中文", "модель", "café", "cafe"]
    folders = [files.folder_name(n) for n in names]
    assert len(set(folders)) == len(names), folders
    assert all(f.isascii() and "/" not in f and len(f) <= files._FOLDER_MAX for f in folders)
    assert files.folder_name("日本") == files.folder_name("日本")  # stable: a rerun replaces its own report
    assert files.folder_name("my model") == "my_model"  # ASCII names keep today's folders
    for name in ("日本", "中文"):  # both reports can be written in one --out
        with files.staged_folder(tmp_path, name) as tmp:
            (tmp / "run.log").write_text(name, encoding="utf-8")
    assert sorted(p.read_text(encoding="utf-8") for p in tmp_path.glob("*/run.log")) == sorted(["日本", "中文"])


def test_non_latin_batch_names_are_not_one_folder(tmp_path):
    from reporter.batch import config

    (tmp_path / "m.keras").write_bytes(b"")
    (tmp_path / "d.npz").write_bytes(b"")
    toml = tmp_path / "b.toml"
    toml.write_text(textwrap.dedent("""\
        [[model]]
        name = "日本"
        path = "m.keras"
        data = "d.npz"

        [[model]]
        name = "中文"
        path = "m.keras"
        data = "d.npz"
        """), encoding="utf-8")
    try:
        config.load(toml)
    except config.ConfigError as exc:
        assert "folder" not in str(exc), str(exc)


# --- (b) one message for nesting too deep -------------------------------------------------------------------
def test_deep_recipe_is_one_line(tmp_path):
    from reporter.core.errors import UsageError
    from reporter.inputs import recipes

    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    with pytest.raises(UsageError) as exc:
        recipes._read(deep, "deep.json")
    assert str(exc.value) == f"--recipe deep.json: {NESTED} (line 1)"


@pytest.mark.parametrize("text", [
    "a = " + DEEP + "\n",
    "[defaults]\nx = 1 # [[[[\n" + "a = " + "{x=" * 100_000 + "1" + "}" * 100_000 + "\n",
])
def test_deep_batch_toml_is_one_line(tmp_path, text):
    from reporter.batch import config

    path = tmp_path / "deep.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(config.ConfigError) as exc:
        config.load(path)
    line = 1 if text.startswith("a") else 3
    assert exc.value.problems == [f"{path}:{line}: {NESTED}"]


def test_toml_strings_and_comments_are_not_counted(tmp_path):
    from reporter.batch import config

    path = tmp_path / "b.toml"
    brackets = "[" * 200
    path.write_text(f'# {brackets}\n[defaults]\nformats = ["md"] # {brackets}\n'
                    f'x = "{brackets}"\ny = \'{brackets}\'\nz = """\n{brackets}\n"""\n', encoding="utf-8")
    with pytest.raises(config.ConfigError) as exc:  # refused for other reasons, not for nesting
        config.load(path)
    assert NESTED not in str(exc.value)


def test_every_json_reader_says_it_alike(tmp_path, capsys):
    from reporter.cli import main

    (tmp_path / "r").mkdir()
    report = str(tmp_path / "r" / "report.json")
    (tmp_path / "r" / "report.json").write_text(DEEP)
    for argv in (["render", report, "--format", "md"], ["diff", report, report]):
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert NESTED in err and "recursion" not in err, err


# --- (c) the contained child's log -------------------------------------------------------------------------
def _leftovers(folder: Path) -> list:
    from reporter.core.children import LOG_PREFIX

    return sorted(p.name for p in folder.iterdir() if p.name.startswith(LOG_PREFIX))


def test_child_log_leaves_nothing_in_tmpdir_after_sigkill(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    script = textwrap.dedent("""\
        import os, signal, sys
        from reporter.convert import contained
        child = contained.Child()
        print(child.call("ok", os.getpid), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """)
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == -9, result.stderr
    child_pid = int(result.stdout.split()[0])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the child dies with its parent
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    assert _leftovers(tmpdir) == []


def test_child_log_is_still_read_and_copied(monkeypatch, tmp_path, capfd):
    from reporter.convert import contained

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    child = contained.Child()
    try:
        assert child.call("ok", print, "from the child") is None
        assert _leftovers(tmp_path) == []  # its name is gone while it runs
    finally:
        child.close()
    assert "from the child" in capfd.readouterr().err
    assert _leftovers(tmp_path) == []
