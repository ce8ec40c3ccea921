"""The Python API (issue 37): `reporter.run(model, data, **settings) -> Report` on models and data held in memory (a
Keras model, .tflite bytes, arrays, a tf.data.Dataset, the converter's representative dataset), settings checked by
the flags' declarations, the report inline in Jupyter; its figures
checked against a plain LiteRT run of the .tflite files it writes."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import reporter
from conftest import load_report

ROOT = Path(__file__).resolve().parents[1]
FAST = dict(variants=["float", "drq", "fiq"], latency_runs=0, quiet=True)  # no timing: decisions by size alone


@pytest.fixture(scope="module")
def digits(demo_cache):
    import keras
    from reporter.pipeline import demo

    model_path, data_path = demo.ensure_model("digits_cnn")
    arrays = dict(np.load(data_path))
    return keras.saving.load_model(model_path), arrays, model_path, data_path


def _paired_counts(y, reference, candidate) -> tuple:
    """(right only in the reference, right only in the candidate) over the same samples."""
    ref, cand = reference == y, candidate == y
    return int(np.sum(ref & ~cand)), int(np.sum(~ref & cand))


@pytest.mark.slow
def test_in_memory_keras_model_and_arrays_give_figures_a_plain_litert_run_confirms(tmp_path, digits):
    """The figures of the returned Report (each model's accuracy, confusion matrix, paired counts against float and
    size) are those of its written .tflite files run here with the plain LiteRT interpreter on the same evaluation
    data and scored with scikit-learn; report.json written by save holds the same figures."""
    from sklearn import metrics as skm

    from independent import predictions

    model, arrays, _, _ = digits
    x, y = arrays["x"], arrays["y"]
    report = reporter.run(model, arrays, name="digits", **FAST)
    assert isinstance(report, reporter.Report)
    assert report.model.source.startswith("in memory: ") and report.dataset.num_eval == len(y)

    saved = report.save(tmp_path / "saved", formats=["json", "md"])
    assert saved == tmp_path / "saved" / "digits"
    assert {"report.json", "summary.md", "layer_stats.csv"} <= {p.name for p in saved.iterdir()}
    assert not (saved / "report.html").exists()
    stored = {v["name"]: v for v in json.loads((saved / "report.json").read_text())["variants"]}

    labels = list(range(int(max(y.max(), 1)) + 1))
    preds = {}
    for name in ("float", "drq", "fiq"):
        flat = (saved / f"{name}.tflite").read_bytes()
        assert report.model_bytes(name) == flat, name
        v = report.variant(name)
        preds[name] = pred = predictions(flat, x)
        accuracy = float(skm.accuracy_score(y, pred))
        assert v.size_bytes == len(flat) == stored[name]["size_bytes"], name
        assert v.metrics.accuracy == pytest.approx(accuracy, abs=1e-12), name
        assert stored[name]["metrics"]["accuracy"] == pytest.approx(accuracy, abs=1e-12), name
        cm = skm.confusion_matrix(y, pred, labels=labels)
        assert np.array_equal(np.array(v.metrics.confusion_matrix), cm[: len(v.metrics.confusion_matrix)]), name
        if name != "float":
            b, c = _paired_counts(y, preds["float"], pred)
            paired = v.metrics.paired["float"]
            assert (paired.reference_only, paired.variant_only) == (b, c), name
    assert len(report.model_bytes("float")) > len(report.model_bytes("fiq"))  # int8 weights are smaller
    # the model to ship is one of the written files
    assert report.model_bytes() == (saved / report.decision.file).read_bytes()
    with pytest.raises(reporter.QuantReportError, match="no model 'int8_io'"):
        report.model_bytes("int8_io")

    folder = report.folder  # without out: a temporary folder, removed with the report
    assert folder is not None and folder.is_dir() and not str(folder).startswith(str(tmp_path))
    del report
    import gc

    gc.collect()
    assert not folder.exists()


@pytest.mark.slow
def test_the_output_error_of_a_regression_model_is_a_plain_litert_runs(regression_files):
    """A model whose output is not class scores: each quantized model's output MSE against float, its largest
    absolute error and float's output variance are those of the written .tflite files run here with LiteRT."""
    import keras

    from independent import outputs

    model_path, data_path = regression_files
    arrays = dict(np.load(data_path))
    report = reporter.run(keras.saving.load_model(model_path), arrays, name="diabetes", **FAST)
    reference = outputs(report.model_bytes("float"), arrays["x"]).astype(np.float64)
    checked = 0
    for name in ("drq", "fiq"):
        v = report.variant(name)
        assert v.ok and v.output_error is not None, (name, v.status, v.error)
        out = outputs(report.model_bytes(name), arrays["x"]).astype(np.float64)
        assert v.output_error.mse == pytest.approx(float(np.mean((out - reference) ** 2)), rel=1e-4, abs=1e-9), name
        assert v.output_error.max_abs_error == pytest.approx(float(np.max(np.abs(out - reference))), rel=1e-4), name
        assert v.output_error.float_variance == pytest.approx(float(np.var(reference)), rel=1e-4), name
        checked += 1
    assert checked == 2


