"""Two runs compared: what a change did to each model and variant (`quant-report diff BASE NEW`), decided.

BASE and NEW are report.json files, report folders, batch output folders (their index.json), or folders
whose sub-folders are report folders (a `run` or `demo` --out folder: reporter.findings.diff_sides reads each
side), matched by model name. Beside the
measurements, each model's decision is compared: the model to ship, its target, the decision's verdict and the
run's gate, as each report.json's findings hold them (`ModelDiff.decision`).

Accuracy changes are tested on the same samples with McNemar (each report stores which samples every
variant gets right, and a fingerprint of the evaluation data); where the samples differ or an older report
did not store them, the report says so and tests nothing. Two runs measured on different
data, or of different tasks or main metrics, are shown side by side, each number under its own run's metric
name, and never gated (`ModelDiff.incomparable` says why): a gate the user asked for that cannot be applied
so is `Diff.gate_not_applied`, a failure of its own (the CLI's exit 2), never a silent pass. What counts as a change is
reporter.core.judgement's; variant names are reporter.core.variants'. Pure: no TensorFlow.

The records hold the decisions only: numbers, flags, short codes and names. Their sentence fields
(`Change.text`, `VariantDiff.why`, `ModelDiff.samples_note`, `gap`, `headline`, `error` and `gate_note`,
`GateFailure.message`, `DecisionChange.lines`) stay empty here: reporter.render.words.diff writes them from the
fields marked `unstored` (reporter.core.records: what the words read, which diff.json does not keep), so that
diff.json reads as it always did.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from reporter.core import judgement as jd
from reporter.core import statistics
from reporter.core import variants
from reporter.core.records import as_stored, unstored
from reporter.core.variants import short
from reporter.measure.metrics import unpack_correct
from reporter.model.report import Report, VariantResult
from reporter.findings import decision as choice
from reporter.findings.basis import metric_of
from reporter.findings.diff_sides import DiffError, load_side  # noqa: F401  (the CLI reads both from here)
from reporter.findings.gate import Loss, failing

DIFF_SCHEMA_VERSION = 1


# --- the records -------------------------------------------------------------------------------------
# What a Change measures (`Change.kind`), which says how its numbers read.
POINTS = "points"  # accuracy (a share of samples right), in points, McNemar-tested on the same samples
SCORE = "score"  # a main metric other than accuracy, untested: its per-sample values are not stored
OTHER_METRICS = "other_metrics"  # a variant measured by another main metric in each run: not compared
OTHER_RUN_METRICS = "other_run_metrics"  # the runs judged by different metrics: each score under its own name
VALUES = "values"  # the secondary metric (ROC AUC, top-5 accuracy, macro F1)
MSE = "mse"  # the output's mean squared error against float's (a model whose output is not class scores)
SIZE = "size"
LATENCY = "latency"

# Why a variant counts as changed (`VariantDiff.reasons`: a code and the output it concerns, "" for the
# variant's main numbers), in the order the words list them.
ADDED, REMOVED = "added", "removed"
FAILED_IN_BASE, FAILED_IN_NEW = "failed_in_base", "failed_in_new"
MEASURED_APART = "measured_apart"  # each run measured by its own metric (`Change.names`)
NOT_COMPARED = "not_compared"  # no difference computed (`Change.kind` says why)
ACCURACY_CHANGED = "accuracy_changed"  # beyond noise, or any change where untested
OUTPUT_ERROR_CHANGED = "output_error_changed"
SIZE_CHANGED = "size_changed"
LATENCY_CHANGED = "latency_changed"

# What of a model's decision changed (`DecisionChange.changed`), in the order the words list them.
SHIP_CHANGED = "ship"  # another model to ship (its variant, or what it keeps in float: its label)
TARGET_CHANGED = "target"  # the run's --target
VERDICT_CHANGED = "verdict"  # the decision's verdict (findings.decision.why: meets, float_cheaper, none_meets, ...)
GATE_CHANGED = "gate"  # the run's own gate (findings.gate): passed, failed, or not asked for

# Why BASE's numbers are no baseline for NEW's (`ModelDiff.incomparable`), so that no gate applies.
OTHER_DATA = "other_data"  # the data fingerprints differ
OTHER_SAMPLE_COUNT = "other_sample_count"  # an older report without a fingerprint: the sample counts differ
OTHER_TASK = "other_task"
OTHER_METRIC = "other_metric"


@dataclass(frozen=True)
class Change:
    """One quantity in BASE and NEW."""

    base: Optional[float]
    new: Optional[float]
    delta: Optional[float]
    p_value: Optional[float] = None  # McNemar on the same samples (accuracy only)
    significant: Optional[bool] = None  # None: not tested (other samples, or not stored)
    text: str = ""
    kind: str = unstored("")  # POINTS, SCORE, ...: how the numbers read
    share: bool = unstored(True)  # SCORE, OTHER_RUN_METRICS: NEW's metric is a share (percent, points)
    base_share: bool = unstored(True)  # OTHER_RUN_METRICS: BASE's metric is a share
    names: tuple[str, str] = unstored(("", ""))  # OTHER_METRICS, OTHER_RUN_METRICS: each run's metric name
    same_answers: bool = unstored(False)  # POINTS: right on exactly the same samples in both runs


@dataclass(frozen=True)
class VariantDiff:
    name: str
    label: str
    status: str  # "changed", "unchanged", "added", "removed", "failed" (in either run)
    accuracy: Optional[Change] = None
    main_metric: str = ""  # the secondary metric's name in BASE (ROC AUC, top-5 accuracy, macro F1)
    main: Optional[Change] = None
    output_mse: Optional[Change] = None  # a model whose output is not class scores
    size: Optional[Change] = None
    latency: Optional[Change] = None
    why: list[str] = field(default_factory=list)  # what changed, in words (`reasons` worded)
    error: str = ""
    heads: dict[str, Change] = field(default_factory=dict)  # several outputs: each labelled one's accuracy
    metric: str = ""  # what `accuracy` measures: "accuracy", "mean IoU", the user's metric ("" when not measured)
    new_main_metric: str = ""  # the secondary metric's name in NEW ("" when the same as BASE's)
    base_metric: str = ""  # what `accuracy` measures in BASE, when not the same as in NEW
    reasons: tuple[tuple[str, str], ...] = unstored(())  # what changed: (code, output), codes above


@dataclass(frozen=True)
class Task:
    """What a run's model does: its task, classes and outputs, as the diff compares them."""

    kind: str  # "binary" (one sigmoid unit), or the model's task
    num_classes: Optional[int] = None  # a classification or segmentation model's classes
    outputs: tuple[tuple[str, str], ...] = ()  # several outputs: (name, task)


