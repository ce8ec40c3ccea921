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

Several quantized models of one float model are compared in one pass (`compare_all`): the float model runs once
per sample and each float tensor is read once (float64, its sum of squares) for all of them; the cost grows with the
samples, the models and their tensors' sizes, and is stated (`Cost.line`, in run.log). Dot products run on one BLAS
thread (see `_single_threaded_blas`).

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

import math
from dataclasses import dataclass

import numpy as np

from reporter.debug.tensor_pairs import (  # noqa: F401 - the two models side by side, what is compared
    FLOAT_DTYPES, QDQ_OPS, WEIGHT_DTYPES, _constant_source, _dequantize, _dtype_name, _fit_inputs, _load, _match,
    _Model, _outputs, _read, _samples, _scales, _set_inputs)



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
class _Acc:
    f2: float = 0.0
    q2: float = 0.0
    fq: float = 0.0
    e2: float = 0.0
    n: int = 0
    ok: bool = True
    left_out: int = 0  # samples on which the float tensor held NaN or inf: no reference to measure against

    def add(self, f: "_Float", q: np.ndarray):
        """Adds one sample: `q` (float64, flat, overwritten) against the float tensor `f`."""
        if not f.finite:  # the float model's own NaN/inf; a quantized overflow still counts
            self.left_out += 1
            return
        self.f2 += f.f2
        self.q2 += float(np.dot(q, q))
        self.fq += float(np.dot(f.values, q))
        e = np.subtract(q, f.values, out=q)  # q is the caller's own copy: no array of the tensor's size allocated
        self.e2 += float(np.dot(e, e))
        self.n += f.values.size


@dataclass
class _Float:
    """One float tensor on one sample, read once for every variant compared with it: its values (float64, flat),
    whether they are all finite, and their sum of squares."""

    values: np.ndarray
    finite: bool
    f2: float

    @classmethod
    def of(cls, values: np.ndarray) -> "_Float":
        v = values.astype(np.float64).ravel()
        f2 = float(np.dot(v, v))  # the squares of float32/float16 values cannot overflow float64: NaN or inf only
        finite = math.isfinite(f2) if values.dtype != np.float64 else bool(np.isfinite(v).all())  # from NaN or inf
        return cls(v, finite, f2 if finite else 0.0)


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


@dataclass
class _Side:
    """One quantized model being compared: its interpreter, its tensors' twins and their running sums."""

    qm: _Model
    order: list  # its inputs, as positions in the float model's input order
    twins: dict
    how: dict
    aligned: dict
    accs: dict
    has_vars: bool
    error: Exception | None = None


@dataclass(frozen=True)
class Cost:
    """What a comparison of several models with one float model cost: `samples` run through the float model once
    each, `tensors` quantized tensors compared on each (summed over the models), in `seconds`."""

    models: int
    samples: int
    tensors: int
    seconds: float

    def line(self) -> str:
        return (f"per-layer error of {self.models} model(s) against float: {self.samples} samples x {self.tensors}"
                f" tensors = {self.samples * self.tensors} tensor comparisons (the float model run once per sample)"
                f" in {self.seconds:.2f} s")


def _single_threaded_blas():
    """OpenBLAS splits a dot product of more than 10,000 values over its threads; each such call then waits for
    them (milliseconds each, far more on a busy machine: a side process calibrating beside this stage made 3,744 of
    them take 24 s), and the activations' sums are thousands of calls per model. One thread is as fast, and gives
    the same sums on every machine (to the last bit below 10,000 values; above, within 1e-12 of a split sum).
    Nothing is limited without threadpoolctl (scikit-learn's dependency)."""
    import contextlib

    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - scikit-learn brings it
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def compare(float_model: bytes, quant_model: bytes, x, max_samples: int = 64) -> RawLayerErrors:
    """Runs both models on the first `max_samples` samples of `x` (one per invoke) and measures every op
    output of `quant_model` against its float twin. `x` holds samples (batch first): one array, Inputs fed by
    name, or for a model with several inputs a list (or dict, in input order) of arrays."""
    found = compare_all(float_model, {"": quant_model}, x, max_samples)[0][""]
    if isinstance(found, Exception):
        raise found
    return found


