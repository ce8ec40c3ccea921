"""What every integer-only repair rung (issue 45) shares: the `Rung` protocol, the candidate it returns, and the
workspace it reads (the user's float model and data, float's outputs, and the batch-1 form, calibration and plain
static int8 of a float model, each made once on first use).

Rungs are pure builders: each returns an int8-I/O model whose every tensor an op computes with is int8 or int32
(checked here from the file), or one line saying why there is none. Nothing is measured against labels and nothing is
decided; the one measurement is agreement with float's own outputs on the selection samples.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional, Protocol

import numpy as np

from reporter.convert.rungs.batch import static_batch
from reporter.core import children
from reporter.core.targets import int8_spec
from reporter.measure import graph, runtime, structure
from reporter.model.repair import InputTransform

TOLERANCE = 1e-4  # largest |rewritten - original| float output, relative to the output's largest |value|


@dataclass(frozen=True)
class RepairCandidate:
    """One rung's model, or why there is none."""

    rung: str  # code: a registered rung's
    label: str  # words: "LiteRT static int8, static batch of 1"
    detail: str = ""  # how it was built, in words (the range method and each method's figure, ...)
    model: Optional[bytes] = None  # an int8-input/int8-output, all-int8 .tflite
    error: str = ""  # one line when it cannot be built or does not apply
    applies: bool = True  # False: the model gives the rung nothing to change (`error` says what is missing)
    input_transform: Optional[InputTransform] = None  # host work before the model reads its input
    seconds: float = 0.0  # time to build it (shared work counted by the first rung that needed it)
    rewritten: Optional[bytes] = None  # the float model `model` quantizes, where the rung claims it exact in float


@dataclass(frozen=True)
class RepairOptions:
    """Which rungs to build (None: every registered one) and which range methods the range rung compares."""

    rungs: Optional[tuple] = None
    methods: Optional[tuple] = None  # None: every range method

    def wants(self, code: str) -> bool:
        return self.rungs is None or code in self.rungs


class Rung(Protocol):
    """One repair rung: one module, one entry of reporter.convert.rungs.REGISTRY."""

    code: str  # "static_batch1": the rung's name in report.json and its variant's
    label: str  # "LiteRT static int8, static batch of 1"
    exact: bool  # its float rewrite (RepairCandidate.rewritten) computes the float model's function

    def offered(self, target) -> bool:
        """The rung is on the ladder for `target` (a reporter.core.targets.Target; None: a run without one)."""

    def applies(self, model: bytes, data: "Workspace") -> Optional[str]:
        """None when the rung has something to change in float `model`, else why not (one line)."""

    def measured(self, model: bytes, data: "Workspace") -> str:
        """What the rung measured to find it does not apply, in words ("" for nothing)."""

    def build(self, model: bytes, data: "Workspace") -> RepairCandidate:
        """The rung's candidate (called only when it applies); an error in it when it cannot be built."""

    def prefetch(self, model: bytes, data: "Workspace") -> None:
        """Starts, before the rung's turn, what its build will need and another process can make meanwhile
        (`Workspace.prefetch`); may do nothing."""


class Plain:
    """Defaults of the protocol: offered everywhere, measured nothing, claims no exactness, prefetches nothing."""

    exact = False

    def offered(self, target) -> bool:
        return True

    def measured(self, model: bytes, data: "Workspace") -> str:
        return ""

    def prefetch(self, model: bytes, data: "Workspace") -> None:
        return None


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


def candidate(rung: Rung, **fields) -> RepairCandidate:
    """`rung`'s candidate; a model that is not integer-only or that LiteRT's reference kernels cannot load is
    replaced by the reason."""
    model = fields.get("model")
    if model is not None and not fields.get("error"):
        bad = integer_only(model) or runtime.loads_on_reference(model)
        if bad:
            fields.update(model=None, error=bad)
    return RepairCandidate(rung.code, rung.label, **fields)


# --- float's outputs and agreement with them ----------------------------------------------------------------------
def class_scores(float_model: bytes) -> dict[str, str]:
    """Per signature output: "argmax" (class scores: a SOFTMAX's output), "threshold" (one LOGISTIC unit) or "mse"."""
    made_by = structure.producers(float_model)
    kinds = {}
    for name, d in runtime.port_details(float_model)[1].items():
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