@dataclass(frozen=True)
class Score:
    """A variant's main number in one run."""

    metric: str
    value: float
    share: bool = True


@dataclass(frozen=True)
class Shipped:
    """A run's decision as its report.json holds it: `findings.decision` (the model to ship for its --target, and
    why) and `findings.gate` (the run's own gate, when one was asked for)."""

    target: str
    variant: str  # the model to ship; "" when nothing for the target can ship
    label: str  # how the decision names it ("FIQ with 2 ops in float")
    why: str  # the verdict: reporter.model.findings MEETS, FLOAT_CHEAPER, NONE_MEETS, NO_CANDIDATE, FLOAT_DEGENERATE
    gate: Optional[bool] = None  # the run's gate passed; None: no gate was asked for


@dataclass(frozen=True)
class DecisionChange:
    """The decision of a model in BASE and NEW, and what of it changed."""

    base: Shipped
    new: Shipped
    changed: tuple[str, ...] = ()  # SHIP_CHANGED, TARGET_CHANGED, VERDICT_CHANGED, GATE_CHANGED; () when the same
    lines: list[str] = field(default_factory=list)  # each change in words ("Model to ship: A (cpu) → B (int8)")


@dataclass(frozen=True)
class Run:
    """What the words of a model's diff read from one run's report."""

    num_eval: int
    source: str
    task: Task
    metric: str  # the main metric's name (reporter.findings.basis.metric_of)
    gap: str  # the recommended model's gap status; "" without one
    float_layers: int  # layers the recommended model keeps in float
    variants: int  # variants in the report
    fiq: Optional[Score] = None  # FIQ's main number, when measured
    plain: bool = True  # the main metric is the share of samples right (Report.metric_plain): plain points
    shipped: Optional[Shipped] = None  # its decision; None: a report without one


