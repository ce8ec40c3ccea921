"""The two models of a per-layer comparison side by side (reporter.debug.layer_error): each loaded once with its
facts (op details, tensor details, quantization), their op outputs matched (by name, else by position and shape),
the samples fed to both as each expects them, and tensors read and dequantized."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np

from reporter.measure import graph, runtime

QDQ_OPS = ("QUANTIZE", "DEQUANTIZE")
WEIGHT_DTYPES = ("int4", "int8", "uint8", "int16", "float16")
FLOAT_DTYPES = ("float32", "float64")


@dataclass
class _Model:
    it: object
    tensors: dict  # tensor index -> detail
    ops: list  # op details of the main subgraph (no DELEGATE nodes), in execution order
    producer: dict  # tensor index -> position in `ops`
    inputs: list  # input details
    constants: set  # tensor indices holding constant data (not variables)
    variables: set
    const_derived: set  # constants, and outputs of ops fed by constants only (DEQUANTIZE of a weight)
    subgraph_count: int = 1


def _flatbuffer_facts(model: bytes) -> tuple[set | None, set, int]:
    """(constant tensor indices or None when unreadable, variable tensor indices, number of subgraphs)
    of the main subgraph, read from the flatbuffer."""
    try:
        return graph.stored_tensors(model)
    except Exception:  # noqa: BLE001 - a damaged or unusual flatbuffer: fall back on the interpreter
        return None, set(), 1


def _load(model: bytes) -> _Model:
    # Single-op delegate partitions: every op output is a kernel output, so it is kept.
    it = runtime.load(bytes(model), preserve=True, separate_ops=True)
    it.allocate_tensors()
    tensors = {}
    for d in it.get_tensor_details():
        tensors[int(d["index"])] = d
    ops = graph.op_details(bytes(model))
    producer = {}
    for k, op in enumerate(ops):
        for t in op["outputs"]:
            if t >= 0:
                producer[int(t)] = k
    inputs = it.get_input_details()
    input_idx = {int(d["index"]) for d in inputs}
    constants, variables, subgraphs = _flatbuffer_facts(bytes(model))
    if constants is None:  # not produced by an op, not an input, readable: a constant (variables unknown)
        constants = set()
        for op in ops:
            for t in op["inputs"]:
                t = int(t)
                if t >= 0 and t not in producer and t not in input_idx and _read_tensor(it, t) is not None:
                    constants.add(t)
    constants = {t for t in constants if t not in producer and t not in input_idx}
    const_derived = set(constants)
    for op in ops:  # execution order: a constant-fed op's output is constant-derived
        ins = [int(t) for t in op["inputs"] if t >= 0]
        if ins and all(t in const_derived for t in ins):
            const_derived.update(int(t) for t in op["outputs"] if t >= 0)
    return _Model(it, tensors, ops, producer, inputs, constants, variables, const_derived, subgraphs)


# ---------------------------------------------------------------------------------------- dequantize


def _dtype_name(d: dict) -> str:
    try:
        return np.dtype(d["dtype"]).name
    except TypeError:
        return str(d["dtype"])


def _scales(d: dict):
    q = d.get("quantization_parameters") or {}
    scales = np.asarray(q.get("scales", []), dtype=np.float64)
    zeros = np.asarray(q.get("zero_points", []), dtype=np.float64)
    axis = int(q.get("quantized_dimension", 0) or 0)
    if scales.size == 0:
        return None
    if zeros.size != scales.size:
        zeros = np.zeros_like(scales) if zeros.size == 0 else np.full_like(scales, zeros.flat[0])
    return scales, zeros, axis


def _dequantize(values: np.ndarray, d: dict) -> np.ndarray | None:
    """float64 values of a tensor: integers through their scale and zero point (per axis when there are
    several scales), float16 widened; None when the scales fit no axis (blockwise quantization)."""
    v = np.asarray(values)
    if v.dtype == np.float16 or v.dtype == np.float32 or v.dtype == np.float64:
        return v.astype(np.float64)
    if v.dtype == np.bool_:
        return v.astype(np.float64)
    params = _scales(d) if np.issubdtype(v.dtype, np.integer) else None
    if params is None:
        return v.astype(np.float64)
    scales, zeros, axis = params
    if scales.size == 1:
        out = v.astype(np.float64)
        out -= zeros[0]  # in place: the same values as (v - zero) * scale, one array allocated instead of three
        out *= scales[0]
        return out
    if v.ndim == 0 or axis >= v.ndim or v.shape[axis] != scales.size:
        return None
    shape = [1] * v.ndim
    shape[axis] = scales.size
    out = v.astype(np.float64)
    out -= zeros.reshape(shape)
    out *= scales.reshape(shape)
    return out


def _quantize_input(x: np.ndarray, d: dict) -> np.ndarray:
    dtype = np.dtype(d["dtype"])
    if not np.issubdtype(dtype, np.integer):
        return x.astype(dtype)
    params = _scales(d)
    if params is None:
        return x.astype(dtype)
    scales, zeros, _ = params
    info = np.iinfo(dtype)
    return np.clip(np.round(x / scales[0] + zeros[0]), info.min, info.max).astype(dtype)


# ------------------------------------------------------------------------------------------ matching


def _shape(m: _Model, t: int):
    d = m.tensors.get(t)
    return None if d is None else tuple(int(s) for s in d["shape"])


def _outputs(op) -> list[int]:
    return [int(t) for t in op["outputs"] if t >= 0]


def _signature(m: _Model, op) -> tuple:
    return (op["op_name"], tuple(_shape(m, t) for t in _outputs(op)))


def _match(fm: _Model, qm: _Model):
    """twins: quantized tensor -> float tensor (op outputs, model inputs and what QUANTIZE/DEQUANTIZE pass
    on); how: quantized tensor -> "name"/"position"/"alias"/"input"."""
    twins, how = {}, {}
    # Inputs: by name, else by position.
    f_inputs = {d["name"]: int(d["index"]) for d in fm.inputs}
    for k, d in enumerate(qm.inputs):
        q = int(d["index"])
        f = f_inputs.get(d["name"])
        if f is None and k < len(fm.inputs):
            f = int(fm.inputs[k]["index"])
        if f is not None and None not in (_shape(qm, q), _shape(fm, f)) and \
                np.prod(_shape(qm, q)) == np.prod(_shape(fm, f)):
            twins[q], how[q] = f, "input"

    f_names: dict[str, int | None] = {}
    for op in fm.ops:
        for t in _outputs(op):
            name = fm.tensors[t]["name"] if t in fm.tensors else ""
            if name:
                f_names[name] = None if name in f_names else t  # a duplicated name matches nothing

    f_main = [k for k, op in enumerate(fm.ops) if op["op_name"] not in QDQ_OPS]
    q_main = [k for k, op in enumerate(qm.ops) if op["op_name"] not in QDQ_OPS]
    f_sigs = [_signature(fm, fm.ops[k]) for k in f_main]
    q_sigs = [_signature(qm, qm.ops[k]) for k in q_main]
    aligned = {}
    matcher = difflib.SequenceMatcher(None, q_sigs, f_sigs, autojunk=False)
    for block in matcher.get_matching_blocks():
        for j in range(block.size):
            aligned[q_main[block.a + j]] = f_main[block.b + j]

    by_name = {}
    for k in q_main:
        for t in _outputs(qm.ops[k]):
            name = qm.tensors[t]["name"] if t in qm.tensors else ""
            f = f_names.get(name) if name else None
            if (f is not None and _shape(fm, f) == _shape(qm, t)
                    and fm.ops[fm.producer[f]]["op_name"] == qm.ops[k]["op_name"]):
                by_name[t] = f
    claimed = set(by_name.values())

    for k, op in enumerate(qm.ops):
        outs = _outputs(op)
        if op["op_name"] in QDQ_OPS:
            ins = [int(t) for t in op["inputs"] if t >= 0]
            if ins and ins[0] in twins and outs:
                twins[outs[0]], how[outs[0]] = twins[ins[0]], "alias"
            continue
        f_op = fm.ops[aligned[k]] if k in aligned else None
        f_outs = _outputs(f_op) if f_op is not None else []
        for slot, t in enumerate(outs):
            if t in by_name:
                twins[t], how[t] = by_name[t], "name"
            elif (slot < len(f_outs) and f_outs[slot] not in claimed and _shape(qm, t) is not None
                  and _shape(fm, f_outs[slot]) == _shape(qm, t)):
                twins[t], how[t] = f_outs[slot], "position"
                claimed.add(f_outs[slot])
    return twins, how, aligned


# ------------------------------------------------------------------------------------------- metrics


def _constant_source(m: _Model, t: int) -> int | None:
    """The constant behind input tensor t: t itself, or the constant a DEQUANTIZE op turns into t."""
    if t in m.constants:
        return t
    k = m.producer.get(t)
    if k is not None and m.ops[k]["op_name"] == "DEQUANTIZE":
        ins = [int(i) for i in m.ops[k]["inputs"] if i >= 0]
        if ins and ins[0] in m.constants:
            return ins[0]
    return None


def _read_tensor(it, t: int) -> np.ndarray | None:
    try:
        return np.asarray(it.get_tensor(t))
    except Exception:  # noqa: BLE001 - a tensor the interpreter cannot hand out
        return None


def _read(m: _Model, t: int) -> np.ndarray | None:
    return _read_tensor(m.it, t)


def _samples(x, n_inputs: int, max_samples: int, interpreter=None) -> list[np.ndarray]:
    """x as one array per model input, in the float model's input order: Inputs are matched by name
    (through `interpreter`'s signature); a list/tuple/dict of arrays is taken in that order."""
    from reporter.measure.signature import Inputs, by_position

    if isinstance(x, Inputs):
        arrays = by_position(x, interpreter)
    elif isinstance(x, dict):
        arrays = list(x.values())  # in input order (see compare)
    elif isinstance(x, (list, tuple)) and n_inputs > 1:
        arrays = list(x)
    else:
        arrays = [x]
    if len(arrays) != n_inputs:
        raise ValueError(f"the model has {n_inputs} inputs; got {len(arrays)} input array(s)")
    return [np.asarray(a)[:max_samples] for a in arrays]


def _fit_inputs(m: _Model, arrays: list[np.ndarray], order: list[int]):
    """Resizes inputs whose shape signature allows one sample of `arrays` (batch 1) when the allocated
    shape does not fit it; a fixed batch larger than 1 is filled with copies of the sample."""
    resized = False
    for k, d in enumerate(m.inputs):
        want = (1, *arrays[order[k]].shape[1:])
        shape = tuple(int(s) for s in d["shape"])
        sig = d.get("shape_signature")
        sig = tuple(int(s) for s in sig) if sig is not None and len(sig) else shape
        size, held = int(np.prod(want)), int(np.prod(shape))
        if size == held or (len(shape) and shape[0] > 1 and size * shape[0] == held):
            continue  # one sample fits as it is, or fills a fixed batch by repetition
        if len(sig) == len(want) and all(s == -1 or s == w for s, w in zip(sig, want)):
            m.it.resize_tensor_input(d["index"], list(want))
            resized = True
    if resized:
        m.it.allocate_tensors()
        m.inputs = m.it.get_input_details()
        m.tensors.update({int(d["index"]): d for d in m.it.get_tensor_details()})


def _set_inputs(m: _Model, arrays: list[np.ndarray], i: int, order: list[int]):
    for k, d in enumerate(m.inputs):
        a = arrays[order[k]][i : i + 1]
        if not np.issubdtype(a.dtype, np.integer):
            a = a.astype(np.float32)
        shape = tuple(int(s) for s in d["shape"])
        if a.shape != shape:
            if len(shape) and shape[0] > 1 and a.size * shape[0] == int(np.prod(shape)):
                a = np.repeat(a.reshape((1, *shape[1:])), shape[0], axis=0)  # a fixed batch: the same sample
            elif a.size == int(np.prod(shape)):
                a = a.reshape(shape)
        m.it.set_tensor(d["index"], _quantize_input(a, d))


# --------------------------------------------------------------------------------------------- API
