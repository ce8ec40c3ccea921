"""Issue 46, mask outputs: float targets of an output's exact shape are regression against the targets whatever
op makes the output (a sigmoid mask, landmarks, a heatmap), with the error against float beside it; a sigmoid or
softmax output with targets 0/1 or in [0, 1] is also judged by mask IoU at 0.5; labels that do not fit are refused
in one line naming what was expected and what was got. Unit tests on hand-made arrays, then end-to-end runs of
tests/mask_fixtures.py's sigmoid-mask model, every figure checked against numpy on plain LiteRT outputs of the
written .tflite files (tests/independent.py)."""

import json

import numpy as np
import pytest

from conftest import one_error_line, run_recorded
import mask_fixtures as F

EXTRA = ("--latency-runs", "0", "--format", "md,json")


def _port(shape, name="mask"):
    from reporter.measure.signature import Port

    return Port(name, "output_0", 0, (-1, *shape), "float32", allocated=(1, *shape))


def _read(y, shape, made_by, are_classes=False):
    from reporter.inputs.task_reading import LabelSource, read_task

    y = np.asarray(y)
    return read_task(LabelSource(y, are_classes, "d.npz", "y"), _port(shape), made_by)


# --- reading the task ----------------------------------------------------------------------------------
@pytest.mark.parametrize("values", ["0/1", "in [0, 1]"])
def test_a_sigmoid_output_with_targets_of_its_shape_is_a_mask_not_refused(values):
    rng = np.random.default_rng(0)
    soft = rng.uniform(size=(6, 8, 8, 1)).astype(np.float32)
    y = (soft > 0.5).astype(np.float32) if values == "0/1" else soft
    reading = _read(y, (8, 8, 1), "LOGISTIC")
    assert reading.task.num_classes is None and reading.task.kind.name == "mask"
    assert reading.task.kind.recorded_name == "regression" and reading.task.kind.main_metric == "mask IoU"
    assert f"targets {values} of its shape (8, 8, 1)" in reading.reason and "mask IoU" in reading.reason
    assert reading.y.dtype == np.float32 and (reading.y == y).all()
    # the same values per sample without the channel axis fit too; integer 0/1 labels are 0/1 targets
    assert _read(y[..., 0], (8, 8, 1), "LOGISTIC").task.kind.name == "mask"
    assert _read((soft > 0.5).astype(np.int64), (8, 8, 1), "LOGISTIC", are_classes=True).task.kind.name == "mask"


def test_a_softmax_output_with_soft_targets_of_its_shape_is_a_mask_and_one_hot_stays_segmentation():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(5, 4, 4, 3))
    soft = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    reading = _read(soft, (4, 4, 3), "SOFTMAX")
    assert reading.task.kind.name == "mask" and "a softmax" in reading.reason
    one_hot = np.eye(3, dtype=np.int64)[soft.argmax(axis=-1)]
    assert _read(one_hot, (4, 4, 3), "SOFTMAX", are_classes=True).task.kind.name == "segmentation"


@pytest.mark.parametrize("made_by, shape", [
    ("RESHAPE", (21, 3)),  # landmarks: a Dense reshaped, no activation as the output's op
    ("CONCATENATION", (4, 2)),
    ("CONV_2D", (8, 8, 1)),  # a linear heatmap
    ("ADD", (8, 8, 1)),
])
def test_float_targets_of_a_linear_outputs_shape_stay_plain_regression(made_by, shape):
    rng = np.random.default_rng(2)
    y = rng.normal(size=(7, *shape)).astype(np.float32)
    reading = _read(y, shape, made_by)
    assert reading.task.kind.name == "regression"
    assert "against the targets" in reading.reason
    # values in [0, 1] for a linear output are still no mask (a linear output holds no probabilities)
    assert _read(np.clip(y, 0, 1), shape, made_by).task.kind.name == "regression"


