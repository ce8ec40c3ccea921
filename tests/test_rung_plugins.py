"""The repair rungs as plug-ins (reporter.convert.rungs): one conformance suite that every registered rung must pass.

Each rung says it does not apply, with one line saying why, on a model (or data) it cannot change; on its own fixture
it builds a model that LiteRT's reference kernels load (read with a plain ai_edge_litert interpreter), and where it
claims to be exact in float, its float rewrite computes the float file's function (both run by plain LiteRT, the
input transform applied with numpy). A rung registered without a refusal and a fixture here fails the suite."""

import types

import numpy as np
import pytest

import detector_fixtures
import repair_fixtures
import rewrite_fixtures
import shared_scale_fixtures
from reporter.convert import rungs
from reporter.convert.rungs.base import RepairOptions, Workspace

CODES = [rung.code for rung in rungs.REGISTRY]
EXACT = 1e-4  # largest |rewrite - float| output, relative to the largest |float output|


# --- independent runs ---------------------------------------------------------------------------------------------
def float_outputs(model: bytes, x: np.ndarray) -> np.ndarray:
    """A float model's outputs, one sample per invoke, plain LiteRT."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    rows = []
    for row in x.astype(np.float32):
        it.set_tensor(inp["index"], row[None])
        it.invoke()
        rows.append(np.array(it.get_tensor(out["index"])).reshape(-1))
    return np.stack(rows)


def loads_on_reference_kernels(model: bytes) -> bool:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    inp = it.get_input_details()[0]
    it.set_tensor(inp["index"], np.zeros(inp["shape"], inp["dtype"]))
    it.invoke()
    return True


def mlp(int8: bool = False) -> bytes:
    """A small MLP with no bias, no normalization, no NEG and no outlier channel (optionally full-integer)."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(6, activation="relu", use_bias=False),
                              keras.layers.Dense(3, activation="softmax", use_bias=False)])
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        x = np.random.default_rng(1).normal(size=(32, 8)).astype(np.float32)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([row[None]] for row in x)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
    return bytes(converter.convert())


def litert_16x8(float_model: bytes, x_calib: np.ndarray) -> bytes:
    """LiteRT Quantizer's static_wi8_ai16 of the float model, as the run's 16x8 variant is built."""
    from litert_quantizer import quantizer, recipe

    from ai_edge_litert.interpreter import Interpreter

    q = quantizer.Quantizer(float_model, recipe.static_wi8_ai16())
    (name,) = Interpreter(model_content=float_model).get_signature_list()["serving_default"]["inputs"]
    cal = q.calibrate({"serving_default": [{name: x_calib[i:i + 1].astype(np.float32)} for i in range(len(x_calib))]})
    return bytes(q.quantize(cal).quantized_model)


# --- what each rung cannot change, and its own fixture ------------------------------------------------------------
X = np.random.default_rng(2).normal(size=(40, 8)).astype(np.float32)


def refusal(code: str) -> Workspace:
    """A workspace whose model (or data) gives rung `code` nothing to change."""
    if code == "static_batch1":
        return Workspace(mlp(int8=True), X, X)  # already integer: nothing to quantize
    if code == "ranges":
        return Workspace(mlp(), X, X[:0])  # no selection samples to choose a method on
    if code == "int16x8":
        return Workspace(mlp(), X, X)  # a run that builds no 16x8 variant
    if code in ("bias_correction", "host_normalization", "layernorm_without_neg", "smoothquant",
                "cross_layer_equalization"):
        return Workspace(mlp(), X, X)  # no bias, no leading normalization, no NEG, no outlier channel, no depthwise
    if code == "float_detection_outputs":
        return Workspace(mlp(), X, X)  # no detection postprocess
    if code == "split_output_scale":
        return Workspace(mlp(), X, X)  # no output made by a concatenation
    raise AssertionError(f"rung {code!r} has no refusal case in this suite: add one")


