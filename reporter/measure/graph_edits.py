"""The whole-model edits built on the one flatbuffer graph editor's primitives (reporter.measure.graph): the batch
fixed to 1 and shape arithmetic folded (every int8 rung starts there), the int8 weights and biases bias correction
patches, a leading normalization moved to the host, a shipped .tflite made into the float model the rest reads, and the
smallest model (one ADD) an empty invoke is timed on. Each takes and returns model bytes (or plain values): no caller
holds the object tree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.measure.graph import (add_buffer, buffer_view, compact, constant, consumers, has_data, objects, op_name,
                                    ops_by_output, read_model, schema, tensor_name, write_model)


# --- static batch: the edit every int8 rung starts from ---------------------------------------------------------

# Ops kept even when nothing reads their outputs: they call subgraphs, touch variables or are opaque.
_EFFECTS = frozenset({"CUSTOM", "WHILE", "IF", "CALL", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
                      "STABLEHLO_COMPOSITE"})


def with_static_batch(model: bytes) -> tuple[bytes, bool, int]:
    """`model` with every shape made static (batch 1), every SHAPE op folded into a constant of its input's shape and
    every op left with no reader removed; (model, whether a shape was dynamic, SHAPE ops folded). ValueError when an
    input has a dynamic dimension beyond the batch."""
    obj = read_model(model)
    sg = obj.subgraphs[0]
    dynamic = [list(sg.tensors[i].shapeSignature) for i in sg.inputs
               if sg.tensors[i].shapeSignature is not None and -1 in list(sg.tensors[i].shapeSignature)[1:]]
    if dynamic:
        raise ValueError(f"an input has dynamic dimensions beyond the batch ({dynamic[0]})")
    was_dynamic = any(t.shapeSignature is not None and -1 in list(t.shapeSignature) for t in sg.tensors)
    for t in sg.tensors:
        t.shapeSignature = None
    folded, kept = 0, []
    for op in sg.operators:
        if op_name(obj, op) == "SHAPE":
            out = sg.tensors[int(op.outputs[0])]
            dtype = np.int64 if out.type == schema().TensorType.INT64 else np.int32
            out.buffer = add_buffer(obj, np.array(sg.tensors[int(op.inputs[0])].shape, dtype))
            folded += 1
        else:
            kept.append(op)
    sg.operators = kept
    _drop_dead_ops(obj)
    compact(obj)
    return write_model(obj), was_dynamic, folded


def _drop_dead_ops(obj) -> int:
    """Removes the main subgraph's ops whose outputs nothing reads (no op, no graph output): a RESHAPE whose only
    reader was a SHAPE now folded. LiteRT Quantizer leaves such an op's output in float, and XNNPACK hands out no data
    for it ("Tensor data is null" in a calibration that keeps every tensor). Returns how many."""
    sg = obj.subgraphs[0]
    dropped = 0
    while True:
        read = {int(i) for op in sg.operators for i in op.inputs if i >= 0} | {int(i) for i in sg.outputs}
        dead = [op for op in sg.operators if len(op.outputs) and op_name(obj, op) not in _EFFECTS
                and not any(int(i) in read for i in op.outputs)]
        if not dead:
            return dropped
        sg.operators = [op for op in sg.operators if not any(op is d for d in dead)]
        dropped += len(dead)


def with_shape_arithmetic_folded(model: bytes) -> tuple[bytes, int]:
    """Folds every op whose inputs are all constants and whose outputs are all int32/int64 (shape arithmetic: the
    STRIDED_SLICE, PACK ... a folded SHAPE feeds) into constants, with the values LiteRT computes for them (one
    invoke of the model on zeros, every tensor kept); (model, ops folded). XNNPACK refuses a RESHAPE whose shape is
    computed."""
    from reporter.measure import runtime

    obj = read_model(model)
    sg, types = obj.subgraphs[0], schema().TensorType
    integer = (types.INT32, types.INT64)
    const = {i for i, t in enumerate(sg.tensors) if has_data(obj, t)}
    fold = []
    for op in sg.operators:
        ins, outs = [int(i) for i in op.inputs if i >= 0], [int(i) for i in op.outputs]
        if ins and all(i in const for i in ins) and all(sg.tensors[i].type in integer for i in outs):
            fold.append(op)
            const |= set(outs)
    if not fold:
        return model, 0
    it = runtime.load(model, preserve=True)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    it.invoke()
    for op in fold:
        for i in op.outputs:
            sg.tensors[int(i)].buffer = add_buffer(obj, np.asarray(it.get_tensor(int(i))))
    sg.operators = [op for op in sg.operators if not any(op is f for f in fold)]
    compact(obj)
    return write_model(obj), len(fold)


# --- weights and biases of the matmuls, for bias correction -----------------------------------------------------

@dataclass
class QuantizedLayer:
    """One op of a float model and the same op (by output name) of its int8 model, with writable views of the int8
    model's weight and bias bytes."""

    input: str  # the float op's input tensor name
    weight: np.ndarray  # the float model's float32 weight
    weight_codes: np.ndarray  # the int8 weight's bytes (uint8, writable)
    weight_scale: np.ndarray  # the int8 weight's scales
    bias_codes: np.ndarray  # the int32 bias's bytes (uint8, writable)
    bias_scale: np.ndarray  # the int32 bias's scales


