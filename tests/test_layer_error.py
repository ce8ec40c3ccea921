"""reporter.debug.layer_error: per-layer error of any quantized TFLite variant against the float model, and
reporter.debug.culprit: the layer it blames.

Models are converted here with TF's converter and LiteRT Quantizer's own API from the breast-cancer demo
MLP (a Normalization first, then Dense 32-16-2; FIQ collapses on it). Numbers are checked against
independent computations: plain LiteRT interpreter runs and numpy, and TF's QuantizationDebugger."""

import math

import numpy as np
import pytest

from reporter.debug import culprit as C
from reporter.debug import layer_error as L

SAMPLES = 48


def _interpreter(model: bytes, preserve: bool = False):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model, experimental_preserve_all_tensors=preserve)
    it.allocate_tensors()
    return it


def _tf_convert(model, variant: str, x_calib=None, int8_io: bool = False) -> bytes:
    import tensorflow as tf

    c = tf.lite.TFLiteConverter.from_keras_model(model)
    if variant != "float":
        c.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant == "fiq":
        def rep():
            for i in range(100):
                yield [x_calib[i : i + 1]]

        c.representative_dataset = rep
        if int8_io:
            c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            c.inference_input_type = tf.int8
            c.inference_output_type = tf.int8
    return bytes(c.convert())


@pytest.fixture(scope="module")
def mlp(mlp_files):
    """The MLP as float, TF DRQ, TF FIQ (float and int8 I/O), LiteRT DRQ and LiteRT FIQ (int8 I/O)."""
    import keras
    from litert_quantizer import quantizer, recipe

    model_path, data_path = mlp_files
    data = np.load(data_path)
    x, x_calib = data["x"].astype(np.float32), data["x_calib"].astype(np.float32)
    model = keras.models.load_model(model_path, compile=False)
    models = {
        "float": _tf_convert(model, "float"),
        "drq": _tf_convert(model, "drq"),
        "fiq": _tf_convert(model, "fiq", x_calib),
        "int8_io": _tf_convert(model, "fiq", x_calib, int8_io=True),
    }
    fb = models["float"]
    sig_key, sig = next(iter(_interpreter(fb).get_signature_list().items()))
    models["lq_drq"] = bytes(quantizer.Quantizer(fb, recipe.dynamic_wi8_afp32())
                             .quantize(enable_progress_report=False).quantized_model)
    q = quantizer.Quantizer(fb, recipe.static_wi8_ai8())
    calibration = q.calibrate({sig_key: [{sig["inputs"][0]: x_calib[i : i + 1]} for i in range(100)]})
    models["lq_fiq"] = bytes(q.quantize(calibration, enable_progress_report=False).quantized_model)
    return {"models": models, "x": x, "x_calib": x_calib, "keras": model, "compared": {}}


def _compare(mlp, name) -> L.RawLayerErrors:
    if name not in mlp["compared"]:
        mlp["compared"][name] = L.compare(mlp["models"]["float"], mlp["models"][name], mlp["x"], max_samples=SAMPLES)
    return mlp["compared"][name]


def _row(c: L.RawLayerErrors, fragment: str, op: str) -> L.RawLayerError:
    return next(e for e in c.layers if fragment in e.tensor_name and e.op_name == op)


def _op_types(model: bytes) -> list[str]:
    return [op["op_name"] for op in _interpreter(model)._get_ops_details() if op["op_name"] != "DELEGATE"]


def _dequantized(it, detail, values):
    scale, zero = detail["quantization"]
    if np.issubdtype(values.dtype, np.integer):
        return (values.astype(np.float64) - zero) * scale
    return values.astype(np.float64)


def _plain_runs(float_model, quant_model, x, float_name, quant_name):
    """Both models run with plain interpreters, the named tensors read after each invoke: (float, quant)
    values over all samples, the quantized one dequantized with its own scale and zero point."""
    runs = []
    for model, name in ((float_model, float_name), (quant_model, quant_name)):
        it = _interpreter(model, preserve=True)
        inp = it.get_input_details()[0]
        detail = next(d for d in it.get_tensor_details() if d["name"] == name)
        values = []
        for i in range(len(x)):
            sample = x[i : i + 1]
            if np.issubdtype(inp["dtype"], np.integer):
                scale, zero = inp["quantization"]
                info = np.iinfo(inp["dtype"])
                sample = np.clip(np.round(sample / scale + zero), info.min, info.max).astype(inp["dtype"])
            it.set_tensor(inp["index"], sample)
            it.invoke()
            values.append(_dequantized(it, detail, it.get_tensor(detail["index"])).ravel())
        runs.append(np.concatenate(values))
    return runs


