"""The cross-layer equalization rung (reporter.convert.rungs.cross_layer_equalization; issue 52), checked from outside
on tests/repair_fixtures.py's depthwise_outlier: a MobileNet-style CNN whose one stem channel is x1024 and read /1024
by the depthwise convolution after it (float bit-identical), where plain int8 collapses and SmoothQuant does not
apply. The shipped file's tensor types are read with LiteRT, its accuracy comes from a reference-kernel run of the
written file scored against the labels with scikit-learn, float's from the Keras model, and the rewrite's weights and
ranges are read from the float files with LiteRT's interpreter."""

import json

import numpy as np
import pytest
from sklearn.metrics import accuracy_score

import independent
import repair_fixtures
from conftest import run_recorded
from independent import used_types

pytestmark = pytest.mark.slow

WITHIN = 0.01  # the shipped model within 1 point of float
EXACT = 1e-6  # largest |rewritten - original| float output (softmax scores): powers of two change no float number
OUTLIER = 20.0  # the rung's own threshold (a channel's max |value| this many times the median channel's)


@pytest.fixture(scope="module")
def fx(demo_cache):
    return repair_fixtures.ensure("depthwise_outlier", demo_cache)


@pytest.fixture(scope="module")
def float_accuracy(fx):
    import keras

    return float(accuracy_score(fx.y, keras.models.load_model(fx.keras_path).predict(fx.x, verbose=0).argmax(-1)))


@pytest.fixture(scope="module")
def ladder(fx, tmp_path_factory):
    """`quant-report run --target int8` on the fixture's model.keras and data.npz."""
    out = tmp_path_factory.mktemp("equalization_ladder")
    code, error = run_recorded(fx.keras_path, fx.keras_path.parent / "data.npz", out, "dw", "--target", "int8",
                               "--formats", "json", "--latency-runs", "2")
    folder = out / "dw"
    return {"code": code, "error": error, "folder": folder,
            "report": json.loads((folder / "report.json").read_text()) if (folder / "report.json").exists() else None}


@pytest.fixture(scope="module")
def rewritten(fx):
    from reporter.convert import rungs
    from reporter.convert.rungs.base import RepairOptions

    (found,) = rungs.candidates(fx.float_model, fx.x_calib, fx.x_select,
                                RepairOptions(rungs=("cross_layer_equalization",)))
    assert found.applies and found.rewritten is not None, found.error
    return found.rewritten


def _ops(model: bytes) -> tuple[list, dict]:
    """LiteRT's list of the model's ops and its tensors by index."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    return it._get_ops_details(), {d["index"]: d for d in it.get_tensor_details()}


def _stem_output_ranges(model: bytes, x: np.ndarray) -> np.ndarray:
    """Per channel, the max |value| of the tensor the first DEPTHWISE_CONV_2D reads, over plain LiteRT runs on `x`."""
    from ai_edge_litert.interpreter import Interpreter

    ops, _ = _ops(model)
    read = int(next(op for op in ops if op["op_name"] == "DEPTHWISE_CONV_2D")["inputs"][0])
    it = Interpreter(model_content=model, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    inp = it.get_input_details()[0]
    top = 0
    for row in x:
        it.set_tensor(inp["index"], row[None].astype(np.float32))
        it.invoke()
        top = np.maximum(top, np.abs(it.get_tensor(read)).reshape(-1, it.get_tensor(read).shape[-1]).max(axis=0))
    return top


def _depthwise_kernel(model: bytes) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    it.allocate_tensors()
    op = next(op for op in it._get_ops_details() if op["op_name"] == "DEPTHWISE_CONV_2D")
    return np.array(it.get_tensor(int(op["inputs"][1])))


def test_the_ladder_ships_an_all_int8_model_within_a_point_of_float(fx, ladder, float_accuracy):
    """Plain int8 collapses and every earlier rung misses or does not apply (SmoothQuant: no matmul reads the
    channel), so without this rung nothing ships; with it, the written file is all-int8 and, run here on LiteRT's
    reference kernels and scored with scikit-learn, within a point of float."""
    assert ladder["code"] == 0, ladder["error"]
    report, folder = ladder["report"], ladder["folder"]
    decision = report["findings"]["decision"]
    assert decision["variant"] == "repair_cross_layer_equalization", report["findings"]["headline"][0]
    statuses = {r["rung"]: r["status"] for r in report["repairs"]}
    assert statuses["smoothquant"] == "does_not_apply" and statuses["cross_layer_equalization"] == "meets", statuses
    before = list(statuses)[:list(statuses).index("cross_layer_equalization")]
    assert all(statuses[code] in ("misses", "does_not_apply") for code in before), statuses

    model = (folder / decision["file"]).read_bytes()
    assert set(used_types(model)) <= {"int8", "int32"}
    accuracy = float(accuracy_score(fx.y, independent.outputs(model, fx.x, reference=True).argmax(-1)))
    assert accuracy >= float_accuracy - WITHIN, (accuracy, float_accuracy)
    shipped = next(o for o in decision["options"] if o["name"] == decision["variant"])
    assert shipped["score"] == pytest.approx(accuracy, abs=1e-9) and shipped["meets"]

    plain = (folder / "int8_io.tflite").read_bytes()  # the collapse the rung repaired
    assert accuracy_score(fx.y, independent.outputs(plain, fx.x, reference=True).argmax(-1)) < float_accuracy - 0.5
    assert "Ship" in report["findings"]["headline"][0]


def test_the_rewrite_is_exact_in_float_and_equalizes_the_one_channel(fx, rewritten):
    """The rewritten float model gives the original's outputs; the tensor the depthwise convolution reads no longer
    has a channel far beyond the others; and the depthwise kernel differs from the original only on that channel, by
    a power of two (read from both files)."""
    original, after = independent.outputs(fx.float_model, fx.x), independent.outputs(rewritten, fx.x)
    assert np.allclose(after, original, rtol=0, atol=EXACT), np.abs(after - original).max()

    before_ranges, after_ranges = _stem_output_ranges(fx.float_model, fx.x_calib), _stem_output_ranges(rewritten,
                                                                                                          fx.x_calib)
    channel = int(np.argmax(before_ranges / np.median(before_ranges)))
    assert before_ranges[channel] > 500 * np.median(before_ranges)
    assert after_ranges.max() < OUTLIER * np.median(after_ranges), after_ranges

    k0, k1 = _depthwise_kernel(fx.float_model), _depthwise_kernel(rewritten)  # [1, kh, kw, channels]
    same = np.arange(k0.shape[-1]) != channel
    assert np.array_equal(k0[..., same], k1[..., same])
    ratio = k1[..., channel][k0[..., channel] != 0] / k0[..., channel][k0[..., channel] != 0]
    assert np.all(ratio == ratio.flat[0]) and ratio.flat[0] > 1 and np.log2(ratio.flat[0]).is_integer(), ratio
