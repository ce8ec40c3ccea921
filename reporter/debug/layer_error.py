"""Per-layer error of ANY quantized TFLite model against its float TFLite model.

TF's QuantizationDebugger covers int8 full-integer models only. This runs the float and the quantized
model side by side on the same samples (one sample per invoke, every intermediate tensor kept) and
compares each op output of the quantized model with the matching tensor of the float model, whatever
the scheme (dynamic range, full integer with float or int8 I/O, 16x8, float16, weight-only int8/int4)
and whichever converter made it (TF's converter or LiteRT Quantizer).

What is measured
* The error of every op output is the error ACCUMULATED from the model input (both models run on their
  own, as deployed), not the error of the op alone. `snr_drop_db` is how much of it the op adds:
  the lowest SNR among the op's matched activation inputs minus the SNR of its output.
* Integer tensors are dequantized, (q - zero_point) * scale, per axis when a tensor has several scales;
  float16 tensors are widened to float32. Integer tensors without quantization parameters (ARG_MAX,
  shapes) are compared as they are.
* Weight error: for an op whose constant input is stored quantized (int4/int8/int16/float16, directly
  or through a DEQUANTIZE of a constant), the dequantized constant against the float model's constant in
  the same input slot of the matching op (same shape). When an op has several quantized constant inputs
  (an LSTM's eight matrices, a SUB's mean), the worst one (lowest SNR) is reported. int32/int64 biases are
  not counted. Blockwise-quantized constants (scales that fit no axis) are skipped.

How tensors are matched
* By exact output tensor name (TF's converter and LiteRT Quantizer keep activation names), when the
  op types and shapes agree (a name held by two float tensors matches nothing). QUANTIZE and DEQUANTIZE ops have no float twin: they are not rows and not unmatched;
  their output inherits the twin of their input (so an int8 model's quantized input, or the QUANTIZE
  of a float input, still counts as an input with its own error).
* Otherwise by position: the quantized model's non-(DE)QUANTIZE ops are aligned with the float model's
  by op type and output shapes (difflib, which is plain k-th against k-th when the sequences agree), and
  the output in the same slot with the same shape is taken. Renamed outputs need this: the int8
  SOFTMAX of TF's full-integer model (float's output name moves to the DEQUANTIZE appended after it),
  and most ops of TF's float16 model (its weight DEQUANTIZE ops take the float model's names, e.g.
  `.../batchnorm/sub1`, and the ops are numbered on, `.../batchnorm/sub2`).
* Model inputs are paired by name, else by position.
* Ops with several outputs (SPLIT, WHILE, ...): every matched output is measured (for the inputs of
  later ops); the op's row reports its worst matched output (lowest SNR; the first one on a tie), so a
  WHILE loop's row is its noisy state rather than its exact loop counter.
* Only the main subgraph is compared (WHILE/IF bodies are not; `RawLayerErrors.note` says so). Variable
  tensors (LSTM state) are reset before every sample and are never taken for weights.

Both models run in the LiteRT interpreter as the evaluation runs them (default op resolver, so XNNPACK),
with every tensor kept and delegate node fusion disabled, so that every op output is a kernel output.

The culprit, and the layers to blame after it, are chosen from these records by reporter.debug.culprit.

Infinities: an error-free tensor has snr_db = +inf (stored as float('inf')); snr_drop_db is +inf for an
op whose inputs are exact but whose output is not, 0.0 when both are exact, None when the op has no
matched activation input. Callers that need finite numbers (JSON) must map them.

NaN or inf in the float model (it overflows on some samples): a sample on which a float tensor is not finite
is left out of that tensor's error (there is nothing to measure against; the note says on how many), and a
tensor that is never finite is unmatched. NaN or inf in the quantized tensor only (an overflow quantization
caused) is kept: its error is infinite (or NaN), which is what blames it.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

import numpy as np

from reporter.measure import graph, runtime

QDQ_OPS = ("QUANTIZE", "DEQUANTIZE")
WEIGHT_DTYPES = ("int4", "int8", "uint8", "int16", "float16")
FLOAT_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class RawLayerError:
    """One op output of the quantized model against its float twin, as measured: infinities and NaN kept (the
    culprit rule reads them). The report records it as reporter.model.report.LayerError, where JSON has no
    infinity (reporter.debug.blame.layer_errors)."""

    index: int  # position of the op in the quantized model's execution order (0-based, all ops counted)
    op_name: str  # the quantized model's op type, e.g. "FULLY_CONNECTED"
    tensor_name: str  # the op's output tensor name in the QUANTIZED model
    float_tensor_name: str  # the matched tensor in the float model
    matched_by: str  # "name" or "position"
    mse: float  # float tensor vs the quantized tensor dequantized (error accumulated from the input)
    snr_db: float  # 10*log10(sum(float^2)/sum(err^2)); +inf when err == 0
    cosine: float  # over all samples, flattened; 1.0 when both are all zero
    snr_drop_db: float | None  # min(SNR of matched activation inputs) - snr_db; None: no matched input
    weight_snr_db: float | None = None  # worst quantized constant input against the float constant
    weight_mse: float | None = None
    quantized_dtype: str = ""  # dtype of the output tensor in the quantized model


@dataclass(frozen=True)
class RawLayerErrors:
    """A quantized model compared with float op by op, as measured (`compare`); the report records it as
    reporter.model.report.LayerErrors."""

    layers: list[RawLayerError]
    unmatched: int  # quantized-model ops whose output could not be matched (or read)
    samples: int
    note: str = ""


# --------------------------------------------------------------------------------------------- models


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
        return (v.astype(np.float64) - zeros[0]) * scales[0]
    if v.ndim == 0 or axis >= v.ndim or v.shape[axis] != scales.size:
        return None
    shape = [1] * v.ndim
    shape[axis] = scales.size
    return (v.astype(np.float64) - zeros.reshape(shape)) * scales.reshape(shape)


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


@dataclass
class _Acc:
    f2: float = 0.0
    q2: float = 0.0
    fq: float = 0.0
    e2: float = 0.0
    n: int = 0
    ok: bool = True
    left_out: int = 0  # samples on which the float tensor held NaN or inf: no reference to measure against

    def add(self, f: np.ndarray, q: np.ndarray):
        if not np.isfinite(f).all():  # the float model's own NaN/inf; a quantized overflow still counts
            self.left_out += 1
            return
        e = q - f
        self.f2 += float(np.dot(f, f))
        self.q2 += float(np.dot(q, q))
        self.fq += float(np.dot(f, q))
        self.e2 += float(np.dot(e, e))
        self.n += f.size


def _snr(f2: float, e2: float) -> float:
    """+inf without error, -inf when the error is infinite (an overflow) or the float tensor is all zero,
    NaN when the quantized tensor holds NaN."""
    if math.isnan(e2) or math.isnan(f2):
        return math.nan
    if e2 <= 0.0:
        return math.inf
    if f2 <= 0.0 or math.isinf(e2):
        return -math.inf
    ratio = f2 / e2
    if ratio == 0.0:
        return -math.inf
    return math.inf if math.isinf(ratio) else 10.0 * math.log10(ratio)


def _cosine(a: _Acc) -> float:
    """Cosine similarity of the float and quantized tensors; NaN when either holds NaN or inf."""
    if not all(math.isfinite(v) for v in (a.f2, a.q2, a.fq)):
        return math.nan
    if a.f2 <= 0.0 and a.q2 <= 0.0:
        return 1.0
    if a.f2 <= 0.0 or a.q2 <= 0.0:
        return 0.0
    return float(min(1.0, max(-1.0, a.fq / math.sqrt(a.f2 * a.q2))))


def _drop(inputs_snr: float, snr: float) -> float:
    if math.isinf(inputs_snr) and math.isinf(snr) and (inputs_snr > 0) == (snr > 0):
        return 0.0
    return inputs_snr - snr  # NaN when either is NaN


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


def _weight_error(fm: _Model, qm: _Model, q_op, f_op) -> tuple[float | None, float | None]:
    """(snr_db, mse) of the worst quantized constant input of q_op against f_op's constant in that slot."""
    worst = None
    q_ins, f_ins = list(q_op["inputs"]), list(f_op["inputs"])
    for slot, t in enumerate(q_ins):
        if t < 0 or slot >= len(f_ins) or f_ins[slot] < 0:
            continue
        qc = _constant_source(qm, int(t))
        fc = _constant_source(fm, int(f_ins[slot]))
        if qc is None or fc is None or qc not in qm.tensors or fc not in fm.tensors:
            continue
        if _dtype_name(qm.tensors[qc]) not in WEIGHT_DTYPES or _dtype_name(fm.tensors[fc]) not in ("float32", "float16"):
            continue
        if _dtype_name(qm.tensors[qc]) != "float16" and _scales(qm.tensors[qc]) is None:
            continue  # an integer constant with no scale is not a quantized weight
        qv, fv = _read(qm, qc), _read(fm, fc)
        if qv is None or fv is None or qv.shape != fv.shape or qv.size == 0:
            continue
        deq = _dequantize(qv, qm.tensors[qc])
        if deq is None:
            continue
        fv = fv.astype(np.float64).ravel()
        err = deq.ravel() - fv
        e2 = float(np.dot(err, err))
        snr = _snr(float(np.dot(fv, fv)), e2)
        if worst is None or snr < worst[0]:
            worst = (snr, e2 / err.size)
    return (None, None) if worst is None else worst


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


