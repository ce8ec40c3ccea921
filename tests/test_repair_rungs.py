"""The integer-only repair rungs (reporter.convert.rungs, issue 45), checked from outside: each candidate's tensor
types read with LiteRT's own interpreter (every tensor an op reads or writes int8 or int32, bool allowed), its
accuracy from an independent LiteRT run of its bytes (the input transform applied here with numpy) scored with
scikit-learn, and float's accuracy from the Keras model itself."""

import numpy as np
import pytest

from independent import used_types

import repair_fixtures
from reporter.convert import rungs
from reporter.convert.rungs import base, bias_correction, host_normalization, ranges, static_batch1

RUNGS = tuple(r.RUNG.code for r in (static_batch1, ranges, bias_correction, host_normalization))
STATIC_BATCH1, RANGES, BIAS_CORRECTION, HOST_NORMALIZATION = RUNGS

ALLOWED = {"int8", "int32", "bool"}


# --- independent reads ----------------------------------------------------------------------------------------
def assert_integer_only(model: bytes):
    from ai_edge_litert.interpreter import Interpreter

    types = used_types(model)
    assert set(types) <= ALLOWED and types.get("int8"), types
    it = Interpreter(model_content=model)
    assert all(np.dtype(d["dtype"]) == np.int8 for d in it.get_input_details() + it.get_output_details())


def predict(model: bytes, x: np.ndarray) -> np.ndarray:
    """The int8 model's dequantized outputs, one sample per invoke on LiteRT's reference kernels (what integer-only
    hardware implements; XNNPACK refuses some int8 graphs), nothing of the code under test."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    (s_in, z_in), (s_out, z_out) = inp["quantization"], out["quantization"]
    rows = []
    for row in x:
        it.set_tensor(inp["index"], np.clip(np.round(row[None] / s_in + z_in), -128, 127).astype(np.int8))
        it.invoke()
        rows.append((it.get_tensor(out["index"]).astype(np.float32) - z_out) * s_out)
    return np.concatenate(rows)


def accuracy(model: bytes, fx, transform=None) -> float:
    from sklearn.metrics import accuracy_score

    x = fx.x
    if transform:
        x = (x - np.asarray(transform.subtract)) / np.asarray(transform.divide)
    return float(accuracy_score(fx.y, predict(model, x.astype(np.float32)).argmax(-1)))


def float_accuracy(fx) -> float:
    import keras
    from sklearn.metrics import accuracy_score

    return float(accuracy_score(fx.y, keras.models.load_model(fx.keras_path).predict(fx.x, verbose=0).argmax(-1)))


def plain_litert_int8(float_model: bytes, x_calib: np.ndarray) -> bytes:
    """LiteRT Quantizer's static int8 of the float model as given (dynamic batch), built here."""
    from ai_edge_litert.interpreter import Interpreter
    from litert_quantizer import quantizer, recipe

    signature = Interpreter(model_content=float_model).get_signature_list()["serving_default"]
    q = quantizer.Quantizer(float_model, recipe.static_wi8_ai8())
    calibration = q.calibrate({"serving_default": [{signature["inputs"][0]: x_calib[i:i + 1]}
                                                   for i in range(len(x_calib))]})
    return bytes(q.quantize(calibration, enable_progress_report=False).quantized_model)


def tf_integer_only(fx) -> bytes:
    """TensorFlow's converter's integer-only model (int8 I/O) from the Keras model and the calibration samples."""
    import keras
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(keras.models.load_model(fx.keras_path))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([fx.x_calib[i:i + 1]] for i in range(len(fx.x_calib)))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    return bytes(converter.convert())


# --- fixtures -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def built(demo_cache):
    """name -> (fixture, {rung: candidate}) for every repair fixture, the whole ladder built once."""
    found = {}
    for name in ("input_offset", "squeeze_excite", "range_decides"):
        fx = repair_fixtures.ensure(name, demo_cache)
        found[name] = fx, {c.rung: c for c in rungs.candidates(fx.float_model, fx.x_calib, fx.x_select,
                                                                           base.RepairOptions(RUNGS))}
    return found


# --- fast: the pieces on synthetic data -----------------------------------------------------------------------
def test_starved_features_counts_codes_per_feature():
    x = np.stack([np.linspace(0, 1.4, 50), np.linspace(0, 100, 50)], axis=-1)  # scale 1: 2 codes, then 101 codes
    assert host_normalization.starved_features(x, 1.0, -128) == 1
    assert host_normalization.starved_features(x[:, :1], 1 / 255, -128) == 0


def test_range_methods_follow_their_definitions():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(100, 500)).astype(np.float32)
    values[7, 3] = 40.0  # one outlier in one sample
    stats = ranges.Stats({"t": values.min(axis=1)}, {"t": values.max(axis=1)}, {"t": values.ravel()}, {})
    assert ranges.method_ranges(stats, ranges.MIN_MAX)["t"] == pytest.approx((values.min(), 40.0))
    lo, hi = ranges.method_ranges(stats, ranges.MEAN_EXTREMES)["t"]
    assert hi == pytest.approx(values.max(axis=1).mean(), rel=1e-5) and hi < 5
    assert ranges.method_ranges(stats, ranges.P999)["t"][1] == pytest.approx(np.percentile(values, 99.9), rel=1e-5)
    assert ranges.method_ranges(stats, ranges.MSE)["t"][1] < 40.0  # the outlier is clipped


