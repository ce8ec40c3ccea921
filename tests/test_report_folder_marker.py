"""A report folder is replaced only when quant-report wrote it (its marker file, `.quant-report-report`, is in
it), never because it holds a file a user's folder may hold too (run.log, report.json, index.json): a SavedModel
that a training script left a run.log in, named like the report, stays byte for byte, with one line and exit 2.
A model (or base model) inside the report folder a run would replace is refused before any work."""

import os
import shutil
from pathlib import Path

import pytest

from reporter.core import files

FAST = ("--variants", "float", "--formats", "json")


@pytest.fixture(scope="module")
def saved_model(mlp_files, tmp_path_factory):
    """The breast-cancer demo model exported as a real SavedModel (saved_model.pb, variables/)."""
    import keras

    folder = tmp_path_factory.mktemp("export") / "mlp_savedmodel"
    keras.models.load_model(mlp_files[0]).export(str(folder), verbose=False)
    assert (folder / "saved_model.pb").is_file() and (folder / "variables").is_dir()
    return folder


def _users_model_folder(saved_model: Path, where: Path) -> dict:
    """The SavedModel copied to `where`, with the files a training script or a user may leave in it; returns
    {path: bytes} of everything in it, to compare afterwards."""
    shutil.copytree(saved_model, where)
    (where / "run.log").write_text("epoch 1/10 loss 0.31\n")
    (where / "report.json").write_text('{"val_accuracy": 0.97}\n')
    (where / "index.json").write_text('{"models": ["mymodel"]}\n')
    return _contents(where)


def _contents(folder: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("quant-report: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err, err
    return lines[0]


def _batch(tmp_path: Path, name: str, model: Path, data: Path) -> Path:
    config = tmp_path / "models.toml"
    config.write_text(f'[defaults]\nlatency_runs = 0\nvariants = ["float"]\nformats = ["json"]\n\n'
                      f'[[model]]\nname = "{name}"\npath = "{model}"\ndata = "{data}"\n')
    return config


@pytest.mark.parametrize("model_is_the_folder", [True, False], ids=["model-is-the-folder", "other-model"])
@pytest.mark.parametrize("how", ["run", "batch"])
def test_a_savedmodel_folder_with_a_run_log_is_never_replaced(tmp_path, saved_model, mlp_files, capfd, how,
                                                              model_is_the_folder):
    from reporter.cli import main

    out = tmp_path / "out"
    mine = out / "mymodel"
    before = _users_model_folder(saved_model, mine)
    model = mine if model_is_the_folder else mlp_files[0]  # the report's name is "mymodel" either way
    if how == "run":
        argv = ["run", str(model), "--data", str(mlp_files[1]), "--out", str(out), "--quiet", "--latency-runs", "0",
                *FAST]
        if not model_is_the_folder:
            argv += ["--name", "mymodel"]
    else:
        argv = ["batch", str(_batch(tmp_path, "mymodel", model, mlp_files[1])), "--out", str(out), "--quiet"]
    code = main(argv)
    assert _contents(mine) == before  # every file byte for byte, saved_model.pb and variables/ among them
    line = _one_error(capfd.readouterr().err)
    assert code == 2, line
    assert str(mine) in line, line
    assert ("is the report folder" if model_is_the_folder else "not a report folder quant-report wrote") in line
    assert sorted(p.name for p in out.iterdir()) == ["mymodel"]  # no staging folder, no index, no logs


def test_a_folder_quant_report_wrote_is_replaced_and_one_holding_the_model_is_not(tmp_path, mlp_files, capfd):
    from reporter.cli import main

    out = tmp_path / "out"
    common = ["--data", str(mlp_files[1]), "--out", str(out), "--name", "bc", "--quiet", "--latency-runs", "0", *FAST]
    assert main(["run", str(mlp_files[0]), *common]) == 0
    folder = out / "bc"
    marker = folder / files.REPORT_MARKER
    assert marker.read_text(encoding="utf-8") == files.REPORT_MARKER_LINE
    (folder / "stale.txt").write_text("from the first run")  # gone when the whole folder is replaced
    assert main(["run", str(mlp_files[0]), *common]) == 0
    assert not (folder / "stale.txt").exists() and marker.is_file() and (folder / "report.json").is_file()

    # a model, or a base model, inside the report folder the run would replace: refused before any work
    shutil.copy(mlp_files[0], folder / "base.keras")
    kept = _contents(folder)
    capfd.readouterr()
    for argv in (["run", str(folder / "float.tflite"), *common],
                 ["run", str(mlp_files[0]), "--base-model", str(folder / "base.keras"), *common]):
        assert main(argv) == 2
        line = _one_error(capfd.readouterr().err)
        assert "inside the report folder" in line and str(folder) in line, line
        assert _contents(folder) == kept


@pytest.mark.parametrize("fake", ["no marker", "a link to a marker", "another first line"])
def test_a_folder_is_taken_for_a_report_only_by_a_real_marker(tmp_path, fake):
    from reporter.core.errors import UsageError

    out = tmp_path / "out"
    with files.staged_folder(out, "real") as staged:  # a report folder quant-report wrote
        (staged / "report.json").write_text("{}")
    user = out / "mine"
    user.mkdir()
    (user / "run.log").write_text("a user's log")
    (user / "report.json").write_text("{}")
    if fake == "a link to a marker":
        os.symlink(out / "real" / files.REPORT_MARKER, user / files.REPORT_MARKER)
    elif fake == "another first line":
        (user / files.REPORT_MARKER).write_text("my notes\n" + files.REPORT_MARKER_LINE)
    before = {p: (p.is_symlink(), p.read_bytes()) for p in user.iterdir()}
    with pytest.raises(UsageError, match="remove it yourself"):
        with files.staged_folder(out, "mine") as staged:
            (staged / "report.json").write_text("never reached")
    assert {p: (p.is_symlink(), p.read_bytes()) for p in user.iterdir()} == before
    with files.staged_folder(out, "real") as staged:  # ours is replaced
        (staged / "report.json").write_text('{"second": true}')
    assert (out / "real" / "report.json").read_text() == '{"second": true}'
    assert sorted(p.name for p in out.iterdir()) == ["mine", "real"]


def test_a_batch_never_overwrites_an_index_file_it_did_not_write(tmp_path, mlp_files, capfd):
    """A user's own index.html in --out stays byte for byte (one line, exit 2, nothing run); an index a batch wrote
    is replaced by the next batch into the same folder."""
    from reporter.cli import main

    model, data = mlp_files
    out = tmp_path / "out"
    out.mkdir()
    mine = out / "index.html"
    mine.write_text("<h1>my project's home page</h1>\n")
    config = _batch(tmp_path, "mlp", model, data)
    assert main(["batch", str(config), "--out", str(out), "--quiet", "--jobs", "1"]) == 2
    assert str(mine) in _one_error(capfd.readouterr().err)
    assert mine.read_text() == "<h1>my project's home page</h1>\n" and not (out / "mlp").exists()
    mine.unlink()
    assert main(["batch", str(config), "--out", str(out), "--quiet", "--jobs", "1"]) == 0
    first = (out / "index.json").stat().st_ino
    assert main(["batch", str(config), "--out", str(out), "--quiet", "--jobs", "1"]) == 0
    assert (out / "index.json").stat().st_ino != first  # replaced (written beside it, then renamed over it)
