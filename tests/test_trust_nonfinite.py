"""Issue 32, points 2 and 7: a model whose outputs hold NaN or inf on some samples still gets a report.json
every JSON reader takes (non-finite numbers are null, the counts of such samples recorded per model, the report
saying the model produced them rather than blaming the data), and a user's metric that writes into `y_true`
changes no figure of the run (it gets read-only copies).

The end-to-end runs use a tiny Keras model whose weights are set by hand (no training): a Dense layer with a
zero weight on a feature that overflows float32 for the first NAN_SAMPLES evaluation samples (inf * 0 = NaN),
calibrated on finite samples. Every number is checked against plain LiteRT runs of the .tflite files written
into the report folder and scikit-learn (tests/independent.py), none of the tool's measuring code."""

import dataclasses
import json
import math

import numpy as np
import pytest
from sklearn import metrics as skm

import independent
from conftest import load_report, measured_models, run_recorded

NAN_SAMPLES = 10
N = 200
VARIANTS = "float,drq,fiq"


def strict_json(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity (what a standard JSON reader does)."""
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


# --- fast: the JSON itself, metrics on NaN outputs ----------------------------------------------------
def test_to_json_writes_non_finite_numbers_as_null_and_reads_back(fixture_report):
    from reporter.pipeline.conclude import report_from_json
    from reporter.pipeline.conclude import attach
    from reporter.model.report import LayerError, LayerErrors

    rows = [LayerError(index=0, op_name="FULLY_CONNECTED", tensor_name="t", float_tensor_name="t", matched_by="name",
                       mse=None, snr_db=None, cosine=math.nan)]
    variants = list(fixture_report.variants)
    i = next(k for k, v in enumerate(variants) if v.name == "fiq" and v.ok)
    variants[i] = dataclasses.replace(variants[i], nonfinite_outputs=7, layer_errors=LayerErrors(rows, samples=32),
                                      metrics=dataclasses.replace(variants[i].metrics, roc_auc=math.inf))
    report = attach(dataclasses.replace(fixture_report, variants=variants))  # the findings, as a run derives them
    text = report.to_json()
    data = strict_json(text)
    fiq = data["variants"][i]
    assert fiq["layer_errors"]["layers"][0]["cosine"] is None
    assert fiq["metrics"]["roc_auc"] is None
    assert fiq["nonfinite_outputs"] == 7
    again = report_from_json(text)  # the typed reader (render, diff, --resume) takes it
    assert again.variant("fiq").nonfinite_outputs == 7
    assert again.variant("fiq").layer_errors.layers[0].cosine is None
    assert any("FIQ produced NaN or inf on 7 of" in w.text for w in again.findings.warnings)


def test_older_reports_without_the_count_read_as_zero(fixture_report):
    from reporter.pipeline.conclude import report_from_json

    data = json.loads(fixture_report.to_json())
    for v in data["variants"]:
        v.pop("nonfinite_outputs")
    report = report_from_json(json.dumps(data))
    assert all(v.nonfinite_outputs == 0 for v in report.variants)
    assert not any("NaN" in line for line in report.findings.headline)


def test_classification_metrics_count_nan_rows_wrong_and_never_raise():
    from reporter.measure import metrics as qm
    from reporter.core import tasks
    from reporter.measure.task import Task

    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 40)
    out = np.eye(2, dtype=np.float32)[y] * 0.9 + 0.05  # every row right
    out[:4] = np.nan
    out[4, 1] = np.inf
    task = Task(tasks.of("classification"), 2)
    preds = task.classes(out)
    assert (preds[:5] == -1).all() and (preds[5:] == y[5:]).all()
    m = qm.classification(y, preds, 2, None, task.scores(out))
    assert m.accuracy == pytest.approx(35 / 40)
    # ROC AUC: a NaN score ranks as badly as it can for its sample.
    worst = np.where(np.isfinite(out[:, 1]), out[:, 1], np.where(y == 1, -1.0, 2.0))
    assert m.roc_auc == pytest.approx(skm.roc_auc_score(y, worst))
    # top-5 of ten classes: the NaN rows are wrong
    y10 = rng.integers(0, 10, 30)
    scores = np.eye(10)[y10]
    scores[:3] = np.nan
    assert qm.top_k_accuracy(y10, scores, 10) == pytest.approx(27 / 30)
    # one sigmoid unit: NaN >= 0.5 is no class, not class 0
    sig = Task(tasks.of("binary"), 2)
    assert list(sig.classes(np.array([[0.7], [np.nan], [0.2]], np.float32))) == [1, -1, 0]


def test_dense_nan_positions_are_wrong_and_output_error_leaves_nan_rows_out():
    from reporter.measure import metrics as qm
    from reporter.core import tasks
    from reporter.measure.task import Task

    task = Task(tasks.of("segmentation"), 3)
    y = np.array([[0, 1, 2, 0]])
    out = np.eye(3, dtype=np.float32)[y].reshape(1, -1)
    out[0, 3:6] = np.nan  # the second position
    pred = task.classes(out)
    assert pred.tolist() == [[0, -1, 2, 0]]
    m = qm.dense(y, pred, 3, None)
    assert m.accuracy == pytest.approx(3 / 4)
    assert sum(map(sum, m.confusion_matrix)) == 4  # every position counted

    ref = np.array([[1.0], [2.0], [np.nan], [4.0]])
    mine = np.array([[1.5], [np.inf], [3.0], [4.0]])
    err = qm.output_error(mine, ref)
    assert (err.mse, err.max_abs_error) == (pytest.approx(0.25 / 2), 0.5)
    assert err.float_variance == pytest.approx(np.var([1.0, 4.0]))
    with pytest.raises(ValueError, match="finite outputs"):
        qm.output_error(np.full((3, 1), np.nan), np.ones((3, 1)))


def test_a_metric_gets_read_only_copies():
    from reporter.measure.scoring import UserScore

    y = np.array([0, 1, 1, 0])
    out = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7], [0.6, 0.4]], np.float32)
    seen = []

    def writes(y_true, y_pred):
        seen.append((y_true.flags.writeable, y_pred["a"].flags.writeable))
        with pytest.raises(ValueError):
            y_true.flags.writeable = True
        y_true.base.flags.writeable = True  # the copy behind it: writing there changes nothing of the run's
        y_true.base[...] = 0
        return float(np.mean(np.argmax(y_pred["a"], 1) == y_true))

    score = UserScore("writes", writes, y, len(y))
    assert score.values({"a": out}) == {"writes": 0.5}
    assert score.values({"a": out}) == {"writes": 0.5}
    assert seen[0] == (False, False) and y.tolist() == [0, 1, 1, 0]

    def zeroes(y_true, y_pred):
        y_true["a"][:] = 0
        return 1.0

    with pytest.raises(ValueError, match="read-only"):
        UserScore("zeroes", zeroes, {"a": y}, len(y)).values(out)
    assert y.tolist() == [0, 1, 1, 0]


# --- end to end: a model that outputs NaN on some samples -------------------------------------------------
def _nan_model(folder, kind: str, calibrate_on_x: bool = False):
    """(model.keras, data.npz, x, y): a 4-8-k MLP with hand-set weights, right on every finite sample; the first
    NAN_SAMPLES evaluation samples overflow its first layer (inf), and a zero weight makes that NaN. x_calib holds
    finite samples only, unless `calibrate_on_x` (no x_calib: calibration meets the overflow too)."""
    import keras

    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 4)).astype(np.float32)
    x_calib = x[NAN_SAMPLES:].copy()
    x[:NAN_SAMPLES, 0] = 3e38 * np.sign(x[:NAN_SAMPLES, 0])
    units = 2 if kind == "classification" else 1
    inp = keras.Input((4,))
    hidden = keras.layers.Dense(8, activation="relu")(inp)
    out = keras.layers.Dense(units, activation="softmax" if units == 2 else None)(hidden)
    model = keras.Model(inp, out)
    w1 = np.zeros((4, 8), np.float32)
    w1[0, :2], w1[1, :2] = (1, -1), (0.5, -0.5)
    w1[0, 2:4] = (10, -10)  # overflows to inf on the first samples; weighed by 0 below: NaN
    model.layers[1].set_weights([w1, np.zeros(8, np.float32)])
    w2 = np.zeros((8, units), np.float32)
    if units == 2:
        w2[0, 1] = w2[1, 0] = 3
        y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    else:
        w2[0, 0], w2[1, 0] = 1, -1
        y = (x[:, 0] + 0.5 * x[:, 1]).astype(np.float32)
        y[:NAN_SAMPLES] = 0
    model.layers[2].set_weights([w2, np.zeros(units, np.float32)])
    stem = f"nan_{kind}" + ("_calibrated_on_x" if calibrate_on_x else "")
    path, data = folder / f"{stem}.keras", folder / f"{stem}.npz"
    model.save(path)
    np.savez(data, x=x, y=y, **({} if calibrate_on_x else {"x_calib": x_calib}))
    return path, data, x, y


@pytest.fixture(scope="session")
def nan_runs(demo_cache, tmp_path_factory):
    """{kind: (exit code, error, report folder, x, y)} of one run on each NaN model, every format written."""
    work = tmp_path_factory.mktemp("nan_models")
    out = work / "out"
    runs = {}
    for kind in ("classification", "regression"):
        model, data, x, y = _nan_model(work, kind)
        code, error = run_recorded(model, data, out, f"nan_{kind}", "--variants", VARIANTS, "--latency-runs", "3")
        runs[kind] = (code, error, out / f"nan_{kind}", x, y)
    model, data, x, y = _nan_model(work, "classification", calibrate_on_x=True)
    code, error = run_recorded(model, data, out, "calibrated_on_x", "--variants", "float,fiq", "--formats", "json,md",
                               "--latency-runs", "0")
    runs["calibrated_on_x"] = (code, error, out / "calibrated_on_x", x, y)
    return runs


def _run(nan_runs, kind, expected: int = 0):
    code, error, folder, x, y = nan_runs[kind]
    assert error is None, error
    assert code == expected, (code, (folder / "run.log").read_text()[-3000:] if (folder / "run.log").exists() else "")
    return folder, x, y


@pytest.mark.slow
@pytest.mark.parametrize("kind", ("classification", "regression"))
def test_nan_model_writes_every_format_and_standard_json(nan_runs, kind):
    folder, x, _ = _run(nan_runs, kind)
    for name in ("report.json", "report.html", "report.pdf", "summary.md"):
        assert (folder / name).is_file(), name
    text = (folder / "report.json").read_text()
    data = strict_json(text)
    flt = independent.outputs((folder / "float.tflite").read_bytes(), x)
    bad = ~np.isfinite(flt).all(axis=1)
    assert bad.sum() == NAN_SAMPLES and bad[:NAN_SAMPLES].all()
    counts = {}
    for name, v in measured_models(data, ok_only=True).items():
        mine = independent.outputs((folder / f"{name}.tflite").read_bytes(), x)
        counts[name] = v["nonfinite_outputs"]
        assert v["nonfinite_outputs"] == int((~np.isfinite(mine).all(axis=1)).sum()), name
    assert counts["float"] == NAN_SAMPLES, counts
    md = (folder / "summary.md").read_text()
    html = (folder / "report.html").read_text()
    said = f"The float model produced NaN or inf on {NAN_SAMPLES} of {N} evaluation samples"
    assert said in md and said in html
    assert said in data["findings"]["headline"][0]
    assert any(w["code"] == "nonfinite_outputs" for w in data["findings"]["warnings"])
    for written in (md, html, (folder / "run.log").read_text()):
        assert "Input contains NaN" not in written
    assert all(not v["measurement_errors"] for v in data["variants"]), \
        {v["name"]: v["measurement_errors"] for v in data["variants"]}


@pytest.mark.slow
def test_nan_outputs_count_as_wrong(nan_runs):
    folder, x, y = _run(nan_runs, "classification")
    data = json.loads((folder / "report.json").read_text())
    for name, v in measured_models(data, ok_only=True).items():
        out = independent.outputs((folder / f"{name}.tflite").read_bytes(), x)
        preds = np.where(np.isfinite(out).all(axis=1), out.argmax(axis=1), -1)
        assert v["metrics"]["accuracy"] == pytest.approx(float(skm.accuracy_score(y, preds)), abs=1e-12), name
    flt = next(v for v in data["variants"] if v["name"] == "float")
    assert flt["metrics"]["accuracy"] == pytest.approx((N - NAN_SAMPLES) / N)  # right on every finite sample
    assert flt["metrics"]["roc_auc"] is not None


@pytest.mark.slow
def test_output_error_is_measured_where_both_are_finite(nan_runs):
    folder, x, _ = _run(nan_runs, "regression")
    data = json.loads((folder / "report.json").read_text())
    ref = independent.outputs((folder / "float.tflite").read_bytes(), x).astype(np.float64)
    for name, v in measured_models(data, ok_only=True).items():
        if name == "float":
            continue
        mine = independent.outputs((folder / f"{name}.tflite").read_bytes(), x).astype(np.float64)
        both = np.isfinite(mine).all(axis=1) & np.isfinite(ref).all(axis=1)
        assert both.sum() >= N - NAN_SAMPLES
        assert v["output_error"]["mse"] == pytest.approx(float(np.mean((mine[both] - ref[both]) ** 2)), rel=1e-9)
        assert v["output_error"]["float_variance"] == pytest.approx(float(np.var(ref[both])), rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ("classification", "regression"))
def test_render_and_diff_read_the_nan_run(nan_runs, kind, tmp_path):
    from reporter.cli import main

    folder, _, _ = _run(nan_runs, kind)
    assert load_report(folder).variant("float").nonfinite_outputs == NAN_SAMPLES
    assert main(["render", str(folder / "report.json"), "--format", "md", "--out", str(tmp_path / "r.md")]) == 0
    assert "produced NaN or inf" in (tmp_path / "r.md").read_text()
    assert main(["render", str(folder / "report.json"), "--format", "json", "--out", str(tmp_path / "r.json")]) == 0
    strict_json((tmp_path / "r.json").read_text())
    assert main(["diff", str(folder), str(folder), "--format", "json", "--out", str(tmp_path / "d.json")]) == 0
    strict_json((tmp_path / "d.json").read_text())


@pytest.mark.slow
def test_layer_errors_leave_out_samples_where_float_is_not_finite(nan_runs):
    from reporter.debug import layer_error

    folder, x, _ = _run(nan_runs, "classification")
    flt, fiq = (folder / "float.tflite").read_bytes(), (folder / "fiq.tflite").read_bytes()
    compared = layer_error.compare(flt, fiq, x, max_samples=32)  # the first NAN_SAMPLES are NaN in float
    assert compared.layers and all(math.isfinite(e.cosine) and math.isfinite(e.mse) for e in compared.layers), \
        [(e.op_name, e.cosine, e.mse) for e in compared.layers]
    assert f"on up to {NAN_SAMPLES} of the 32 samples" in compared.note, compared.note


def _float_input(tflite: bytes) -> bool:
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_content=tflite).get_input_details()[0]["dtype"] == np.float32


@pytest.mark.slow
def test_calibrating_on_overflowing_samples_fails_fiq_not_the_process(nan_runs):
    """Calibrated on samples that overflow, TF's converter writes an infinite quantization scale, and LiteRT
    crashes the whole process (SIGSEGV) allocating such a model: it is refused before it runs, FIQ is recorded
    as failed with the reason, and the report is written."""
    # the only quantized variant asked for failed: the report is written and the run exits 1
    folder, _, _ = _run(nan_runs, "calibrated_on_x", expected=1)
    data = strict_json((folder / "report.json").read_text())
    by = {v["name"]: v for v in data["variants"]}
    assert by["float"]["status"] == "ok" and by["float"]["nonfinite_outputs"] == NAN_SAMPLES
    assert by["fiq"]["status"] == "failed" and "quantization scale" in by["fiq"]["error"], by["fiq"]
    assert "FIQ could not be built" in (folder / "summary.md").read_text()


# --- point 7: a metric that writes into y_true ---------------------------------------------------------------
METRICS = '''
import numpy as np


def zero_labels(y_true, y_pred):
    """Zeroes the labels it is given, in place, then scores against them."""
    y_true[...] = 0
    return float(np.mean(np.argmax(y_pred, axis=1) == y_true))


def zero_behind(y_true, y_pred):
    """Goes around a read-only flag: zeroes the array behind the one it is given."""
    target = y_true
    while target.base is not None and isinstance(target.base, np.ndarray):
        target = target.base
    target.flags.writeable = True
    target[...] = 0
    return float(np.mean(np.argmax(y_pred, axis=1) == target))


def exits(y_true, y_pred):
    """Ends the process it runs in, as a script would."""
    import sys

    sys.exit(3)
'''


@pytest.mark.slow
@pytest.mark.parametrize("metric", ("zero_labels", "zero_behind", "exits"))
def test_a_metric_that_writes_into_y_true_changes_no_figure(mlp_files, tmp_path, capfd, run_cli, metric):
    model, data_path = mlp_files
    module = tmp_path / "writing_metrics.py"
    module.write_text(METRICS)
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(model, data_path, out, "--variants", VARIANTS, "--formats", "json", "--latency-runs", "0",
                   "--metric", f"{module}:{metric}", name=metric, quiet=False)
    err = capfd.readouterr().err
    folder = out / metric
    assert code == 0, (code, err[-3000:])
    report = json.loads((folder / "report.json").read_text())
    data = np.load(data_path)
    x, y = data["x"], data["y"]
    checked = []
    for name, v in measured_models(report, ok_only=True).items():
        tflite = (folder / f"{name}.tflite").read_bytes()
        if not _float_input(tflite):  # an int8-I/O model (a lighter-scheme alternative): not fed by independent.py
            continue
        truth = independent.accuracy(tflite, x, y)
        assert v["metrics"]["accuracy"] == pytest.approx(truth, abs=1e-12), (name, v["metrics"]["accuracy"], truth)
        checked.append(name)
    assert {"float", "drq", "fiq"} <= set(checked), checked
    errors = {v["name"]: v["measurement_errors"].get("user_metric") for v in report["variants"]}
    if metric in ("zero_labels", "exits"):  # the write (the exit) fails the metric, said in one line; exit 0
        said = "read-only" if metric == "zero_labels" else "the metric function called sys.exit(3)"
        assert any(e and said in e for e in errors.values()), errors
        lines = [line for line in err.splitlines() if "--metric" in line]
        assert len(lines) == 1 and said in lines[0] and "Traceback" not in err, err[-3000:]
    else:  # it wrote into its own copy: its value stands, every other figure is untouched
        assert not any(errors.values()), errors
        assert all(v["metrics"]["main"] is not None for v in report["variants"])
