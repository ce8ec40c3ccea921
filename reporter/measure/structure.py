"""Model structure, read from the TFLite flatbuffer itself: tensor types, ops, and the Analyzer's text."""

from __future__ import annotations

import contextlib
import functools
import io
from collections import Counter

import numpy as np

TENSOR_TYPE_KEYS = ("int8", "int16", "int32", "float32", "other", "total")
# Sub-byte weights (LiteRT Quantizer's int4 and int2 recipes): counted apart, and only in a model that has them (the
# counts of every other model, and of reports written before, stay as they were).
from reporter.core.targets import SUB_BYTE_KEYS  # noqa: E402 - beside the keys it adds to
from reporter.core.targets.rules import host_group  # noqa: E402 - what runs on the host
from reporter.measure import graph  # noqa: E402 - the flatbuffer read and its schema


def read(model: bytes):
    """The flatbuffer as read-only Python objects, shared with every other reader of the same bytes (kept for the last
    few models read)."""
    return _model_object(model)


def _model_object(model: bytes):
    """The flatbuffer unpacked into Python objects (read-only here): ~80 ms for a 150-layer model, so the last
    few models read are kept (each is read for its ops, tensor types, names and dataflow)."""
    return _unpacked(bytes(model))


@functools.lru_cache(maxsize=4)
def _unpacked(model: bytes):
    return graph.read_model(model)


def _enum_names(enum_cls) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


def tensor_types(model: bytes) -> dict[str, int]:
    """Counts tensors by element type over every subgraph of the model."""
    schema = graph.schema()

    names = _enum_names(schema.TensorType)
    counts = Counter()
    for subgraph in _model_object(model).subgraphs or []:
        for tensor in subgraph.tensors or []:
            name = names.get(tensor.type, "OTHER").lower()
            counts[name if name in TENSOR_TYPE_KEYS or name in SUB_BYTE_KEYS else "other"] += 1
    result = {k: counts.get(k, 0) for k in TENSOR_TYPE_KEYS[:-1]}
    result.update({k: counts[k] for k in SUB_BYTE_KEYS if counts.get(k)})
    result["total"] = sum(result.values())
    return result


def op_tensor_types(model: bytes) -> dict[str, int]:
    """Counts by element type of the tensors the model computes with: those its ops read or write and its inputs and
    outputs (an int8 LSTM's empty float32 "intermediate" placeholders are left out). What the int8 specification
    is read from (reporter.core.targets.int8_spec); bool (a comparison's result) is counted apart. The ops the host
    CPU runs (a detector's postprocess: `host_ops`) are left out: the network is what the target runs."""
    schema = graph.schema()

    names = _enum_names(schema.TensorType)
    counts = Counter()
    obj = _model_object(model)
    for number, subgraph in enumerate(obj.subgraphs or []):
        host = set(_host_positions(obj)) if number == 0 else set()
        network = [op for n, op in enumerate(subgraph.operators or []) if n not in host]
        made_on_host = {int(i) for n in host for i in subgraph.operators[n].outputs}
        used = set(subgraph.inputs if subgraph.inputs is not None else []) | {
            i for i in (subgraph.outputs if subgraph.outputs is not None else []) if int(i) not in made_on_host}
        for op in network:
            used |= {i for i in (op.inputs if op.inputs is not None else []) if i >= 0}
            used |= {i for i in (op.outputs if op.outputs is not None else []) if i >= 0}
        for index in used:
            name = names.get(subgraph.tensors[index].type, "OTHER").lower()
            counts[name if name in (*TENSOR_TYPE_KEYS, "bool", *SUB_BYTE_KEYS) else "other"] += 1
    return {k: v for k, v in sorted(counts.items())}


def fake_quant_pairs(model: bytes) -> int:
    """QUANTIZE ops whose int8 output a DEQUANTIZE reads back to float inside a float model: the fake-quant nodes of
    a quantization-aware model (tfmot, tf.quantization.fake_quant_*), as TF's converter keeps them without
    optimizations. 0 for a plain float model (a shipped float16 file has DEQUANTIZE only)."""
    obj = _model_object(model)
    names = _op_names(obj)
    pairs = 0
    for subgraph in obj.subgraphs or []:
        ops = subgraph.operators or []
        quantized = {op.outputs[0] for op in ops if names[op.opcodeIndex] == "QUANTIZE" and op.outputs is not None}
        pairs += sum(1 for op in ops if names[op.opcodeIndex] == "DEQUANTIZE" and op.inputs is not None
                     and op.inputs[0] in quantized)
    return pairs


def has_variable_tensors(model: bytes) -> bool:
    """True when the model keeps state between invokes (variable tensors, as fused LSTMs have)."""
    return any(t.isVariable for sg in _model_object(model).subgraphs or [] for t in sg.tensors or [])