@pytest.mark.slow
def test_a_tf_data_dataset_and_a_representative_generator(digits):
    import tensorflow as tf

    model, arrays, _, _ = digits
    x, y, x_calib = arrays["x"], arrays["y"], arrays["x_calib"]

    def representative_dataset():
        for i in range(100):
            yield [x_calib[i:i + 1]]

    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)
    streamed = reporter.run(model, dataset, calibration=representative_dataset, name="digits", **FAST)
    direct = reporter.run(model, {"x": x, "y": y, "x_calib": x_calib[:100]}, name="digits", **FAST)
    assert streamed.dataset.num_eval == len(x) and streamed.dataset.num_calibration == 100
    assert streamed.dataset.fingerprint == direct.dataset.fingerprint
    for name in ("float", "drq", "fiq"):
        assert streamed.variant(name).metrics.accuracy == direct.variant(name).metrics.accuracy, name
    assert streamed.model_bytes("fiq") == direct.model_bytes("fiq")  # the same calibration, read batch by batch


@pytest.mark.slow
def test_several_inputs_from_a_dataset_of_dicts(demo_cache):
    import keras
    import tensorflow as tf
    from reporter.pipeline import demo

    model_path, data_path = demo.ensure_model("wine_wide_deep")
    arrays = dict(np.load(data_path))
    inputs = {k[2:]: v for k, v in arrays.items() if k.startswith("x_") and not k.startswith("x_calib")}
    dataset = tf.data.Dataset.from_tensor_slices((inputs, arrays["y"])).batch(16)
    calib = {k[len("x_calib_"):]: v for k, v in arrays.items() if k.startswith("x_calib_")}
    report = reporter.run(keras.saving.load_model(model_path), dataset, name="wine",
                          calibration=tf.data.Dataset.from_tensor_slices(calib).batch(8), **FAST)
    assert [i.name for i in report.model.inputs] and len(report.model.inputs) == len(inputs)
    assert report.variant("fiq").ok and report.dataset.num_eval == len(arrays["y"])


@pytest.mark.slow
def test_float_tflite_bytes(digits, tmp_path):
    from independent import accuracy

    model, arrays, _, _ = digits
    first = reporter.run(model, arrays, variants=["float"], latency_runs=0, quiet=True)
    flat = first.model_bytes("float")
    report = reporter.run(flat, arrays, variants=["float", "fiq"], latency_runs=0, quiet=True, out=tmp_path)
    assert report.model.format == "tflite" and report.model.name == "model"
    assert report.variant("float").metrics.accuracy == pytest.approx(accuracy(flat, arrays["x"], arrays["y"]),
                                                                       abs=1e-12)
    assert report.folder == tmp_path / "model" and (tmp_path / "model" / "report.json").is_file()


