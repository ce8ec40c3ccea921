"""Rung (d) of the integer-only repairs (reporter.convert.rungs: layernorm_without_neg, smoothquant; issue 45), checked from outside on
tests/rewrite_fixtures.py's LayerNorm transformer with one outlier channel: the rewritten float models against the
original with plain LiteRT runs (numpy), the int8 candidates' tensor types read with LiteRT's own interpreter, their
accuracy from an independent LiteRT run scored with scikit-learn, float's from the Keras model itself, and plain int8
(LiteRT Quantizer's static_wi8_ai8 of the unmodified float model) built here."""

import numpy as np
import pytest

from independent import used_types

import rewrite_fixtures
from reporter.convert import rungs
from reporter.convert.rungs.base import RepairOptions
from reporter.convert.rungs.layernorm_without_neg import without_neg
from reporter.convert.rungs.smoothquant import smooth

REWRITES = RepairOptions(rungs=("layernorm_without_neg", "smoothquant"))

ALLOWED = {"int8", "int32", "bool"}
EXACT = 1e-5  # largest |rewritten - original| float output (softmax scores)
CLOSE = 0.03  # the repaired int8 model's accuracy within 3 points of float's
FAR = 0.30  # plain int8 at least 30 points below float's


# --- independent runs and reads -------------------------------------------------------------------------------
def interpreter(model: bytes, **options):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model, **options)
    it.allocate_tensors()
    return it


def float_outputs(model: bytes, x: np.ndarray, keep=None) -> np.ndarray:
    """Outputs of a float model, one sample per invoke; with `keep` (a tensor name), that tensor's values instead."""
    it = interpreter(model, experimental_preserve_all_tensors=keep is not None)
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    index = out["index"] if keep is None else next(d["index"] for d in it.get_tensor_details() if d["name"] == keep)
    rows = []
    for row in x:
        it.set_tensor(inp["index"], row[None].astype(np.float32))
        it.invoke()
        rows.append(np.array(it.get_tensor(index)))
    return np.concatenate(rows)