def test_a_sigmoid_heatmap_with_targets_outside_0_1_is_regression_without_mask_iou():
    y = np.random.default_rng(3).normal(size=(4, 8, 8, 1)) * 3
    reading = _read(y, (8, 8, 1), "LOGISTIC")
    assert reading.task.kind.name == "regression" and "not all in [0, 1]" in reading.reason


@pytest.mark.parametrize("made_by, shape, y_shape, expected", [
    ("LOGISTIC", (16, 16, 1), (9, 8, 8, 1), "targets of its shape (n, 16, 16, 1) (256 values per sample)"),
    ("CONV_2D", (16, 16, 1), (9, 16, 16, 2), "targets of its shape (n, 16, 16, 1) (256 values per sample)"),
    ("SOFTMAX", (8, 8, 3), (9, 4, 4, 3), "targets of its shape (n, 8, 8, 3) (192 values per sample), class ids (n, 8, 8) or one-hot labels (n, 8, 8, 3)"),
])
def test_labels_that_do_not_fit_are_refused_naming_what_was_expected_and_what_was_got(made_by, shape, y_shape,
                                                                                     expected):
    from reporter.core.errors import InputError

    with pytest.raises(InputError) as err:
        _read(np.zeros(y_shape, np.float32), shape, made_by)
    text = str(err.value)
    got = int(np.prod(y_shape[1:]))
    assert f"'y' has shape {y_shape} ({got} values per sample)" in text, text
    assert f"output mask has shape {shape}" in text and f"expected {expected}" in text, text
    assert "--task" in text and "\n" not in text


def test_a_mask_head_of_several_outputs_is_recorded_as_a_mask():
    from reporter.inputs.labels import Head
    from reporter.inputs.task_reading import head_spec

    y = (np.random.default_rng(4).uniform(size=(5, 8, 8, 1)) > 0.5).astype(np.float32)
    spec = head_spec(Head(_port((8, 8, 1)), y, False, False), "d.npz", "LOGISTIC", 0.5)
    # report.json's model.outputs[].task names it; it is measured as a regression (no classes) all the same
    assert spec.task.kind.name == "mask" and not spec.task.classification and spec.labelled


# --- mask IoU ------------------------------------------------------------------------------------------
def _iou(out, y, threshold=0.5) -> float:
    """Pooled IoU of the masks (output >= threshold, target >= 0.5) over every value of every sample; a value
    whose output is not finite counts wrong."""
    out, y = np.asarray(out, np.float64).reshape(len(out), -1), np.asarray(y, np.float64).reshape(len(y), -1)
    truth = y >= 0.5
    pred = np.zeros_like(truth)
    finite = np.isfinite(out)
    pred[finite] = out[finite] >= threshold
    pred[~finite] = ~truth[~finite]
    union = (pred | truth).sum()
    return float((pred & truth).sum() / union) if union else 0.0


def test_mask_iou_matches_numpy_counts_nan_wrong_and_is_bootstrapped_over_samples():
    from reporter.core import tasks
    from reporter.measure.kinds.mask import MaskIoU
    from reporter.measure.task import Task

    rng = np.random.default_rng(5)
    y = (rng.uniform(size=(40, 6, 6, 1)) > 0.6).astype(np.float32)
    out = np.clip(y + rng.normal(scale=0.4, size=y.shape), 0, 1)
    out[3, 2, 2, 0] = np.nan
    score = MaskIoU(Task(tasks.of("mask")), y)
    scored = score.measure(out)
    assert scored.value == pytest.approx(_iou(out, y), rel=1e-12)
    assert score.value(out) == pytest.approx(_iou(out, y), rel=1e-12)
    # the same resamples for every model: a model equal to this one is the same on every resample
    again = score.measure(out.copy())
    assert (again.boot == scored.boot).all() and score.compare(again, scored) == (0.0, 1.0)
    low, high = score.interval(scored)
    assert low < scored.value < high
    # --threshold moves the output's mask only
    strict = MaskIoU(Task(tasks.of("mask"), None, 0.8), y)
    assert strict.value(out) == pytest.approx(_iou(out, y, 0.8), rel=1e-12)