def quantized_layers(float_model: bytes, int8_model: bytes, kinds) -> tuple[bytearray, list[QuantizedLayer]]:
    """The ops of `kinds` with a float32 weight in `float_model` and an int8 weight and int32 bias in `int8_model`
    (the same op by output name), and the int8 model's bytes the layers' views write into: patching them patches
    the file in place, its layout kept."""
    fobj, qobj = read_model(float_model), read_model(int8_model)
    raw = bytearray(int8_model)
    types = schema().TensorType
    fsg, qsg = fobj.subgraphs[0], qobj.subgraphs[0]
    quantized = ops_by_output(qobj, kinds)
    found = []
    for name, (kind, fop) in ops_by_output(fobj, kinds).items():
        if name not in quantized or len(fop.inputs) < 3 or fop.inputs[2] < 0:
            continue
        w = constant(fobj, int(fop.inputs[1]))
        qop = quantized[name][1]
        wt, bt = qsg.tensors[int(qop.inputs[1])], qsg.tensors[int(qop.inputs[2])] if len(qop.inputs) > 2 else None
        if w is None or bt is None or qop.inputs[2] < 0:
            continue
        if wt.type != types.INT8 or bt.type != types.INT32:
            continue
        w_view, b_view = buffer_view(raw, qobj, wt.buffer), buffer_view(raw, qobj, bt.buffer)
        if w_view is None or b_view is None:
            continue
        found.append(QuantizedLayer(tensor_name(fsg.tensors[int(fop.inputs[0])]), w, w_view,
                                    np.asarray(wt.quantization.scale, np.float64), b_view,
                                    np.asarray(bt.quantization.scale, np.float64)))
    return raw, found


# --- a leading normalization moved to the host ------------------------------------------------------------------

def without_leading_normalization(model: bytes) -> tuple[Optional[tuple], str]:
    """The first float input read only by a SUB of a constant then a MUL or DIV by a constant (per feature along the
    last axis, no fused activation), those two ops removed: ((input signature name, the model without them, the
    subtracted constant, the MUL's factor or the DIV's divisor, whether it divides), ""), or (None, "output") when the
    normalization's result is a model output, (None, "none") when there is no such normalization."""
    obj = read_model(model)
    sg = obj.subgraphs[0]
    sig = next((s for s in obj.signatureDefs or [] if s.subgraphIndex == 0), None)
    names = {int(p.tensorIndex): (p.name.decode() if isinstance(p.name, bytes) else p.name)
             for p in (sig.inputs if sig else [])}
    for index in [int(i) for i in sg.inputs]:
        users = consumers(sg, index)
        if len(users) != 1 or op_name(obj, users[0]) != "SUB" or int(users[0].inputs[0]) != index:
            continue
        sub = users[0]
        mean = constant(obj, int(sub.inputs[1]))
        nexts = consumers(sg, int(sub.outputs[0]))
        if mean is None or len(nexts) != 1 or op_name(obj, nexts[0]) not in ("MUL", "DIV"):
            continue
        scale_op = nexts[0]
        other = [int(i) for i in scale_op.inputs if int(i) != int(sub.outputs[0])]
        divides = op_name(obj, scale_op) == "DIV"
        if len(other) != 1 or (divides and int(scale_op.inputs[0]) != int(sub.outputs[0])):
            continue
        factor = constant(obj, other[0])
        if factor is None or any(d != 1 for c in (mean, factor) for d in c.shape[:-1]):
            continue
        if getattr(sub.builtinOptions, "fusedActivationFunction", 0) or \
                getattr(scale_op.builtinOptions, "fusedActivationFunction", 0):
            continue
        out = int(scale_op.outputs[0])
        if out in [int(i) for i in sg.outputs]:
            return None, "output"
        for op in sg.operators:
            op.inputs = np.array([index if int(i) == out else int(i) for i in op.inputs], np.int32)
        sg.operators = [op for op in sg.operators if op is not sub and op is not scale_op]
        compact(obj)
        return (names.get(index, ""), write_model(obj), mean, factor, op_name(obj, scale_op) == "DIV"), ""
    return None, "none"