def _assert_metrics(row: L.RawLayerError, f: np.ndarray, q: np.ndarray):
    err = q - f
    assert row.mse == pytest.approx(np.mean(err**2), rel=1e-4)
    assert row.snr_db == pytest.approx(10 * np.log10(np.sum(f**2) / np.sum(err**2)), abs=1e-3)
    assert row.cosine == pytest.approx(np.dot(f, q) / np.linalg.norm(f) / np.linalg.norm(q), abs=1e-6)


# ------------------------------------------------------------------------------------------- exactness


@pytest.mark.slow
def test_the_float_model_against_itself_has_no_error_anywhere(mlp):
    fb = mlp["models"]["float"]
    c = L.compare(fb, fb, mlp["x"], max_samples=SAMPLES)
    assert c.samples == SAMPLES and c.unmatched == 0
    assert [e.op_name for e in c.layers] == _op_types(fb)  # every op, in execution order
    for e in c.layers:
        assert e.mse == 0.0 and e.snr_db == math.inf and e.cosine == 1.0, e
        assert e.snr_drop_db == 0.0 and e.matched_by == "name" and e.tensor_name == e.float_tensor_name
        assert e.weight_snr_db is None and e.quantized_dtype == "float32"
    assert C.culprit(c) is None


@pytest.mark.slow
def test_tf_drq_leaves_this_mlps_small_weights_in_float_so_nothing_differs(mlp):
    # TF's DRQ keeps weight tensors under 1,024 elements in float (30x32 is the largest here): the comparison
    # must say there is no error rather than invent one.
    c = _compare(mlp, "drq")
    assert c.layers and c.unmatched == 0
    assert all(e.snr_db == math.inf and e.weight_snr_db is None for e in c.layers)
    assert C.culprit(c) is None


# -------------------------------------------------------------------------------- against plain numpy


@pytest.mark.slow
def test_fiq_hidden_layer_error_equals_numpy_on_two_plain_interpreter_runs(mlp):
    c = _compare(mlp, "fiq")
    row = _row(c, "dense_1_1/MatMul", "FULLY_CONNECTED")
    assert row.matched_by == "name" and row.quantized_dtype == "int8"
    f, q = _plain_runs(mlp["models"]["float"], mlp["models"]["fiq"], mlp["x"][:SAMPLES],
                       row.float_tensor_name, row.tensor_name)
    _assert_metrics(row, f, q)


@pytest.mark.slow
def test_a_renamed_output_is_matched_by_position_and_measured_like_the_model_output(mlp):
    # TF's FIQ gives the float output name to the DEQUANTIZE it appends; the int8 SOFTMAX is renamed.
    c = _compare(mlp, "fiq")
    softmax = next(e for e in c.layers if e.op_name == "SOFTMAX")
    float_out = _interpreter(mlp["models"]["float"]).get_output_details()[0]["name"]
    assert softmax.matched_by == "position" and softmax.float_tensor_name == float_out
    assert softmax.tensor_name != float_out and softmax.quantized_dtype == "int8"
    assert "DEQUANTIZE" in _op_types(mlp["models"]["fiq"])
    assert not any(e.op_name in ("QUANTIZE", "DEQUANTIZE") for e in c.layers) and c.unmatched == 0
    # The model's own float output (the DEQUANTIZE of that SOFTMAX), from plain runs without kept tensors.
    x = mlp["x"][:SAMPLES]
    outs = []
    for model in (mlp["models"]["float"], mlp["models"]["fiq"]):
        it = _interpreter(model)
        inp, out = it.get_input_details()[0], it.get_output_details()[0]
        rows = []
        for i in range(len(x)):
            it.set_tensor(inp["index"], x[i : i + 1])
            it.invoke()
            rows.append(it.get_tensor(out["index"]).astype(np.float64).ravel())
        outs.append(np.concatenate(rows))
    _assert_metrics(softmax, *outs)