@dataclass(frozen=True)
class PairContext:
    """What every variant of a model is compared on: the samples both runs measured, and each run's main metric."""

    same: Optional[bool]  # the same samples in both runs; None: cannot tell (`ModelDiff.same_samples`)
    num_eval: int  # BASE's samples evaluated: each variant's right answers are read for this many
    metrics: tuple[str, str] = ("", "")  # what each run's main numbers are (accuracy, mean IoU, ...)


@dataclass(frozen=True)
class ModelDiff:
    name: str
    status: str  # "compared", "added", "removed", "failed" (in either run)
    same_samples: Optional[bool] = None  # None: cannot tell (an older report stored no fingerprint)
    samples_note: str = ""
    variants: list[VariantDiff] = field(default_factory=list)
    float_layers_added: list[str] = field(default_factory=list)
    float_layers_removed: list[str] = field(default_factory=list)
    gap: str = ""  # FIQ's gap status with the searched layers kept in float, "recovered → open"
    headline: str = ""
    error: str = ""
    # Why BASE and NEW are not comparable (other data, task or main metric), so that no gate applies to this
    # model, in words: "" when they are (`incomparable` decides it).
    gate_note: str = ""
    decision: Optional[DecisionChange] = None  # the decision in BASE and NEW; None when a report has none
    base_run: Optional[Run] = unstored(None)  # None: not in BASE, or failed there
    new_run: Optional[Run] = unstored(None)
    base_error: Optional[str] = unstored(None)  # why the model failed in BASE
    new_error: Optional[str] = unstored(None)
    base_name: str = unstored("")  # the model's name in BASE, when two single reports name it differently
    incomparable: tuple[str, ...] = unstored(())  # OTHER_DATA, OTHER_SAMPLE_COUNT, OTHER_TASK, OTHER_METRIC

    @property
    def gated(self) -> bool:
        return self.status == "compared" and not self.incomparable

    @property
    def decision_changed(self) -> bool:
        """Another model to ship, target, verdict or gate verdict in NEW than in BASE."""
        return self.decision is not None and bool(self.decision.changed)

    @property
    def decision_lines(self) -> list[str]:
        """The decision's changes in words (`DecisionChange.lines`); [] when it did not change."""
        return self.decision.lines if self.decision is not None else []

    @property
    def any_change(self) -> bool:
        """Something changed: the decision, a variant, or the layers kept in float."""
        return bool(self.decision_changed or self.changed or self.float_layers_added or self.float_layers_removed)

    @property
    def changed(self) -> list[VariantDiff]:
        return [v for v in self.variants if v.status != "unchanged"]

    @property
    def unchanged(self) -> list[VariantDiff]:
        return [v for v in self.variants if v.status == "unchanged"]

    def variant(self, name: str) -> Optional[VariantDiff]:
        return next((v for v in self.variants if v.name == name), None)

    @property
    def fiq(self) -> Optional[VariantDiff]:
        return self.variant(variants.FIQ)

    @property
    def float_kept(self) -> Optional[VariantDiff]:
        """FIQ with the layers the search (or the rule) keeps in float: not necessarily the model to ship."""
        return self.variant(variants.SELECTIVE)


