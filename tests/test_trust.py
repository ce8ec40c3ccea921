"""Trust nothing it is handed: model files that run code, config folders that shadow packages, damaged .tflite
files, two runs racing for one output folder, hostile names, leftovers of killed runs."""

import fcntl
import multiprocessing
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import one_error_line
from reporter.cli import main
from reporter.core import files

ROOT = Path(__file__).resolve().parents[1]

LAMBDA_MODEL = '''
import os, sys
import numpy as np
import tf_keras

def leave_a_mark(x):
    import os
    open(os.environ["QR_MARKER"], "w").write("ran")
    return x

inp = tf_keras.Input((4,))
out = tf_keras.layers.Dense(2, activation="softmax")(tf_keras.layers.Lambda(leave_a_mark)(inp))
tf_keras.Model(inp, out).save(sys.argv[1])
rng = np.random.default_rng(0)
np.savez(sys.argv[2], x=rng.normal(size=(40, 4)).astype("float32"), y=rng.integers(0, 2, 40))
'''


@pytest.fixture(scope="module")
def lambda_h5(tmp_path_factory):
    """A legacy .h5 model whose Lambda layer writes a marker file whenever its Python code runs."""
    folder = tmp_path_factory.mktemp("lambda")
    marker = folder / "marker"
    env = {**os.environ, "QR_MARKER": str(marker), "TF_CPP_MIN_LOG_LEVEL": "3"}
    subprocess.run([sys.executable, "-c", LAMBDA_MODEL, str(folder / "lambda.h5"), str(folder / "data.npz")],
                   check=True, env=env, capture_output=True, timeout=300)
    marker.unlink()  # building the model called the Lambda once
    return folder / "lambda.h5", folder / "data.npz", marker


def test_a_legacy_h5_lambda_is_refused_and_its_code_never_runs(lambda_h5, tmp_path, capfd, monkeypatch):
    model, data, marker = lambda_h5
    monkeypatch.setenv("QR_MARKER", str(marker))
    out = tmp_path / "out"
    code = main(["run", str(model), "--data", str(data), "--out", str(out), "--quiet"])
    line = one_error_line(code, capfd.readouterr().err, out)
    assert str(model) in line and "--trust-model" in line and "Lambda" in line
    assert not marker.exists()


@pytest.mark.slow
def test_refused_the_same_way_when_the_side_process_opens_it(lambda_h5, tmp_path, capfd, monkeypatch):
    """A big model is opened by the side process, which describes it to the run (reporter.inputs.described): that
    one refuses it too, and the run, loading it itself, says why in the same line; its code runs in neither."""
    from reporter.convert import side

    model, data, marker = lambda_h5
    monkeypatch.setenv("QR_MARKER", str(marker))
    monkeypatch.setattr(side, "MIN_MODEL_BYTES", 0)
    out = tmp_path / "out"
    code = main(["run", str(model), "--data", str(data), "--out", str(out), "--quiet"])
    line = one_error_line(code, capfd.readouterr().err, out)
    assert str(model) in line and "--trust-model" in line and "Lambda" in line
    assert not marker.exists()


@pytest.mark.slow
def test_trust_model_loads_it_and_its_code_runs(lambda_h5, tmp_path, monkeypatch):
    """The flag does what it says (and so the refusal above is what kept the code from running)."""
    model, data, marker = lambda_h5
    monkeypatch.setenv("QR_MARKER", str(marker))
    code = main(["run", str(model), "--data", str(data), "--out", str(tmp_path), "--quiet", "--trust-model",
                 "--variants", "float", "--formats", "json", "--latency-runs", "0"])
    assert code == 0
    assert marker.exists()
    marker.unlink()


SHADOW = 'open(__import__("os").environ["QR_SHADOW_MARKER"], "w").write("ran")\nraise SystemExit("shadowed")\n'
DATA_MODULE = '''
import numpy as np

def load():
    d = np.load({data!r})
    return {{"x": d["x"], "y": d["y"], "x_calib": d["x_calib"]}}
'''