def compare_all(float_model: bytes, quant_models: dict, x, max_samples: int = 64) -> tuple[dict, Cost]:
    """`compare` for several quantized models of one float model at once: the float model runs once per sample and
    each float tensor is read once for all of them. Returns ({name: RawLayerErrors, or the exception that model's
    comparison raised}, its cost). Raises what the float model's side raises (its inputs, no samples)."""
    import time

    t0 = time.perf_counter()
    with _single_threaded_blas():
        fm = _load(float_model)
        arrays = _samples(x, len(fm.inputs), max_samples, fm.it)
        n = min(len(a) for a in arrays)
        if n == 0:
            raise ValueError("no samples to compare")
        f_order = list(range(len(fm.inputs)))
        f_pos = {d["name"]: k for k, d in enumerate(fm.inputs)}
        _fit_inputs(fm, arrays, f_order)
        sides: dict[str, _Side | Exception] = {}
        for name, model in quant_models.items():
            try:
                sides[name] = _side(fm, model, arrays, f_pos)
            except Exception as exc:  # noqa: BLE001 - this model's comparison fails, the others go on
                sides[name] = exc
        live = [s for s in sides.values() if isinstance(s, _Side)]
        reset_float = bool(fm.variables) or any(s.has_vars for s in live)
        for i in range(n):
            if not any(s.error is None for s in live):
                break
            if reset_float:
                fm.it.reset_all_variables()  # recurrent state must not carry over from the previous sample
            _set_inputs(fm, arrays, i, f_order)
            fm.it.invoke()
            floats: dict[int, _Float | None] = {}
            for side in live:
                if side.error is None:
                    try:
                        _accumulate(fm, side, arrays, i, floats)
                    except Exception as exc:  # noqa: BLE001 - as above
                        side.error = exc
    results: dict = {}
    for name, made in sides.items():  # the weights' errors: a few dot products per op, BLAS as it is
        if isinstance(made, _Side) and made.error is None:
            try:
                results[name] = _result(fm, made, n)
            except Exception as exc:  # noqa: BLE001 - as above
                results[name] = exc
        else:
            results[name] = made if isinstance(made, Exception) else made.error
    tensors = sum(len(s.twins) for s in live)
    return results, Cost(len(quant_models), n, tensors, time.perf_counter() - t0)


def _side(fm: _Model, quant_model: bytes, arrays: list[np.ndarray], f_pos: dict) -> _Side:
    qm = _load(quant_model)
    if len(qm.inputs) != len(fm.inputs):
        raise ValueError(f"the float model has {len(fm.inputs)} inputs, the quantized one {len(qm.inputs)}")
    order = [f_pos.get(d["name"], k) for k, d in enumerate(qm.inputs)]
    _fit_inputs(qm, arrays, order)
    twins, how, aligned = _match(fm, qm)
    return _Side(qm, order, twins, how, aligned, {t: _Acc() for t in twins}, bool(fm.variables or qm.variables))


def _accumulate(fm: _Model, side: _Side, arrays: list[np.ndarray], i: int, floats: dict) -> None:
    """Runs sample i through the quantized model and adds every matched tensor's error to its sums; `floats` holds
    the float tensors already read for this sample (the float model has run it)."""
    qm = side.qm
    if side.has_vars:
        qm.it.reset_all_variables()
    _set_inputs(qm, arrays, i, side.order)
    qm.it.invoke()
    for q, f in side.twins.items():
        acc = side.accs[q]
        if not acc.ok:
            continue
        qv = _read(qm, q)
        if f not in floats:
            fv = _read(fm, f)
            floats[f] = None if fv is None else _Float.of(fv)
        fv = floats[f]
        deq = None if qv is None or q not in qm.tensors else _dequantize(qv, qm.tensors[q])
        if fv is None or deq is None or deq.size != fv.values.size:
            acc.ok = False
            continue
        acc.add(fv, deq.ravel())


def _result(fm: _Model, side: _Side, n: int) -> RawLayerErrors:
    qm, twins, how, aligned, accs, has_vars = side.qm, side.twins, side.how, side.aligned, side.accs, side.has_vars
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
