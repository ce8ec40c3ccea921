"""The edit every int8 rung starts from: the float model with its batch fixed to 1, its SHAPE ops and the shape
arithmetic after them folded into constants (no DEQUANTIZE->SHAPE island, and XNNPACK refuses a computed RESHAPE)."""

from __future__ import annotations

import numpy as np

from reporter.measure import graph, runtime


def _fold_shape_arithmetic(model: bytes) -> tuple[bytes, int]:
    """Folds every op whose inputs are all constants and whose outputs are all int32/int64 (shape arithmetic: the
    STRIDED_SLICE, PACK ... a folded SHAPE feeds) into constants, with the values LiteRT computes for them (one
    invoke of the model on zeros, every tensor kept). XNNPACK refuses a RESHAPE whose shape is computed."""
    obj = graph.read_model(model)
    sg, types = obj.subgraphs[0], graph.schema().TensorType
    integer = (types.INT32, types.INT64)
    const = {i for i, t in enumerate(sg.tensors) if graph.has_data(obj, t)}
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
            sg.tensors[int(i)].buffer = graph.add_buffer(obj, np.asarray(it.get_tensor(int(i))))
    sg.operators = [op for op in sg.operators if not any(op is f for f in fold)]
    graph.compact(obj)
    return graph.write_model(obj), len(fold)


# Ops kept even when nothing reads their outputs: they call subgraphs, touch variables or are opaque.
_EFFECTS = frozenset({"CUSTOM", "WHILE", "IF", "CALL", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
                      "STABLEHLO_COMPOSITE"})


def _drop_dead_ops(obj) -> int:
    """Removes the main subgraph's ops whose outputs nothing reads (no op, no graph output): a RESHAPE whose only
    reader was a SHAPE now folded. LiteRT Quantizer leaves such an op's output in float, and XNNPACK hands out no data
    for it ("Tensor data is null" in a calibration that keeps every tensor). Returns how many."""
    sg = obj.subgraphs[0]
    dropped = 0
    while True:
        read = {int(i) for op in sg.operators for i in op.inputs if i >= 0} | {int(i) for i in sg.outputs}
        dead = [op for op in sg.operators if len(op.outputs) and graph.op_name(obj, op) not in _EFFECTS
                and not any(int(i) in read for i in op.outputs)]
        if not dead:
            return dropped
        sg.operators = [op for op in sg.operators if not any(op is d for d in dead)]
        dropped += len(dead)


def static_batch(float_model: bytes) -> tuple[bytes, str]:
    """The float model with its batch dimension fixed to 1: every shape made static, every SHAPE op folded into an
    int32 constant, and the shape arithmetic after it folded too; an op left with no reader (a RESHAPE only a SHAPE
    read) is removed. Returns (model, words); raises ValueError when a dimension other than the batch is dynamic."""
    obj = graph.read_model(float_model)
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
        if graph.op_name(obj, op) == "SHAPE":
            out = sg.tensors[int(op.outputs[0])]
            dtype = np.int64 if out.type == graph.schema().TensorType.INT64 else np.int32
            out.buffer = graph.add_buffer(obj, np.array(sg.tensors[int(op.inputs[0])].shape, dtype))
            folded += 1
        else:
            kept.append(op)
    sg.operators = kept
    _drop_dead_ops(obj)
    graph.compact(obj)
    model, arithmetic = _fold_shape_arithmetic(graph.write_model(obj))
    words = "batch fixed to 1 (was dynamic)" if was_dynamic else "batch already static"
    if folded:
        words += f"; {folded} SHAPE op{'s' * (folded != 1)} and {arithmetic} op{'s' * (arithmetic != 1)} of shape" \
                 " arithmetic folded into constants"
    return model, words