def per_sample_agreement(reference: dict[str, np.ndarray], outputs: dict[str, np.ndarray],
                         kinds: dict[str, str]) -> np.ndarray:
    """Each sample's `agreement` (higher is better; its mean is `agreement`'s figure): whether it keeps float's class
    (bool, for one class-score output), else the mean over outputs of its share of positions that keep float's class,
    or minus its squared error relative to float's variance."""
    figures = []
    for name, ref in reference.items():
        got, kind = outputs[name], kinds.get(name, "mse")
        if kind == "argmax":
            same = ref.argmax(-1) == got.argmax(-1)
        elif kind == "threshold":
            same = (ref > 0.5) == (got > 0.5)
        else:
            err = (ref.astype(np.float64) - got) ** 2 / max(float(np.var(ref)), 1e-12)
            figures.append(-err.reshape(len(err), -1).mean(axis=1))
            continue
        figures.append(same.reshape(len(same), -1).mean(axis=1) if same.ndim > 1 else same)
    if len(figures) == 1 and figures[0].dtype == bool:
        return figures[0]
    return np.mean([f.astype(np.float64) for f in figures], axis=0)


def figure(value: float, kinds: dict[str, str]) -> str:
    """An agreement in words: a share of samples, or a relative MSE."""
    if all(k != "mse" for k in kinds.values()):
        return f"{100 * value:.1f} %"
    return f"relative MSE {-value:.4g}"


def float_difference(original: bytes, rewritten: bytes, x: dict[str, np.ndarray]) -> float:
    """Largest |rewritten - original| over the outputs on `x`, relative to the outputs' largest |value| (LiteRT)."""
    def outputs(model):
        return np.concatenate([np.concatenate([v.reshape(len(v), -1) for _, v in sorted(o.items())], 1)
                               for o, _, _ in runtime.chunks(model, x)])

    a, b = outputs(original), outputs(rewritten)
    return float(np.abs(a - b).max() / max(float(np.abs(a).max()), 1e-12))


def exact(original: bytes, rewritten: bytes, x_select: dict, what: str) -> tuple[str, str]:
    """(error, words): a rewrite checked against the original float model on the selection samples."""
    difference = float_difference(original, rewritten, x_select)
    words = f"{what}; largest float difference {difference:.2g} of the output's range on the selection samples"
    if not difference <= TOLERANCE:
        return f"the rewrite is not exact in float (largest difference {difference:.2g} of the output's range)", words
    return "", words


# --- the shared work ----------------------------------------------------------------------------------------------
def static_int8(model: bytes, calibration: dict) -> bytes:
    """LiteRT Quantizer's static_wi8_ai8 of `model` from a calibration result."""
    from litert_quantizer import quantizer, recipe

    q = quantizer.Quantizer(model, recipe.static_wi8_ai8())
    return bytes(q.quantize(calibration, enable_progress_report=False).quantized_model)


def int8_outputs(model: bytes, calibration: dict, select: dict, batched: bool) -> dict:
    """The outputs on `select` of `model`'s static int8 (`static_int8`), one invoke per chunk when `batched`: run here
    or by a helper process (`Base.scores`)."""
    return runtime.outputs(static_int8(model, calibration), select, batched)


def samples(x: dict) -> int:
    return len(next(iter(x.values())))


class Base:
    """One float model the rungs quantize (the user's, or a rewrite of it) with its data: its batch-1 form, LiteRT
    Quantizer's calibration on that, its plain static int8, and what rungs add (`once`), each made once on first use.
    `reference`: float's outputs on the selection samples and their kinds, what agreement is measured against."""

    def __init__(self, float_model: bytes, x_calib: dict, x_select: dict, reference: Callable,
                 collected: Optional[Callable[[], Optional[dict]]] = None, helper=None):
        self.float_model, self.calib, self.select, self.reference = float_model, x_calib, x_select, reference
        self.collected = collected  # the run's LiteRT calibration of this float model on these samples (None: none)
        self.helper = helper  # builds and runs some of `scores`' models in another process (None: none)
        self.key = runtime.signature_names(float_model)[0]
        self.batched = runtime.takes_batches(float_model)
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

            reused = self._collected_for_batch1()
            if reused is not None:
                return reused

            data = {self.key: [{k: a[i:i + 1] for k, a in self.calib.items()} for i in range(samples(self.calib))]}
            return quantizer.Quantizer(self.batch1()[0], recipe.static_wi8_ai8()).calibrate(
                data, num_threads=os.cpu_count() or 1)  # its default: 16 threads, on a machine of a few cores
        return self.once("calibration", make)

    def _collected_for_batch1(self) -> Optional[dict]:
        """The run's own calibration of the float model (`collected`), kept to the batch-1 model's tensors: the same
        statistics LiteRT Quantizer collects on the batch-1 model (each sample runs alone either way; tested), not
        collected twice. None when there is none or it lacks one of those tensors (a tensor the batch edit made)."""
        found = self.collected() if self.collected is not None else None
        if not found:
            return None
        wanted = graph.float_activation_names(self.batch1()[0])
        if wanted is None or not wanted <= found.keys():
            return None
        return {name: found[name] for name in found if name in wanted}

    def plain(self) -> bytes:
        return self.once("plain", lambda: static_int8(self.batch1()[0], self.calibration()))

    def score(self, calibration: dict) -> float:
        """Agreement with float on the selection samples of the model built from `calibration` (built from the float
        model as given when it takes batches: the same numbers, one invoke per chunk)."""
        reference, kinds = self.reference()
        if self.batched:
            try:
                return agreement(reference, int8_outputs(self.float_model, calibration, self.select, True), kinds)
            except (RuntimeError, ValueError, KeyError):
                pass  # measured on the batch-1 model, one sample at a time
        return agreement(reference, int8_outputs(self.batch1()[0], calibration, self.select, False), kinds)

    def scores(self, calibrations: list) -> list[float]:
        """`score` of each calibration, the helper process (if any) taking them from the first while this one takes
        them from the last, each scored once by whichever reaches it first (the same models and outputs either way:
        one LiteRT Quantizer, one LiteRT). One the helper fails on (a model that takes batches but fails on them
        among them) is scored here."""
        if self.helper is None or len(calibrations) < 2:
            return [self.score(c) for c in calibrations]
        model = self.float_model if self.batched else self.batch1()[0]
        reference, kinds = self.reference()
        return children.shared(len(calibrations),
                               lambda k: self.helper.call(int8_outputs, model, calibrations[k], self.select,
                                                          self.batched),
                               lambda k: self.score(calibrations[k]),
                               lambda k, outputs: agreement(reference, outputs, kinds))