@pytest.mark.slow
def test_litert_drq_weight_error_is_small_nonzero_and_equals_numpy_per_channel(mlp):
    c = _compare(mlp, "lq_drq")
    dense = [e for e in c.layers if e.op_name == "FULLY_CONNECTED"]
    assert len(dense) == 3 and c.unmatched == 0
    f_it, q_it = _interpreter(mlp["models"]["float"]), _interpreter(mlp["models"]["lq_drq"])
    f_details = {d["name"]: d for d in f_it.get_tensor_details()}
    q_details = {d["name"]: d for d in q_it.get_tensor_details()}
    for e in dense:
        assert 30 < e.weight_snr_db < 60 and e.weight_mse > 0, e  # int8 per channel: small, not zero
        # The weight tensor: the FC's input named like its Keras layer's MatMul, int8 with one scale per row.
        layer = e.tensor_name.split(";")[0]
        q = q_details[layer]
        assert q["dtype"] == np.int8 and len(q["quantization_parameters"]["scales"]) == q["shape"][0]
        w = f_it.get_tensor(f_details[layer]["index"]).astype(np.float64)
        scales = q["quantization_parameters"]["scales"][:, None]
        zeros = q["quantization_parameters"]["zero_points"][:, None]
        deq = (q_it.get_tensor(q["index"]).astype(np.float64) - zeros) * scales
        assert e.weight_mse == pytest.approx(np.mean((deq - w) ** 2), rel=1e-9)
        assert e.weight_snr_db == pytest.approx(10 * np.log10(np.sum(w**2) / np.sum((deq - w) ** 2)), abs=1e-6)
    # Activations stay float: the normalization ops are exact, the first quantized layer loses everything
    # it has from exact inputs.
    assert all(e.snr_db == math.inf for e in c.layers[:2])
    assert dense[0].snr_drop_db == math.inf and 30 < dense[0].snr_db < 70


@pytest.mark.slow
def test_tf_drq_weights_of_a_wider_dense_are_read_through_its_per_channel_scales():
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((30,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(2)])
    x = np.random.RandomState(0).randn(40, 30).astype(np.float32)
    c = L.compare(_tf_convert(model, "float"), _tf_convert(model, "drq"), x)
    wide, small = [e for e in c.layers if e.op_name == "FULLY_CONNECTED"]
    assert wide.quantized_dtype == "float32" and 35 < wide.weight_snr_db < 60  # hybrid op: int8 weights
    assert small.weight_snr_db is None  # 128 weights: TF's DRQ keeps them float
    assert wide.snr_drop_db == math.inf and 30 < wide.snr_db < 70
    assert C.culprit(c) is wide


# --------------------------------------------------------------------------------- the FIQ collapse


@pytest.mark.slow
def test_fiq_culprit_is_the_normalization_op_tfs_debugger_flags(mlp):
    import io

    import tensorflow as tf

    c = _compare(mlp, "fiq")
    blamed = C.culprit(c)
    assert blamed.op_name in ("SUB", "MUL") and "normalization" in blamed.tensor_name
    assert blamed.snr_drop_db > 20 and blamed.snr_db < 10  # the collapse happens there
    assert any("input" in part and "int8" in part for part in c.note.split("; "))

    # TF's debugger, on the same model and data: the op with the largest rmse/scale.
    converter = tf.lite.TFLiteConverter.from_keras_model(mlp["keras"])
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    x_calib, x = mlp["x_calib"], mlp["x"]

    def rep():
        for i in range(100):
            yield [x_calib[i : i + 1]]

    def dataset():
        for i in range(SAMPLES):
            yield [x[i : i + 1]]

    converter.representative_dataset = rep
    debugger = tf.lite.experimental.QuantizationDebugger(converter=converter, debug_dataset=dataset)
    debugger.run()
    buf = io.StringIO()
    debugger.layer_statistics_dump(buf)
    import csv

    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    worst = max(rows, key=lambda r: math.sqrt(float(r["mean_squared_error"])) / float(r["scale"]))
    assert worst["tensor_name"] == blamed.tensor_name


@pytest.mark.slow
def test_integer_io_does_not_change_the_per_layer_errors(mlp):
    fiq, int8_io = _compare(mlp, "fiq"), _compare(mlp, "int8_io")
    assert [e.op_name for e in fiq.layers] == [e.op_name for e in int8_io.layers]
    for a, b in zip(fiq.layers, int8_io.layers):
        assert a.snr_db == pytest.approx(b.snr_db, abs=0.05) and a.weight_snr_db == pytest.approx(b.weight_snr_db)
        assert b.quantized_dtype == "int8"
    assert C.culprit(int8_io).tensor_name == C.culprit(fiq).tensor_name