def compare(float_model: bytes, quant_model: bytes, x, max_samples: int = 64) -> RawLayerErrors:
    """Runs both models on the first `max_samples` samples of `x` (one per invoke) and measures every op
    output of `quant_model` against its float twin. `x` holds samples (batch first): one array, Inputs fed by
    name, or for a model with several inputs a list (or dict, in input order) of arrays."""
    fm, qm = _load(float_model), _load(quant_model)
    arrays = _samples(x, len(fm.inputs), max_samples, fm.it)
    n = min(len(a) for a in arrays)
    if n == 0:
        raise ValueError("no samples to compare")
    if len(qm.inputs) != len(fm.inputs):
        raise ValueError(f"the float model has {len(fm.inputs)} inputs, the quantized one {len(qm.inputs)}")
    f_order = list(range(len(fm.inputs)))
    f_pos = {d["name"]: k for k, d in enumerate(fm.inputs)}
    q_order = [f_pos.get(d["name"], k) for k, d in enumerate(qm.inputs)]

    _fit_inputs(fm, arrays, f_order)
    _fit_inputs(qm, arrays, q_order)
    twins, how, aligned = _match(fm, qm)
    accs = {t: _Acc() for t in twins}
    has_vars = bool(fm.variables or qm.variables)
    for i in range(n):
        for m, order in ((fm, f_order), (qm, q_order)):
            if has_vars:
                m.it.reset_all_variables()  # recurrent state must not carry over from the previous sample
            _set_inputs(m, arrays, i, order)
            m.it.invoke()
        f_cache = {}
        for q, f in twins.items():
            acc = accs[q]
            if not acc.ok:
                continue
            qv = _read(qm, q)
            if f not in f_cache:
                fv = _read(fm, f)
                f_cache[f] = None if fv is None else fv.astype(np.float64).ravel()
            fv = f_cache[f]
            deq = None if qv is None or q not in qm.tensors else _dequantize(qv, qm.tensors[q])
            if fv is None or deq is None or deq.size != fv.size:
                acc.ok = False
                continue
            acc.add(fv, deq.ravel())

    # A tensor the float model filled with NaN or inf on every sample has nothing to be measured against.
    snr = {t: _snr(a.f2, a.e2) for t, a in accs.items() if a.ok and (a.n or not a.left_out)}
    layers, unmatched, renamed, multi = [], 0, 0, 0
    for k, op in enumerate(qm.ops):
        if op["op_name"] in QDQ_OPS:
            continue
        outs = [t for t in _outputs(op) if t in snr and how.get(t) in ("name", "position")]
        if not outs:
            unmatched += 1
            continue
        if len(_outputs(op)) > 1:
            multi += 1
        t = min(outs, key=lambda o: snr[o])  # the worst output (the first, for a single one)
        a, f = accs[t], twins[t]
        ins = [snr[int(i)] for i in op["inputs"] if i >= 0 and int(i) in snr and int(i) not in qm.const_derived]
        drop = _drop(min(ins), snr[t]) if ins else None
        w_snr, w_mse = (None, None)
        if k in aligned or how[t] == "name":
            f_op = fm.ops[fm.producer[f]] if f in fm.producer else None
            if f_op is not None:
                w_snr, w_mse = _weight_error(fm, qm, op, f_op)
        renamed += how[t] == "position"
        layers.append(RawLayerError(
            index=k, op_name=str(op["op_name"]), tensor_name=str(qm.tensors[t]["name"]),
            float_tensor_name=str(fm.tensors[f]["name"]), matched_by=how[t], mse=a.e2 / a.n if a.n else 0.0,
            snr_db=snr[t], cosine=_cosine(a), snr_drop_db=drop, weight_snr_db=w_snr, weight_mse=w_mse,
            quantized_dtype=_dtype_name(qm.tensors[t]),
        ))

    notes = [f"{len(layers)} op outputs compared over {n} samples (error accumulated from the input)"]
    notes.append(f"{len(layers) - renamed} matched by name, {renamed} by position" if renamed
                 else "all matched by name")
    if unmatched:
        notes.append(f"{unmatched} ops unmatched or unreadable")
    if multi:
        notes.append(f"{multi} ops with several outputs: each row reports the op's worst matched output")
    for d in qm.inputs:  # the input's own quantization is no op's row: say what it costs
        q = int(d["index"])
        quantized = [q] if _dtype_name(d) not in FLOAT_DTYPES else [
            int(op["outputs"][0]) for op in qm.ops
            if op["op_name"] == "QUANTIZE" and len(op["inputs"]) and int(op["inputs"][0]) == q]
        for t in quantized:
            if t in snr:
                notes.append(f"input {d['name']} quantized to {_dtype_name(qm.tensors[t])}: SNR {snr[t]:.1f} dB")
    extra = max(fm.subgraph_count, qm.subgraph_count) - 1
    if extra > 0:
        notes.append(f"only the main subgraph is compared ({extra} other subgraphs, e.g. WHILE bodies, are not)")
    if has_vars:
        notes.append("variable tensors (recurrent state) reset before every sample")
    left_out = max((accs[t].left_out for t in snr), default=0)
    if left_out:
        notes.append(f"the float model's own tensors held NaN or inf on up to {left_out} of the {n} samples:"
                     " each op's error leaves those samples out")
    return RawLayerErrors(layers=layers, unmatched=unmatched, samples=n, note="; ".join(notes))

