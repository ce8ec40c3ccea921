"""Independent checks of a recommendation: the public TF path and plain LiteRT + scikit-learn, none of
quant-report's own code for building or measuring models."""

import numpy as np
from sklearn import metrics as skm


def accuracy(tflite: bytes, x, y) -> float:
    """One sample per invoke, with the plain LiteRT interpreter, scored by scikit-learn."""
    return float(skm.accuracy_score(y, predictions(tflite, x)))


def outputs(tflite: bytes, x, reference: bool = False) -> np.ndarray:
    """Outputs (N, k), one sample per invoke with the state reset, with the plain LiteRT interpreter; the
    samples in the input's own type when it takes integers (token ids), quantized with the input's own scale and
    zero point when it takes int8 (LiteRT's static int8 models), else as float32; a quantized output is read
    back as float with its own scale and zero point. With `reference`, on LiteRT's reference kernels."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=tflite, experimental_op_resolver_type=OpResolverType.BUILTIN_REF if reference
                     else OpResolverType.AUTO)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    scale, zero = inp["quantization"]
    out_scale, out_zero = out["quantization"]
    rows = []
    for i in range(len(x)):
        it.reset_all_variables()
        sample = x[i : i + 1]
        if np.issubdtype(inp["dtype"], np.integer) and scale:
            info = np.iinfo(inp["dtype"])
            sample = np.clip(np.round(sample.astype(np.float32) / scale + zero), info.min, info.max)
        ids = np.issubdtype(inp["dtype"], np.integer)
        it.set_tensor(inp["index"], sample.astype(inp["dtype"] if ids else np.float32))
        it.invoke()
        row = np.array(it.get_tensor(out["index"])[0]).reshape(-1)
        if np.issubdtype(row.dtype, np.integer) and out_scale:
            row = (row.astype(np.float32) - out_zero) * out_scale
        rows.append(row)
    return np.stack(rows)


def predictions(tflite: bytes, x) -> np.ndarray:
    """Top class per sample, one sample per invoke, with the plain LiteRT interpreter; a model with one
    output unit (a sigmoid head) predicts class 1 when the output is at least 0.5. Written here again
    on purpose rather than calling reporter.measure.task.top_class: these checks use none of the tool's code."""
    out = outputs(tflite, x)
    if out.shape[1] == 1:
        return (out[:, 0] >= 0.5).astype(np.int64)
    return out.argmax(axis=1)


def public_selective(model_path, x_calib, nodes) -> bytes:
    """The selective model as the seed notebook builds it: the public QuantizationDebugger."""
    import keras
    import tensorflow as tf

    model = keras.saving.load_model(str(model_path), compile=False)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]

    def rep():
        for i in range(len(x_calib)):
            yield [x_calib[i : i + 1]]

    converter.representative_dataset = rep
    options = tf.lite.experimental.QuantizationDebugOptions(denylisted_nodes=list(nodes) or None)
    debugger = tf.lite.experimental.QuantizationDebugger(converter=converter, debug_dataset=rep,
                                                         debug_options=options)
    return bytes(debugger.get_nondebug_quantized_model())


def check_recommendation(report, folder, model_path, data_path, min_share=0.99, min_samples_lost=2):
    """The recommended model recovers at least `min_share` of the float-to-FIQ gap on the evaluation
    data, equals the model the public path builds from the same denylist, and every float layer in it
    is needed: without any one of them, at least `min_samples_lost` more evaluation samples disagree
    with the float model (what the search optimizes: behave like float)."""
    data = np.load(data_path)
    x, y = data["x"], data["y"]
    x_calib = (data["x_calib"] if "x_calib" in data.files else x)[: report.dataset.num_calibration]
    preds = {name: predictions((folder / f"{name}.tflite").read_bytes(), x) for name in ("float", "fiq", "selective")}
    acc = {name: float(skm.accuracy_score(y, p)) for name, p in preds.items()}
    rec = report.recommendation
    assert rec.selective.metrics.accuracy == acc["selective"]
    share = (acc["selective"] - acc["fiq"]) / (acc["float"] - acc["fiq"])
    assert share >= min_share, (acc, rec.denylisted_nodes)
    assert rec.selective.accuracy_gap_recovered == share
    nodes = rec.denylisted_nodes
    assert without_conversion_metadata(public_selective(model_path, x_calib, nodes)) == \
        without_conversion_metadata((folder / "selective.tflite").read_bytes())
    agree = int(np.sum(preds["selective"] == preds["float"]))
    for node in nodes:
        without = predictions(public_selective(model_path, x_calib, [n for n in nodes if n != node]), x)
        lost = agree - int(np.sum(without == preds["float"]))
        assert lost >= min_samples_lost, (node, agree, lost)
    return acc