@dataclass(frozen=True)
class GateFailure:
    model: str
    variant: str
    base: float
    new: float
    drop: float
    message: str = ""
    output: str = unstored("")  # the labelled output that lost accuracy; "" for the main metric


@dataclass(frozen=True)
class Diff:
    schema_version: int
    base: str
    new: str
    models: list[ModelDiff]
    max_accuracy_drop: Optional[float] = None
    gate_failures: list[GateFailure] = field(default_factory=list)

    @property
    def gate_passed(self) -> Optional[bool]:
        return None if self.max_accuracy_drop is None else not self.gate_failures

    @property
    def compared(self) -> list[ModelDiff]:
        return [m for m in self.models if m.status == "compared"]

    @property
    def ungated(self) -> list[ModelDiff]:
        """Models compared without the gate: BASE and NEW measured different data, tasks or main metrics."""
        return [m for m in self.compared if m.incomparable]

    @property
    def gate_not_applied(self) -> list[ModelDiff]:
        """The models a requested gate (`max_accuracy_drop`) cannot be applied to: BASE's numbers are no
        baseline for NEW's (`ungated`); [] when no gate was asked for."""
        return [] if self.max_accuracy_drop is None else self.ungated

    def model(self, name: str) -> ModelDiff:
        return next(m for m in self.models if m.name == name)

    def to_json(self) -> str:
        """diff.json: every field but the `unstored` ones (the words, reporter.render.words.diff, fill the
        sentence fields first)."""
        return json.dumps(as_stored(self), indent=2, allow_nan=False) + "\n"


# --- comparing -----------------------------------------------------------------------------------------
def compare(base_path, new_path, max_accuracy_drop: Optional[float] = None) -> Diff:
    """BASE and NEW compared, decided; reporter.render.words.diff words it."""
    base, base_failed = load_side(base_path)
    new, new_failed = load_side(new_path)
    base_name = ""
    if _single(base_path) and _single(new_path) and len(base) == len(new) == 1 and set(base) != set(new):
        # Two single reports are compared whatever their names (a model renamed between runs).
        (base_name, report), = base.items()
        base = {next(iter(new)): report}
    names = list(dict.fromkeys([*base, *base_failed, *new, *new_failed]))
    models = [_model(name, base.get(name), new.get(name), base_failed.get(name), new_failed.get(name))
              for name in sorted(names)]
    if base_name:
        models = [dataclasses.replace(m, base_name=base_name) for m in models]
    failures = _gate_failures(models, max_accuracy_drop) if max_accuracy_drop is not None else []
    return Diff(DIFF_SCHEMA_VERSION, str(base_path), str(new_path), models, max_accuracy_drop, failures)


def _gate_failures(models: list[ModelDiff], limit: float) -> list[GateFailure]:
    """The gate against BASE (reporter.findings.gate.failing): every variant's main metric and each labelled
    output's accuracy, where both runs measured it, in the models BASE and NEW can be compared on."""
    out = []
    for m in models:
        if not m.gated:  # other data, task or main metric: BASE's numbers are no baseline for NEW's
            continue
        for v in m.variants:
            changes = {"": v.accuracy, **v.heads}
            losses = [Loss(v.name, -c.delta, c.p_value, output=output) for output, c in changes.items()
                      if c is not None and c.base is not None and c.new is not None and c.delta is not None]
            for loss in failing(losses, limit):
                a = changes[loss.output]
                out.append(GateFailure(m.name, v.name, a.base, a.new, loss.drop, output=loss.output))
    return out


def _single(path) -> bool:
    """A report.json or a report folder, not a batch nor a folder of report folders."""
    path = Path(path)
    if path.name == "index.json":
        return False
    return not path.is_dir() or (path / "report.json").is_file() and not (path / "index.json").is_file()


