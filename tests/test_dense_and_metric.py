"""Dense outputs and a user's own metric (tests/seg_fixtures.py): a per-pixel softmax is measured as
segmentation (pixel accuracy, IoU per class, mean IoU, a pixel confusion matrix; verdicts on mean IoU, with
intervals and paired tests over images), `--task` overrides the task read from the output (and is refused
where it contradicts it), and `--metric PATH:NAME` measures every variant with the user's function, which
then leads the verdicts and the gate (`--metric-mode min` for a metric where lower is better). A user's
metric that raises is recorded, not fatal; one that cannot be found is refused in one line. A segmentation
model whose full-integer quantization collapses (segmentation_collapse) is fixed, judged on mean IoU.

Every number is checked against scikit-learn (or the user's function) on what the written .tflite files
output (plain LiteRT signature runners, tests/independent.py), none of the tool's own code."""

import json
import re

import numpy as np
import pytest
from sklearn import metrics as skm

from conftest import has_word, one_error_line, run_recorded, measured_models
import seg_fixtures as S

pytestmark = pytest.mark.slow

EXTRA = ("--formats", "json,md", "--latency-runs", "3")
ALL = "float,drq,fiq"
# Runs shared by the tests: run name -> (fixture, flags); "{metrics}" is the top2 fixture's user_metrics.py.
RUNS = {
    "segmentation": ("segmentation", ("--variants", ALL)),
    "segmentation_onehot": ("segmentation_onehot", ("--variants", ALL)),
    "segmentation_as_regression": ("segmentation", ("--variants", "float,fiq", "--task", "regression")),
    "segmentation_collapse": ("segmentation_collapse", ("--variants", "float,fiq")),
    "top2": ("top2", ("--variants", ALL, "--metric", "{metrics}:top2", "--max-accuracy-drop", "0")),
    "loss": ("top2", ("--variants", "float,fiq", "--metric", "{metrics}:loss", "--metric-mode", "min")),
}
CLASSES = list(range(len(S.CLASSES)))
ALPHA = 0.05
EXACT = 1e-12
GATE_FAILED = 3  # `quant-report run --help`: exit code 3, the gate failed


@pytest.fixture(scope="session")
def dense_runs(demo_cache, tmp_path_factory):
    """Each run of RUNS once: {run name: (exit code, error, report folder, model path, data path)}."""
    out = tmp_path_factory.mktemp("dense_out")
    module = S.metric_module(demo_cache)
    runs = {}
    for run_name, (fixture, flags) in RUNS.items():
        model, data = S.ensure(fixture, demo_cache)
        code, error = run_recorded(model, data, out, run_name, *(f.format(metrics=module) for f in flags), *EXTRA)
        runs[run_name] = (code, error, out / run_name, model, data)
    return runs


def _log_tail(folder):
    return (folder / "run.log").read_text()[-3000:] if (folder / "run.log").is_file() else ""


def _run(dense_runs, name, codes=(0,)):
    """(report folder, report.json as a dict, model path, data path) of a run that exited with one of `codes`."""
    code, error, folder, model, data = dense_runs[name]
    assert error is None, error
    assert code in codes, (code, _log_tail(folder))
    return folder, json.loads((folder / "report.json").read_text()), model, data


def _measured(report):
    return measured_models(report, ok_only=True)


def _all_ok(report, names):
    """The variants asked for come first and all ran (when FIQ's gap stays open, the search adds the whole model
    in 16x8 after them, as a measured trade-off)."""
    found = [v["name"] for v in report["variants"]]
    assert found[: len(names)] == list(names) and set(found[len(names):]) <= {"int16x8"}, found
    assert all(v["status"] == "ok" for v in report["variants"]), \
        {v["name"]: (v["status"], v.get("error")) for v in report["variants"]}


def _outputs(folder, variant, x):
    """The one output of `variant`.tflite over `x`, fed by name to its signature runner, as float64."""
    from independent import signature_input_order, signature_predict

    model = (folder / f"{variant}.tflite").read_bytes()
    (name,) = signature_input_order(model)
    (out,) = signature_predict(model, {name: x}).values()
    return np.asarray(out, np.float64)


