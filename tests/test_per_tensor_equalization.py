"""The per-tensor schemes' fix by cross-layer equalization (reporter.debug.equalization, issue 52), checked from outside
on tests/per_tensor_fixtures.py's digits_spread: a digits CNN whose convolution has two output channels scaled by
1/128 and read x128 by the depthwise convolution after it (the same float function), so one scale per weight tensor
rounds most channels of one layer or the other to a code or none. The equalized float model written in the report
folder is compared with the float model by LiteRT runs of both files; the equalized per-tensor model's accuracy comes
from a plain LiteRT run of its file scored with numpy, and its weights' scales are read from the file."""

import json

import numpy as np
import pytest

import independent
import per_tensor_fixtures
from conftest import run_recorded

pytestmark = pytest.mark.slow

WITHIN = 0.01  # the equalized per-tensor model within 1 point of float
LOSS = 0.05  # per-tensor without equalization: 5 points below float (27 of 540 samples; the paired noise is ~1.5)
WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


@pytest.fixture(scope="module")
def fx(demo_cache):
    model, data = per_tensor_fixtures.ensure("digits_spread", demo_cache)
    loaded = np.load(data)
    return {"model": model, "data": data, "x": loaded["x"].astype(np.float32), "y": loaded["y"]}


@pytest.fixture(scope="module")
def run(fx, tmp_path_factory):
    """`quant-report run MODEL --data DATA --variants float,fiq,fiq_per_tensor`."""
    out = tmp_path_factory.mktemp("per_tensor_equalization")
    code, error = run_recorded(fx["model"], fx["data"], out, "pt", "--variants", "float,fiq,fiq_per_tensor",
                               "--formats", "json", "--latency-runs", "2")
    folder = out / "pt"
    report = json.loads((folder / "report.json").read_text()) if (folder / "report.json").exists() else None
    return {"code": code, "error": error, "folder": folder, "report": report}


def _ok(run):
    assert run["error"] is None and run["code"] == 0, run["error"]
    return run["report"], run["folder"]


def _weights(model: bytes) -> list[dict]:
    """The weight tensor (second input) of every convolution and fully connected op, as LiteRT details it."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    details = {d["index"]: d for d in it.get_tensor_details()}
    return [details[int(op["inputs"][1])] for op in it._get_ops_details() if op["op_name"] in WEIGHTED]


def _channel_ranges(model: bytes, op: str) -> np.ndarray:
    """max |weight| of each channel of the model's one `op` (float weights, read with LiteRT): a convolution's output
    channels (first axis), a depthwise convolution's channels (last axis)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    it.allocate_tensors()
    (index,) = [int(o["inputs"][1]) for o in it._get_ops_details() if o["op_name"] == op]
    w = np.abs(it.get_tensor(index))
    return (w.reshape(-1, w.shape[-1]).max(axis=0) if op == "DEPTHWISE_CONV_2D"
            else w.reshape(w.shape[0], -1).max(axis=1))


def test_equalized_float_model_is_the_same_function(run, fx):
    report, folder = _ok(run)
    original, equalized = (folder / "float.tflite").read_bytes(), (folder / "per_tensor_cle_float.tflite").read_bytes()
    a, b = independent.outputs(original, fx["x"]), independent.outputs(equalized, fx["x"])
    assert np.allclose(a, b, rtol=1e-4, atol=1e-5), np.abs(a - b).max()
    # and it equalized as Nagel et al. do: each channel's range where it is made (the convolution) and where it is
    # read (the depthwise convolution) both become the geometric mean of the two ranges before
    r1, r2 = _channel_ranges(original, "CONV_2D"), _channel_ranges(original, "DEPTHWISE_CONV_2D")
    e1, e2 = _channel_ranges(equalized, "CONV_2D"), _channel_ranges(equalized, "DEPTHWISE_CONV_2D")
    assert r1.max() / r1.min() > 100  # the fixture's spread
    np.testing.assert_allclose(e1, np.sqrt(r1 * r2), rtol=2e-3)
    np.testing.assert_allclose(e2, np.sqrt(r1 * r2), rtol=2e-3)


def test_equalized_per_tensor_model_recovers_float(run, fx):
    report, folder = _ok(run)
    measured = {v["name"]: v for v in report["variants"]}
    assert measured["per_tensor_cle"]["status"] == "ok", measured["per_tensor_cle"].get("error")
    model = (folder / "per_tensor_cle.tflite").read_bytes()
    own = float(np.mean(independent.outputs(model, fx["x"]).argmax(axis=1) == fx["y"]))
    reported = measured["per_tensor_cle"]["metrics"]["accuracy"]
    assert own == pytest.approx(reported, abs=1e-9)
    flt = float(np.mean(independent.outputs((folder / "float.tflite").read_bytes(), fx["x"]).argmax(1) == fx["y"]))
    per_tensor = float(np.mean(independent.outputs((folder / "fiq_per_tensor.tflite").read_bytes(), fx["x"])
                               .argmax(1) == fx["y"]))
    assert flt - per_tensor > LOSS, (flt, per_tensor)  # the loss the fix is for
    assert own >= flt - WITHIN, (own, flt)
    reference = float(np.mean(independent.outputs(model, fx["x"], reference=True).argmax(axis=1) == fx["y"]))
    assert reference >= flt - WITHIN, (reference, flt)  # LiteRT's reference kernels too
    # one scale per weight tensor, int8, in every convolution and fully connected op of the file
    weights = _weights(model)
    assert {w["dtype"].__name__ for w in weights} == {"int8"}, weights
    assert [len(w["quantization_parameters"]["scales"]) for w in weights] == [1] * len(weights), weights
    assert len(weights) == 3


def test_it_is_an_option_of_the_decision_named_for_what_it_is(run):
    report, _ = _ok(run)
    options = {o["name"]: o for o in report["findings"]["decision"]["options"]}
    assert "cross-layer equalization" in options["per_tensor_cle"]["label"]
    assert "per-tensor" in options["per_tensor_cle"]["label"]
    assert options["per_tensor_cle"]["meets"] and not options["fiq_per_tensor"]["meets"]
