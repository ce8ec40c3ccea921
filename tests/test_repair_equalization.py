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


def _stem_output_ranges(model: bytes, x: np.ndarray) -> np.ndarray:
    """Per channel, the max |value| of the tensor the first DEPTHWISE_CONV_2D reads, over plain LiteRT runs on `x`."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    read = int(next(op for op in it._get_ops_details() if op["op_name"] == "DEPTHWISE_CONV_2D")["inputs"][0])
    inp = it.get_input_details()[0]
    top = 0
    for row in x:
        it.set_tensor(inp["index"], row[None].astype(np.float32))
        it.invoke()
        value = it.get_tensor(read)
        top = np.maximum(top, np.abs(value).reshape(-1, value.shape[-1]).max(axis=0))
    return top


def _kernel(model: bytes, kind: str, nth: int = 0) -> np.ndarray:
    """The weights of the model's `nth` op of `kind`, read with LiteRT's interpreter."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    it.allocate_tensors()
    op = [op for op in it._get_ops_details() if op["op_name"] == kind][nth]
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
    # each missed, did not apply, or was no closer to float on the selection samples than a model that missed
    assert all(statuses[code] in ("misses", "does_not_apply", "screened") for code in before), statuses

    model = (folder / decision["file"]).read_bytes()
    assert set(used_types(model)) <= {"int8", "int32"}
    accuracy = float(accuracy_score(fx.y, independent.outputs(model, fx.x, reference=True).argmax(-1)))
    assert accuracy >= float_accuracy - WITHIN, (accuracy, float_accuracy)
    shipped = next(o for o in decision["options"] if o["name"] == decision["variant"])
    assert shipped["score"] == pytest.approx(accuracy, abs=1e-9) and shipped["meets"]

    plain = (folder / "int8_io.tflite").read_bytes()  # the collapse the rung repaired
    assert accuracy_score(fx.y, independent.outputs(plain, fx.x, reference=True).argmax(-1)) < float_accuracy - 0.5
    assert "Ship" in report["findings"]["headline"][0]

    # What the rung did, in the user's terms: the channel found here, the layer that makes it, no fused tensor name.
    ranges = _stem_output_ranges(fx.float_model, fx.x_calib)
    detail = next(r for r in report["repairs"] if r["rung"] == "cross_layer_equalization")["detail"]
    assert f"channel {int(np.argmax(ranges))} of layer " in detail and ";" not in detail.split(" (max")[0], detail


def test_the_rewrite_is_exact_in_float_and_equalizes_the_one_channel(fx, rewritten):
    """The rewritten float model gives the original's outputs; the tensor the depthwise convolution reads no longer
    has a channel far beyond the others; and the depthwise kernel differs from the original only on that channel, by
    a power of two (read from both files)."""
    original, after = independent.outputs(fx.float_model, fx.x), independent.outputs(rewritten, fx.x)
    assert np.allclose(after, original, rtol=0, atol=EXACT), np.abs(after - original).max()

    before_ranges = _stem_output_ranges(fx.float_model, fx.x_calib)
    after_ranges = _stem_output_ranges(rewritten, fx.x_calib)
    channel = int(np.argmax(before_ranges / np.median(before_ranges)))
    assert before_ranges[channel] > 500 * np.median(before_ranges)
    assert after_ranges.max() < OUTLIER * np.median(after_ranges), after_ranges

    k0, k1 = _kernel(fx.float_model, "DEPTHWISE_CONV_2D"), _kernel(rewritten, "DEPTHWISE_CONV_2D")  # [1, kh, kw, C]
    same = np.arange(k0.shape[-1]) != channel
    assert np.array_equal(k0[..., same], k1[..., same])
    ratio = k1[..., channel][k0[..., channel] != 0] / k0[..., channel][k0[..., channel] != 0]
    assert np.all(ratio == ratio.flat[0]) and ratio.flat[0] > 1 and np.log2(ratio.flat[0]).is_integer(), ratio


def _outlier_model(reader: str) -> bytes:
    """A seeded, untrained CNN (8x8x1 -> conv stem, ReLU -> `reader` -> global pooling -> dense) whose stem channel 2
    is x1024 and read /1024 by `reader`: "grouped", a convolution in 4 groups of 2 channels; "padded", zero padding
    then a strided valid depthwise convolution (MobileNetV2's downsampling)."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    layers = keras.layers
    inp = keras.Input((8, 8, 1))
    stem = layers.Conv2D(8, 3, padding="same", activation="relu", name="stem")(inp)
    if reader == "grouped":
        h = layers.Conv2D(16, 3, padding="same", groups=4, activation="relu", name="reader")(stem)
    else:
        h = layers.DepthwiseConv2D(3, strides=2, activation="relu", name="reader")(layers.ZeroPadding2D(1)(stem))
    model = keras.Model(inp, layers.Dense(10, activation="softmax")(layers.GlobalAveragePooling2D()(h)))
    k, b = model.get_layer("stem").get_weights()
    k[..., CHANNEL] *= 1024.0
    b[CHANNEL] *= 1024.0
    model.get_layer("stem").set_weights([k, b])
    k, b = model.get_layer("reader").get_weights()
    if reader == "grouped":  # (kh, kw, channels per group, outputs): group 1 holds channels 2, 3 and outputs 4..7
        k[:, :, CHANNEL % 2, 4:8] /= 1024.0
    else:  # (kh, kw, channels, multiplier)
        k[:, :, CHANNEL, :] /= 1024.0
    model.get_layer("reader").set_weights([k, b])
    return tf.lite.TFLiteConverter.from_keras_model(model).convert()


CHANNEL = 2


@pytest.mark.parametrize("reader", ["grouped", "padded"])
def test_a_grouped_or_padded_reader_takes_the_factor_on_that_channel_only(reader):
    """The rung's rewrite of `_outlier_model` gives the original's outputs, its int8 model is integer-only, and in
    the reader's kernel only the weights reading the outlier channel change, all by the same power of two (read from
    both files with LiteRT)."""
    from reporter.convert import rungs
    from reporter.convert.rungs.base import RepairOptions

    float_model = _outlier_model(reader)
    x = np.random.default_rng(0).uniform(0, 1, (120, 8, 8, 1)).astype(np.float32)
    (found,) = rungs.candidates(float_model, x[:80], x[80:], RepairOptions(rungs=("cross_layer_equalization",)))
    assert found.model is not None and set(used_types(found.model)) <= {"int8", "int32"}, found.error
    original, after = independent.outputs(float_model, x), independent.outputs(found.rewritten, x)
    assert np.allclose(after, original, rtol=0, atol=EXACT)

    kind, nth = ("CONV_2D", 1) if reader == "grouped" else ("DEPTHWISE_CONV_2D", 0)
    k0, k1 = _kernel(float_model, kind, nth), _kernel(found.rewritten, kind, nth)
    changed = np.zeros(k0.shape, bool)
    if reader == "grouped":  # [outputs, kh, kw, channels per group]
        changed[4:8, ..., CHANNEL % 2] = True
    else:  # [1, kh, kw, channels]; the PAD between them passed the factor
        changed[..., CHANNEL] = True
        from ai_edge_litert.interpreter import Interpreter

        assert "PAD" in {op["op_name"] for op in Interpreter(model_content=float_model)._get_ops_details()}
    assert np.array_equal(k0[~changed], k1[~changed])
    ratio = k1[changed] / k0[changed]
    assert np.all(ratio == ratio[0]) and ratio[0] > 1 and np.log2(ratio[0]).is_integer(), ratio