def _op_names(obj) -> list[str]:
    """Each operator code's name (builtin name, or the custom op's code), by opcode index."""
    schema = graph.schema()

    names = _enum_names(schema.BuiltinOperator)
    op_names = []
    for code in obj.operatorCodes or []:
        # Old files keep the code in deprecatedBuiltinCode; new ones in builtinCode.
        builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
        if names.get(builtin) == "CUSTOM" and code.customCode:
            custom = code.customCode
            op_names.append(custom.decode() if isinstance(custom, bytes) else str(custom))
        else:
            op_names.append(names.get(builtin, f"OP_{builtin}"))
    return op_names


def _host_positions(obj) -> list[int]:
    return host_group(graph.main_ops(obj))


def host_ops(model: bytes) -> dict[str, int]:
    """The ops integer-only hardware leaves to the host CPU (reporter.core.targets.rules.host_group: a detector's
    postprocess with its DEQUANTIZE/QUANTIZE ops), counted by type; {} for a model without them."""
    obj = _model_object(model)
    main = graph.main_ops(obj)
    return dict(sorted(Counter(main[n][0] for n in _host_positions(obj)).items()))


def host_tensor_names(model: bytes) -> set[str]:
    """The names of the tensors the host ops write (as Vela names an op: by its output)."""
    obj = _model_object(model)
    main = graph.main_ops(obj)
    tensors = obj.subgraphs[0].tensors if obj.subgraphs else []
    return {_name(tensors[t]) for n in _host_positions(obj) for t in main[n][2]}


def ops(model: bytes) -> dict[str, int]:
    """Counts operators by type (builtin name, or the custom op's code) over every subgraph."""
    obj = _model_object(model)
    op_names = _op_names(obj)
    counts = Counter()
    for subgraph in obj.subgraphs or []:
        for op in subgraph.operators or []:
            counts[op_names[op.opcodeIndex]] += 1
    return dict(sorted(counts.items()))


def analyzer_text(model: bytes) -> str:
    """The TFLite Analyzer's own report on the model, as text: what `tf.lite.experimental.Analyzer.analyze(
    model_content=model)` prints, from LiteRT's copy of its C++ analyzer (no TensorFlow import), TensorFlow's where the
    LiteRT wheel lacks it."""
    try:
        from ai_edge_litert import _pywrap_analyzer_wrapper as wrapper
    except ImportError:  # pragma: no cover - an ai-edge-litert without the analyzer
        import tensorflow as tf

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            tf.lite.experimental.Analyzer.analyze(model_content=model)
        return buf.getvalue()
    # the Analyzer's two prints: its title, then the wrapper's report (input_is_filepath False, gpu_compatibility
    # False)
    return "=== TFLite ModelAnalyzer ===\n\n" + wrapper.ModelAnalyzer(model, False, False) + "\n"


def _name(tensor) -> str:
    name = tensor.name
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)


def tensor_names(model: bytes) -> list[str]:
    """Names of every tensor over every subgraph, in file order."""
    return [_name(t) for sg in _model_object(model).subgraphs or [] for t in sg.tensors or []]


def dataflow(model: bytes) -> list[tuple[list[str], list[str]]]:
    """The main subgraph's operators as (input tensor names, output tensor names), in execution order."""
    obj = _model_object(model)
    if not obj.subgraphs:
        return []
    sg = obj.subgraphs[0]
    names = [_name(t) for t in sg.tensors or []]
    flow = []
    for op in sg.operators or []:
        ins = [names[i] for i in (op.inputs if op.inputs is not None else []) if i >= 0]
        outs = [names[i] for i in (op.outputs if op.outputs is not None else []) if i >= 0]
        flow.append((ins, outs))
    return flow


def largest_weight_elements(model: bytes) -> int:
    """Elements of the biggest constant float tensor (a tensor whose buffer holds data): DRQ only
    quantizes weights from a minimum size on, so this tells whether any weight could qualify."""
    schema = graph.schema()

    obj = _model_object(model)
    buffers = obj.buffers or []
    largest = 0
    for sg in obj.subgraphs or []:
        for t in sg.tensors or []:
            if t.type != schema.TensorType.FLOAT32 or not (0 < t.buffer < len(buffers)):
                continue
            data = buffers[t.buffer].data
            has_data = (data is not None and len(data) > 0) or (buffers[t.buffer].size or 0) > 0
            if has_data and t.shape is not None:
                n = 1
                for d in t.shape:
                    n *= int(d)
                largest = max(largest, n)
    return largest


def quantized_tensors(model: bytes) -> int:
    """Tensors stored as int8, int16, uint8 or float16, or carrying quantization parameters: zero for
    a float model (int32/int64 index tensors do not count)."""
    schema = graph.schema()

    low = {schema.TensorType.INT8, schema.TensorType.INT16, schema.TensorType.UINT8, schema.TensorType.FLOAT16}
    count = 0
    for sg in _model_object(model).subgraphs or []:
        for t in sg.tensors or []:
            q = t.quantization
            if t.type in low or (q is not None and q.scale is not None and len(q.scale) > 0):
                count += 1
    return count


def producers(model: bytes) -> dict[int, str]:
    """Tensor index -> the type of the op its values come from (main subgraph), through ops that only move data
    (reporter.measure.graph.made_by): e.g. an output made by LOGISTIC, reshaped or not, is sigmoid probabilities,
    by SOFTMAX class scores."""
    from reporter.measure import graph

    return graph.made_by(model)


