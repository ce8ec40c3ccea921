"""Integer-only repairs (issue 45): all-int8 models built another way when the plain int8 model loses accuracy.

Pure builders: each rung takes the run's float .tflite, its calibration and selection samples, and returns a
`RepairCandidate` (an int8-I/O model whose every tensor an op computes with is int8 or int32, checked here from the
file, or one line saying why there is none). Nothing is measured against labels and nothing is decided; the one
measurement is the choice of a range method by agreement with float's own outputs on the selection samples.
`rungs(...)` yields them cheapest first, lazily: static_batch1 (LiteRT's static int8 from the float model with its
batch fixed to 1, SHAPE ops folded: no DEQUANTIZE->SHAPE island), ranges (activation ranges chosen among range
methods, injected through LiteRT Quantizer's calibration result), bias_correction (int32 biases patched by
b <- b - E[(Q(W) - W) x]), host_normalization (a leading SUB, MUL/DIV by constants moved to the host when the
input's int8 scale leaves features with at most 2 codes; the caller feeds (x - subtract) / divide).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import numpy as np

from reporter.convert.repair_edits import (biased_ops, correct_biases, find_normalization, read_model,
                                           static_batch, tensor_name)
from reporter.core.targets import int8_spec
from reporter.measure import structure
from reporter.measure.evaluate import as_inputs

STATIC_BATCH1, RANGES, BIAS_CORRECTION, HOST_NORMALIZATION = (
    "static_batch1", "ranges", "bias_correction", "host_normalization")
RUNGS = (STATIC_BATCH1, RANGES, BIAS_CORRECTION, HOST_NORMALIZATION)  # cheapest first
LABELS = {
    STATIC_BATCH1: "LiteRT static int8, static batch of 1",
    RANGES: "LiteRT static int8, activation ranges chosen by measurement",
    BIAS_CORRECTION: "LiteRT static int8 with bias correction",
    HOST_NORMALIZATION: "LiteRT static int8, input normalization on the host",
}
# Range methods, in the order ties are settled (LiteRT's own default first: another method must do better).
MOVING_AVERAGE, MIN_MAX, MEAN_EXTREMES, P999, P9999, MSE = "moving_average", "min_max", "mean_extremes", "p99.9", \
    "p99.99", "mse"
RANGE_METHODS = (MOVING_AVERAGE, MIN_MAX, MEAN_EXTREMES, P999, P9999, MSE)
METHOD_WORDS = {MOVING_AVERAGE: "moving average (LiteRT's default)", MIN_MAX: "min-max",
                MEAN_EXTREMES: "mean of per-sample extremes", P999: "percentile 99.9", P9999: "percentile 99.99",
                MSE: "MSE-optimal clipping"}
VALUES_KEPT = 1 << 16  # activation values kept per tensor for percentiles and MSE clipping (a strided subsample)
CHUNK = 32  # samples per float run when the float model takes a batch
MAX_CODES = 2  # host normalization applies when some input feature spans at most this many int8 codes


@dataclass(frozen=True)
class RepairCandidate:
    """One rung's model, or why there is none."""

    rung: str  # code: one of RUNGS
    label: str  # words: "LiteRT static int8, static batch of 1"
    detail: str = ""  # how it was built, in words (the range method and each method's figure, ...)
    model: Optional[bytes] = None  # an int8-input/int8-output, all-int8 .tflite
    error: str = ""  # one line when it cannot be built or does not apply
    applies: bool = True  # False: the model gives the rung nothing to change (`error` says what is missing)
    input_transform: Optional[dict] = None  # {"input": name, "subtract": [...], "divide": [...]}: host work
    seconds: float = 0.0  # time to build it (shared work counted by the first rung that needed it)


