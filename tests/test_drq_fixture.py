"""The DRQ fixture (tests/drq_fixtures.py) does what it claims, checked with TF's converter, LiteRT Quantizer,
the plain LiteRT interpreter (one sample per invoke) and scipy, none of quant-report's own code:
dynamic-range quantization loses a lot of accuracy, the weights of ONE layer are the cause, and keeping
that layer in float (LiteRT Quantizer, `no_quantize`) gives float's accuracy back while keeping any other
single layer in float does not."""

import numpy as np
import pytest

import drq_fixtures as F

pytestmark = pytest.mark.slow

NAME = "drq_dead_feature"
MIN_DROP = 0.10  # accuracy points DRQ must lose
NOISE = 0.01  # a fix must come this close to float's accuracy (5 of 540 evaluation samples)


@pytest.fixture(scope="module")
def drq(demo_cache):
    """(keras model path, x, y, x_calib, float .tflite bytes, float accuracy)."""
    import keras
    from independent import accuracy

    model_path, data_path = F.ensure(NAME, demo_cache)
    data = np.load(data_path)
    model = keras.saving.load_model(str(model_path), compile=False)
    float_tflite = _convert(model)
    return model_path, data["x"], data["y"], data["x_calib"], float_tflite, accuracy(float_tflite, data["x"], data["y"])


def _convert(model, drq=False) -> bytes:
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if drq:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]  # no representative dataset: dynamic range
    return converter.convert()


def _litert_drq(float_tflite: bytes, float_layers=()) -> bytes:
    from litert_quantizer import quantizer, recipe

    the_recipe = recipe.dynamic_wi8_afp32() + [
        {"regex": F.op_regex(layer), "operation": "*", "algorithm_key": "no_quantize"} for layer in float_layers
    ]  # later entries take precedence over the '.*' one (recipe_manager.get_quantization_configs)
    result = quantizer.Quantizer(float_tflite, the_recipe).quantize(enable_progress_report=False)
    return bytes(result.quantized_model)


def _ops(tflite: bytes):
    """(op name, output tensor names) per op, with the plain LiteRT interpreter."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=tflite)
    names = {t["index"]: t["name"] for t in it.get_tensor_details()}
    return [(op["op_name"], [names[i] for i in op["outputs"]]) for op in it._get_ops_details()]


def _weight_scales(tflite: bytes, layer: str) -> np.ndarray:
    """Quantization scales of the int8 weight tensor of `layer`'s FULLY_CONNECTED."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=tflite)
    (weights,) = [t for t in it.get_tensor_details()
                  if t["dtype"] == np.int8 and f"/{layer}" in t["name"] and "MatMul" in t["name"]]
    return np.asarray(weights["quantization_parameters"]["scales"])


def _significantly_worse(tflite: bytes, float_tflite: bytes, x, y) -> float:
    """Exact McNemar (sign) test on the samples exactly one of the two models gets right: the p-value that
    the quantized model is no worse than float."""
    from scipy.stats import binomtest

    from independent import predictions

    float_ok = predictions(float_tflite, x) == y
    q_ok = predictions(tflite, x) == y
    only_float, only_q = int(np.sum(float_ok & ~q_ok)), int(np.sum(q_ok & ~float_ok))
    if only_float + only_q == 0:
        return 1.0
    return float(binomtest(only_float, only_float + only_q, 0.5, alternative="greater").pvalue)


def test_the_data_never_fires_the_padding_flag_and_the_kill_switch_is_in_the_float_model(drq):
    import keras

    model_path, x, y, x_calib, _, float_acc = drq
    assert not np.any(x[:, F.PAD_FEATURE]) and not np.any(x_calib[:, F.PAD_FEATURE])
    assert x[:, : F.PAD_FEATURE].min() >= 0 and x[:, : F.PAD_FEATURE].max() <= 1  # no wide input
    model = keras.saving.load_model(str(model_path), compile=False)
    w = model.get_layer(F.CULPRIT_LAYER).get_weights()[0]
    assert np.all(w[F.PAD_FEATURE] == F.KILL_WEIGHT)
    assert np.abs(w[: F.PAD_FEATURE]).max() < abs(F.KILL_WEIGHT) / 50
    assert float_acc >= 0.95


def test_the_culprit_is_one_fully_connected_op_that_the_regex_finds(drq):
    import re

    float_tflite = drq[4]
    ops = _ops(float_tflite)
    assert [op for op, _ in ops] == ["FULLY_CONNECTED"] * 3 + ["SOFTMAX"]
    for layer in F.LAYERS:
        matched = [outs for _, outs in ops if any(re.search(F.op_regex(layer), n) for n in outs)]
        assert len(matched) == 1 and f"/{layer}" in matched[0][0], (layer, ops)


def test_tf_drq_loses_accuracy_through_the_culprits_weights(drq):
    import keras

    from independent import accuracy

    model_path, x, y, _, float_tflite, float_acc = drq
    tf_drq = _convert(keras.saving.load_model(str(model_path), compile=False), drq=True)
    assert accuracy(tf_drq, x, y) <= float_acc - MIN_DROP
    assert _significantly_worse(tf_drq, float_tflite, x, y) < 1e-6
    # per output channel, and every channel holds the kill switch: every scale is |KILL_WEIGHT| / 127
    scales = _weight_scales(tf_drq, F.CULPRIT_LAYER)
    assert len(scales) == 64 and np.allclose(scales, abs(F.KILL_WEIGHT) / 127)

    # the same model with the switch at 0 (same inputs, same dynamic activation ranges) survives DRQ
    model = keras.saving.load_model(str(model_path), compile=False)
    layer = model.get_layer(F.CULPRIT_LAYER)
    w, b = layer.get_weights()
    w[F.PAD_FEATURE] = 0
    layer.set_weights([w, b])
    assert accuracy(_convert(model), x, y) == float_acc  # the flag is 0 everywhere: float is unchanged
    assert accuracy(_convert(model, drq=True), x, y) >= float_acc - NOISE


def test_litert_drq_loses_it_too_and_only_the_culprit_in_float_gives_it_back(drq):
    from independent import accuracy

    _, x, y, _, float_tflite, float_acc = drq
    full = _litert_drq(float_tflite)
    assert accuracy(full, x, y) <= float_acc - MIN_DROP
    assert _significantly_worse(full, float_tflite, x, y) < 1e-6
    scales = _weight_scales(full, F.CULPRIT_LAYER)  # channelwise, like TF's converter
    assert len(scales) == 64 and np.allclose(scales, abs(F.KILL_WEIGHT) / 127)

    fixed = _litert_drq(float_tflite, [F.CULPRIT_LAYER])
    assert abs(accuracy(fixed, x, y) - float_acc) <= NOISE
    assert not any(t["dtype"] == np.int8 and F.CULPRIT_LAYER in t["name"] for t in _tensors(fixed))
    for layer in (F.DENSE_MID, F.DENSE_OUT):  # quantized by LiteRT (it has no size threshold)
        assert any(t["dtype"] == np.int8 and layer in t["name"] for t in _tensors(full)), layer
        other = _litert_drq(float_tflite, [layer])
        assert accuracy(other, x, y) <= float_acc - MIN_DROP, layer
    both_others = _litert_drq(float_tflite, [F.DENSE_MID, F.DENSE_OUT])
    assert accuracy(both_others, x, y) <= float_acc - MIN_DROP


def _tensors(tflite: bytes):
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_content=tflite).get_tensor_details()
