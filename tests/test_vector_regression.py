"""Vector regression read from the model as well as the labels (issue 34, points 1 and 4): a linear output (no
softmax or sigmoid) with float targets of its shape is regression without a flag, measured against the targets
(MAE, RMSE, R²) besides the error against float; labels that cannot fit an output's task are refused in one line
naming the output and the --task choices. Unit tests on hand-made arrays, then end-to-end runs of the fixtures
in tests/regression_fixtures.py, every figure checked against numpy on the written .tflite's outputs (plain
LiteRT, tests/independent.py)."""

import json

import numpy as np
import pytest

from conftest import one_error_line, run_recorded
import regression_fixtures as R

EXTRA = ("--latency-runs", "0", "--format", "md,json")


def _port(size, shape=None):
    from reporter.measure.signature import Port

    shape = shape or (size,)
    return Port("reconstruction", "output_0", 0, (-1, *shape), "float32", allocated=(1, *shape))


def _read(y, are_classes, size, made_by="", forced=None, shape=None):
    from reporter.inputs.task_reading import LabelSource, read_task

    return read_task(LabelSource(np.asarray(y), are_classes, "d.npz", "y"), _port(size, shape), made_by,
                     forced=forced)


# --- reading the task ----------------------------------------------------------------------------------
def test_float_rows_of_a_linear_outputs_width_are_regression_without_a_flag():
    rng = np.random.default_rng(0)
    reading = _read(rng.normal(size=(20, 6)).astype(np.float32), False, 6, "FULLY_CONNECTED")
    assert reading.task.kind.name == "regression" and reading.y.shape == (20, 6)
    assert "against the targets" in reading.reason
    # targets of a 2-D output's shape (an image autoencoder) too
    assert _read(rng.normal(size=(5, 4, 3)), False, 12, "ADD", shape=(4, 3)).task.kind.name == "regression"
    # sigmoid units with targets in [0, 1] that are not 0/1 (a [0, 1] reconstruction): regression too
    reading = _read(rng.uniform(size=(20, 6)), False, 6, "LOGISTIC")
    assert reading.task.kind.name == "regression" and "sigmoid" in reading.reason
    # one-hot rows for a linear output stay logits of a classifier
    assert _read(np.eye(3)[[0, 2, 1, 1]], True, 3, "FULLY_CONNECTED").task.num_classes == 3


def test_multi_hot_rows_for_a_linear_output_are_targets_with_a_note():
    rows = np.array([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 0, 0]])
    reading = _read(rows, True, 4, "FULLY_CONNECTED")
    assert reading.task.kind.name == "regression" and "--task multilabel" in reading.note
    assert reading.y.dtype == np.float32 and (reading.y == rows).all()


@pytest.mark.parametrize("y, are_classes, size, made_by, what", [
    (np.array([0, 1, 1, 0, 0]), True, 640, "FULLY_CONNECTED", "0/1 labels"),  # issue 34 point 4: not 640 classes
    (np.array([0.3, 1.7, 2.2]), False, 6, "FULLY_CONNECTED", "float values"),  # one float for six values
    (np.zeros((4, 5), np.float32) + 0.5, False, 6, "FULLY_CONNECTED", "do not fit"),  # rows of the wrong width
    (np.zeros((4, 6), np.float32) + 0.5, False, 6, "SOFTMAX", "not one-hot"),  # fractions for a softmax
])
def test_labels_that_cannot_fit_the_output_are_refused_naming_it_and_the_task_choices(y, are_classes, size,
                                                                                     made_by, what):
    from reporter.core.errors import InputError
    from reporter.core import tasks

    with pytest.raises(InputError) as err:
        _read(y, are_classes, size, made_by)
    text = str(err.value)
    assert what in text and "reconstruction" in text and "--task" in text, text
    assert all(kind in text for kind in tasks.names()), text
    assert "\n" not in text


def test_task_regression_checks_the_targets_shape():
    from reporter.core.errors import InputError

    with pytest.raises(InputError, match=r"--task regression: 'y' has shape \(5,\) .* reconstruction"):
        _read(np.arange(5.0), False, 640, forced="regression")
    reading = _read(np.ones((5, 6)), False, 6, "SOFTMAX", forced="regression")
    assert reading.task.kind.name == "regression" and "--task regression" in reading.reason


# --- the figures ---------------------------------------------------------------------------------------
def _independent(pred, y) -> dict:
    pred, y = np.asarray(pred, np.float64).reshape(len(pred), -1), np.asarray(y, np.float64).reshape(len(y), -1)
    residual = ((y - pred) ** 2).sum()
    total = ((y - y.mean(axis=0)) ** 2).sum()
    return {"mae": np.abs(pred - y).mean(), "rmse": np.sqrt(((pred - y) ** 2).mean()), "r2": 1 - residual / total}