def integer_only(model: bytes) -> str:
    """"" when every tensor the model's ops compute with is int8 or int32 (bool allowed) and its inputs and outputs
    are int8; else what is not."""
    op_types = structure.op_tensor_types(model)
    if int8_spec(structure.tensor_types(model), structure.ops(model), op_types):
        return ""
    others = {k: v for k, v in op_types.items() if k not in ("int8", "int32", "bool")}
    kinds = ", ".join(f"{v} {k}" for k, v in others.items())
    ops = structure.ops(model)
    islands = f" ({ops['DEQUANTIZE']} DEQUANTIZE op{'s' * (ops['DEQUANTIZE'] != 1)})" if ops.get("DEQUANTIZE") else ""
    return f"not integer-only: {kinds} tensor{'s' * (sum(others.values()) != 1)} left among the ops{islands}"


# --- data and runs ------------------------------------------------------------------------------------------------
def _signature(model: bytes) -> tuple[str, list[str], list[str]]:
    from ai_edge_litert.interpreter import Interpreter

    signatures = Interpreter(model_content=model).get_signature_list()
    if not signatures:
        raise ValueError("the model has no signature (LiteRT Quantizer calibrates through one)")
    key = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
    return key, list(signatures[key]["inputs"]), list(signatures[key]["outputs"])


def _interpreter(model: bytes, preserve: bool = False):
    """A LiteRT interpreter on `model` with its default kernels, or without the default delegate where XNNPACK
    refuses the model (it does refuse some int8 graphs that LiteRT's own kernels run)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model, experimental_preserve_all_tensors=preserve)
    try:
        it.allocate_tensors()
    except RuntimeError:
        it = Interpreter(model_content=model, experimental_preserve_all_tensors=preserve,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    return it


def _keyed(x, names: list[str]) -> dict[str, np.ndarray]:
    """`x` by the signature's input names (the one array of a one-input model whatever it is called)."""
    x = as_inputs(x)
    if len(x.arrays) == 1 and len(names) == 1:
        return {names[0]: x.single()}
    return {name: x[name] for name in names}


def _typed(a: np.ndarray) -> np.ndarray:
    return a if np.issubdtype(a.dtype, np.integer) else a.astype(np.float32)


def run(model: bytes, x: dict[str, np.ndarray], batched: bool = True) -> dict[str, np.ndarray]:
    """The model's outputs (dequantized) over `x` (signature name -> array): one invoke per chunk of samples, or per
    sample when the model takes a batch of 1 only."""
    it = _interpreter(model)
    key = _signature(model)[0]
    runner = it.get_signature_runner(key)
    ins, outs = runner.get_input_details(), runner.get_output_details()
    n = len(next(iter(x.values())))
    step = CHUNK if batched else 1
    parts: dict[str, list] = {name: [] for name in outs}
    for start in range(0, n, step):
        feed = {}
        for name, d in ins.items():
            a = x[name][start:start + step]
            scale, zero = d["quantization"]
            if scale and np.issubdtype(d["dtype"], np.integer):
                info = np.iinfo(d["dtype"])
                a = np.clip(np.round(a / scale + zero), info.min, info.max)
            feed[name] = a.astype(d["dtype"])
        got = runner(**feed)
        for name, d in outs.items():
            scale, zero = d["quantization"]
            value = got[name]
            parts[name].append((value.astype(np.float32) - zero) * scale if scale else value.astype(np.float32))
    return {name: np.concatenate(p) for name, p in parts.items()}


def _takes_batches(model: bytes) -> bool:
    from ai_edge_litert.interpreter import Interpreter

    details = Interpreter(model_content=model).get_input_details()
    return all(len(d["shape_signature"]) and d["shape_signature"][0] == -1 for d in details)