@pytest.mark.slow
def test_litert_fiq_with_int8_io_is_compared_and_blames_the_normalization(mlp):
    model = mlp["models"]["lq_fiq"]
    inp = _interpreter(model).get_input_details()[0]
    assert inp["dtype"] == np.int8 and "QUANTIZE" not in _op_types(model)
    c = _compare(mlp, "lq_fiq")
    assert c.unmatched == 0 and all(e.matched_by == "name" for e in c.layers)
    assert [e.op_name for e in c.layers] == _op_types(model)
    assert all(e.quantized_dtype == "int8" for e in c.layers)
    blamed = C.culprit(c)
    assert blamed.op_name in ("SUB", "MUL") and "normalization" in blamed.tensor_name
    # The int8 output, dequantized, against float's output: from plain runs with a hand-quantized input.
    out = next(e for e in c.layers if e.op_name == "SOFTMAX")
    f, q = _plain_runs(mlp["models"]["float"], model, mlp["x"][:SAMPLES], out.float_tensor_name, out.tensor_name)
    _assert_metrics(out, f, q)
    # The first op's loss is counted from the quantized input, whose own error the note gives.
    first = c.layers[0]
    assert first.snr_drop_db is not None and math.isfinite(first.snr_drop_db)
    assert f"quantized to int8: SNR {first.snr_db + first.snr_drop_db:.1f} dB" in c.note


@pytest.mark.slow
def test_max_samples_bounds_the_samples_run(mlp):
    c = L.compare(mlp["models"]["float"], mlp["models"]["fiq"], mlp["x"], max_samples=5)
    assert c.samples == 5
    assert L.compare(mlp["models"]["float"], mlp["models"]["fiq"], mlp["x"][:3]).samples == 3


# ------------------------------------------------------------------------------------ the culprit rule


def _layer(index, snr, drop, op="FULLY_CONNECTED", dtype="int8", w=None):
    return L.RawLayerError(index, op, f"t{index}", f"t{index}", "name", 1.0, snr, 1.0, drop, w, None, dtype)


def _comparison(*layers):
    return L.RawLayerErrors(list(layers), 0, 1)


def test_culprit_is_not_the_first_quantized_op_just_because_its_inputs_were_exact():
    # A DRQ model: the first quantized op has exact inputs (drop +inf) but a fine 45 dB; a later one falls
    # from 44 to 10 dB.
    first = _layer(0, 45.0, math.inf, dtype="float32", w=48.0)
    bad = _layer(3, 10.0, 34.0, dtype="float32", w=47.0)
    assert C.culprit(_comparison(first, _layer(1, 44.0, 1.0, dtype="float32", w=48.0), bad)) is bad
    # ...but an exact-input op that collapses is blamed.
    broken = _layer(0, 4.0, math.inf, dtype="float32", w=36.0)
    assert C.culprit(_comparison(broken, _layer(1, 5.0, -1.0, dtype="float32", w=44.0))) is broken


def test_culprit_skips_float_ops_and_errors_above_the_ceiling_and_breaks_ties():
    softmax = _layer(5, 20.0, 25.0, op="SOFTMAX", dtype="float32")  # a DRQ model's float op: passes error on
    dense = _layer(2, 41.0, 4.0, dtype="float32", w=47.0)
    assert C.culprit(_comparison(dense, softmax)) is dense
    assert C.culprit(_comparison(softmax)) is softmax  # nothing quantized matched: any op
    assert C.culprit(_comparison(_layer(0, 70.0, math.inf, dtype="float32", w=75.0))) is None  # float16-like
    assert C.culprit(_comparison(_layer(0, math.inf, 0.0))) is None
    a, b, c = _layer(1, 30.0, 5.0, w=45.0), _layer(2, 30.0, 5.0, w=40.0), _layer(3, 30.0, 5.0, w=40.0)
    assert C.culprit(_comparison(a, b, c)) is b  # same loss: the worse weights, then the earlier op
    assert C.culprit_score(_layer(0, 30.0, None)) == pytest.approx(C.SNR_CEILING_DB - 30.0)


def test_culprit_blames_an_overflow_but_not_noise_on_an_all_zero_float_tensor():
    ok = _layer(0, 40.0, math.inf, dtype="float32", w=48.0)
    dead = L.RawLayerError(1, "FULLY_CONNECTED", "t1", "t1", "name", 1e-6, -math.inf, 0.0, math.inf, 47.0, None, "int8")
    assert C.culprit_score(dead) is None and C.culprit(_comparison(ok, dead)) is ok
    overflow = L.RawLayerError(2, "MUL", "t2", "t2", "name", math.inf, -math.inf, math.nan, math.inf, None, None,
                            "float32")
    assert C.culprit_score(overflow) == math.inf and C.culprit(_comparison(ok, overflow)) is overflow


# ------------------------------------------------------------------------ structures that must not crash