def own_fixture(code: str, cache):
    """The fixture on which rung `code` builds its model."""
    if code == "static_batch1":
        fx = repair_fixtures.ensure("squeeze_excite", cache)
    elif code in ("ranges", "bias_correction"):
        fx = repair_fixtures.ensure("range_decides", cache)
    elif code in ("host_normalization", "int16x8"):
        fx = repair_fixtures.ensure("input_offset", cache)
    elif code in ("layernorm_without_neg", "smoothquant"):
        fx = rewrite_fixtures.ensure(cache)
    elif code == "cross_layer_equalization":
        fx = repair_fixtures.ensure("depthwise_outlier", cache)
    elif code == "float_detection_outputs":
        files = detector_fixtures.ensure(cache)
        data = np.load(files["data"])
        fx = types.SimpleNamespace(float_model=files["tflite"].read_bytes(), x_calib=data["x_calib"],
                                   x_select=data["x_calib"][:64], x=data["x"])
    elif code == "split_output_scale":
        folder = shared_scale_fixtures.ensure(cache)
        data = np.load(folder / "data.npz")
        fx = types.SimpleNamespace(float_model=(folder / "model.tflite").read_bytes(), x_calib=data["x_calib"],
                                   x_select=data["x_calib"][:64], x=data["x"])
    else:
        raise AssertionError(f"rung {code!r} has no fixture in this suite: add one")
    return fx


# --- the suite ----------------------------------------------------------------------------------------------------
def test_the_registry_lists_each_rung_once_in_ladder_order():
    assert CODES == ["static_batch1", "float_detection_outputs", "ranges", "split_output_scale", "bias_correction",
                     "host_normalization", "layernorm_without_neg", "smoothquant", "cross_layer_equalization", "int16x8"]
    for rung in rungs.REGISTRY:
        assert rung.label and isinstance(rung.exact, bool)


def test_16x8_is_on_the_ladder_only_where_the_target_runs_int16_activations():
    from reporter.core import targets

    assert "int16x8" not in [r.code for r in rungs.plan(targets.of("int8"))]
    assert [r.code for r in rungs.plan(targets.of("micro"))] == CODES


@pytest.mark.slow
@pytest.mark.parametrize("code", CODES)
def test_a_rung_says_why_it_does_not_apply(code):
    data = refusal(code)
    rung = next(r for r in rungs.REGISTRY if r.code == code)
    why = rung.applies(data.float_model, data)
    assert isinstance(why, str) and why.strip() and "\n" not in why
    from reporter.core import targets

    (candidate,) = rungs.candidates(data.float_model, data.base.calib, data.select, RepairOptions(rungs=(code,)),
                                    target=targets.of("micro"))
    assert (candidate.rung, candidate.model, candidate.applies, candidate.error) == (code, None, False, why)


@pytest.mark.slow
@pytest.mark.parametrize("code", CODES)
def test_a_rung_builds_on_its_fixture_a_model_the_reference_kernels_load(code, demo_cache):
    from reporter.core import targets

    fx = own_fixture(code, demo_cache)
    built = (lambda name: litert_16x8(fx.float_model, fx.x_calib)) if code == "int16x8" else None
    (candidate,) = rungs.candidates(fx.float_model, fx.x_calib, fx.x_select, RepairOptions(rungs=(code,)),
                                    target=targets.of("micro"), run=rungs.RunVariants(build=built))
    assert candidate.model is not None and candidate.applies, candidate.error
    assert loads_on_reference_kernels(candidate.model)
    rung = next(r for r in rungs.REGISTRY if r.code == code)
    if rung.exact:
        assert candidate.rewritten is not None
        x = fx.x[:200].astype(np.float32)
        fed = x if candidate.input_transform is None else (
            (x - np.asarray(candidate.input_transform.subtract)) / np.asarray(candidate.input_transform.divide))
        original, rewritten = float_outputs(fx.float_model, x), float_outputs(candidate.rewritten, fed)
        assert np.abs(rewritten - original).max() <= EXACT * np.abs(original).max()


@pytest.mark.slow
def test_16x8_measured_by_the_run_already_is_not_built_again():
    from reporter.core import targets

    built = []
    (candidate,) = rungs.candidates(mlp(), X, X, RepairOptions(rungs=("int16x8",)), target=targets.of("micro"),
                                    run=rungs.RunVariants(frozenset({"int16x8"}), built.append))
    assert candidate.model is None and candidate.applies and not built
    assert candidate.error == "measured above as the 16x8 variant (an option of the decision)"