def _variants(report: Report) -> dict[str, VariantResult]:
    found = {v.name: v for v in report.variants}
    rec = report.recommendation
    if rec and rec.selective:
        found[variants.SELECTIVE] = rec.selective
    return found


def _same_samples(base: Report, new: Report) -> Optional[bool]:
    """Both runs evaluated the same samples; None when a report does not record which."""
    b, n = base.dataset, new.dataset
    return b.fingerprint == n.fingerprint if b.fingerprint and n.fingerprint else None


def _incomparable(base: Report, new: Report) -> tuple[str, ...]:
    """Why BASE's numbers are no baseline for NEW's (other data, task or main metric); () when they are
    comparable."""
    reasons = []
    b, n = base.dataset, new.dataset
    if b.fingerprint and n.fingerprint:
        if b.fingerprint != n.fingerprint:
            reasons.append(OTHER_DATA)
    elif b.num_eval != n.num_eval:  # an older report without a fingerprint: the sample counts still tell
        reasons.append(OTHER_SAMPLE_COUNT)
    if _task(base) != _task(new):
        reasons.append(OTHER_TASK)
    if metric_of(base)[0] != metric_of(new)[0]:
        reasons.append(OTHER_METRIC)
    return tuple(reasons)


def _task(report: Report) -> Task:
    """The task of a report's model, its outputs' too when it has several."""
    model = report.model
    kind = model.task_kind
    classes = model.num_classes if kind.class_count_compared and model.num_classes else None
    return Task(kind.name, classes, tuple((o.name, o.task) for o in model.outputs))


def _run(report: Report) -> Run:
    fiq = report.variant(variants.FIQ)
    score = Score(metric_name(fiq), fiq.metrics.score, fiq.metrics.share) \
        if fiq is not None and fiq.ok and fiq.metrics else None
    return Run(report.dataset.num_eval, report.dataset.source, _task(report), metric_of(report)[0], _gap(report),
               len(_kept(report)), len(report.variants), score, report.metric_plain(), _shipped(report))


def _shipped(report: Report) -> Optional[Shipped]:
    """The report's decision and gate verdict as its findings hold them; an older report whose findings the
    migration dropped has them decided again (reporter.findings.derive, as every reader of a report does)."""
    found = report.findings
    if found is not None:
        decision, passed = found.decision, (found.gate.passed if found.gate is not None else None)
    else:
        from reporter.findings import derive

        decided = derive.decide(report)
        decision, passed = decided.findings.decision, (decided.gate.passed if decided.gate is not None else None)
    if decision is None:
        return None
    return Shipped(decision.target, decision.variant, decision.label if decision.variant else "", decision.why,
                   passed)


def _decision(base: Optional[Shipped], new: Optional[Shipped]) -> Optional[DecisionChange]:
    """The decision in BASE and NEW, and what of it changed; None when a run has none."""
    if base is None or new is None:
        return None
    changed = []
    if (base.variant, base.label) != (new.variant, new.label):
        changed.append(SHIP_CHANGED)
    if base.target != new.target:
        changed.append(TARGET_CHANGED)
    if base.why != new.why:
        changed.append(VERDICT_CHANGED)
    if base.gate != new.gate:
        changed.append(GATE_CHANGED)
    return DecisionChange(base, new, tuple(changed))


