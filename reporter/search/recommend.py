"""The recommendation: which layers to keep in float, chosen by measuring (the search) or by the
seed notebook's rule, then built and proved on the evaluation data.
"""

from __future__ import annotations

import contextlib
import dataclasses
import traceback
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Optional, Protocol, Union

import numpy as np

from reporter.convert.litert import LiteRtQuantizer
from reporter.convert.quantize import FiqQuantizer
from reporter.core import judgement, variants
from reporter.core.errors import one_line
from reporter.measure import evaluate
from reporter.measure.measurer import Measurer
from reporter.measure.task import Task, top_class
from reporter.model.data import Dataset, Inputs
from reporter.model.report import LayerStat, SearchResult, SearchStep, SelectionData, VariantResult
from reporter.search import engine as srch

Quantizer = Union[FiqQuantizer, LiteRtQuantizer]  # what the candidates are built with (`quantize(nodes, ops)`)


class TargetRule(Protocol):
    """The run's accuracy target as the findings hand it to the search (reporter.findings.decision.TargetRule, through
    reporter.pipeline.conclude.target_rule): whether a measured model meets it against float, and the acceptance on
    the search's selection samples with its words. The search measures; it never decides that itself."""

    def __call__(self, model: VariantResult, flt: Optional[VariantResult]) -> bool: ...

    def on_selection(self, classification: bool,
                     metric: Optional[tuple[str, float]] = None) -> tuple[srch.Acceptance, str]: ...

SELECTION_SEED = 0


# --- the seed rule ------------------------------------------------------------------------------
def mark_suspects(layers: list[LayerStat], threshold: float, first_layers: int) -> list[LayerStat]:
    """Marks layers whose rmse/scale exceeds `threshold`, and the first `first_layers` layers."""
    marked = []
    for layer in layers:
        reasons = []
        if layer.rmse_over_scale > threshold:
            reasons.append(f"rmse/scale {layer.rmse_over_scale:.3g} > {threshold:g}")
        if layer.index < first_layers:
            reasons.append(f"one of the first {first_layers} layers")
        marked.append(dataclasses.replace(layer, suspect=bool(reasons), reasons=reasons))
    return marked


def denylist(layers: list[LayerStat]) -> list[str]:
    """Tensor names of the suspect layers, in model order, without repeats."""
    return list(dict.fromkeys(layer.tensor_name for layer in layers if layer.suspect))


def in_model_order(nodes, layers: list[LayerStat]) -> list[str]:
    order = {layer.tensor_name: layer.index for layer in layers}
    return sorted(set(nodes), key=lambda n: (order.get(n, len(order)), n))


def gap_recovered(float_v: VariantResult, fiq_v: VariantResult, selective_v: VariantResult) -> Optional[float]:
    """Share of the float-to-FIQ accuracy gap that the selective model wins back (1.0 = all of it).

    None when there is no gap to recover (FIQ is as good as float) or no accuracy to compare.
    """
    accs = [v.metrics.score if v and v.ok and v.metrics and v.metrics.score is not None else None
            for v in (float_v, fiq_v, selective_v)]
    if None in accs:
        return None
    sign = 1.0 if selective_v.metrics.higher_is_better else -1.0  # the main metric, oriented: higher is better
    f, q, s = (sign * a for a in accs)
    if f - q <= 0:
        return None
    return (s - q) / (f - q)


# --- selection data --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Selection:
    """The samples the search chooses on, and the float model's outputs on them."""

    x: Inputs  # the samples, every input by name
    info: SelectionData
    heldout: Optional[np.ndarray]  # indices of evaluation samples the search did not see
    float_out: Union[np.ndarray, dict, None] = None  # the one output, or (several outputs) every output by name
    chosen: Optional[np.ndarray] = None  # indices of the evaluation samples it holds (a part of them), else None


# What the search chooses on for the accuracy target (`stand_in`): the task's own agreement with float's predictions,
# the user's metric on labelled selection samples, or (a regression measured by its output error) the output's error
# in units of float's variance.
AGREEMENT, METRIC, VARIANCE = "agreement", "metric", "variance"
AGREEMENT_WORDS = "agreement with the float model's predictions"
VARIANCE_WORDS = "1 - output MSE / variance of the float model's output"