def int8_outputs(model: bytes, x: np.ndarray) -> np.ndarray:
    """An int8-I/O model's dequantized outputs, one sample per invoke on LiteRT's reference kernels (what
    integer-only hardware implements)."""
    from ai_edge_litert.interpreter import OpResolverType

    it = interpreter(model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    (s_in, z_in), (s_out, z_out) = inp["quantization"], out["quantization"]
    rows = []
    for row in x:
        if inp["dtype"] == np.int8:
            row = np.clip(np.round(row / s_in + z_in), -128, 127)
        it.set_tensor(inp["index"], row[None].astype(inp["dtype"]))
        it.invoke()
        got = it.get_tensor(out["index"]).astype(np.float32)
        rows.append((got - z_out) * s_out if s_out else got)
    return np.concatenate(rows)


def accuracy(model: bytes, fx) -> float:
    from sklearn.metrics import accuracy_score

    return float(accuracy_score(fx.y, int8_outputs(model, fx.x).argmax(-1)))


def op_names(model: bytes) -> list:
    from ai_edge_litert.interpreter import Interpreter

    return [op["op_name"] for op in Interpreter(model_content=model)._get_ops_details()]


def plain_int8(float_model: bytes, x_calib: np.ndarray) -> bytes:
    """LiteRT Quantizer's static int8 of the unmodified float model, built here."""
    from ai_edge_litert.interpreter import Interpreter
    from litert_quantizer import quantizer, recipe

    (name,) = Interpreter(model_content=float_model).get_signature_list()["serving_default"]["inputs"]
    q = quantizer.Quantizer(float_model, recipe.static_wi8_ai8())
    calibration = q.calibrate({"serving_default": [{name: x_calib[i:i + 1]} for i in range(len(x_calib))]})
    return bytes(q.quantize(calibration).quantized_model)


def head_input(model: bytes) -> str:
    """The name of the tensor the last FULLY_CONNECTED reads (the pooled LayerNorm output)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    names = {d["index"]: d["name"] for d in it.get_tensor_details()}
    fc = [op for op in it._get_ops_details() if op["op_name"] == "FULLY_CONNECTED"][-1]
    return names[int(fc["inputs"][0])]


# --- fixtures ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fx(demo_cache):
    return rewrite_fixtures.ensure(demo_cache)


@pytest.fixture(scope="module")
def candidates(fx):
    return {c.rung: c for c in rungs.candidates(fx.float_model, fx.x_calib, fx.x_select, REWRITES)}


@pytest.fixture(scope="module")
def float_accuracy(fx):
    import keras
    from sklearn.metrics import accuracy_score

    model = keras.models.load_model(fx.keras_path)
    return float(accuracy_score(fx.y, model.predict(fx.x, verbose=0).argmax(-1)))


# --- tests ------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_rewritten_float_models_compute_the_same_function(fx):
    assert "NEG" in op_names(fx.float_model)
    original = float_outputs(fx.float_model, fx.x)
    no_neg, how = without_neg(fx.float_model)
    assert how and "NEG" not in op_names(no_neg)
    assert np.abs(float_outputs(no_neg, fx.x) - original).max() <= EXACT
    smoothed, words = smooth(no_neg, fx.x_calib)
    assert words and smoothed != no_neg
    assert np.abs(float_outputs(smoothed, fx.x) - original).max() <= EXACT
    # the outlier channel is gone from the head's input: its range now near the others'
    for model, outlier in ((no_neg, True), (smoothed, False)):
        pooled = np.abs(float_outputs(model, fx.x_calib, keep=head_input(model))).max(axis=0)
        ratio = pooled[fx.channel] / np.median(np.delete(pooled, fx.channel))
        assert (ratio > 100) == outlier, (outlier, ratio)


@pytest.mark.slow
def test_candidates_are_integer_only(fx, candidates):
    plain = plain_int8(fx.float_model, fx.x_calib)
    assert set(used_types(plain)) - ALLOWED  # the unmodified model keeps a float island (the NEG)
    assert set(candidates) == {"layernorm_without_neg", "smoothquant"}
    for c in candidates.values():
        assert c.model is not None and not c.error, (c.rung, c.error)
        types = used_types(c.model)
        assert set(types) <= ALLOWED and types.get("int8"), (c.rung, types)
        assert "NEG" not in op_names(c.model) and "DEQUANTIZE" not in op_names(c.model)
        it = interpreter(c.model)
        assert all(d["dtype"] == np.int8 for d in it.get_input_details() + it.get_output_details())


@pytest.mark.slow
def test_smoothquant_recovers_float_accuracy_where_plain_int8_collapses(fx, candidates, float_accuracy):
    plain = accuracy(plain_int8(fx.float_model, fx.x_calib), fx)
    repaired = accuracy(candidates["smoothquant"].model, fx)
    no_neg = accuracy(candidates["layernorm_without_neg"].model, fx)
    print(f"float {float_accuracy:.3f}, plain int8 {plain:.3f}, without NEG {no_neg:.3f}, SmoothQuant {repaired:.3f}")
    assert plain < float_accuracy - FAR
    assert no_neg < float_accuracy - FAR  # integer-only, but the outlier channel still collapses it
    assert repaired >= float_accuracy - CLOSE


@pytest.mark.slow
def test_a_rewrite_that_does_not_apply_says_why(fx):
    """An MLP on the digits (no LayerNorm, no outlier channel): both candidates without a model, each with one line."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8)), keras.layers.Flatten(), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    flat = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    got = {c.rung: c for c in rungs.candidates(flat, fx.x_calib, fx.x_select, REWRITES)}
    assert got["layernorm_without_neg"].model is None and got["layernorm_without_neg"].error == "no NEG in the model"
    assert got["smoothquant"].model is None
    assert got["smoothquant"].error == (
        "no outlier channel feeding a FULLY_CONNECTED, BATCH_MATMUL or CONV_2D through channel-wise ops")


@pytest.mark.slow
def test_a_neg_that_reaches_no_add_becomes_a_multiplication_by_minus_one(fx):
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inp = keras.Input((8, 8))
    h = keras.layers.Flatten()(keras.layers.Lambda(keras.ops.negative)(inp))
    h = keras.layers.Dense(10, activation="softmax")(h)
    flat = tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, h)).convert()
    assert "NEG" in op_names(flat)
    rewritten, how = without_neg(flat)
    assert how == ["NEG as MUL by -1"] and "NEG" not in op_names(rewritten) and "MUL" in op_names(rewritten)
    assert np.abs(float_outputs(rewritten, fx.x) - float_outputs(flat, fx.x)).max() <= EXACT
    (candidate,) = [c for c in rungs.candidates(flat, fx.x_calib, fx.x_select, REWRITES)
                    if c.rung == "layernorm_without_neg"]
    assert candidate.model is not None and set(used_types(candidate.model)) <= ALLOWED, candidate.error


@pytest.mark.slow
def test_smoothquants_calibration_made_ahead_in_another_process_builds_the_same_model(fx, candidates, monkeypatch):
    """Issue 67: once the ladder's first rung missed, SmoothQuant's rewrite is calibrated in another process (the
    run's contained child) while the rungs before it are built; its candidate is byte for byte the one built with the
    calibration made here, which is then not made here."""
    from litert_quantizer import quantizer

    from reporter.convert import contained
    from reporter.convert.rungs import base

    calibrated_here = []
    calibrate = quantizer.Quantizer.calibrate
    monkeypatch.setattr(quantizer.Quantizer, "calibrate",
                        lambda self, *a, **k: calibrated_here.append(1) or calibrate(self, *a, **k))
    child = contained.Child()
    handed = []

    class Recording:
        def call(self, fn, *args):
            handed.append(fn)
            return child.helper().call(fn, *args)

    try:
        got = {c.rung: c for c in rungs.candidates(fx.float_model, fx.x_calib, fx.x_select, REWRITES,
                                                   run=base.RunVariants(behind=Recording()))}
    finally:
        child.close()
    assert handed == [base.batch1_calibration]
    assert got["smoothquant"].model == candidates["smoothquant"].model
    assert len(calibrated_here) == 1  # the user's float model's own calibration; the rewrite's came from the child