@pytest.mark.parametrize("settings, line", [
    (dict(varients="fiq"), "unknown setting 'varients'; did you mean variants?"),
    (dict(target="tpu"), 'target must be "cpu" or "int8" or "gpu" or "micro" or "ethos-u55-32"'),
    (dict(variants=["float", "int3"]), "variants must be a list of variants from"),
    (dict(max_accuracy_drop=2), "max_accuracy_drop must be a number from 0 to 1, not 2"),
    (dict(latency_runs=-1), "latency_runs must be an integer >= 0 and at most 2,147,483,647, not -1"),
])
def test_settings_errors_are_one_line(tmp_path, settings, line):
    with pytest.raises(reporter.QuantReportError) as caught:
        reporter.run(tmp_path / "none.keras", {"x": np.zeros((2, 3)), "y": np.zeros(2)}, **settings)
    assert line in str(caught.value) and "\n" not in str(caught.value)


def test_inputs_of_the_wrong_kind_are_one_line(tmp_path):
    with pytest.raises(reporter.QuantReportError, match="model: expected a path, a keras.Model"):
        reporter.run(object(), {"x": np.zeros((2, 3))})
    with pytest.raises(reporter.QuantReportError, match="not a .tflite flatbuffer"):
        reporter.run(b"not a model", {"x": np.zeros((2, 3))})
    with pytest.raises(reporter.QuantReportError, match="no such file"):
        reporter.run(tmp_path / "missing.keras", {"x": np.zeros((2, 3)), "y": np.zeros(2)})
    assert not any(tmp_path.iterdir())


def test_inline_html_is_escaped_and_self_contained(fixture_report):
    from reporter.api import Report

    hostile = "<script>alert(1)</script><img src=https://evil.example/x.png>"
    base = dataclasses.replace(fixture_report, model=dataclasses.replace(fixture_report.model, name=hostile))
    report = Report(**{f.name: getattr(base, f.name) for f in dataclasses.fields(type(base))})
    html = report._repr_html_()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    lowered = html.lower()
    assert "<script" not in lowered and "<img" not in lowered and "<link" not in lowered and "javascript:" not in lowered
    assert "http://" not in lowered and "https://" not in lowered.replace("https://evil.example", "")
    assert "evil.example/x.png&gt;" in html  # shown as text
    decision = fixture_report.findings.decision
    assert decision.reason.split(":")[0].replace("'", "&#39;") in html  # the model to ship, inline
    assert 'class="quant-report"' in html and "<style>" in html


@pytest.mark.slow
def test_a_batch_entry_may_name_a_model_function(tmp_path, mlp_files):
    from reporter.cli import main

    model, data = mlp_files
    (tmp_path / "models.py").write_text(
        "import keras\n\n"
        f"def mlp():\n    return keras.saving.load_model({str(model)!r})\n\n"
        "def nothing():\n    return 42\n")
    config = tmp_path / "q.toml"
    config.write_text(f'[defaults]\nlatency_runs = 0\nformats = ["json"]\nvariants = ["float", "fiq"]\n\n'
                      f'[[model]]\npath = "models:mlp"\ndata = "{data}"\n\n'
                      f'[[model]]\npath = "models:nothing"\ndata = "{data}"\n')
    out = tmp_path / "out"
    assert main(["batch", str(config), "--out", str(out), "--jobs", "1", "--quiet"]) == 1  # one entry fails
    report = load_report(out / "mlp")
    assert report.variant("fiq").ok and report.model.source == "models:mlp"
    index = json.loads((out / "index.json").read_text())
    failed = next(m for m in index["rows"] if m["name"] == "nothing")
    assert failed["status"] == "failed" and "must return a keras.Model" in failed["error"]


@pytest.mark.slow
def test_the_example_notebook_runs_top_to_bottom(tmp_path):
    """Its code cells, in order, as one program read from standard input (as a kernel runs them: no script file)."""
    cells = json.loads((ROOT / "examples" / "notebook.ipynb").read_text())["cells"]
    code = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-"], input=code, text=True, capture_output=True, cwd=tmp_path, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Ship " in done.stdout and "bytes:" in done.stdout
    assert not any(tmp_path.iterdir())  # nothing written where it ran
