"""An output whose int8 range cannot hold float's values (issue 35): the share that clips is measured against
an independent reading of the written FIQ model, and the report names it as a cause no float layer fixes."""

import json

import numpy as np
import pytest

from conftest import run_cli


def _range_of_output(tflite: bytes):
    """The int8 tensor behind FIQ's float output, read with the interpreter directly."""
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_content=tflite)
    out = interpreter.get_output_details()[0]
    makers = {o: op for op in interpreter._get_ops_details() for o in op["outputs"]}
    op = makers[out["index"]]
    assert op["op_name"] == "DEQUANTIZE"
    details = {t["index"]: t for t in interpreter.get_tensor_details()}
    scale, zero = details[op["inputs"][0]]["quantization"]
    return (-128 - zero) * scale, (127 - zero) * scale, scale


@pytest.mark.slow
def test_an_output_that_clips_at_its_int8_range_is_measured_and_named(tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)], name="clipper")
    model.layers[0].set_weights([np.eye(4, 3, dtype=np.float32), np.zeros(3, np.float32)])
    x_calib = rng.uniform(0, 1, (64, 4)).astype(np.float32)  # outputs in [0, 1] when calibrated
    x = rng.uniform(0, 2, (200, 4)).astype(np.float32)  # about half of the evaluated outputs lie beyond 1
    model.save(tmp_path / "clipper.keras")
    np.savez(tmp_path / "data.npz", x=x, y=x[:, :3], x_calib=x_calib)
    code = run_cli(tmp_path / "clipper.keras", tmp_path / "data.npz", tmp_path / "out", "--variants", "float,fiq",
                   "--formats", "json,md", latency_runs=0)
    assert code == 0
    folder = tmp_path / "out" / "clipper"
    report = json.loads((folder / "report.json").read_text())
    fiq = next(v for v in report["variants"] if v["name"] == "fiq")
    (name, clip), = fiq["clipped_outputs"].items()
    low, high, scale = _range_of_output((folder / "fiq.tflite").read_bytes())
    assert clip["low"] == pytest.approx(low) and clip["high"] == pytest.approx(high)
    flt = x[:, :3]  # the float model is the identity on the first three inputs
    margin = max(scale / 2, 0.01 * (high - low))  # rounding, not clipping
    expected = np.mean((flt < low - margin) | (flt > high + margin))
    assert 0.3 < expected < 0.7 and clip["share"] == pytest.approx(expected)
    summary = (folder / "summary.md").read_text()
    assert "clip" in summary and "No layer kept in float changes that" in summary
    float_variant = next(v for v in report["variants"] if v["name"] == "float")
    assert float_variant["clipped_outputs"] == {}  # a float output has no integer range


def test_a_softmax_output_one_step_short_of_one_is_not_clipping():
    from reporter.measure.evaluate import clipped_share

    scale = 1 / 256  # a softmax's int8 output: zero point -128, 0 to 0.996
    probabilities = np.array([1.0, 0.999, 0.5, 0.0, 0.997])
    assert clipped_share(probabilities, 0.0, 255 * scale, scale) == 0.0
    assert clipped_share(np.array([1.2, 0.5, 0.0, 0.3]), 0.0, 255 * scale, scale) == 0.25


@pytest.mark.slow
def test_an_output_range_loss_gets_its_own_measured_fix(tmp_path):
    """x1 - x2 through two ReLU units: calibrated where x1 and x2 move together, the output's int8 range holds
    only about ±0.06, while the inputs and hidden units keep their ranges. FIQ with the output op in float is
    built and measured: its error, checked on the written .tflite, is what the report says, and it fixes FIQ."""
    import keras

    from independent import outputs

    rng = np.random.default_rng(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2, activation="relu"), keras.layers.Dense(1)],
                             name="difference")
    model.layers[0].set_weights([np.eye(2, dtype=np.float32), np.zeros(2, np.float32)])
    model.layers[1].set_weights([np.array([[1.0], [-1.0]], np.float32), np.zeros(1, np.float32)])
    u = rng.uniform(0, 1, (200, 1)).astype(np.float32)
    x_calib = np.concatenate([u, np.clip(u + rng.normal(0, 0.02, u.shape), 0, 1)], 1).astype(np.float32)
    x = rng.uniform(0, 1, (300, 2)).astype(np.float32)
    y = (x[:, :1] - x[:, 1:]).astype(np.float32)
    model.save(tmp_path / "difference.keras")
    np.savez(tmp_path / "data.npz", x=x, y=y, x_calib=x_calib)
    assert run_cli(tmp_path / "difference.keras", tmp_path / "data.npz", tmp_path / "out", "--formats", "json,md",
                   latency_runs=0) == 0
    folder = tmp_path / "out" / "difference"
    report = json.loads((folder / "report.json").read_text())
    by_name = {v["name"]: v for v in report["variants"]}
    fixed, fiq = by_name["fiq_output_float"], by_name["fiq"]
    assert fiq["clipped_outputs"]["output_0"]["share"] > 0.5 and fixed["clipped_outputs"] == {}
    mse = float(np.mean((outputs((folder / "fiq_output_float.tflite").read_bytes(), x).reshape(-1) - y[:, 0]) ** 2))
    assert fixed["output_error"]["mse"] == pytest.approx(mse, rel=1e-4, abs=1e-9)
    assert mse < 0.01 * np.var(y) < fiq["output_error"]["mse"]  # the fix is measured to work
    summary = (folder / "summary.md").read_text()
    assert "FIQ with its output op in float measured output MSE" in summary
    assert "FIQ already meets the search's target" not in summary  # x_calib cannot show the clipping