# --- a shipped .tflite made into the float model the rest reads (reporter.inputs.tflite_prep says why) -------------

PLACEHOLDER_FOR_GREATER_OP_CODES = 127  # deprecated_builtin_code of every op numbered above 127


@dataclass
class ShippedFixes:
    """What `fix_shipped` changed: the model (the given bytes when nothing changed), operator codes copied to
    builtin_code, the sparse weights made dense (names), the float16 constants widened, and the signature added
    (its input and output names; None when the file had one)."""

    model: bytes
    op_codes: int = 0
    densified: list = None
    widened: int = 0
    signature: Optional[tuple] = None


def fix_shipped(model: bytes, signature_key: str) -> ShippedFixes:
    """`model` with old op codes normalized, sparse constants made dense by TFLite's DENSIFY kernel, float16
    constants widened and a signature `signature_key` added, as needed; the given bytes when nothing changed."""
    obj = read_model(model)
    codes = _normalize_op_codes(obj)
    dense = _densify(obj)
    widened = _widen_float16(obj)
    names = None if obj.signatureDefs else _add_signature(obj, signature_key)
    if not (codes or dense or widened or names):
        return ShippedFixes(model, densified=[])
    return ShippedFixes(write_model(obj, drop_orphans=False), codes, dense, widened, names)


def _normalize_op_codes(model) -> int:
    """Copies deprecated_builtin_code into builtin_code where only the old field holds the op; how many."""
    count = 0
    for code in model.operatorCodes or []:
        old = code.deprecatedBuiltinCode
        if code.builtinCode < old < PLACEHOLDER_FOR_GREATER_OP_CODES:
            code.builtinCode = old
            count += 1
    return count


def _builtin(code) -> int:
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def _densify(model) -> list[str]:
    """Every sparse constant made dense by TFLite's DENSIFY kernel: a DENSIFY op's output becomes the dense
    constant (in the sparse tensor's type: float16 stays behind its DEQUANTIZE, `_widen_float16` folds it) and the
    op is removed; a sparse constant an op reads directly is made dense in place. Returns the densified tensors'
    names, in the graph's order."""
    fb = objects()
    codes = model.operatorCodes or []
    densify_ops = {i for i, c in enumerate(codes) if _builtin(c) == fb.BuiltinOperator.DENSIFY}
    names = []
    for sg in model.subgraphs or []:
        sparse = [i for i, t in enumerate(sg.tensors or []) if t.sparsity is not None and t.buffer
                  and model.buffers[t.buffer].data is not None and len(model.buffers[t.buffer].data)]
        if not sparse:
            continue
        dense = _densify_kernel(model, sg, sparse)

        def set_constant(tensor, values):
            new = fb.BufferT()
            new.data = np.frombuffer(np.ascontiguousarray(values).tobytes(), dtype=np.uint8)
            model.buffers.append(new)
            tensor.buffer, tensor.sparsity = len(model.buffers) - 1, None

        kept = []
        for op in sg.operators or []:
            source = int(op.inputs[0]) if op.opcodeIndex in densify_ops and len(op.inputs) == 1 else -1
            if source in dense:
                out = sg.tensors[op.outputs[0]]
                set_constant(out, dense[source])
                out.type = sg.tensors[source].type
                names.append(_text(sg.tensors[source].name))
                continue
            kept.append(op)
        sg.operators = kept
        read = {int(i) for op in kept for i in op.inputs if i >= 0}
        for index in sorted(read & set(dense)):
            set_constant(sg.tensors[index], dense[index])
            names.append(_text(sg.tensors[index].name))
    if names:
        _drop_unused_tensors(model)
        _drop_unused_buffers(model)
    return names