def _class_scores(float_model: bytes) -> dict[str, str]:
    """Per signature output: "argmax" (class scores: a SOFTMAX's output), "threshold" (one LOGISTIC unit) or "mse"."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=float_model)
    made_by = structure.producers(float_model)
    kinds = {}
    for name, d in it.get_signature_runner(_signature(float_model)[0]).get_output_details().items():
        op = made_by.get(int(d["index"]), "")
        units = int(d["shape"][-1]) if len(d["shape"]) else 1
        kinds[name] = "argmax" if op == "SOFTMAX" and units > 1 else "threshold" if op == "LOGISTIC" and units == 1 \
            else "mse"
    return kinds


def agreement(reference: dict[str, np.ndarray], outputs: dict[str, np.ndarray], kinds: dict[str, str]) -> float:
    """How close `outputs` are to float's (`reference`), higher is better: for class scores the share of samples with
    float's class (argmax, or p > 0.5 for one sigmoid unit), else minus the output MSE relative to float's variance;
    averaged over outputs."""
    figures = []
    for name, ref in reference.items():
        got, kind = outputs[name], kinds.get(name, "mse")
        if kind == "argmax":
            figures.append(float(np.mean(ref.argmax(-1) == got.argmax(-1))))
        elif kind == "threshold":
            figures.append(float(np.mean((ref > 0.5) == (got > 0.5))))
        else:
            figures.append(-float(np.mean((ref - got) ** 2) / max(float(np.var(ref)), 1e-12)))
    return float(np.mean(figures))


def _figure(value: float, kinds: dict[str, str]) -> str:
    if all(k != "mse" for k in kinds.values()):
        return f"{100 * value:.1f} %"
    return f"relative MSE {-value:.4g}"


# --- activation statistics ----------------------------------------------------------------------------------------
@dataclass
class _Stats:
    """Per tensor of the float model: each sample's min and max, a strided subsample of its values, and (for the
    inputs of biased ops) the mean of each channel (last axis)."""

    mins: dict
    maxs: dict
    values: dict
    channel_means: dict


def activation_stats(float_model: bytes, x: dict[str, np.ndarray], names: set, means_of: set = frozenset()) -> _Stats:
    """Runs the float model keeping every tensor and reads `names` (tensor names) per sample."""
    batched = _takes_batches(float_model)
    it = _interpreter(float_model, preserve=True)
    key, inputs, _ = _signature(float_model)
    runner = it.get_signature_runner(key)
    index = {d["name"]: d["index"] for d in it.get_tensor_details() if d["name"] in names | set(means_of)}
    n = len(next(iter(x.values())))
    per_sample = max(1, VALUES_KEPT // max(n, 1))
    stats = _Stats({k: [] for k in index}, {k: [] for k in index}, {k: [] for k in index}, {})
    sums: dict = {}
    step = CHUNK if batched else 1
    for start in range(0, n, step):
        runner(**{k: _typed(x[k][start:start + step]) for k in inputs})
        count = min(step, n - start)
        for name, i in index.items():
            a = it.get_tensor(i)
            if not np.issubdtype(a.dtype, np.floating):
                continue
            rows = a.reshape(count, -1) if a.size and a.shape[0] == count else a.reshape(1, -1)
            if name in names:
                stats.mins[name].append(rows.min(axis=1))
                stats.maxs[name].append(rows.max(axis=1))
                stride = max(1, rows.shape[1] // per_sample)
                stats.values[name].append(rows[:, ::stride].ravel())
            if name in means_of:
                total, seen = sums.get(name, (0.0, 0))
                channels = a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)
                sums[name] = (total + channels.astype(np.float64).sum(axis=0), seen + channels.shape[0])
    for d in (stats.mins, stats.maxs, stats.values):
        for name in list(d):
            if d[name]:
                d[name] = np.concatenate(d[name])
            else:
                del d[name]
    stats.channel_means = {k: total / seen for k, (total, seen) in sums.items()}
    return stats


def _mse_range(values: np.ndarray, lo: float, hi: float) -> tuple[float, float]:
    """The clipping range (a shrink of [lo, hi] towards 0) that quantizes `values` to 256 steps with least error."""
    best, best_err = (lo, hi), np.inf
    for fraction in np.linspace(1.0, 0.3, 36):
        a, b = lo * fraction if lo < 0 else lo, hi * fraction if hi > 0 else hi
        scale = max(b - a, 1e-12) / 255.0
        q = np.clip(np.round((values - a) / scale), 0, 255) * scale + a
        err = float(np.mean((q - values) ** 2))
        if err < best_err:
            best, best_err = (a, b), err
    return best


def method_ranges(stats: _Stats, method: str) -> dict[str, tuple[float, float]]:
    """Tensor name -> (min, max) by `method` (any of RANGE_METHODS but the moving average, LiteRT's own)."""
    ranges = {}
    for name, mins in stats.mins.items():
        maxs, values = stats.maxs[name], stats.values[name]
        if method == MIN_MAX:
            lo, hi = float(mins.min()), float(maxs.max())
        elif method == MEAN_EXTREMES:
            lo, hi = float(mins.mean()), float(maxs.mean())
        elif method in (P999, P9999):
            q = 99.9 if method == P999 else 99.99
            lo, hi = float(np.percentile(values, 100 - q)), float(np.percentile(values, q))
        elif method == MSE:
            lo, hi = _mse_range(values.astype(np.float64), float(mins.min()), float(maxs.max()))
        else:
            raise ValueError(f"unknown range method {method!r}")
        ranges[name] = (lo, hi) if hi > lo else (lo, lo + 1e-6)
    return ranges


def edited(calibration: dict, ranges: dict[str, tuple[float, float]]) -> dict:
    """LiteRT Quantizer's calibration result with the given tensors' min/max replaced (array shapes kept)."""
    out = {}
    for name, qsv in calibration.items():
        qsv = dict(qsv)
        if name in ranges and "min" in qsv and "max" in qsv:
            lo, hi = ranges[name]
            qsv["min"] = np.full_like(np.asarray(qsv["min"], np.float32), lo)
            qsv["max"] = np.full_like(np.asarray(qsv["max"], np.float32), hi)
        out[name] = qsv
    return out


def starved_features(x: np.ndarray, scale: float, zero_point: int) -> int:
    """Input features (last axis) that the int8 input quantization leaves with at most MAX_CODES codes over `x`."""
    codes = np.clip(np.round(x / scale + zero_point), -128, 127).reshape(-1, x.shape[-1])
    return int(sum(len(np.unique(codes[:, j])) <= MAX_CODES for j in range(codes.shape[1])))


# --- the ladder ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RepairOptions:
    """Which rungs to build (in RUNGS order) and which range methods the range rung compares."""

    rungs: tuple = RUNGS
    methods: tuple = RANGE_METHODS


def _static_int8(model: bytes, calibration: dict) -> bytes:
    from litert_quantizer import quantizer, recipe

    q = quantizer.Quantizer(model, recipe.static_wi8_ai8())
    return bytes(q.quantize(calibration, enable_progress_report=False).quantized_model)


def _samples(x: dict) -> int:
    return len(next(iter(x.values())))


class _Base:
    """One float model the rungs quantize (the user's, or it without its normalization) with its data: its batch-1
    form, LiteRT Quantizer's calibration on that, the activation statistics and the range method chosen, each made
    once on first use. `reference`: float's outputs on the selection samples and their kinds, what agreement is
    measured against."""

    def __init__(self, float_model: bytes, x_calib: dict, x_select: dict, reference: Callable):
        self.float_model, self.calib, self.select, self.reference = float_model, x_calib, x_select, reference
        self.key = _signature(float_model)[0]
        self.batched = _takes_batches(float_model)
        self.cache: dict = {}

    def once(self, name: str, make: Callable):
        if name not in self.cache:
            self.cache[name] = make()
        return self.cache[name]

    def batch1(self) -> tuple[bytes, str]:
        return self.once("batch1", lambda: static_batch(self.float_model))

    def calibration(self) -> dict:
        def make():
            from litert_quantizer import quantizer, recipe

            data = {self.key: [{k: a[i:i + 1] for k, a in self.calib.items()} for i in range(_samples(self.calib))]}
            return quantizer.Quantizer(self.batch1()[0], recipe.static_wi8_ai8()).calibrate(data)
        return self.once("calibration", make)

    def plain(self) -> bytes:
        return self.once("plain", lambda: _static_int8(self.batch1()[0], self.calibration()))

    def stats(self) -> _Stats:
        def make():
            obj = read_model(self.float_model)
            inputs = {tensor_name(obj.subgraphs[0].tensors[int(op.inputs[0])]) for _, op in biased_ops(obj).values()}
            return activation_stats(self.float_model, self.calib, set(self.calibration()), inputs)
        return self.once("stats", make)

    def score(self, calibration: dict) -> float:
        """Agreement with float on the selection samples of the model built from `calibration` (built from the float
        model as given when it takes batches: the same numbers, one invoke per chunk)."""
        reference, kinds = self.reference()
        if self.batched:
            try:
                return agreement(reference, run(_static_int8(self.float_model, calibration), self.select), kinds)
            except (RuntimeError, ValueError, KeyError):
                pass  # measured on the batch-1 model, one sample at a time
        return agreement(reference, run(_static_int8(self.batch1()[0], calibration), self.select, False), kinds)

    def chosen(self, methods: tuple) -> tuple[str, dict, str]:
        """(range method, its calibration, the figures in words), by agreement with float on the selection samples;
        ties go to the method listed first."""
        def make():
            kinds = self.reference()[1]
            scored = []
            for method in methods:
                cal = self.calibration() if method == MOVING_AVERAGE else edited(
                    self.calibration(), method_ranges(self.stats(), method))
                scored.append((method, cal, self.score(cal)))
            best = max(scored, key=lambda s: s[2])
            others = ", ".join(f"{METHOD_WORDS[m]} {_figure(v, kinds)}" for m, _, v in scored if m != best[0])
            return best[0], best[1], (f"range method: {METHOD_WORDS[best[0]]}, chosen on {_samples(self.select)}"
                                      f" selection samples (agreement with float {_figure(best[2], kinds)}; {others})")
        return self.once("chosen", make)


class _Ladder:
    """The user's float model and data as the rungs share them."""

    def __init__(self, float_model: bytes, x_calib, x_select, options: RepairOptions):
        self.float_model, self.options = bytes(float_model), options
        self.inputs = _signature(self.float_model)[1]
        calib = {k: _typed(a) for k, a in _keyed(x_calib, self.inputs).items()}
        self.select = {k: _typed(a) for k, a in _keyed(x_select, self.inputs).items()}
        self._reference = None
        self.base = _Base(self.float_model, calib, self.select, self.reference)

    def reference(self) -> tuple[dict, dict]:
        if self._reference is None:
            self._reference = (run(self.float_model, self.select, _takes_batches(self.float_model)),
                               _class_scores(self.float_model))
        return self._reference

    def ranged(self, base: _Base) -> tuple[str, dict, str]:
        """The range method chosen on `base` (LiteRT's default where the range rung is not built or cannot choose)."""
        if RANGES in self.options.rungs and _samples(self.select):
            return base.chosen(self.options.methods)
        return MOVING_AVERAGE, base.calibration(), f"ranges: {METHOD_WORDS[MOVING_AVERAGE]}"


def loads_on_reference(model: bytes) -> str:
    """"" when LiteRT's reference kernels (what integer-only hardware implements) load the model, else why not."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    try:
        Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF).allocate_tensors()
    except (RuntimeError, ValueError) as exc:
        return f"LiteRT cannot load it: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
    return ""


def _candidate(rung: str, started: float, **fields) -> RepairCandidate:
    model = fields.get("model")
    if model is not None and not fields.get("error"):
        bad = integer_only(model) or loads_on_reference(model)
        if bad:
            fields.update(model=None, error=bad)
    return RepairCandidate(rung, LABELS[rung], seconds=time.perf_counter() - started, **fields)


def _static_batch1(ladder: _Ladder, started: float) -> RepairCandidate:
    base = ladder.base
    return _candidate(STATIC_BATCH1, started, model=base.plain(), detail=(
        f"{base.batch1()[1]}; LiteRT's moving-average ranges over {_samples(base.calib)} calibration samples"))


def _ranges(ladder: _Ladder, started: float) -> RepairCandidate:
    if not _samples(ladder.select):
        return _candidate(RANGES, started, applies=False, error="no selection samples to choose a range method on")
    method, calibration, words = ladder.ranged(ladder.base)
    if method == MOVING_AVERAGE:
        return _candidate(RANGES, started, detail=words, applies=False, error="LiteRT's default ranges agree with"
                          " float best: the model is the static batch-1 one")
    return _candidate(RANGES, started, detail=words, model=_static_int8(ladder.base.batch1()[0], calibration))


def _bias_correction(ladder: _Ladder, started: float) -> RepairCandidate:
    base = ladder.base
    method, calibration, _ = ladder.ranged(base)
    quantized = base.plain() if method == MOVING_AVERAGE else _static_int8(base.batch1()[0], calibration)
    model, corrected, largest = correct_biases(base.batch1()[0], quantized, base.stats().channel_means)
    if not corrected:
        return _candidate(BIAS_CORRECTION, started, applies=False,
                          error="no FULLY_CONNECTED or CONV_2D with a bias to correct")
    return _candidate(BIAS_CORRECTION, started, model=model, detail=(
        f"{corrected} bias{'es' * (corrected != 1)} corrected by E[(Q(W) - W) x] on {_samples(base.calib)} calibration"
        f" samples (largest change {largest:.1f} bias steps); ranges by {METHOD_WORDS[method]}"))


def _host_normalization(ladder: _Ladder, started: float) -> RepairCandidate:
    found, why = find_normalization(ladder.float_model)
    if found is None:
        return _candidate(HOST_NORMALIZATION, started, applies=False, error=why)
    from ai_edge_litert.interpreter import Interpreter

    port = Interpreter(model_content=ladder.base.plain()).get_signature_runner(ladder.base.key).get_input_details()
    scale, zero = port[found.input]["quantization"]
    x = ladder.base.calib[found.input]
    starved = starved_features(x, scale, zero) if scale else 0
    if not starved:
        return _candidate(HOST_NORMALIZATION, started, applies=False, error=f"the input's int8 scale ({scale:.4g})"
                          f" leaves every feature more than {MAX_CODES} codes")

    def standardized(data: dict) -> dict:
        return dict(data, **{found.input: ((data[found.input] - found.subtract) / found.divide).astype(np.float32)})

    host = _Base(found.model, standardized(ladder.base.calib), standardized(ladder.select), ladder.reference)
    method, calibration, words = ladder.ranged(host)
    transform = {"input": found.input, "subtract": [float(v) for v in found.subtract],
                 "divide": [float(v) for v in found.divide]}
    return _candidate(HOST_NORMALIZATION, started, model=_static_int8(host.batch1()[0], calibration),
                      input_transform=transform, detail=(
                          f"the input's int8 scale ({scale:.4g}) leaves {starved} of {x.shape[-1]} features with at"
                          f" most {MAX_CODES} codes; the model without its leading normalization, fed"
                          f" (x - subtract) / divide; {words}"))


BUILDERS = {STATIC_BATCH1: _static_batch1, RANGES: _ranges, BIAS_CORRECTION: _bias_correction,
            HOST_NORMALIZATION: _host_normalization}


def rungs(float_model: bytes, x_calib, x_select, options: RepairOptions = RepairOptions()) -> Iterator[RepairCandidate]:
    """The repair candidates, cheapest first, each built when asked for (stop iterating to build no more).

    `x_calib`, `x_select`: reporter.measure.signature.Inputs, a dict input name -> array, or the one array of a
    one-input model. A rung that fails yields a candidate with its error instead of raising."""
    ladder = _Ladder(float_model, x_calib, x_select, options)
    for rung in RUNGS:
        if rung not in options.rungs:
            continue
        started = time.perf_counter()
        try:
            candidate = BUILDERS[rung](ladder, started)
        except (ValueError, RuntimeError, KeyError, IndexError) as exc:
            line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            candidate = _candidate(rung, started, error=f"{type(exc).__name__}: {line}")
        yield candidate