def test_agreement_reads_class_scores_and_a_sigmoid_unit():
    ref = {"a": np.array([[0.9, 0.1], [0.2, 0.8]]), "b": np.array([[0.7], [0.2]])}
    got = {"a": np.array([[0.6, 0.4], [0.6, 0.4]]), "b": np.array([[0.6], [0.4]])}
    assert base.agreement(ref, got, {"a": "argmax", "b": "threshold"}) == pytest.approx((0.5 + 1.0) / 2)


# --- slow: the rungs on trained models ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["input_offset", "squeeze_excite", "range_decides"])
def test_every_candidate_built_is_integer_only_read_independently(built, name):
    fx, candidates = built[name]
    assert list(candidates) == list(RUNGS)
    for candidate in candidates.values():
        assert candidate.label and candidate.seconds >= 0
        assert (candidate.model is None) == bool(candidate.error), candidate
        if candidate.model is not None:
            assert_integer_only(candidate.model)
        print(f"{name} {candidate.rung}: {candidate.seconds:.2f} s; {candidate.error or candidate.detail}")


@pytest.mark.slow
def test_host_normalization_recovers_float_on_the_input_offset_mlp(built):
    import keras

    fx, candidates = built["input_offset"]
    host, plain = candidates[HOST_NORMALIZATION], candidates[STATIC_BATCH1]
    floated, plain_acc = float_accuracy(fx), accuracy(plain.model, fx)
    host_acc = accuracy(host.model, fx, host.input_transform)
    print(f"input_offset: float {floated:.3f}, static int8 batch 1 {plain_acc:.3f}, host normalization {host_acc:.3f}")
    assert plain_acc < floated - 0.1  # the input's quantization is the loss
    assert host_acc >= floated - 0.01
    norm = next(layer for layer in keras.models.load_model(fx.keras_path).layers
                if isinstance(layer, keras.layers.Normalization))
    mean, variance = (np.asarray(keras.ops.convert_to_numpy(w)).ravel() for w in (norm.mean, norm.variance))
    assert host.input_transform.subtract == pytest.approx(mean, rel=1e-5)
    assert host.input_transform.divide == pytest.approx(np.sqrt(variance), rel=1e-4)
    from ai_edge_litert.interpreter import Interpreter

    names = Interpreter(model_content=fx.float_model).get_signature_list()["serving_default"]["inputs"]
    assert host.input_transform.input == names[0]
    assert "SUB" not in {op["op_name"] for op in Interpreter(model_content=host.model)._get_ops_details()}


@pytest.mark.slow
def test_static_batch1_leaves_no_float_island_where_the_dynamic_batch_does(built):
    from ai_edge_litert.interpreter import Interpreter

    fx, candidates = built["squeeze_excite"]
    plain = plain_litert_int8(fx.float_model, fx.x_calib)
    assert "float32" in used_types(plain)  # DEQUANTIZE -> SHAPE on the dynamic batch
    model = candidates[STATIC_BATCH1].model
    assert model is not None, candidates[STATIC_BATCH1].error
    ops = {op["op_name"] for op in Interpreter(model_content=model)._get_ops_details()}
    assert "SHAPE" not in ops and "DEQUANTIZE" not in ops
    assert Interpreter(model_content=model).get_input_details()[0]["shape_signature"][0] == 1
    floated, acc, island_acc = float_accuracy(fx), accuracy(model, fx), accuracy(plain, fx)
    print(f"squeeze_excite: float {floated:.3f}, LiteRT int8 dynamic batch (float island) {island_acc:.3f},"
          f" static int8 batch 1 {acc:.3f}")
    assert acc == pytest.approx(island_acc, abs=0.005)  # the same numbers, without the float island
    assert acc >= floated - 0.03


@pytest.mark.slow
def test_the_range_method_chosen_beats_litert_default_on_range_decides(built):
    fx, candidates = built["range_decides"]
    ranged, plain = candidates[RANGES], candidates[STATIC_BATCH1]
    assert ranged.model is not None, ranged.error
    chosen = ranged.detail.split("range method: ", 1)[1].split(",", 1)[0]
    assert chosen in ranges.METHOD_WORDS.values() and chosen != ranges.METHOD_WORDS[ranges.MOVING_AVERAGE]
    assert all(words in ranged.detail for words in ranges.METHOD_WORDS.values())
    floated, plain_acc, ranged_acc = float_accuracy(fx), accuracy(plain.model, fx), accuracy(ranged.model, fx)
    minmax_acc = accuracy(tf_integer_only(fx), fx)  # TF's converter keeps the absolute min/max
    print(f"range_decides: float {floated:.3f}, TF int8 (min-max) {minmax_acc:.3f}, static int8 batch 1 {plain_acc:.3f},"
          f" ranges ({chosen}) {ranged_acc:.3f}")
    assert minmax_acc < floated - 0.1  # the range method decides
    assert ranged_acc >= max(plain_acc, floated - 0.01)