def without_conversion_metadata(model: bytes) -> bytes:
    """The flatbuffer with its CONVERSION_METADATA emptied and its numbered constant names made one: that
    record names how the model was converted (from a Keras model or a SavedModel), and the numbering of the
    constants TensorFlow names Const, Const_1, ... follows the order in which the SavedModel's save met them:
    that is all that differs between the seed notebook's `from_keras_model` and the tool's export-once path."""
    from tensorflow.lite.tools import flatbuffer_utils

    obj = flatbuffer_utils.convert_bytearray_to_object(bytearray(without_constant_numbering(model)))
    for meta in obj.metadata or []:
        name = meta.name.decode() if isinstance(meta.name, bytes) else meta.name
        if name == "CONVERSION_METADATA":
            obj.buffers[meta.buffer].data = None
    return bytes(flatbuffer_utils.convert_object_to_bytearray(obj))


def without_constant_numbering(model: bytes) -> bytes:
    """The flatbuffer with the names TensorFlow numbers for unnamed constants (Const, Const_1, ...) blanked: the
    order in which a SavedModel's save meets a function's captured constants numbers them, and nothing else
    depends on it."""
    import re

    from tensorflow.lite.tools import flatbuffer_utils

    obj = flatbuffer_utils.convert_bytearray_to_object(bytearray(model))
    for graph in obj.subgraphs:
        for tensor in graph.tensors:
            name = tensor.name.decode() if isinstance(tensor.name, bytes) else tensor.name
            if re.fullmatch(r"Const(_\d+)?", name or ""):
                tensor.name = "Const"
    return bytes(flatbuffer_utils.convert_object_to_bytearray(obj))


def signature_predict(model_bytes: bytes, inputs: dict, batch_size: int = 256) -> dict:
    """Outputs of a .tflite's signature runner fed by name, `batch_size` samples per call: {output name:
    array (N, ...)}. An input tensor that is integer and carries a scale (int8 I/O) gets float data
    quantized with its scale and zero point; integer data for an integer input without scale (token
    or category ids) are passed as they are, in the input's integer type. Integer outputs that carry a
    scale are dequantized. Plain LiteRT only: none of the tool's code."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_content=model_bytes).get_signature_runner()
    in_details, out_details = runner.get_input_details(), runner.get_output_details()
    assert set(inputs) == set(in_details), (sorted(inputs), sorted(in_details))
    n = {len(a) for a in inputs.values()}
    assert len(n) == 1, {k: len(a) for k, a in inputs.items()}
    n = n.pop()

    def fed(name, array):
        d = in_details[name]
        dtype = np.dtype(d["dtype"])
        scale, zero = d["quantization"]
        array = np.asarray(array)
        if np.issubdtype(dtype, np.integer) and scale and not np.issubdtype(array.dtype, np.integer):
            info = np.iinfo(dtype)
            return np.clip(np.round(array / scale) + zero, info.min, info.max).astype(dtype)
        if np.issubdtype(dtype, np.integer):
            assert np.issubdtype(array.dtype, np.integer), (name, array.dtype, dtype)
        return array.astype(dtype)

    chunks = {name: [] for name in out_details}
    for start in range(0, n, batch_size):
        result = runner(**{name: fed(name, a[start : start + batch_size]) for name, a in inputs.items()})
        for name, value in result.items():
            scale, zero = out_details[name]["quantization"]
            value = np.array(value)
            if np.issubdtype(value.dtype, np.integer) and scale:
                value = (value.astype(np.float32) - zero) * np.float32(scale)
            chunks[name].append(value)
    return {name: np.concatenate(parts) for name, parts in chunks.items()}


def signature_predictions(model_bytes: bytes, inputs: dict, output: str = "output_0") -> np.ndarray:
    """Top class per sample of one signature output, fed by name (`signature_predict`)."""
    return signature_predict(model_bytes, inputs)[output].argmax(axis=1)


def signature_input_order(model_bytes: bytes) -> list:
    """The names of a .tflite's signature inputs in the order of `get_input_details()`, the order a
    positional debug dataset must follow. Each input tensor's name is matched to its signature name
    through the signature's tensor indices."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model_bytes)
    by_index = {d["index"]: name for name, d in it.get_signature_runner().get_input_details().items()}
    return [by_index[d["index"]] for d in it.get_input_details()]


