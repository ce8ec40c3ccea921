"""A float .tflite as the field ships it, made into the model the rest of quant-report reads.

Three things a bundled .tflite (MediaPipe's, an old converter's) commonly has that stop the quantizers:

- no SignatureDef: LiteRT Quantizer and the calibration both need one; one is built from subgraph 0's inputs
  and outputs (key `serving_default`, each named by its tensor).
- sparse weights (TFLite's sparsity format: a constant with `sparsity` parameters, behind a DENSIFY op, or read
  sparse by FULLY_CONNECTED), as MediaPipe's pose detector ships 38 of its float16 weights: each is made dense by
  TFLite's own DENSIFY kernel (a one-op interpreter per model, so every format it reads, block maps and CSR
  segments alike, is read as LiteRT reads it); the DENSIFY output becomes that dense constant and the op goes.
  The model with them dense is run beside the given one on seeded random inputs and the largest output
  difference is said (0: identical).
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
    """The model with old op codes normalized, sparse constants made dense, float16 constants widened and a
    signature added, as needed."""
    from reporter.measure import graph

    model = graph.read_model(data)
    changes = []
    codes = normalize_op_codes(model)
    if codes:
        changes.append(f"{codes} operator codes were stored in the old field only (deprecated_builtin_code);"
                       " copied to builtin_code so LiteRT Quantizer reads the ops")
    dense = densify(model)
    widened = widen_float16(model)
    if widened:
        changes.append(f"{widened} float16 constants (behind DEQUANTIZE ops) widened to float32 and the"
                       " DEQUANTIZE ops removed: measured as the float model they compute")
    if not model.signatureDefs:
        names = add_signature(model)
        changes.append(f"the file has no signature; one was built from the graph's inputs"
                       f" ({', '.join(names[0])}) and outputs ({', '.join(names[1])})")
    if not changes and not dense:
        return Prepared(data)
    result = graph.write_model(model, drop_orphans=False)
    if dense:
        changes.insert(1 if codes else 0, _densified_sentence(dense, data, result))
    return Prepared(result, changes)


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


def densify(model) -> list[str]:
    """Every sparse constant made dense by TFLite's DENSIFY kernel: a DENSIFY op's output becomes the dense
    constant (in the sparse tensor's type: float16 stays behind its DEQUANTIZE, `widen_float16` folds it) and the
    op is removed; a sparse constant an op reads directly is made dense in place. Returns the densified tensors'
    names, in the graph's order."""
    import numpy as np
    from reporter.measure import graph

    schema = graph.objects()

    codes = model.operatorCodes or []
    densify_ops = {i for i, c in enumerate(codes) if _builtin(c) == schema.BuiltinOperator.DENSIFY}
    names = []
    for sg in model.subgraphs or []:
        sparse = [i for i, t in enumerate(sg.tensors or []) if t.sparsity is not None and t.buffer
                  and model.buffers[t.buffer].data is not None and len(model.buffers[t.buffer].data)]
        if not sparse:
            continue
        dense = _densify_kernel(model, sg, sparse)

        def constant(tensor, values):
            new = schema.BufferT()
            new.data = np.frombuffer(np.ascontiguousarray(values).tobytes(), dtype=np.uint8)
            model.buffers.append(new)
            tensor.buffer, tensor.sparsity = len(model.buffers) - 1, None

        kept = []
        for op in sg.operators or []:
            source = int(op.inputs[0]) if op.opcodeIndex in densify_ops and len(op.inputs) == 1 else -1
            if source in dense:
                out = sg.tensors[op.outputs[0]]
                constant(out, dense[source])
                out.type = sg.tensors[source].type
                names.append(_name(sg.tensors[source].name))
                continue
            kept.append(op)
        sg.operators = kept
        read = {int(i) for op in kept for i in op.inputs if i >= 0}
        for index in sorted(read & set(dense)):
            constant(sg.tensors[index], dense[index])
            names.append(_name(sg.tensors[index].name))
    if names:
        _drop_unused_tensors(model)
        _drop_unused_buffers(model)
    return names


def _name(raw) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")


def _densify_kernel(model, sg, indices: list[int]) -> dict:
    """The dense values of `sg`'s sparse constants `indices`, computed by LiteRT's DENSIFY kernel: a model of
    one DENSIFY op per constant, no inputs, invoked once (without XNNPACK, which takes DENSIFY of constants as
    its own and has nothing to run in a graph of them alone)."""
    from reporter.measure import graph as editor
    from reporter.measure import runtime

    schema = editor.objects()

    tiny = schema.ModelT()
    tiny.version = 3
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.DENSIFY
    code.version = 1
    tiny.operatorCodes, tiny.buffers = [code], [schema.BufferT()]
    tensors, ops, outputs = [], [], []
    for index in indices:
        given = sg.tensors[index]
        buffer = schema.BufferT()
        buffer.data = model.buffers[given.buffer].data
        tiny.buffers.append(buffer)
        sparse, dense = schema.TensorT(), schema.TensorT()
        sparse.name, sparse.shape, sparse.type = b"sparse_%d" % index, given.shape, given.type
        sparse.buffer, sparse.sparsity = len(tiny.buffers) - 1, given.sparsity
        dense.name, dense.shape, dense.type, dense.buffer = b"dense_%d" % index, given.shape, given.type, 0
        tensors += [sparse, dense]
        op = schema.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = 0, [len(tensors) - 2], [len(tensors) - 1]
        ops.append(op)
        outputs.append(len(tensors) - 1)
    graph = schema.SubGraphT()
    graph.tensors, graph.operators, graph.inputs, graph.outputs = tensors, ops, [], outputs
    tiny.subgraphs = [graph]
    interpreter = runtime.load(editor.write_model(tiny, drop_orphans=False), builtin=True)
    interpreter.allocate_tensors()
    interpreter.invoke()
    return {index: interpreter.get_tensor(out).copy() for index, out in zip(indices, outputs)}


PROOF_SAMPLES = 8  # seeded random samples the densified model is run on beside the given one
PROOF_SEED = 46


def _densified_sentence(names: list[str], given: bytes, dense: bytes) -> str:
    difference = output_difference(given, dense)
    proof = ("its outputs are identical to the given file's" if difference == 0.0 else
             f"largest output difference against the given file {difference:.3g}" if difference is not None else
             "its outputs could not be compared with the given file's (inputs that are not numbers)")
    return (f"{len(names)} sparse weights (TFLite sparsity, behind DENSIFY ops) made dense by TFLite's DENSIFY"
            f" kernel and the DENSIFY ops removed ({proof}: LiteRT, {PROOF_SAMPLES} seeded random samples):"
            f" {', '.join(names)}")


def output_difference(given: bytes, changed: bytes) -> "float | None":
    """The largest absolute difference between the outputs of two models with the same inputs and outputs, run
    by LiteRT on PROOF_SAMPLES seeded random samples (standard normal for float inputs, zeros for integer ones,
    dynamic dimensions as 1); None when an input is neither."""
    import numpy as np

    from reporter.measure import runtime

    runs = []
    for data in (given, changed):
        interpreter = runtime.load(data)
        rng = np.random.default_rng(PROOF_SEED)
        outputs = []
        for _ in range(PROOF_SAMPLES):
            for d in interpreter.get_input_details():
                shape = [max(1, int(s)) for s in d["shape_signature"]] if len(d["shape_signature"]) else []
                interpreter.resize_tensor_input(d["index"], shape)
            interpreter.allocate_tensors()
            for d in interpreter.get_input_details():
                if np.issubdtype(d["dtype"], np.floating):
                    interpreter.set_tensor(d["index"], rng.standard_normal(d["shape"]).astype(d["dtype"]))
                elif np.issubdtype(d["dtype"], np.integer) or d["dtype"] == np.bool_:
                    interpreter.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
                else:
                    return None
            interpreter.invoke()
            outputs += [interpreter.get_tensor(d["index"]).astype(np.float64) for d in interpreter.get_output_details()]
        runs.append(outputs)
    gaps = [np.where(np.isnan(a) & np.isnan(b), 0.0, np.abs(a - b)) for a, b in zip(*runs)]
    return max((float(np.max(g)) if g.size else 0.0 for g in gaps), default=0.0)


def widen_float16(model) -> int:
    """Folds every DEQUANTIZE of a float16 constant: its output becomes the float32 constant, the op goes,
    and tensors nothing reads any more are dropped. Returns how many constants were widened."""
    import numpy as np
    from reporter.measure import graph

    schema = graph.objects()

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
    from reporter.measure import graph

    schema = graph.objects()

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