@pytest.mark.slow
def test_range_methods_scored_beside_the_run_choose_the_same_model(built):
    """Issue 67: a helper process (the run's side process, else its contained child) scores range methods from the
    first while the run scores them from the last; the method chosen, its figures and the model built are those of
    scoring every method here, and the helper did score some."""
    from reporter.convert import contained

    fx, candidates = built["range_decides"]
    child = contained.Child()
    handed = []

    class Counting:  # the child's helper, recording what it was handed
        def __init__(self, helper):
            self.helper = helper

        def call(self, fn, *args):
            handed.append(self.helper.call(fn, *args))
            return handed[-1]

    try:
        found = {c.rung: c for c in rungs.candidates(
            fx.float_model, fx.x_calib, fx.x_select, base.RepairOptions((STATIC_BATCH1, RANGES)),
            run=base.RunVariants(helper=Counting(child.helper())))}
    finally:
        child.close()
    assert len(handed) == len(ranges.RANGE_METHODS)
    assert any(not job.cancelled() for job in handed)  # the child scored at least one
    assert found[RANGES].detail == candidates[RANGES].detail
    assert found[RANGES].model == candidates[RANGES].model


@pytest.mark.slow
def test_bias_correction_changes_only_biases_by_the_expected_shift(built):
    """Each Dense's int32 bias moves by -E[(Q(W) - W) x] / bias scale, with W from Keras, Q(W) read from the file and
    x from a numpy forward pass over the calibration samples; every other tensor is unchanged."""
    import keras
    from ai_edge_litert.interpreter import Interpreter

    fx, candidates = built["range_decides"]
    corrected, base = candidates[BIAS_CORRECTION].model, candidates[RANGES].model
    assert corrected is not None and base is not None
    a, b = Interpreter(model_content=corrected), Interpreter(model_content=base)
    a.allocate_tensors(), b.allocate_tensors()
    for it in (a, b):  # every tensor but the biases of FULLY_CONNECTED is the same
        assert [op["op_name"] for op in it._get_ops_details()] == [op["op_name"] for op in b._get_ops_details()]
    biased = [op["inputs"] for op in b._get_ops_details() if op["op_name"] == "FULLY_CONNECTED"]
    bias_indices = {int(i[2]) for i in biased}
    for d in b.get_tensor_details():
        if d["index"] not in bias_indices:
            try:
                before = b.get_tensor(d["index"])
            except ValueError:
                continue
            if d["dtype"] == np.int8 and before.ndim == 2 and d["index"] in {int(i[1]) for i in biased}:
                assert np.array_equal(before, a.get_tensor(d["index"])), d["name"]
    consts = {}
    for inputs in biased:
        w, bias = b.get_tensor_details()[int(inputs[1])], b.get_tensor_details()[int(inputs[2])]
        consts[w["shape"][0], w["shape"][1]] = (b.get_tensor(w["index"]), w["quantization_parameters"]["scales"])
        consts["bias", bias["shape"][0]] = (b.get_tensor(bias["index"]), a.get_tensor(bias["index"]),
                                            bias["quantization_parameters"]["scales"])
    x = fx.x_calib
    for layer in [layer for layer in keras.models.load_model(fx.keras_path).layers
                  if isinstance(layer, keras.layers.Dense)]:
        w, bias = layer.get_weights()
        q, scales = consts[(w.shape[1], w.shape[0])]
        before, after, b_scales = consts[("bias", w.shape[1])]
        shift = (q * scales[:, None] - w.T) @ x.mean(axis=0)
        np.testing.assert_allclose(after.astype(np.float64) - before, -shift / b_scales, atol=1.0)
        x = layer(x).numpy()
    acc = accuracy(corrected, fx)
    print(f"range_decides: bias correction {acc:.3f} (on top of the chosen ranges {accuracy(base, fx):.3f})")


@pytest.mark.slow
def test_rungs_are_built_lazily_in_order(built, monkeypatch):
    fx, _ = built["squeeze_excite"]
    called = []
    for rung in rungs.REGISTRY:
        for method in ("applies", "build"):
            real = getattr(type(rung), method)
            monkeypatch.setattr(type(rung), method, lambda self, model, data, f=real: (called.append(self.code),
                                                                                       f(self, model, data))[1])
    ladder = rungs.candidates(fx.float_model, fx.x_calib, fx.x_select)
    first = next(ladder)
    assert first.rung == STATIC_BATCH1 and set(called) == {STATIC_BATCH1}
    only = base.RepairOptions(rungs=(HOST_NORMALIZATION,))
    (host,) = list(rungs.candidates(fx.float_model, fx.x_calib, fx.x_select, only))
    assert host.model is None and not host.applies and host.error