@pytest.mark.slow
def test_a_module_beside_a_batch_config_shadows_no_package(tmp_path, mlp_files, monkeypatch, capfd):
    """A jinja2.py (and a numpy.py) beside the TOML never runs; the data module beside it is still found."""
    model, data = mlp_files
    marker = tmp_path / "shadow-marker"
    monkeypatch.setenv("QR_SHADOW_MARKER", str(marker))
    (tmp_path / "jinja2.py").write_text(SHADOW)
    (tmp_path / "numpy.py").write_text(SHADOW)
    (tmp_path / "pr_data.py").write_text(DATA_MODULE.format(data=str(data)))
    config = tmp_path / "q.toml"
    config.write_text(textwrap.dedent(f'''
        [[model]]
        name = "mlp"
        path = "{model}"
        data = "pr_data:load"
        formats = ["md", "json"]
        latency_runs = 0
        variants = ["float", "fiq"]
    '''))
    code = main(["batch", str(config), "--out", str(tmp_path / "out"), "--jobs", "1"])
    assert code == 0, capfd.readouterr().err
    assert not marker.exists()
    assert (tmp_path / "out" / "mlp" / "summary.md").is_file()


def _damaged(source: Path, folder: Path) -> dict:
    """Two damaged copies of a float .tflite: a tensor shape set to 12.8 G elements, a name made invalid UTF-8."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    data = source.read_bytes()
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    sg = model.subgraphs[0]
    tensor = sg.tensors[sg.operators[0].outputs[0]]
    tensor.shape = np.array([1, 40000, 40000, 8], dtype=np.int32)
    tensor.shapeSignature = None
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    (folder / "shape.tflite").write_bytes(bytes(builder.Output()))
    raw = bytearray(data)
    name = sg.tensors[0].name
    at = raw.find(name)
    raw[at + 1] = 0xCC
    (folder / "name.tflite").write_bytes(bytes(raw))
    return {"shape": folder / "shape.tflite", "name": folder / "name.tflite"}


@pytest.fixture(scope="module")
def float_tflite(tmp_path_factory, mlp_files):
    """The demo MLP as a float .tflite (TensorFlow's converter)."""
    import tensorflow as tf

    import keras

    model = keras.saving.load_model(str(mlp_files[0]), compile=False)
    path = tmp_path_factory.mktemp("tflite") / "mlp.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    return path


@pytest.mark.parametrize("damage,words", [("shape", "TFLite interpreter"), ("name", "not valid UTF-8")])
def test_a_damaged_tflite_fails_in_one_line_under_a_memory_bound(float_tflite, mlp_files, tmp_path, damage, words):
    bad = _damaged(float_tflite, tmp_path)[damage]
    out = tmp_path / "out"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    run = subprocess.run([sys.executable, "-m", "reporter", "run", str(bad), "--data", str(mlp_files[1]), "--out",
                          str(out), "--quiet"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    line = one_error_line(run.returncode, "\n".join(
        x for x in run.stderr.splitlines() if x.startswith("quant-report")), out)
    assert "Traceback" not in run.stderr
    assert str(bad) in line and words in line
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert max(peak_kb, before) < 3 * 1024 * 1024  # no process of the run grew past 3 GB


def _race(out: str, name: str, who: int, rounds: int, errors):
    for i in range(rounds):
        try:
            with files.staged_folder(out, name) as tmp:
                (tmp / "report.json").write_text(f"{who}-{i}")
                (tmp / "summary.md").write_text(f"{who}-{i}")
        except Exception as exc:  # noqa: BLE001 - counted by the test
            errors.put(f"{type(exc).__name__}: {exc}")


def test_concurrent_runs_of_one_name_lose_nothing_and_leave_nothing(tmp_path):
    ctx = multiprocessing.get_context("fork")
    errors = ctx.Queue()
    workers = [ctx.Process(target=_race, args=(str(tmp_path), "model", who, 60, errors)) for who in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no .partial-/.old- folder left
    final = tmp_path / "model"
    assert (final / "report.json").read_text() == (final / "summary.md").read_text()  # one run's report, whole


def test_a_run_says_when_it_replaced_a_report_another_run_wrote_meanwhile(tmp_path):
    said = []
    with files.staged_folder(tmp_path, "m", on_replace=said.append) as first:
        (first / "a").write_text("1")
        with files.staged_folder(tmp_path, "m", on_replace=said.append) as second:
            (second / "a").write_text("2")
    assert (tmp_path / "m" / "a").read_text() == "1"  # the one that finished last
    assert len(said) == 1 and "another run wrote" in said[0]


def test_leftovers_of_killed_runs_go_but_a_live_run_keeps_its_folder(tmp_path):
    dead = [tmp_path / ".m.partial-dead1xxx", tmp_path / ".m.old-dead2xxx"]
    live = tmp_path / ".m.partial-livexxxx"
    other = tmp_path / ".other.partial-xxxxxxxx"
    for folder in [*dead, live, other]:
        folder.mkdir()
        (folder / "report.json").write_text("{}")
        (folder / files.MARKER).write_text("")  # a killed run's folder carries quant-report's marker
    held = os.open(live, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        with files.staged_folder(tmp_path, "m") as tmp:
            (tmp / "report.json").write_text("{}")
        assert not any(p.exists() for p in dead)
        assert live.exists() and other.exists()  # a run still going; another name's (its own run cleans it)
    finally:
        os.close(held)


@pytest.mark.parametrize("name,words", [("x" * 240, "240 characters"), ("a\nb", "control characters"),
                                        ("a\x1b[31mb", "control characters")])
def test_a_bad_name_is_refused_before_anything_runs(tmp_path, mlp_files, capfd, name, words):
    out = tmp_path / "out"
    code = main(["run", str(mlp_files[0]), "--data", str(mlp_files[1]), "--out", str(out), "--name", name])
    err = capfd.readouterr().err
    assert code == 2, err  # a value given on the command line: a usage error (issue 54), nothing read or written
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("quant-report: error: --name ") and words in lines[0], err
    assert not out.exists() or not any(out.rglob("*"))


def test_control_characters_never_reach_the_terminal_or_a_markdown_line(fixture_report):
    import dataclasses

    from reporter.core.progress import Progress
    from reporter.render import formats

    hostile = "evil\x1b[2J\r\nname"
    report = dataclasses.replace(fixture_report, model=dataclasses.replace(fixture_report.model, name=hostile))
    md = formats.render(report, "md").decode()
    assert "\x1b" not in md and "\r" not in md
    assert next(line for line in md.splitlines() if line.startswith("## ")).endswith("name")  # one heading line

    class Stream:
        text = ""

        def write(self, s):
            Stream.text += s

        def flush(self):
            pass

    Progress(hostile, stream=Stream()).say("done\x1b]0;title\x07")
    assert "\x1b" not in Stream.text and "\x07" not in Stream.text and Stream.text.count("\n") == 1


def test_a_long_model_file_name_gets_a_short_distinct_folder():
    a, b = files.folder_name("m" * 300 + "a"), files.folder_name("m" * 300 + "b")
    assert a != b and len(a) <= 80 and len(b) <= 80


def test_the_exported_savedmodel_lives_in_the_staging_folder(mlp_files, tmp_path):
    """So that a killed run leaves it only inside its own .partial- folder, which a later run removes."""
    from reporter.inputs import model_loading

    loaded = model_loading.load_model(mlp_files[0], scratch=tmp_path)
    loaded.make_converter()
    exported = [p for p in tmp_path.iterdir() if p.name.startswith(".savedmodel-")]
    assert len(exported) == 1 and (exported[0] / "saved_model.pb").is_file()
    loaded.make_converter.cleanup()
    assert not any(tmp_path.iterdir())


def test_render_takes_a_report_folder_and_an_output_folder(tmp_path, capfd):
    """`render FOLDER --format md --out .`: the folder's report.json, written as summary.md in the output folder
    (it said "cannot write (Is a directory)")."""
    import shutil

    from conftest import FIXTURE_REPORT

    run = tmp_path / "model"
    run.mkdir()
    shutil.copy(FIXTURE_REPORT, run / "report.json")
    out = tmp_path / "elsewhere"
    out.mkdir()
    assert main(["render", str(run), "--format", "md", "--out", str(out)]) == 0
    assert (out / "summary.md").read_text(encoding="utf-8").startswith("## Quantization report")
    empty = tmp_path / "empty"
    empty.mkdir()
    code = main(["render", str(empty), "--format", "md"])
    line = one_error_line(code, capfd.readouterr().err, empty)
    assert str(empty) in line and "report.json" in line