# --- end to end ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def runs(demo_cache, tmp_path_factory):
    """The fixture run plain (no --task) with 0/1 masks and with soft targets: {name: (code, error, folder,
    data)}."""
    found = {}
    for name, data_name in (("binary", "data.npz"), ("soft", "data_soft.npz")):
        data = F.data_file(demo_cache, data_name)
        model = data.parent / "model.keras"
        out = tmp_path_factory.mktemp(f"mask_{name}")
        code, error = run_recorded(model, data, out, name, *EXTRA)
        found[name] = (code, error, out / name, data)
    return found


def _errors(pred, y) -> dict:
    pred, y = np.asarray(pred, np.float64).reshape(len(pred), -1), np.asarray(y, np.float64).reshape(len(y), -1)
    return {"mae": np.abs(pred - y).mean(), "rmse": np.sqrt(((pred - y) ** 2).mean()),
            "r2": 1 - ((y - pred) ** 2).sum() / ((y - y.mean(axis=0)) ** 2).sum()}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["binary", "soft"])
def test_a_sigmoid_mask_runs_plain_measured_against_targets_float_and_by_mask_iou(runs, name):
    from independent import signature_predict

    code, error, folder, data_path = runs[name]
    assert error is None and code == 0, (code, error)
    report = json.loads((folder / "report.json").read_text())
    assert report["model"]["task"] == "regression" and report["model"]["main_metric"] == "mask IoU"
    assert ("targets 0/1" if name == "binary" else "targets in [0, 1]") in report["model"]["task_reason"]
    data = np.load(data_path)
    assert data["y"].shape == (F.N_EVAL, F.SIZE, F.SIZE, 1)
    ok = [v for v in report["variants"] if v["status"] == "ok"]
    assert len(ok) >= 3
    outs = {v["name"]: signature_predict((folder / f"{v['name']}.tflite").read_bytes(), {F.INPUT: data["x"]})
            for v in ok}
    outs = {k: next(iter(o.values())) for k, o in outs.items()}
    flt = next(v["name"] for v in ok if not v["output_error"])
    for v in ok:
        pred = outs[v["name"]]
        assert pred.shape == data["y"].shape
        expected = _errors(pred, data["y"])
        for key in ("mae", "rmse", "r2"):
            assert v["target_error"][key] == pytest.approx(expected[key], rel=1e-4, abs=1e-7), (v["name"], key)
        assert v["metrics"]["main"]["name"] == "mask IoU"
        assert v["metrics"]["main"]["value"] == pytest.approx(_iou(pred, data["y"]), abs=1e-6), v["name"]
        if v["name"] != flt:  # the error against float, beside the targets'
            diff = pred.astype(np.float64) - outs[flt].astype(np.float64)
            assert v["output_error"]["mse"] == pytest.approx(np.mean(diff ** 2), rel=1e-4, abs=1e-10), v["name"]
            assert v["output_error"]["max_abs_error"] == pytest.approx(np.abs(diff).max(), rel=1e-4, abs=1e-7)
            assert "float" in v["metrics"]["main"]["paired"]
    assert _iou(outs[flt], data["y"]) > 0.8  # the fixture learned its masks
    summary = (folder / "summary.md").read_text()
    assert "| Variant | Mask IoU |" in summary and "MAE vs target" in summary
    assert "Mask IoU is not a mean over samples" in summary and "Mean IoU" not in summary


@pytest.mark.slow
def test_masks_of_another_shape_are_refused_in_one_line_naming_expected_and_got(demo_cache, tmp_path, capfd):
    from conftest import run_cli

    data = F.data_file(demo_cache, "data_wrong.npz")
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(data.parent / "model.keras", data, out, *EXTRA, name="wrong")
    line = one_error_line(code, capfd.readouterr().err, out)
    assert "data_wrong.npz" in line and f"'y' has shape ({F.N_EVAL}, 8, 8, 1) (64 values per sample)" in line, line
    assert "has shape (16, 16, 1): expected targets of its shape (n, 16, 16, 1) (256 values per sample)" in line