def _text(raw) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")


def _densify_kernel(model, sg, indices: list[int]) -> dict:
    """The dense values of `sg`'s sparse constants `indices`, computed by LiteRT's DENSIFY kernel: a model of
    one DENSIFY op per constant, no inputs, invoked once (without XNNPACK, which takes DENSIFY of constants as
    its own and has nothing to run in a graph of them alone)."""
    from reporter.measure import runtime

    fb = objects()
    tiny = fb.ModelT()
    tiny.version = 3
    code = fb.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = fb.BuiltinOperator.DENSIFY
    code.version = 1
    tiny.operatorCodes, tiny.buffers = [code], [fb.BufferT()]
    tensors, ops, outputs = [], [], []
    for index in indices:
        given = sg.tensors[index]
        buffer = fb.BufferT()
        buffer.data = model.buffers[given.buffer].data
        tiny.buffers.append(buffer)
        sparse, dense = fb.TensorT(), fb.TensorT()
        sparse.name, sparse.shape, sparse.type = b"sparse_%d" % index, given.shape, given.type
        sparse.buffer, sparse.sparsity = len(tiny.buffers) - 1, given.sparsity
        dense.name, dense.shape, dense.type, dense.buffer = b"dense_%d" % index, given.shape, given.type, 0
        tensors += [sparse, dense]
        op = fb.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = 0, [len(tensors) - 2], [len(tensors) - 1]
        ops.append(op)
        outputs.append(len(tensors) - 1)
    main = fb.SubGraphT()
    main.tensors, main.operators, main.inputs, main.outputs = tensors, ops, [], outputs
    tiny.subgraphs = [main]
    interpreter = runtime.load(write_model(tiny, drop_orphans=False), builtin=True)
    interpreter.allocate_tensors()
    interpreter.invoke()
    return {index: interpreter.get_tensor(out).copy() for index, out in zip(indices, outputs)}


def _widen_float16(model) -> int:
    """Folds every DEQUANTIZE of a float16 constant: its output becomes the float32 constant, the op goes,
    and tensors nothing reads any more are dropped. Returns how many constants were widened."""
    fb = objects()
    codes = model.operatorCodes or []
    dequantize = {i for i, c in enumerate(codes) if _builtin(c) == fb.BuiltinOperator.DEQUANTIZE}
    count = 0
    for sg in model.subgraphs or []:
        kept = []
        for op in sg.operators or []:
            source = sg.tensors[op.inputs[0]] if op.opcodeIndex in dequantize and len(op.inputs) == 1 else None
            buffer = model.buffers[source.buffer] if source is not None and source.buffer else None
            if source is None or source.type != fb.TensorType.FLOAT16 or buffer is None or buffer.data is None \
                    or len(buffer.data) == 0:
                kept.append(op)
                continue
            values = np.frombuffer(bytes(bytearray(buffer.data)), dtype="<f2").astype("<f4")
            new = fb.BufferT()
            new.data = np.frombuffer(values.tobytes(), dtype=np.uint8)
            model.buffers.append(new)
            out = sg.tensors[op.outputs[0]]
            out.buffer, out.type = len(model.buffers) - 1, fb.TensorType.FLOAT32
            count += 1
        sg.operators = kept
    if count:
        _drop_unused_tensors(model)
        _drop_unused_buffers(model)
    return count