@dataclass(frozen=True)
class RunVariants:
    """The run's own variants, where a rung needs them: `measured`, those the run measured already; `build(name)`,
    a variant of the run built (None: the run builds none here); `calibration()`, the run's LiteRT Quantizer
    calibration of the same float model on the same calibration samples (None: the rungs collect their own)."""

    measured: frozenset = frozenset()
    build: Optional[Callable[[str], bytes]] = None
    calibration: Optional[Callable[[], Optional[dict]]] = None  # LiteRT Quantizer's calibration of the float model
    helper: Optional[object] = None  # another process whose `call(fn, *args)` gives a Future (None: none)
    behind: Optional[object] = None  # the same, for what rungs start before their turn, at the lowest priority


class Workspace:
    """The user's float model and data as the rungs share them, and the run's own variants (`run`) where a rung
    needs them."""

    def __init__(self, float_model: bytes, x_calib, x_select, options: RepairOptions = RepairOptions(),
                 run: RunVariants = RunVariants()):
        self.float_model, self.options = bytes(float_model), options
        self.measured, self.build_variant = run.measured, run.build
        self.inputs = runtime.signature_names(self.float_model)[1]
        calib = runtime.keyed(x_calib, self.inputs)
        self.select = runtime.keyed(x_select, self.inputs)
        self._reference = None
        self.base = Base(self.float_model, calib, self.select, self.reference, run.calibration, run.helper)
        self.cache: dict = {}
        self.behind = run.behind
        self._prefetched: dict[bytes, object] = {}  # a rewrite's float model -> the Future of its calibration

    def reference(self) -> tuple[dict, dict]:
        if self._reference is None:
            self._reference = (runtime.outputs(self.float_model, self.select), class_scores(self.float_model))
        return self._reference

    def once(self, name: str, make: Callable):
        """What `make` returns, made once for every rung that asks for `name`."""
        if name not in self.cache:
            self.cache[name] = make()
        return self.cache[name]

    def rewrite(self, float_model: bytes, x_calib: Optional[dict] = None, x_select: Optional[dict] = None) -> Base:
        """A Base for a rewrite of the float model (on the same data, or on the data given); its calibration the one
        `prefetch` started, when it did (on the same calibration data)."""
        pending = self._prefetched.get(bytes(float_model)) if x_calib is None else None
        return Base(float_model, self.base.calib if x_calib is None else x_calib,
                    self.select if x_select is None else x_select, self.reference,
                    children.or_none(pending.result) if pending is not None else None)

    def prefetch(self, float_model: bytes) -> None:
        """Starts the calibration of a rewrite of the float model (what `rewrite(float_model).plain()` needs) in the
        `behind` process, once; nothing without one."""
        key = bytes(float_model)
        if self.behind is not None and key not in self._prefetched:
            self._prefetched[key] = self.behind.call(batch1_calibration, key, self.base.calib)


def batch1_calibration(float_model: bytes, x_calib: dict) -> dict:
    """LiteRT Quantizer's calibration of `float_model`'s batch-1 form on `x_calib`: `Base.calibration`, run by the
    process `Workspace.prefetch` hands it to (the same statistics)."""
    return Base(float_model, x_calib, {}, lambda: None).calibration()


def timed(candidate_: RepairCandidate, started: float) -> RepairCandidate:
    """The candidate with the seconds since `started`."""
    return replace(candidate_, seconds=time.perf_counter() - started)