def stand_in(task: Task, heads: list, own_metric: bool, user_metric: bool) -> str:
    """What the search reads for the accuracy target, as the task reads its outputs: agreement with float's
    predictions as the task kind reads them (a class, a label set, a mask's positions: an output that counts classes,
    a kind with a main metric of its own (`own_metric`), or a class-score output among the `heads` the target holds
    for); else the user's metric (`user_metric`) on labelled selection samples; only without either, a regression's
    output error in units of float's variance (which large values, boxes say, dominate)."""
    if task.classification or own_metric or any(t.classification for _, t in heads):
        return AGREEMENT
    return METRIC if user_metric else VARIANCE


def selection(data: Dataset, calibration_samples: int, max_samples: int,
              classification: Optional[bool] = None, score: Optional[str] = None,
              labelled: bool = False) -> Selection:
    """Unlabelled x_calib samples when there are any (after those used to calibrate, if enough
    remain); otherwise, or when the search reads the user's metric (`labelled`: it needs the evaluation data's labels
    and meta arrays), a seeded half of the evaluation data, the other half held out. `score` says what the search
    reads there (default: agreement for a classification, else the output error)."""
    pool = data.x_pool
    if classification is None:
        classification = data.labels_are_classes
    score = score or (AGREEMENT_WORDS if classification else VARIANCE_WORDS)
    if pool is not None and len(pool) and not labelled:
        fresh = pool[calibration_samples:]
        overlaps = len(fresh) < min(max_samples, 100)  # too few beyond calibration: the whole pool, said so
        x = (pool if overlaps else fresh)[:max_samples]
        return Selection(x, SelectionData("x_calib", int(len(x)), score, False, overlaps_calibration=overlaps,
                                          detectable=judgement.detectable_share(len(x)) if classification else None), None)
    rng = np.random.default_rng(SELECTION_SEED)
    order = rng.permutation(len(data.x))
    n = max(1, min(max_samples, len(data.x) // 2))
    chosen, heldout = np.sort(order[:n]), np.sort(order[n:])
    info = SelectionData("x", int(n), score, True, heldout_num=int(len(heldout)),
                         detectable=judgement.detectable_share(n) if classification else None)
    return Selection(data.x[chosen], info, heldout, chosen=chosen)


GROWN_MAX_FACTOR = 10  # grown selection data: at most this many times --selection-samples (each candidate reads them)


def grown(data: Dataset, sel: Selection, calibration_samples: int, max_samples: int,
          to_win: float) -> Optional[Selection]:
    """Selection data sized to the question: when the gap the search must close on the selection samples (`to_win`:
    the target's agreement with float minus FIQ's) is near what they can detect (judgement.selection_too_small),
    every x_calib sample beyond the calibration samples, up to GROWN_MAX_FACTOR times `max_samples`. Never an
    evaluation sample, and no calibration sample either (FIQ was calibrated on them: a layer judged there may look
    better than it is; `selection` takes them only when too few others remain). None when there are no more such
    samples than `sel` holds, or no need (or `sel` is not a classification's agreement, or is a held-out part of the
    evaluation data)."""
    pool, info = data.x_pool, sel.info
    if pool is None or info.overlaps_evaluation or info.overlaps_calibration or info.detectable is None:
        return None
    fresh = pool[calibration_samples:]
    n = min(len(fresh), GROWN_MAX_FACTOR * max_samples)
    if n <= len(sel.x) or not judgement.selection_too_small(to_win, len(sel.x)):
        return None
    info = dataclasses.replace(info, num_samples=int(n), detectable=judgement.detectable_share(n),
                               grown_from=int(len(sel.x)))
    return Selection(fresh[:n], info, None)


def scorer(float_out: np.ndarray, classification: bool,
           agreement: Optional[Callable] = None) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """Selection score of a candidate's outputs and each sample's figure, both higher is better: agreement with float
    (`agreement(out, float_out)`: each sample's, as its task kind reads it (Task.agreement): the same class, label
    set, share of positions, a detector's matched detections; default the same top class), or 1 - MSE / variance
    with each sample's squared error negated."""
    if classification:
        agreement = agreement or (lambda out, ref: top_class(out) == top_class(ref))

        def score(out):
            agree = agreement(out, float_out)
            return float(agree.mean()), agree
        return score
    var = _variance(float_out)

    def score_reg(out):
        err = np.mean((out.astype(np.float64) - float_out) ** 2, axis=1)
        return float(1.0 - err.mean() / var), -err  # per sample higher is better, as the score
    return score_reg


class MetricFailed(RuntimeError):
    """The user's metric raised on the search's selection samples (one line): the search reads the output error."""


class MetricScorer:
    """The user's metric as the search's selection score, on labelled selection samples (`part`: the metric on those
    samples, reporter.measure.scoring.UserScore.subset), relative to float's value there: 1 - (float's - the
    candidate's) / |float's| (judgement.metric_scale), oriented so that higher is better, 1 as good as float. Each
    sample's figure is the metric's value per sample, or for a metric that returns a number its value on each block
    of the samples (batch means), oriented the same way: one call on the samples (and one per block) per candidate,
    never one per resample. `names` maps signature keys to output names for a model with several outputs."""

    def __init__(self, part, float_out, names: Optional[dict] = None):
        self.part, self.names = part, dict(names or {})
        self.reference = self._measured(float_out).value

    def _measured(self, out):
        try:
            return self.part.measure(self.given(out))
        except Exception as exc:  # noqa: BLE001 - the user's function may raise anything
            raise MetricFailed(one_line(exc)) from exc

    def given(self, out):
        """The outputs as the metric takes them: the one output, or every output by its name."""
        return {self.names[k]: v for k, v in out.items() if k in self.names} if self.names else out

    def __call__(self, out) -> tuple[float, np.ndarray]:
        scored = self._measured(out)
        sign = 1.0 if self.part.higher_is_better else -1.0
        value = 1.0 - sign * (self.reference - scored.value) / judgement.metric_scale(self.reference)
        per = scored.per_sample if scored.per_sample is not None else scored.boot
        per = np.asarray(per, np.float64) if per is not None and np.size(per) else np.full(1, scored.value)
        return float(value), sign * per


def heads_scorer(float_outs: dict, heads: list) -> Callable[[dict], tuple[float, np.ndarray]]:
    """Several outputs: a sample agrees with float when every class-score output in `heads` predicts float's
    class (the target must hold for each). Without such an output the target must hold for every output too:
    the score is the worst output's 1 - MSE / variance, and a sample's error the sum of its errors over the
    outputs, each in units of its output's variance (so that no output's scale outweighs another's), negated as
    `scorer`'s (higher is better)."""
    classifying = [(key, task) for key, task in heads if task.classification]
    if not classifying:
        scores = [(key, scorer(float_outs[key], False)) for key, _ in heads]

        def worst(outs):
            measured = [one(outs[key]) for key, one in scores]
            value = min(v for v, _ in measured)
            per_sample = np.sum([err / _variance(float_outs[key]) for (key, _), (_, err) in zip(scores, measured)],
                                axis=0)
            return float(value), per_sample
        return worst
    refs = {key: task.classes(float_outs[key]) for key, task in classifying}

    def score(outs):
        agree = np.logical_and.reduce([_per_sample(task.classes(outs[key]) == refs[key]) for key, task in classifying])
        return float(agree.mean()), agree
    return score


def _variance(float_out: np.ndarray) -> float:
    """The float output's variance, the unit of a regression output's selection error (1 when it is constant)."""
    return float(np.var(float_out)) or 1.0


def _per_sample(agree: np.ndarray) -> np.ndarray:
    """A sample agrees with float when every one of its positions does (dense outputs), else as it is."""
    return agree.all(axis=1) if agree.ndim > 1 else agree


# --- the search, wired to real models ---------------------------------------------------------------
def search_layers(layers: list[LayerStat], flow: list[tuple[list[str], list[str]]]) -> list[srch.Layer]:
    """The debugger's layers with their producers and consumers from the model's dataflow."""
    names = {layer.tensor_name for layer in layers}
    inputs: dict[str, list[str]] = {n: [] for n in names}
    consumers: dict[str, list[str]] = {n: [] for n in names}
    for ins, outs in flow:
        out = next((o for o in outs if o in names), None)
        if out is None:
            continue
        for i in ins:
            if i in names and i != out:
                inputs[out].append(i)
                consumers[i].append(out)
    return [
        srch.Layer(layer.tensor_name, layer.op_name, layer.rmse_over_scale, layer.propagated_rmse_over_scale,
                   layer.range, tuple(dict.fromkeys(inputs[layer.tensor_name])),
                   tuple(dict.fromkeys(consumers[layer.tensor_name])))
        for layer in layers
    ]


BUILT_CACHE_BYTES = 256 * 2**20  # candidate models kept for reuse (a big model is rebuilt instead)


@dataclass(frozen=True)
class Scoring:
    """How the candidates are scored on the selection samples: what the (one) output means (`task`); for a model with
    several outputs, the (signature output name, Task) of each output the target must hold for (`heads`) and the
    output the evaluation data's accuracy is read from (`primary_key`); the user's metric on the selection samples
    (`sel.chosen`) when the search chooses on it (`metric`, a MetricScorer's part; `names`, signature key -> output
    name, for several outputs); else the task's agreement with float's predictions (`agreement`; None: for a
    classification) or the output error against float's variance."""

    task: Task
    heads: tuple = ()
    primary_key: str = ""
    metric: object = None
    names: tuple = ()  # (signature key, output name) pairs
    agreement: Optional[bool] = None
    stand: str = ""  # what the search reads for the accuracy target (`stand_in`: AGREEMENT, METRIC or VARIANCE)


class Candidates:
    """Builds candidate models from one calibration and measures them on the selection data."""

    def __init__(self, quantizer: Quantizer, ops: list[str], sel: Selection, scoring: Scoring):
        """`sel.float_out`: float's outputs on the selection samples (by signature output name for several);
        `scoring`: how a candidate is scored there."""
        self.quantizer, self.ops, self.sel, self.scoring = quantizer, list(ops), sel, scoring
        self.task, self.heads, self.primary_key = scoring.task, list(scoring.heads), scoring.primary_key
        self.metric, self.names, self.agreement = scoring.metric, dict(scoring.names), scoring.agreement
        self.helper = None  # see `beside`
        if self.metric is not None:
            self.score = MetricScorer(self.metric, sel.float_out, self.names)
        elif self.heads:
            self.score = heads_scorer(sel.float_out, self.heads)
        else:
            agree = self.task.classification if self.agreement is None else self.agreement
            self.score = scorer(sel.float_out, agree, self.task.agreement)
        self._built: dict[frozenset, bytes] = {}
        self._scored: dict[frozenset, srch.Evaluation] = {}
        self._ahead: dict[frozenset, Future] = {}  # builds started in `helper`

    def on(self, sel: Selection) -> "Candidates":
        """The same candidates scored on other selection samples (`sel.float_out` float's outputs on them): the
        models already built are not built again."""
        other = Candidates(self.quantizer, self.ops, sel, self.scoring).beside(self.helper)
        other._built, other._ahead = self._built, self._ahead
        return other

    def beside(self, helper) -> "Candidates":
        """These candidates, with `helper` building the next ones ahead: another process with TensorFlow whose
        `call(fn, *args)` gives a Future (the run's side converter, else its contained child; None: every build here).
        Returns them."""
        self.helper = helper
        return self

    def ahead(self, node_sets) -> None:
        """The next candidates the search measures, in its order: the helper builds them from the last while this
        process builds from the first, and each is built once, by whichever reaches it first (a build holds
        Python's lock, so a thread would not help; the bytes are the same either way)."""
        if self.helper is None:
            return
        for nodes in reversed(list(node_sets)[1:]):
            key = frozenset(nodes)
            if key in self._built or key in self._ahead or key in self._scored:
                continue
            try:
                job = self.quantizer.portable(sorted(key), self.ops) if hasattr(self.quantizer, "portable") else None
            except Exception:  # noqa: BLE001 - a bad name is raised where the candidate is built here
                job = None
            if job is None:
                continue
            self._ahead[key] = self.helper.call(job[0], *job[1])

    def settle(self) -> None:
        """Drops the builds the helper has not started and waits for the one it is on: nothing is left running
        beside a latency being timed."""
        pending = list(self._ahead.values())
        self._ahead.clear()  # shared with the candidates `on` other samples
        for job in pending:
            job.cancel()
        for job in pending:
            if not job.cancelled():
                with contextlib.suppress(Exception):
                    job.result()

    def outputs(self, model: bytes, x):
        """The model's outputs the score reads: all of them by name (several outputs), or the one."""
        return evaluate.predict_all(model, x) if self.heads or self.names else evaluate.predict(model, x)

    def primary(self, model: bytes, x) -> np.ndarray:
        """The output the report's accuracy is about."""
        return evaluate.predict_all(model, x)[self.primary_key] if self.primary_key else evaluate.predict(model, x)

    def build(self, nodes) -> bytes:
        """The model with `nodes` kept in float, built once: the search, its steps on the evaluation
        data and the recommended model all use the same bytes (a MobileNetV2 candidate takes ~60 ms)."""
        key = frozenset(nodes)
        if key in self._built:
            return self._built[key]
        model, job = None, self._ahead.pop(key, None)
        if job is not None and not job.cancel():  # started in the helper: its bytes
            try:
                model = bytes(job.result())
            except Exception:  # noqa: BLE001 - the helper failed: built here (its traceback is in run.log)
                traceback.print_exc()
        if model is None:
            model = self.quantizer.quantize(sorted(key), self.ops)
        if sum(map(len, self._built.values())) + len(model) <= BUILT_CACHE_BYTES:  # memory stays bounded
            self._built[key] = model
        return model

    def __call__(self, nodes: frozenset) -> srch.Evaluation:
        key = frozenset(nodes)
        if key not in self._scored:  # once each: FIQ is scored to size the selection data, then by the search
            model = self.build(key)
            value, per_sample = self.score(self.outputs(model, self.sel.x))
            self._scored[key] = srch.Evaluation(key, value, per_sample, len(model))
        return self._scored[key]


def steps_on_evaluation(trace: srch.Trace, candidates: Candidates, layers: list[LayerStat],
                        m: Measurer) -> list[SearchStep]:
    """Every step of the search with its size (and, on the Pareto front, its latency, timed a tenth as often as a
    variant's); the candidates are scored on the selection samples only (the search's own score), and the
    chosen one on `m`'s evaluation data as well: the main metric (accuracy, mean IoU or the user's metric of
    the outputs), or without one the output MSE against float. An evaluation set of 50,000 images is read
    once per model the report shows, not once per candidate."""
    data, float_eval_out = m.data, m.outputs[variants.FLOAT]
    latency_runs = max(3, m.latency_runs // 10) if m.latency_runs else 0
    score = _step_score(m) if m.score is not None else None
    chosen = trace.chosen.nodes if trace.chosen is not None else None
    # The Pareto front over size and selection score, known before anything is timed: only the front's
    # candidates (and the pick) are timed, the ones the trade-off keeps everywhere (the PDF shows no other).
    front = {step.evaluation.nodes for step, flag in zip(trace.steps, srch.pareto(
        [(st.evaluation.size_bytes, st.evaluation.score) for st in trace.steps])) if flag}
    cache: dict[frozenset, tuple] = {}
    rows = []
    for step in trace.steps:
        nodes = step.evaluation.nodes
        if nodes not in cache:
            model = candidates.build(nodes)
            acc = mse = None
            if nodes == chosen:
                out = candidates.primary(model, data.x)
                acc = score(model, out) if score is not None else None
                mse = None if score is not None else float(np.mean((out.astype(np.float64) - float_eval_out) ** 2))
            timed = nodes in front or nodes == chosen
            latency = _step_latency(model, data.x[:1], latency_runs) if timed else None
            cache[nodes] = (acc, mse, latency)
        acc, mse, latency = cache[nodes]
        rows.append(SearchStep(
            denylisted_nodes=in_model_order(nodes, layers), size_bytes=step.evaluation.size_bytes,
            selection_score=step.evaluation.score, phase=step.phase, change=step.change,
            accepted=step.accepted, accuracy=acc, output_mse=mse, latency_ms=latency,
            chosen=chosen is not None and nodes == chosen, pareto=nodes in front,
            score_share=bool(getattr(m.score, "share", True)),
        ))
    return rows


def _step_score(m: Measurer) -> Callable[[bytes, np.ndarray], float]:
    """The main metric of a candidate on the evaluation data, from its primary output (or, for a user's metric
    on a model with several outputs, from all of them by name)."""
    from reporter.measure.scoring import UserScore

    def value(model: bytes, out) -> float:
        if isinstance(m.score, UserScore) and m.heads:
            outs = evaluate.predict_all(model, m.data.x)
            return m.score.value({h.name: outs[h.key] for h in m.heads})
        return m.score.value(out)
    return value


def _step_latency(model: bytes, sample, runs: int) -> Optional[float]:
    """A candidate's median latency; None when not timed (runs 0) or when timing fails (the step's size and
    accuracy stand; the traceback goes to run.log)."""
    if not runs:
        return None
    try:
        return evaluate.latency_ms(model, sample, runs=runs)[0]
    except Exception:  # noqa: BLE001 - a candidate's latency is a side column of the trade-off table
        import traceback

        traceback.print_exc()
        return None


def search_result(trace: srch.Trace, steps: list[SearchStep], sel: Selection, target_text: str,
                  budget: int, layers: list[LayerStat]) -> SearchResult:
    order = {layer.tensor_name: layer.index for layer in layers}
    return SearchResult(
        steps=steps,
        evaluations=trace.evaluations,
        seconds=round(trace.seconds, 3),
        seconds_per_candidate=round(trace.seconds / max(trace.evaluations, 1), 4),
        selection_data=sel.info,
        target=trace.target,
        target_text=target_text,
        target_met=trace.target_met,
        stop_reason=trace.stop_reason,
        budget=budget,
        necessity={n: trace.necessity[n] for n in sorted(trace.necessity, key=lambda n: order.get(n, 0))},
        spread=trace.spread,
        beyond=trace.beyond,
        cost=trace.cost,
        out_of_budget=trace.out_of_budget,
    )


def policy(rule: TargetRule, classification: bool, budget: int,
           metric: Optional[tuple[str, float]] = None) -> tuple[srch.Policy, str]:
    """The search's policy and its target's words: the acceptance the run's target rule (`rule`, the findings')
    gives on the selection samples, on agreement with float (`classification`), the output error, or the user's
    metric relative to float's there (`metric`: its name and float's value there)."""
    accept, text = rule.on_selection(classification, metric)
    return srch.Policy(accept=accept, budget=budget), text


def on_evaluation(m: Measurer, scoring: Scoring, start: srch.Evaluation, sel: Selection, accept: srch.Acceptance,
                  forced: frozenset) -> SelectionData:
    """`sel.info` with FIQ's selection score on the evaluation data, read from the outputs the run stored (no model
    run again), and whether the two data sets show it differently beyond noise (judgement.samples_differ, two
    independent samples): only distinct selection samples (x_calib) can differ from the evaluation data, and only a
    measured difference, never a guess, says that they do."""
    info, stand, heads = sel.info, scoring.stand, list(scoring.heads)
    if info.overlaps_evaluation or forced or stand == METRIC or variants.FIQ not in m.outputs \
            or variants.FLOAT not in m.outputs:
        return info
    if heads:
        by_key = {h.key: h.name for h in m.heads}
        flt = {key: m.head_outputs[variants.FLOAT][by_key[key]] for key, _ in heads}
        fiq = {key: m.head_outputs[variants.FIQ][by_key[key]] for key, _ in heads}
        value, per_sample = heads_scorer(flt, heads)(fiq)
    else:
        value, per_sample = scorer(m.outputs[variants.FLOAT], stand == AGREEMENT, scoring.task.agreement)(
            m.outputs[variants.FIQ])
    differs = value < start.score and not accept.reached(value) \
        and judgement.samples_differ(start.per_sample, per_sample)
    return dataclasses.replace(info, fiq_on_evaluation=float(value), differs=bool(differs))