def _drop_unused_tensors(model) -> None:
    """Drops every subgraph's tensors no op, input, output, intermediate or signature uses, renumbering them."""
    for sg_index, sg in enumerate(model.subgraphs or []):
        used = set(sg.inputs) | set(sg.outputs)
        for op in sg.operators or []:
            used |= {int(i) for i in op.inputs if i >= 0} | {int(i) for i in op.outputs if i >= 0}
            used |= {int(i) for i in (op.intermediates if op.intermediates is not None else [])}
        for sig in model.signatureDefs or []:
            if sig.subgraphIndex == sg_index:
                used |= {m.tensorIndex for m in (sig.inputs or []) + (sig.outputs or [])}
        order = sorted(used)
        remap = {old: new for new, old in enumerate(order)}
        sg.tensors = [sg.tensors[i] for i in order]
        sg.inputs = [remap[int(i)] for i in sg.inputs]
        sg.outputs = [remap[int(i)] for i in sg.outputs]
        for op in sg.operators or []:
            op.inputs = [remap[int(i)] if i >= 0 else -1 for i in op.inputs]
            op.outputs = [remap[int(i)] if i >= 0 else -1 for i in op.outputs]
            if op.intermediates is not None:
                op.intermediates = [remap[int(i)] for i in op.intermediates]
        for sig in model.signatureDefs or []:
            if sig.subgraphIndex == sg_index:
                for m in (sig.inputs or []) + (sig.outputs or []):
                    m.tensorIndex = remap[m.tensorIndex]


def _drop_unused_buffers(model) -> None:
    """Empties the buffers no tensor points at any more (the float16 data), keeping every index valid."""
    used = {t.buffer for sg in model.subgraphs or [] for t in sg.tensors or []}
    for index, buffer in enumerate(model.buffers or []):
        if index not in used and index != 0:
            buffer.data = None


def _add_signature(model, key: str) -> tuple[list[str], list[str]]:
    """A SignatureDef `key` for subgraph 0 from its inputs and outputs, each named by its tensor (unique, never
    empty). Returns the input and output names."""
    fb = objects()
    sg = model.subgraphs[0]
    taken: set[str] = set()

    def maps(indices, kind):
        result = []
        for k, index in enumerate(indices):
            raw = sg.tensors[index].name
            name = (raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")).strip()
            name = name or f"{kind}_{k}"
            while name in taken:
                name = f"{name}_{k}"
            taken.add(name)
            item = fb.TensorMapT()
            item.name, item.tensorIndex = name, int(index)
            result.append(item)
        return result

    sig = fb.SignatureDefT()
    sig.signatureKey, sig.subgraphIndex = key, 0
    sig.inputs, sig.outputs = maps(sg.inputs, "input"), maps(sg.outputs, "output")
    model.signatureDefs = [sig]
    return [m.name for m in sig.inputs], [m.name for m in sig.outputs]


def one_add_model() -> bytes:
    """The smallest model: y = x + 1 on one float32 [1, 1] (one ADD, its constant in a buffer), written with the
    schema's object API (what TensorFlow's converter makes of `lambda x: x + 1.0`, without importing it)."""
    fb, ops = objects(), schema().BuiltinOperator
    one = np.array([1.0], dtype="<f4")
    model = fb.ModelT()
    model.version = 3
    model.description = "quant-report: one ADD"
    model.operatorCodes = [fb.OperatorCodeT()]
    model.operatorCodes[0].builtinCode = model.operatorCodes[0].deprecatedBuiltinCode = ops.ADD
    model.operatorCodes[0].version = 1
    model.buffers = [fb.BufferT() for _ in range(4)]  # buffer 0 is empty by convention; 2 holds the constant
    model.buffers[2].data = np.frombuffer(one.tobytes(), dtype=np.uint8)
    tensors = []
    for k, (name, shape) in enumerate((("x", [1, 1]), ("one", [1]), ("y", [1, 1]))):
        t = fb.TensorT()
        t.name, t.shape, t.type, t.buffer = name, shape, schema().TensorType.FLOAT32, k + 1
        tensors.append(t)
    op = fb.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [0, 1], [2]
    op.builtinOptionsType, op.builtinOptions = schema().BuiltinOptions.AddOptions, fb.AddOptionsT()
    sub = fb.SubGraphT()
    sub.tensors, sub.inputs, sub.outputs, sub.operators, sub.name = tensors, [0], [2], [op], "main"
    model.subgraphs = [sub]
    return write_model(model, drop_orphans=False)