def test_target_error_matches_numpy_and_leaves_r2_out_when_targets_do_not_vary():
    from reporter.measure.metrics import target_error

    rng = np.random.default_rng(1)
    y = rng.normal(size=(50, 3))
    pred = y + rng.normal(scale=0.3, size=y.shape)
    found, expected = target_error(pred, y), _independent(pred, y)
    for key in ("mae", "rmse", "r2"):
        assert getattr(found, key) == pytest.approx(expected[key], rel=1e-9), key
    from sklearn.metrics import r2_score

    assert found.r2 == pytest.approx(r2_score(y, pred, multioutput="variance_weighted"), rel=1e-9)
    assert target_error(pred, np.ones_like(y)).r2 is None
    with pytest.raises(ValueError, match="targets of shape"):
        target_error(pred, y[:, :2])


# --- end to end ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def runs(demo_cache, tmp_path_factory):
    """Each fixture run plain (no --task): {name: (exit code or None, error, report folder, data.npz)}."""
    found = {}
    for name in R.FIXTURES:
        model, data = R.ensure(name, demo_cache)
        out = tmp_path_factory.mktemp(f"regression_{name}")
        code, error = run_recorded(model, data, out, name, *EXTRA)
        found[name] = (code, error, out / name, data)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", ["autoencoder", "forecaster"])
def test_a_vector_regression_runs_plain_and_reports_error_against_the_target(runs, name):
    from independent import signature_predict

    code, error, folder, data_path = runs[name]
    assert error is None and code == 0, (code, error)
    report = json.loads((folder / "report.json").read_text())
    assert report["model"]["task"] == "regression"
    data = np.load(data_path)
    ok = [v for v in report["variants"] if v["status"] == "ok"]
    assert len(ok) >= 3
    for v in ok:
        pred = signature_predict((folder / f"{v['name']}.tflite").read_bytes(), {"x": data["x"]})["output_0"]
        expected = _independent(pred, data["y"])
        for key in ("mae", "rmse", "r2"):
            assert v["target_error"][key] == pytest.approx(expected[key], rel=1e-4, abs=1e-7), (v["name"], key)
    summary = (folder / "summary.md").read_text()
    assert "MAE vs target" in summary and "R² vs target" in summary and "Against the targets FIQ's MAE" in summary


@pytest.mark.slow
def test_a_two_head_detector_runs_plain_with_its_box_head_against_its_targets(runs):
    from independent import signature_predict

    code, error, folder, data_path = runs["detector"]
    assert error is None and code == 0, (code, error)
    report = json.loads((folder / "report.json").read_text())
    data = np.load(data_path)
    for v in (v for v in report["variants"] if v["status"] == "ok"):
        outs = signature_predict((folder / f"{v['name']}.tflite").read_bytes(), {"x": data["x"]})
        box = v["heads"]["box"]["target_error"]
        expected = _independent(outs["output_1"], data["y_box"])
        for key in ("mae", "rmse", "r2"):
            assert box[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-7), (v["name"], key)
        digit = v["heads"]["digit"]["metrics"]["accuracy"]
        assert digit == pytest.approx(float(np.mean(outs["output_0"].argmax(axis=1) == data["y_digit"])))
    assert "MAE " in (folder / "summary.md").read_text()


@pytest.mark.slow
def test_anomaly_flags_for_a_reconstruction_are_refused_in_one_line_naming_task(demo_cache, tmp_path, capfd):
    from conftest import run_cli

    model, data = R.copy_of("autoencoder", demo_cache, "data_flags.npz", tmp_path / "in")
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(model, data, out, *EXTRA, name="flags")
    line = one_error_line(code, capfd.readouterr().err, out)
    assert "reconstruction" in line and "--task" in line and "0/1 labels" in line and "data.npz" in line, line


@pytest.mark.slow
def test_binary_pixels_for_a_reconstruction_are_regression_targets(demo_cache, tmp_path):
    from independent import signature_predict

    model, data_path = R.copy_of("autoencoder", demo_cache, "data_binary.npz", tmp_path / "in")
    code, error = run_recorded(model, data_path, tmp_path / "out", "binary", *EXTRA)
    assert error is None and code == 0, (code, error)
    folder = tmp_path / "out" / "binary"
    report = json.loads((folder / "report.json").read_text())
    assert report["model"]["task"] == "regression"
    data = np.load(data_path)
    flt = next(v for v in report["variants"] if v["status"] == "ok" and v["target_error"])
    pred = signature_predict((folder / f"{flt['name']}.tflite").read_bytes(), {"x": data["x"]})["output_0"]
    assert flt["target_error"]["mae"] == pytest.approx(_independent(pred, data["y"])["mae"], rel=1e-4)
    assert "--task multilabel" in (folder / "summary.md").read_text()