def public_selective_multi(model_path, x_calib: dict, nodes) -> bytes:
    """`public_selective` for a Keras model with several (named) inputs: the public QuantizationDebugger
    with `denylisted_nodes`, calibrated with a representative dataset of dicts keyed by input name, and
    fed a positional debug dataset in the float model's `get_input_details()` order."""
    import keras
    import tensorflow as tf

    model = keras.saving.load_model(str(model_path), compile=False)
    order = signature_input_order(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    n = len(next(iter(x_calib.values())))

    def rep():
        for i in range(n):
            yield {name: a[i : i + 1] for name, a in x_calib.items()}

    def positional():
        for i in range(n):
            yield [x_calib[name][i : i + 1] for name in order]

    converter.representative_dataset = rep
    options = tf.lite.experimental.QuantizationDebugOptions(denylisted_nodes=list(nodes) or None)
    debugger = tf.lite.experimental.QuantizationDebugger(converter=converter, debug_dataset=positional,
                                                         debug_options=options)
    return bytes(debugger.get_nondebug_quantized_model())


def used_types(model: bytes) -> dict:
    """dtype name -> count over the tensors LiteRT's ops read or write, plus the inputs and outputs."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    details = {d["index"]: d for d in it.get_tensor_details()}
    used = {d["index"] for d in it.get_input_details() + it.get_output_details()}
    for op in it._get_ops_details():
        used |= {int(i) for i in list(op["inputs"]) + list(op["outputs"]) if i >= 0}
    counts = {}
    for i in used:
        name = np.dtype(details[i]["dtype"]).name
        counts[name] = counts.get(name, 0) + 1
    return counts


# --- TFLite Micro's interpreter and LiteRT's kernels, raw outputs ---------------------------------------------
def quantize(x: np.ndarray, scale: float, zero: int) -> np.ndarray:
    """Float values as int8 with a tensor's scale and zero point."""
    return np.clip(np.round(x / scale + zero), -128, 127).astype(np.int8)


def micro_raw(model: bytes, x: np.ndarray) -> tuple[np.ndarray, float, int]:
    """The model's outputs (int8, or float for a float output) over every sample of `x`, run by TFLite Micro's
    interpreter one sample per invoke (reset between samples), an int8 input quantized with the input tensor's own
    scale and zero point; with the output tensor's scale and zero point (1 and 0 for a float output)."""
    from tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(bytes(model))
    inp, out = it.get_input_details(0), it.get_output_details(0)
    rows = []
    for sample in x:
        feed = sample[None].astype(np.float32)
        if inp["dtype"] == np.int8:
            q = inp["quantization_parameters"]
            feed = quantize(feed, q["scales"][0], q["zero_points"][0])
        it.set_input(feed, 0)
        it.invoke()
        rows.append(np.array(it.get_output(0))[0])
        it.reset()
    if out["dtype"] != np.int8:  # a float output (FIQ's float I/O): already real values
        return np.stack(rows).astype(np.float64), 1.0, 0
    q = out["quantization_parameters"]
    return np.stack(rows).astype(np.int32), float(q["scales"][0]), int(q["zero_points"][0])


def litert_raw(model: bytes, x: np.ndarray, reference: bool) -> np.ndarray:
    """The outputs (raw, in the output tensor's type) of LiteRT's reference kernels (`reference`) or its default
    kernels, one sample per invoke, variables reset between samples (an LSTM's state carries nothing over)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = OpResolverType.BUILTIN_REF if reference else OpResolverType.AUTO
    it = Interpreter(model_content=model, experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    rows = []
    for sample in x:
        feed = sample[None].astype(np.float32)
        if inp["dtype"] == np.int8:
            scale, zero = inp["quantization"]
            feed = quantize(feed, scale, zero)
        it.reset_all_variables()
        it.set_tensor(inp["index"], feed)
        it.invoke()
        rows.append(it.get_tensor(out["index"])[0].copy())
    return np.stack(rows)