def _model(name, base: Optional[Report], new: Optional[Report], base_error, new_error) -> ModelDiff:
    base_run, new_run = (_run(r) if r is not None else None for r in (base, new))
    if base is None and new is None or (base is None and base_error) or (new is None and new_error):
        return ModelDiff(name, "failed", base_error=base_error, new_error=new_error, base_run=base_run,
                         new_run=new_run)
    if base is None:
        return ModelDiff(name, "added", new_run=new_run)
    if new is None:
        return ModelDiff(name, "removed", base_run=base_run)
    bv, nv = _variants(base), _variants(new)
    order = [v for v in [*bv, *nv] if v in bv or v in nv]
    same = _same_samples(base, new)
    pair = PairContext(same, base.dataset.num_eval, (base_run.metric, new_run.metric))
    found = [_variant(v, bv.get(v), nv.get(v), pair, _label(base, new, v)) for v in dict.fromkeys(order)]
    b_layers, n_layers = _kept(base), _kept(new)
    return ModelDiff(name, "compared", same, variants=found,
                     float_layers_added=[n for n in n_layers if n not in b_layers],
                     float_layers_removed=[n for n in b_layers if n not in n_layers],
                     decision=_decision(base_run.shipped, new_run.shipped), base_run=base_run,
                     new_run=new_run, incomparable=_incomparable(base, new))


def _label(base: Report, new: Report, name: str) -> str:
    """How the diff names a variant: its short name; FIQ with layers kept in float as the decision names it (what
    it keeps, "FIQ with 2 ops in float", NEW's count when the runs keep different layers), never "Recommended":
    the model to ship is the decision's, `ModelDiff.decision`."""
    if name != variants.SELECTIVE:
        return short(name)
    found = new if new.recommendation and new.recommendation.selective else base
    return choice.label(found, name)


def _kept(report: Report) -> list[str]:
    rec = report.recommendation
    return list(rec.denylisted_nodes) if rec and rec.selective else []


def _gap(report: Report) -> str:
    rec = report.recommendation
    return rec.gap.status if rec and rec.gap else ""


def _variant(name: str, b: Optional[VariantResult], n: Optional[VariantResult], pair: PairContext,
             label: str = "") -> VariantDiff:
    """One variant in BASE and NEW, compared on `pair` (the samples, and what each run's main numbers are)."""
    same, num_eval, metrics = pair.same, pair.num_eval, pair.metrics
    label = label or short(name)
    if b is None:
        return VariantDiff(name, label, "added", reasons=((ADDED, ""),))
    if n is None:
        return VariantDiff(name, label, "removed", reasons=((REMOVED, ""),))
    if not b.ok or not n.ok:
        err = (b.error if not b.ok else n.error) or ""
        failed = FAILED_IN_BASE if not b.ok else FAILED_IN_NEW
        return VariantDiff(name, label, "failed", error=err, reasons=((failed, ""),))
    why = []
    accuracy = main = mse = None
    main_label = new_main_label = base_metric = ""
    if b.metrics and n.metrics:
        if metrics[0] != metrics[1]:  # each number under its own run's metric name; never one delta of two
            base_metric = metrics[0]
            accuracy = Change(b.metrics.score, n.metrics.score, None, kind=OTHER_RUN_METRICS, share=n.metrics.share,
                              base_share=b.metrics.share, names=metrics)
            why.append((MEASURED_APART, ""))
        else:
            accuracy = _accuracy_of(b.metrics, n.metrics, same, num_eval)
            if accuracy.delta is None:
                why.append((NOT_COMPARED, ""))
            elif jd.accuracy_differs(accuracy.significant, accuracy.delta):
                why.append((ACCURACY_CHANGED, ""))
        main_label, new_main_label, bm, nm = _main(b), _main(n), _main_value(b), _main_value(n)
        if bm is not None and nm is not None:
            main = Change(bm, nm, nm - bm if main_label == new_main_label else None, kind=VALUES)
    elif b.output_error and n.output_error:
        mse = Change(b.output_error.mse, n.output_error.mse, n.output_error.mse - b.output_error.mse, kind=MSE)
        if jd.output_error_changed(b.output_error.mse, n.output_error.mse):
            why.append((OUTPUT_ERROR_CHANGED, ""))
    size = None
    if b.size_bytes and n.size_bytes:
        size = Change(b.size_bytes, n.size_bytes, n.size_bytes - b.size_bytes, kind=SIZE)
        if n.size_bytes != b.size_bytes:
            why.append((SIZE_CHANGED, ""))
    latency = None
    if b.latency_ms and n.latency_ms and b.latency_ms.median > 0:
        latency = Change(b.latency_ms.median, n.latency_ms.median, n.latency_ms.median - b.latency_ms.median,
                         kind=LATENCY)
        if jd.latency_changed(b.latency_ms.median, n.latency_ms.median):
            why.append((LATENCY_CHANGED, ""))
    heads = {}
    for output, bh in b.heads.items():  # several outputs: each labelled one, on the same samples
        nh = n.heads.get(output)
        if bh.metrics is not None and nh is not None and nh.metrics is not None:
            heads[output] = _accuracy_of(bh.metrics, nh.metrics, same, num_eval)
            if heads[output].delta is None:
                why.append((NOT_COMPARED, output))
            elif jd.accuracy_differs(heads[output].significant, heads[output].delta):
                why.append((ACCURACY_CHANGED, output))
    return VariantDiff(name, label, "changed" if why else "unchanged", accuracy, main_label, main, mse, size,
                       latency, heads=heads, metric=metric_name(n) if n.metrics else "",
                       new_main_metric=new_main_label if new_main_label != main_label else "",
                       base_metric=base_metric, reasons=tuple(why))


