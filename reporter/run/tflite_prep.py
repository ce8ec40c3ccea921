"""A float .tflite as the field ships it, made into the model the rest of quant-report reads.

Three things a bundled .tflite (MediaPipe's, an old converter's) commonly has that stop the quantizers:

- no SignatureDef: LiteRT Quantizer and the calibration both need one; one is built from subgraph 0's inputs
  and outputs (key `serving_default`, each named by its tensor).
- float16 weights behind DEQUANTIZE ops (a float16 export): each float16 constant is widened to float32 in
  place of the DEQUANTIZE output and the DEQUANTIZE op removed, so the model is the float model it computes
  (float16 -> float32 is exact).
- operator codes in the old field only (`deprecated_builtin_code`, `builtin_code` 0): LiteRT Quantizer reads
  `builtin_code` and sees every op as ADD; the code is copied into `builtin_code`.

`prepare(data)` returns the bytes to use and one sentence per change (empty when nothing changed: the bytes
are the given ones).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SIGNATURE_KEY = "serving_default"
PLACEHOLDER_FOR_GREATER_OP_CODES = 127  # deprecated_builtin_code of every op numbered above 127


@dataclass
class Prepared:
    data: bytes
    changes: list[str] = field(default_factory=list)  # what was changed, one sentence each


def prepare(data: bytes) -> Prepared:
    """The model with old op codes normalized, float16 constants widened and a signature added, as needed."""
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(data))
    changes = []
    codes = normalize_op_codes(model)
    if codes:
        changes.append(f"{codes} operator codes were stored in the old field only (deprecated_builtin_code);"
                       " copied to builtin_code so LiteRT Quantizer reads the ops")
    widened = widen_float16(model)
    if widened:
        changes.append(f"{widened} float16 constants (behind DEQUANTIZE ops) widened to float32 and the"
                       " DEQUANTIZE ops removed: measured as the float model they compute")
    if not model.signatureDefs:
        names = add_signature(model)
        changes.append(f"the file has no signature; one was built from the graph's inputs"
                       f" ({', '.join(names[0])}) and outputs ({', '.join(names[1])})")
    if not changes:
        return Prepared(data)
    return Prepared(bytes(flatbuffer_utils.convert_object_to_bytearray(model)), changes)


def normalize_op_codes(model) -> int:
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


def widen_float16(model) -> int:
    """Folds every DEQUANTIZE of a float16 constant: its output becomes the float32 constant, the op goes,
    and tensors nothing reads any more are dropped. Returns how many constants were widened."""
    import numpy as np
    from tensorflow.lite.python import schema_py_generated as schema

    codes = model.operatorCodes or []
    dequantize = {i for i, c in enumerate(codes) if _builtin(c) == schema.BuiltinOperator.DEQUANTIZE}
    count = 0
    for sg in model.subgraphs or []:
        kept = []
        for op in sg.operators or []:
            source = sg.tensors[op.inputs[0]] if op.opcodeIndex in dequantize and len(op.inputs) == 1 else None
            buffer = model.buffers[source.buffer] if source is not None and source.buffer else None
            if source is None or source.type != schema.TensorType.FLOAT16 or buffer is None or buffer.data is None \
                    or len(buffer.data) == 0:
                kept.append(op)
                continue
            values = np.frombuffer(bytes(bytearray(buffer.data)), dtype="<f2").astype("<f4")
            new = schema.BufferT()
            new.data = np.frombuffer(values.tobytes(), dtype=np.uint8)
            model.buffers.append(new)
            out = sg.tensors[op.outputs[0]]
            out.buffer, out.type = len(model.buffers) - 1, schema.TensorType.FLOAT32
            count += 1
        sg.operators = kept
    if count:
        _drop_unused_tensors(model)
        _drop_unused_buffers(model)
    return count


def _drop_unused_tensors(model) -> None:
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


def add_signature(model) -> tuple[list[str], list[str]]:
    """A SignatureDef for subgraph 0 from its inputs and outputs, each named by its tensor (unique, never
    empty). Returns the input and output names."""
    from tensorflow.lite.python import schema_py_generated as schema

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
            item = schema.TensorMapT()
            item.name, item.tensorIndex = name, int(index)
            result.append(item)
        return result

    sig = schema.SignatureDefT()
    sig.signatureKey, sig.subgraphIndex = SIGNATURE_KEY, 0
    sig.inputs, sig.outputs = maps(sg.inputs, "input"), maps(sg.outputs, "output")
    model.signatureDefs = [sig]
    return [m.name for m in sig.inputs], [m.name for m in sig.outputs]
