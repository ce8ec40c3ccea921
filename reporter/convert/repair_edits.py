"""Flatbuffer edits for the integer-only repairs (reporter.convert.repair): a float .tflite with its batch fixed to
1 and its SHAPE ops folded, an int8 model's int32 biases corrected, and a float model without its leading
normalization. Read and written with tensorflow.lite.tools.flatbuffer_utils; the main subgraph only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

BIASED_OPS = ("FULLY_CONNECTED", "CONV_2D")


# --- flatbuffer helpers -------------------------------------------------------------------------------------------
def _schema():
    from tensorflow.lite.python import schema_py_generated as schema

    return schema


def read_model(model: bytes):
    from tensorflow.lite.tools import flatbuffer_utils

    return flatbuffer_utils.convert_bytearray_to_object(bytearray(model))


def write_model(obj) -> bytes:
    """The model object as .tflite bytes, the buffers of constants an edit replaced emptied first."""
    from tensorflow.lite.tools import flatbuffer_utils

    drop_orphan_buffers(obj)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(obj))


def _op_name(obj, op) -> str:
    names = {v: k for k, v in vars(_schema().BuiltinOperator).items() if not k.startswith("_")}
    code = obj.operatorCodes[op.opcodeIndex]
    return names.get(max(code.builtinCode, code.deprecatedBuiltinCode), "")


def _constant(obj, index: int) -> Optional[np.ndarray]:
    """The float32 constant at tensor `index` of the main subgraph, or None when it is not one."""
    t = obj.subgraphs[0].tensors[index]
    data = obj.buffers[t.buffer].data if 0 < t.buffer < len(obj.buffers) else None
    if data is None or len(data) == 0 or t.type != _schema().TensorType.FLOAT32:
        return None
    return np.frombuffer(bytes(np.asarray(data, np.uint8)), np.float32).reshape([int(d) for d in t.shape])


def _buffer_view(raw: bytearray, root, obj, index: int) -> Optional[np.ndarray]:
    """A writable uint8 view of buffer `index`'s bytes inside `raw` (the model file): inline, or appended after the
    flatbuffer at an offset (as LiteRT Quantizer writes them); None when the buffer holds nothing."""
    buffer = obj.buffers[index]
    if (getattr(buffer, "offset", 0) or 0) > 1:
        return np.frombuffer(raw, np.uint8, count=int(buffer.size), offset=int(buffer.offset))
    view = root.Buffers(index).DataAsNumpy()
    return view if isinstance(view, np.ndarray) and view.size else None


def _add_buffer(obj, array: np.ndarray) -> int:
    buffer = _schema().BufferT()
    buffer.data = np.frombuffer(np.ascontiguousarray(array).tobytes(), np.uint8)
    obj.buffers.append(buffer)
    return len(obj.buffers) - 1


def compact(obj) -> None:
    """Drops the main subgraph's tensors no op, input or output uses, renumbering every reference."""
    sg = obj.subgraphs[0]
    used = set(sg.inputs) | set(sg.outputs)
    for op in sg.operators:
        used |= {int(i) for i in list(op.inputs) + list(op.outputs) if i >= 0}
    keep = sorted(used)
    new = {old: n for n, old in enumerate(keep)}
    sg.tensors = [sg.tensors[i] for i in keep]
    for op in sg.operators:
        op.inputs = np.array([new[int(i)] if i >= 0 else -1 for i in op.inputs], np.int32)
        op.outputs = np.array([new[int(i)] for i in op.outputs], np.int32)
    sg.inputs = np.array([new[int(i)] for i in sg.inputs], np.int32)
    sg.outputs = np.array([new[int(i)] for i in sg.outputs], np.int32)
    for sig in obj.signatureDefs or []:
        if sig.subgraphIndex == 0:
            for port in list(sig.inputs or []) + list(sig.outputs or []):
                port.tensorIndex = new[int(port.tensorIndex)]


def drop_orphan_buffers(obj) -> int:
    """Empties every buffer no tensor of any subgraph refers to (a constant an edit replaced: the file would carry
    the old weights as dead bytes, and the quantizers keep them); returns how many. Buffer numbers stay as they are."""
    used = {int(t.buffer) for sg in obj.subgraphs for t in sg.tensors or []}
    dropped = 0
    for n, buffer in enumerate(obj.buffers):
        if n and n not in used and buffer.data is not None and len(buffer.data):
            buffer.data, dropped = None, dropped + 1
    return dropped