def _accuracy_of(b_metrics, n_metrics, same: Optional[bool], num_eval: int) -> Change:
    """Accuracy in BASE and NEW, with McNemar when both runs measured the same samples."""
    b, n = b_metrics, n_metrics
    if b.main is not None or n.main is not None:
        return _main_change(b, n)
    ba, na = b.accuracy, n.accuracy
    if ba is None or na is None:  # not measured in one run: nothing to compare or gate
        return Change(ba, na, None, kind=POINTS)
    delta = na - ba
    if same:
        b_ok, n_ok = _correct(b.correct_bits, num_eval), _correct(n.correct_bits, num_eval)
        if b_ok is not None and n_ok is not None:
            p = statistics.mcnemar_p(b_ok, n_ok)
            if not (b_ok != n_ok).any():
                return Change(ba, na, delta, p, False, kind=POINTS, same_answers=True)
            return Change(ba, na, delta, p, jd.significant(p), kind=POINTS)
    return Change(ba, na, delta, kind=POINTS)


def _correct(bits: str, num_eval: int):
    """Which samples a variant got right, or None when not stored or not readable (not base64)."""
    try:
        return unpack_correct(bits, num_eval)
    except ValueError:  # binascii.Error: a damaged report; the change is shown untested
        return None


def _main_change(b, n) -> Change:
    """A main metric other than accuracy (mean IoU, the user's metric) in BASE and NEW: its per-sample values
    are not stored, so the change is shown untested (any change counts); `delta` is positive when better."""
    if b.main is None or n.main is None or b.main.name != n.main.name:
        names = tuple(m.main.name if m.main else "accuracy" for m in (b, n))
        return Change(b.score, n.score, None, kind=OTHER_METRICS, names=names)
    raw = n.main.value - b.main.value
    delta = raw if n.main.higher_is_better else -raw
    return Change(b.main.value, n.main.value, delta, None, None if jd.nonzero(raw) else False, kind=SCORE,
                  share=n.main.share)


def metric_name(v: VariantResult) -> str:
    """What a variant's main numbers are: "accuracy", or the main metric's name."""
    return v.metrics.main.name if v.metrics is not None and v.metrics.main is not None else "accuracy"


def _main(v: VariantResult) -> str:
    m = v.metrics
    return "ROC AUC" if m.roc_auc is not None else "Top-5 accuracy" if m.top5_accuracy is not None else "F1 (macro)"


def _main_value(v: VariantResult) -> Optional[float]:
    m = v.metrics
    return m.roc_auc if m.roc_auc is not None else m.top5_accuracy if m.top5_accuracy is not None else m.f1