@pytest.mark.slow
def test_recurrent_split_and_while_models_compare_without_crashing(tmp_path):
    """A Keras 3 LSTM (a WHILE loop with variables), and a SPLIT op with two outputs."""
    import keras

    keras.utils.set_random_seed(0)
    inp = keras.Input((8, 8), batch_size=1)
    lstm = keras.Model(inp, keras.layers.Dense(10, activation="softmax")(keras.layers.LSTM(32)(inp)))
    xs = np.random.RandomState(1).randn(12, 8, 8).astype(np.float32)
    flt, drq = _tf_convert(lstm, "float"), _tf_convert(lstm, "drq")
    assert "WHILE" in _op_types(flt)
    same = L.compare(flt, flt, xs)
    assert same.layers and all(e.snr_db == math.inf for e in same.layers) and "main subgraph" in same.note
    c = L.compare(flt, drq, xs)
    loop = next(e for e in c.layers if e.op_name == "WHILE")
    assert loop.quantized_dtype == "float32" and math.isfinite(loop.snr_db)  # its noisy state, not its counter

    inp = keras.Input((32,))
    h = keras.layers.Dense(64, activation="relu")(inp)
    a, b = keras.ops.split(h, 2, axis=-1)
    out = keras.layers.Concatenate()([keras.layers.Dense(40)(a), keras.layers.Dense(40)(b)])
    split = keras.Model(inp, keras.layers.Dense(5)(out))
    x = np.random.RandomState(0).randn(60, 32).astype(np.float32)
    flt = _tf_convert(split, "float")
    fiq = _tf_convert(split, "fiq", x)
    c = L.compare(flt, fiq, x)
    assert c.unmatched == 0 and any(e.op_name == "SPLIT" for e in c.layers)
    assert all(math.isfinite(e.snr_db) and e.quantized_dtype == "int8" for e in c.layers)
    assert all(e.snr_drop_db is not None for e in c.layers)  # both SPLIT outputs feed a measured input


@pytest.mark.slow
def test_a_fused_lstm_with_state_tensors_is_compared_sample_by_sample():
    """The tf_keras demo LSTM (UNIDIRECTIONAL_SEQUENCE_LSTM with variable state tensors) in FIQ: its state is
    reset before every sample, so the error over two samples is the mean of each one's."""
    from reporter.convert import converter as convert
    from reporter.pipeline import demo
    from reporter.inputs import model_loading

    model_path, data_path = demo.ensure_model("digits_lstm")
    data = np.load(data_path)
    x, x_calib = data["x"].astype(np.float32), data["x_calib"][:50].astype(np.float32)
    loaded = model_loading.load_model(model_path)
    flt = convert.convert(loaded.make_converter, "float", x_calib)
    fiq = convert.convert(loaded.make_converter, "fiq", x_calib)
    c = L.compare(flt, fiq, x[:2])
    lstm = next(e for e in c.layers if e.op_name == "UNIDIRECTIONAL_SEQUENCE_LSTM")
    assert c.unmatched == 0 and "variable tensors" in c.note
    assert lstm.quantized_dtype == "int8" and 25 < lstm.weight_snr_db < 60 and math.isfinite(lstm.snr_db)
    one, two = (next(e for e in L.compare(flt, fiq, x[i : i + 1]).layers if e.op_name == lstm.op_name)
                for i in (0, 1))
    assert lstm.mse == pytest.approx((one.mse + two.mse) / 2, rel=1e-9)
    same = L.compare(flt, flt, x[:4])
    assert same.layers and all(e.mse == 0.0 for e in same.layers)


@pytest.mark.slow
def test_on_litert_quantizers_own_model_every_mse_equals_its_validate(mlp):
    """LiteRT Quantizer's own `validate` (which matches tensors by name and works on the models it made)
    gives the same accumulated MSE for every op output; our matching is needed beyond it (renamed outputs,
    TF-converter models, weight error), not instead of it."""
    from litert_quantizer import quantizer
    from litert_quantizer.utils import validation_utils as vu

    fb, lq = mlp["models"]["float"], mlp["models"]["lq_fiq"]
    sig_key, sig = next(iter(_interpreter(fb).get_signature_list().items()))
    x = mlp["x"][:SAMPLES]
    theirs = quantizer.Quantizer(fb, previous_quantized_model=lq).validate(
        {sig_key: [{sig["inputs"][0]: x[i : i + 1]} for i in range(len(x))]},
        error_metrics=[vu.ValidationErrorMetric.MSE]).get_all_tensor_results()
    ours = L.compare(fb, lq, x, max_samples=SAMPLES)
    assert ours.layers
    for e in ours.layers:
        assert e.tensor_name in theirs, e.tensor_name
        assert e.mse == pytest.approx(theirs[e.tensor_name]["mse"], rel=1e-5, abs=1e-9), e.tensor_name