def _finding(report, name):
    return next(v for v in report["findings"]["variants"] if v["name"] == name)


def _expected_direction(paired):
    if paired["p_value"] >= ALPHA:
        return "same"
    return "better" if paired["delta"] > 0 else "worse"


def _user_metrics(demo_cache):
    """The user_metrics module itself (the user's functions, to compute what the report must hold)."""
    import importlib.util

    path = S.metric_module(demo_cache)
    spec = importlib.util.spec_from_file_location("seg_fixture_user_metrics", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- segmentation ------------------------------------------------------------------------------------------

def _pixel_metrics(y, pred):
    """Pixel accuracy, IoU per class (None: the class is neither in the labels nor predicted), mean IoU over
    the other classes (as Keras MeanIoU) and the pixel confusion matrix (rows true, columns predicted)."""
    y, pred = y.ravel(), pred.ravel()
    cm = skm.confusion_matrix(y, pred, labels=CLASSES)
    union = cm.sum(axis=0) + cm.sum(axis=1) - np.diag(cm)
    iou = skm.jaccard_score(y, pred, average=None, labels=CLASSES, zero_division=0)
    per_class = [float(v) if u > 0 else None for v, u in zip(iou, union)]
    present = [v for v in per_class if v is not None]
    return {"accuracy": float(skm.accuracy_score(y, pred)), "iou_per_class": per_class,
            "mean_iou": float(np.mean(present)), "confusion_matrix": cm.tolist()}


def test_a_per_pixel_softmax_is_measured_as_segmentation(dense_runs):
    """Pixel accuracy, IoU per class, mean IoU and the pixel confusion matrix of every measured model equal
    scikit-learn's on the argmax over classes of that model's .tflite outputs; the main metric is mean IoU,
    inside its interval."""
    folder, report, _, data_path = _run(dense_runs, "segmentation")
    data = np.load(data_path)
    x, y = data["x"], data["y"]
    assert report["model"]["task"] == "segmentation", report["model"]
    _all_ok(report, ALL.split(","))
    measured = _measured(report)
    for variant, result in measured.items():
        scores = _outputs(folder, variant, x)
        assert scores.shape == y.shape + (len(CLASSES),), (variant, scores.shape)
        expected = _pixel_metrics(y, scores.argmax(axis=-1))
        m = result.get("metrics")
        assert m, (variant, result.get("status"), result.get("error"), result.get("measurement_errors"))
        assert m["accuracy"] == pytest.approx(expected["accuracy"], abs=EXACT), variant
        seg = m["figures"]["segmentation"]
        assert seg["mean_iou"] == pytest.approx(expected["mean_iou"], abs=EXACT), variant
        got_iou = seg["iou_per_class"]
        assert [v is None for v in got_iou] == [v is None for v in expected["iou_per_class"]], (variant, got_iou)
        assert [v for v in got_iou if v is not None] == \
            pytest.approx([v for v in expected["iou_per_class"] if v is not None], abs=EXACT), variant
        assert m["confusion_matrix"] == expected["confusion_matrix"], variant
        main = m["main"]
        assert main and main["name"] == "mean IoU", (variant, main)
        assert main["value"] == seg["mean_iou"], (variant, main)
        assert main["low"] <= main["value"] <= main["high"], (variant, main)


def _image_bootstrap_p(y, pred, ref_pred, resamples=2000, seed=12345) -> float:
    """Two-sided p of a paired bootstrap over images (not pixels) of mean IoU (pred - ref_pred), written here:
    numpy's own resamples, each image's scikit-learn confusion matrix summed with the resample's weights."""
    def per_image(p):
        return np.stack([skm.confusion_matrix(t.ravel(), q.ravel(), labels=CLASSES).ravel() for t, q in zip(y, p)])

    k = len(CLASSES)
    weights = np.random.default_rng(seed).multinomial(len(y), np.full(len(y), 1 / len(y)), size=resamples)

    def miou(per):
        cm = (weights @ per).reshape(-1, k, k).astype(np.float64)
        inter = np.diagonal(cm, axis1=1, axis2=2)
        union = cm.sum(axis=1) + cm.sum(axis=2) - inter
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.nanmean(np.where(union > 0, inter / union, np.nan), axis=1)

    d = miou(per_image(pred)) - miou(per_image(ref_pred))
    tail = min(int(np.sum(d <= 0)), int(np.sum(d >= 0)))
    return 1.0 if not np.any(d) else min(1.0, 2.0 * (tail + 1) / (resamples + 1))


def test_segmentation_verdicts_read_mean_iou_over_images(dense_runs):
    """Each quantized variant's comparison with float is a paired test of mean IoU over images, not one on argmax
    accuracy: its difference is the mean IoU of its .tflite's outputs minus float's (computed here), its p-value
    agrees with a bootstrap over images written here (within resampling error), and its verdict follows it
    (p >= 0.05: "same", else the sign of the difference)."""
    folder, report, _, data_path = _run(dense_runs, "segmentation")
    data = np.load(data_path)
    x, y = data["x"], data["y"]
    pred = {v: _outputs(folder, v, x).argmax(axis=-1) for v in ("float", "drq", "fiq")}
    for variant in ("drq", "fiq"):
        m = next(v for v in report["variants"] if v["name"] == variant)["metrics"]
        assert m and m.get("main") and "float" in m["main"]["paired"], (variant, m)
        paired = m["main"]["paired"]["float"]
        delta = _mean_iou(y, pred[variant]) - _mean_iou(y, pred["float"])
        assert paired["delta"] == pytest.approx(delta, abs=1e-9), (variant, paired, delta)
        p = _image_bootstrap_p(y, pred[variant], pred["float"])
        assert paired["p_value"] == pytest.approx(p, abs=0.05), (variant, paired, p)  # two seeded bootstraps
        if p < 0.01 or p > 0.2:  # far from the 0.05 line: both bootstraps fall on the same side of it
            assert (paired["p_value"] < ALPHA) == (p < ALPHA), (variant, paired, p)
        found = _finding(report, variant)
        expected = "same" if paired["p_value"] >= ALPHA else ("better" if delta > 0 else "worse")
        assert found["direction"] == expected, (variant, paired, delta, found)
        assert found["vs_float"]["delta"] == pytest.approx(delta, abs=1e-9), (variant, found, delta)
        assert "mean IoU" in found["verdict"], found["verdict"]
        assert "accuracy points" not in found["verdict"], found["verdict"]


def test_one_hot_pixel_labels_give_the_same_metrics_as_class_ids(dense_runs):
    _, ids, _, _ = _run(dense_runs, "segmentation")
    _, onehot, _, _ = _run(dense_runs, "segmentation_onehot")
    assert onehot["model"]["task"] == "segmentation", onehot["model"]
    for a, b in zip(ids["variants"], onehot["variants"], strict=True):
        assert a["name"] == b["name"] and a["metrics"], (a["name"], a.get("measurement_errors"))
        assert b["metrics"] == a["metrics"], a["name"]


def _mean_iou(y, pred):
    """Mean over the classes with a nonzero union (in the labels or predicted) of each class's IoU, from
    scikit-learn's pixel confusion matrix."""
    cm = skm.confusion_matrix(y.ravel(), pred.ravel(), labels=CLASSES)
    inter = np.diag(cm)
    union = cm.sum(axis=0) + cm.sum(axis=1) - inter
    return float(np.mean(inter[union > 0] / union[union > 0]))


def test_a_segmentation_collapse_is_fixed_on_mean_iou(dense_runs):
    """segmentation_collapse (FIQ cannot resolve the shapes next to a huge nuisance channel): the gap is
    recovered by a model with layers kept in float, whose mean IoU is what its selective.tflite outputs
    give, and which wins back at least 90 % of the float-to-FIQ mean-IoU gap, all three models' mean IoU
    computed here from the .tflite files in the report folder. The summary's headline speaks of mean IoU."""
    folder, report, _, data_path = _run(dense_runs, "segmentation_collapse")
    data = np.load(data_path)
    x, y = data["x"], data["y"]
    assert report["model"]["task"] == "segmentation", report["model"]
    _all_ok(report, ("float", "fiq"))
    assert report["findings"]["gap"]["status"] == "recovered", report["findings"]["gap"]
    rec = report["recommendation"]
    assert rec and rec["denylisted_nodes"], rec
    selective = rec["selective"]
    assert selective and selective["status"] == "ok", (selective or {}).get("error")
    miou = {}
    for variant in ("float", "fiq", "selective"):
        scores = _outputs(folder, variant, x)
        assert scores.shape == y.shape + (len(CLASSES),), (variant, scores.shape)
        miou[variant] = _mean_iou(y, scores.argmax(axis=-1))
    m = selective["metrics"]
    seg = m["figures"]["segmentation"]
    assert seg["mean_iou"] == pytest.approx(miou["selective"], abs=EXACT), (seg["mean_iou"], miou)
    assert m["main"]["name"] == "mean IoU" and m["main"]["value"] == pytest.approx(miou["selective"], abs=EXACT), \
        (m["main"], miou)
    assert miou["float"] - miou["fiq"] >= 0.2, miou  # the fixture does collapse
    share = (miou["selective"] - miou["fiq"]) / (miou["float"] - miou["fiq"])
    assert share >= 0.9, (share, miou, rec["denylisted_nodes"])
    lines = (folder / "summary.md").read_text().splitlines()
    # The headline: the lines above the first note or table (the title, the model line, the story's sentences).
    end = next((i for i, line in enumerate(lines) if line.startswith((">", "|"))), len(lines))
    headline = "\n".join(lines[:end])
    assert "mean IoU" in headline, headline
    assert "accuracy points" not in headline, headline


# --- --task ---------------------------------------------------------------------------------------------------

def test_task_regression_with_class_ids_for_a_dense_output_is_refused(dense_runs):
    """--task regression checks y against the output (issue 34): class ids (n, h, w) are not targets of the
    output's shape (n, h, w, classes), so the run stops with exit 1 and writes no report."""
    code, error, folder, _, _ = dense_runs["segmentation_as_regression"]
    assert code == 1 and error is None, (code, error)
    assert not (folder / "report.json").exists()


def test_task_multilabel_for_a_softmax_is_refused_in_one_line(demo_cache, tmp_path, capfd, run_cli):
    """A softmax classifier's output cannot be read as multi-label: exit 1, one line naming the output."""
    model, data = S.ensure("top2", demo_cache)
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(model, data, out, "--task", "multilabel", *EXTRA, name="softmax_as_multilabel")
    line = one_error_line(code, capfd.readouterr().err, out)
    assert has_word(line, S.TOP2_OUTPUT) or has_word(line, "output_0"), line
    assert re.search(r"multi-?label", line, re.I), line


# --- --metric -------------------------------------------------------------------------------------------------

def test_a_users_metric_is_measured_on_every_model_and_leads(dense_runs):
    """metrics.user["top2"] of every measured model is scikit-learn's top-2 accuracy of its .tflite outputs;
    top2 is the main metric, and the summary shows it with each value."""
    folder, report, _, data_path = _run(dense_runs, "top2", codes=(0, GATE_FAILED))
    data = np.load(data_path)
    x, y = data["x"], data["y"]
    _all_ok(report, ALL.split(","))
    summary = (folder / "summary.md").read_text()
    assert "top2" in summary, summary[:3000]
    for variant, result in _measured(report).items():
        scores = _outputs(folder, variant, x)
        expected = skm.top_k_accuracy_score(y, scores, k=2, labels=range(scores.shape[1]))
        m = result.get("metrics")
        assert m, (variant, result.get("status"), result.get("error"), result.get("measurement_errors"))
        assert m["user"]["top2"] == pytest.approx(expected, abs=EXACT), (variant, m["user"], expected)
        assert m["main"]["name"] == "top2" and m["main"]["value"] == m["user"]["top2"], (variant, m["main"])
        value = m["user"]["top2"]
        shown = {f"{value * 100:.1f} %", f"{value:.3f}", f"{value:.4g}"}
        assert any(s in summary for s in shown), (variant, shown, summary[:3000])


def test_the_gate_reads_the_users_metric(dense_runs):
    """--max-accuracy-drop 0 with --metric top2: exit 3 exactly when FIQ's top2 is below float's."""
    code, error, folder, _, _ = dense_runs["top2"]
    assert error is None, error
    report = json.loads((folder / "report.json").read_text())
    top2 = {v["name"]: v["metrics"]["user"]["top2"] for v in report["variants"]}
    drop = top2["float"] - top2["fiq"]
    assert code == (GATE_FAILED if drop > EXACT else 0), (code, top2, _log_tail(folder))


def test_a_metric_where_lower_is_better(dense_runs, demo_cache):
    """--metric-mode min: the main metric says lower is better, and FIQ's comparison with float is positive
    when its loss is lower (better), negative when higher."""
    folder, report, _, data_path = _run(dense_runs, "loss")
    data = np.load(data_path)
    x, y = data["x"], data["y"]
    _all_ok(report, ("float", "fiq"))
    user = _user_metrics(demo_cache)
    loss = {v["name"]: user.loss(y, _outputs(folder, v["name"], x)) for v in report["variants"]}
    for v in report["variants"]:
        assert v["metrics"]["user"]["loss"] == pytest.approx(loss[v["name"]], rel=1e-6), (v["name"], loss)
        assert v["metrics"]["main"]["name"] == "loss", v["metrics"]["main"]
        assert v["metrics"]["main"]["higher_is_better"] is False, v["metrics"]["main"]
    better = float(np.sign(round(loss["float"] - loss["fiq"], 12)))
    fiq = _finding(report, "fiq")
    assert fiq["vs_float"] is not None, fiq
    assert np.sign(round(fiq["vs_float"]["delta"], 12)) == better, (loss, fiq["vs_float"])
    paired = next(v for v in report["variants"] if v["name"] == "fiq")["metrics"]["main"]["paired"]["float"]
    assert np.sign(round(paired["delta"], 12)) == better, (loss, paired)
    assert fiq["direction"] == _expected_direction(paired), (paired, fiq)


def test_a_metric_that_raises_is_recorded_and_the_run_goes_on(demo_cache, tmp_path, capfd, run_cli):
    """--metric ...:boom raises: the report is still written with every variant measured; the terminal shows
    one line naming the metric and its error (no traceback), and run.log keeps the traceback."""
    model, data = S.ensure("top2", demo_cache)
    module = S.metric_module(demo_cache)
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(model, data, out, "--variants", "float,fiq", "--metric", f"{module}:boom", *EXTRA,
                   name="raising_metric", quiet=False)
    captured = capfd.readouterr()
    folder = out / "raising_metric"
    assert (folder / "report.json").is_file(), (code, captured.err[-3000:])
    report = json.loads((folder / "report.json").read_text())
    _all_ok(report, ("float", "fiq"))
    assert all(v["metrics"] and v["metrics"]["accuracy"] is not None for v in report["variants"]), \
        [v["metrics"] for v in report["variants"]]
    recorded = {v["name"]: (v.get("measurement_errors") or {}).get("user_metric") for v in report["variants"]}
    assert code != 0 or any(e and "metric exploded" in e for e in recorded.values()), (code, recorded)
    lines = [line for line in captured.err.splitlines() if "boom" in line or "metric exploded" in line]
    assert len(lines) == 1 and "boom" in lines[0] and "metric exploded" in lines[0], captured.err[-3000:]
    assert "Traceback" not in captured.err and "Traceback" not in captured.out
    log = (folder / "run.log").read_text()
    assert "Traceback" in log and "metric exploded" in log


@pytest.mark.parametrize("target", ("missing_file", "missing_function"))
def test_a_metric_that_cannot_be_found_is_refused_in_one_line(demo_cache, tmp_path, capfd, run_cli, target):
    model, data = S.ensure("top2", demo_cache)
    module = S.metric_module(demo_cache)
    spec, named = {"missing_file": (f"{tmp_path / 'no_such_metrics.py'}:top2", "no_such_metrics.py"),
                   "missing_function": (f"{module}:no_such_metric", "no_such_metric")}[target]
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(model, data, out, "--metric", spec, *EXTRA, name="missing_metric")
    line = one_error_line(code, capfd.readouterr().err, out)
    assert named in line, line