def _has_data(obj, t) -> bool:
    data = obj.buffers[t.buffer].data if 0 < t.buffer < len(obj.buffers) else None
    return data is not None and len(data) > 0


def _fold_shape_arithmetic(model: bytes) -> tuple[bytes, int]:
    """Folds every op whose inputs are all constants and whose outputs are all int32/int64 (shape arithmetic: the
    STRIDED_SLICE, PACK ... a folded SHAPE feeds) into constants, with the values LiteRT computes for them (one
    invoke of the model on zeros, every tensor kept). XNNPACK refuses a RESHAPE whose shape is computed."""
    from ai_edge_litert.interpreter import Interpreter

    obj = read_model(model)
    sg, schema = obj.subgraphs[0], _schema()
    integer = (schema.TensorType.INT32, schema.TensorType.INT64)
    const = {i for i, t in enumerate(sg.tensors) if _has_data(obj, t)}
    fold = []
    for op in sg.operators:
        ins, outs = [int(i) for i in op.inputs if i >= 0], [int(i) for i in op.outputs]
        if ins and all(i in const for i in ins) and all(sg.tensors[i].type in integer for i in outs):
            fold.append(op)
            const |= set(outs)
    if not fold:
        return model, 0
    it = Interpreter(model_content=model, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    it.invoke()
    for op in fold:
        for i in op.outputs:
            sg.tensors[int(i)].buffer = _add_buffer(obj, np.asarray(it.get_tensor(int(i))))
    sg.operators = [op for op in sg.operators if not any(op is f for f in fold)]
    compact(obj)
    return write_model(obj), len(fold)


def static_batch(float_model: bytes) -> tuple[bytes, str]:
    """The float model with its batch dimension fixed to 1: every shape made static, every SHAPE op folded into an
    int32 constant, and the shape arithmetic after it folded too. Returns (model, words); raises ValueError when a
    dimension other than the batch is dynamic."""
    obj = read_model(float_model)
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
        if _op_name(obj, op) == "SHAPE":
            out = sg.tensors[int(op.outputs[0])]
            dtype = np.int64 if out.type == _schema().TensorType.INT64 else np.int32
            out.buffer = _add_buffer(obj, np.array(sg.tensors[int(op.inputs[0])].shape, dtype))
            folded += 1
        else:
            kept.append(op)
    sg.operators = kept
    compact(obj)
    model, arithmetic = _fold_shape_arithmetic(write_model(obj))
    words = "batch fixed to 1 (was dynamic)" if was_dynamic else "batch already static"
    if folded:
        words += f"; {folded} SHAPE op{'s' * (folded != 1)} and {arithmetic} op{'s' * (arithmetic != 1)} of shape" \
                 " arithmetic folded into constants"
    return model, words


# --- bias correction and host normalization (flatbuffer edits) ----------------------------------------------------
def biased_ops(obj) -> dict[str, tuple]:
    """Output tensor name -> (op type, op) of each FULLY_CONNECTED / CONV_2D of the main subgraph."""
    sg, found = obj.subgraphs[0], {}
    for op in sg.operators:
        kind = _op_name(obj, op)
        if kind in BIASED_OPS and len(op.outputs):
            found[tensor_name(sg.tensors[int(op.outputs[0])])] = (kind, op)
    return found


def tensor_name(t) -> str:
    return t.name.decode() if isinstance(t.name, bytes) else str(t.name)


def correct_biases(float_model: bytes, int8_model: bytes, means: dict[str, np.ndarray]) -> tuple[bytes, int, float]:
    """`int8_model` with the int32 bias of each FULLY_CONNECTED / CONV_2D replaced by b - E[(Q(W) - W) x], W read from
    `float_model` (the same op by output name), Q(W) from the int8 model's weights and scales, E[x] the mean of each
    input channel over the calibration samples (`means`: float tensor name -> per-channel mean; padding is ignored).
    Returns (model, ops corrected, the largest change in bias steps); the bytes are patched in place."""
    fobj, qobj = read_model(float_model), read_model(int8_model)
    raw = bytearray(int8_model)
    root = _schema().Model.GetRootAs(raw, 0)
    fsg, qsg = fobj.subgraphs[0], qobj.subgraphs[0]
    quantized = biased_ops(qobj)
    corrected, largest = 0, 0.0
    for name, (kind, fop) in biased_ops(fobj).items():
        if name not in quantized or len(fop.inputs) < 3 or fop.inputs[2] < 0:
            continue
        w = _constant(fobj, int(fop.inputs[1]))
        mean = means.get(tensor_name(fsg.tensors[int(fop.inputs[0])]))
        qop = quantized[name][1]
        wt, bt = qsg.tensors[int(qop.inputs[1])], qsg.tensors[int(qop.inputs[2])] if len(qop.inputs) > 2 else None
        if w is None or mean is None or bt is None or qop.inputs[2] < 0 or w.shape[-1] != mean.shape[-1]:
            continue
        if wt.type != _schema().TensorType.INT8 or bt.type != _schema().TensorType.INT32:
            continue
        w_view, b_view = _buffer_view(raw, root, qobj, wt.buffer), _buffer_view(raw, root, qobj, bt.buffer)
        if w_view is None or b_view is None:
            continue
        w_int = w_view.view(np.int8).reshape(w.shape)
        w_scale = np.asarray(wt.quantization.scale, np.float64).reshape((-1,) + (1,) * (w.ndim - 1))
        dw = w_int.astype(np.float64) * w_scale - w.astype(np.float64)
        shift = (dw.reshape(dw.shape[0], -1, dw.shape[-1]).sum(axis=1)) @ mean  # FC: [out, in]; conv: [out, h, w, in]
        b_scale = np.asarray(bt.quantization.scale, np.float64)
        b_int = b_view.view("<i4").astype(np.float64)
        steps = shift / b_scale
        b_view[:] = np.clip(np.round(b_int - steps), -(2 ** 31), 2 ** 31 - 1).astype("<i4").view(np.uint8)
        corrected += 1
        largest = max(largest, float(np.abs(steps).max()) if steps.size else 0.0)
    return bytes(raw), corrected, largest  # patched in place: the file keeps its layout


@dataclass(frozen=True)
class Normalization:
    """A leading SUB then MUL/DIV by constants on a float input: (input signature name, the model without those two
    ops, per-feature subtract and divide along the last axis)."""

    input: str
    model: bytes
    subtract: np.ndarray
    divide: np.ndarray


def _consumers(sg, index: int) -> list:
    return [op for op in sg.operators if index in [int(i) for i in op.inputs]]


def find_normalization(float_model: bytes) -> tuple[Optional[Normalization], str]:
    """The model's leading normalization moved out (the input feeds the next op directly), or None and why not."""
    obj = read_model(float_model)
    sg = obj.subgraphs[0]
    sig = next((s for s in obj.signatureDefs or [] if s.subgraphIndex == 0), None)
    names = {int(p.tensorIndex): (p.name.decode() if isinstance(p.name, bytes) else p.name)
             for p in (sig.inputs if sig else [])}
    for index in [int(i) for i in sg.inputs]:
        users = _consumers(sg, index)
        if len(users) != 1 or _op_name(obj, users[0]) != "SUB" or int(users[0].inputs[0]) != index:
            continue
        sub = users[0]
        mean = _constant(obj, int(sub.inputs[1]))
        nexts = _consumers(sg, int(sub.outputs[0]))
        if mean is None or len(nexts) != 1 or _op_name(obj, nexts[0]) not in ("MUL", "DIV"):
            continue
        scale_op = nexts[0]
        other = [int(i) for i in scale_op.inputs if int(i) != int(sub.outputs[0])]
        if len(other) != 1 or (_op_name(obj, scale_op) == "DIV" and int(scale_op.inputs[0]) != int(sub.outputs[0])):
            continue
        factor = _constant(obj, other[0])
        if factor is None or any(d != 1 for c in (mean, factor) for d in c.shape[:-1]):
            continue
        if getattr(sub.builtinOptions, "fusedActivationFunction", 0) or \
                getattr(scale_op.builtinOptions, "fusedActivationFunction", 0):
            continue
        out = int(scale_op.outputs[0])
        if out in [int(i) for i in sg.outputs]:
            return None, "the normalization's result is a model output"
        for op in sg.operators:
            op.inputs = np.array([index if int(i) == out else int(i) for i in op.inputs], np.int32)
        sg.operators = [op for op in sg.operators if op is not sub and op is not scale_op]
        compact(obj)
        divide = factor.ravel() if _op_name(obj, scale_op) == "DIV" else 1.0 / factor.ravel()
        return Normalization(names.get(index, ""), write_model(obj), mean.ravel().astype(np.float64),
                             divide.astype(np.float64)), ""
    return None, "the model does not start with a SUB then MUL or DIV by constants on a float input"