def bad_scale(model: bytes) -> str:
    """"" when every quantization scale of the model is a finite float32; else which tensor's is not.
    A converter calibrated on data that drive a tensor to inf or NaN writes such a scale (and says "scale out
    of expressed type range" in run.log); LiteRT then crashes the whole process when it allocates the model,
    so it is refused before it runs."""
    import numpy as np

    for sg in _model_object(model).subgraphs or []:
        for t in sg.tensors or []:
            q = t.quantization
            if q is None or q.scale is None or len(q.scale) == 0:
                continue
            scales = np.asarray(q.scale, np.float64)
            wrong = ~np.isfinite(scales) | (scales > np.finfo(np.float32).max)  # tiny or zero: left to LiteRT
            if wrong.any():
                return (f"tensor {_name(t)} has quantization scale {float(scales[wrong][0])!r} (not a finite float32:"
                        " its calibration range was NaN or infinite, e.g. the model overflows on the calibration data)")
    return ""


# The ops whose int8 weights (input 1) the TFLite int8 specification requires to be symmetric: zero point 0.
_SYMMETRIC_WEIGHTS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")


def weight_zero_point(model: bytes) -> str:
    """"" when every int8 weight of a convolution or fully connected op has zero point 0, as the int8 specification
    requires; else the first that does not, in one line (LiteRT refuses such a model when it prepares the op, in its
    own internal words)."""
    obj = _model_object(model)
    names = _op_names(obj)
    int8 = graph.schema().TensorType.INT8
    for sg in obj.subgraphs or []:
        for op in sg.operators or []:
            if names[op.opcodeIndex] not in _SYMMETRIC_WEIGHTS or op.inputs is None or len(op.inputs) < 2 \
                    or op.inputs[1] < 0:
                continue
            weight = sg.tensors[op.inputs[1]]
            q = weight.quantization
            points = [int(z) for z in (q.zeroPoint if q is not None and q.zeroPoint is not None else [])]
            wrong = next((z for z in points if z != 0), 0)
            if weight.type == int8 and wrong:
                return (f"the {names[op.opcodeIndex]} weights {_name(weight)} have zero point {wrong}, where the"
                        " int8 specification requires 0")
    return ""


# Ops that carry a weight to another op rather than compute with it (a weight-only or float16 model stores the
# weight in a low type and widens it with DEQUANTIZE before the op that uses it).
_CARRIERS = ("DEQUANTIZE", "QUANTIZE")


def weight_coverage(model: bytes) -> dict[str, dict[str, int]]:
    """Per op type, the weight tensors its ops compute with (constant inputs of rank 2 or more: kernels, embedding
    tables; biases and shapes are not weights) and how many of them are stored below float32 (int8, int4, int2,
    int16, float16), with their element counts: {"CONV_2D": {"tensors", "quantized", "elements",
    "quantized_elements"}}. A weight reached through DEQUANTIZE is counted in the type it is stored in."""
    schema = graph.schema()

    obj = _model_object(model)
    op_names = _op_names(obj)
    buffers = obj.buffers or []
    types = _enum_names(schema.TensorType)
    kinds = {code for code, name in types.items()  # what weights are stored as (int32 paddings and shapes are not)
             if name in ("FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "INT4", "INT2")}
    found: dict[str, dict[str, int]] = {}
    for sg in obj.subgraphs or []:
        tensors = sg.tensors or []
        operators = sg.operators or []
        made_by = {int(i): op for op in operators for i in (op.outputs if op.outputs is not None else []) if i >= 0}

        def stored(index: int):
            """The constant tensor behind input `index` (through DEQUANTIZE), or None."""
            op = made_by.get(index)
            if op is not None:
                if op_names[op.opcodeIndex] != "DEQUANTIZE" or op.inputs is None or len(op.inputs) == 0:
                    return None
                index = int(op.inputs[0])
                if index in made_by:
                    return None
            t = tensors[index]
            b = buffers[t.buffer] if 0 < t.buffer < len(buffers) else None
            has_data = b is not None and ((b.data is not None and len(b.data) > 0) or (b.size or 0) > 0)
            weight = t.type in kinds and t.shape is not None and len(t.shape) >= 2
            return t if has_data and weight else None

        seen = set()
        for op in operators:
            kind = op_names[op.opcodeIndex]
            if kind in _CARRIERS:
                continue
            for i in (op.inputs if op.inputs is not None else []):
                t = stored(int(i)) if i >= 0 else None
                if t is None or (kind, id(t)) in seen:
                    continue
                seen.add((kind, id(t)))
                n = int(np.prod([int(d) for d in t.shape]))
                low = t.type != schema.TensorType.FLOAT32
                row = found.setdefault(kind, dict(tensors=0, quantized=0, elements=0, quantized_elements=0))
                row["tensors"] += 1
                row["elements"] += n
                row["quantized"] += int(low)
                row["quantized_elements"] += n if low else 0
    return dict(sorted(found.items()))
