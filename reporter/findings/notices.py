"""The notices, decided: which warnings and hints a measured report calls for, each with what its sentence
names (reporter.render.words.notices words them into `Notice`s, by code). Pure: no TensorFlow, no words.

Warnings say what makes a number less trustworthy (overlapping data, a failed measurement, non-finite
outputs, a stateful model); hints say how the report measured (the task, the metric, the outputs) and what
the rmse/scale rule missed or flagged needlessly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from reporter.core import judgement as jd
from reporter.core import variants
from reporter.findings.basis import columns
from reporter.model.findings import GapFinding
from reporter.model.shared_scale import SPLIT_RUNG

if TYPE_CHECKING:  # pragma: no cover
    from reporter.model.report import LayerStat, Report, VariantResult


@dataclass(frozen=True)
class Fact:
    """One notice, decided: its code (`Notice.code`, stable for tools) and what its sentence names beyond the
    report's own fields."""

    code: str
    subject: str = ""  # the variant (variant_failed, measurement_failed) or output (unlabelled_output) it is about
    detail: str = ""  # the measurement that failed (measurement_failed); the output that clips (output_clipped)
    layer: Optional["LayerStat"] = None  # the worst flagged layer (rule_false_alarm), the widest (wide_range)
    count: Optional[int] = None  # layers flagged (rule_false_alarm)
    items: tuple = ()  # the classes missing (classes_missing); the variants with non-finite outputs
    output: str = ""  # the output its sentence names (output_clipped, primary_output, unlabelled_output)
    figure: Optional["OutputFigure"] = None  # output_clipped: the subject variant on that output
    fix: Optional["OutputFigure"] = None  # output_clipped: the output's own fix (FIQ with its output op in float)
    fix_state: str = ""  # output_clipped: FIX_MEASURED, FIX_FAILED (`fix_error`), FIX_UNMEASURED or FIX_NONE
    fix_error: str = ""


# What a clipping output's own fix came to (`Fact.fix_state`).
FIX_MEASURED = "measured"  # built and measured on that output (`Fact.fix`, against `Fact.figure`)
FIX_FAILED = "failed"  # not built: `Fact.fix_error`
FIX_UNMEASURED = "unmeasured"  # built, but its quality on that output was not measured
FIX_NONE = "none"  # this run built none for the subject variant


@dataclass(frozen=True)
class OutputFigure:
    """What one model measured on one output, as a sentence about that output quotes it: never another
    output's figures (a model with several outputs: `VariantResult.heads[output]`; the primary output: the
    variant's own main metric, which is that output's)."""

    score: Optional[float] = None  # its main metric (accuracy, mean IoU, the user's metric), where it has one
    share: bool = True  # `score` is a share (0..1)
    mse: Optional[float] = None  # else its error against float's same output
    variance: Optional[float] = None  # float's variance of that output (the MSE's scale)
    agreement: Optional[float] = None  # else (an unlabelled class-score output) the share of float's classes kept

    @property
    def measured(self) -> bool:
        return self.score is not None or self.mse is not None or self.agreement is not None


def output_figure(report: "Report", v: "VariantResult", output: str) -> Optional[OutputFigure]:
    """Variant `v`'s own figures on output `output` (a name of `v.clipped_outputs`, `report.model.outputs`), or
    None when it measured nothing there."""
    outputs = report.model.outputs or []
    primary = next((o.name for o in outputs if o.primary), outputs[0].name if outputs else None)
    head = v.heads.get(output) if v.heads else None
    if head is None and v.heads and output != primary:
        return None
    if head is None or output == primary:  # one output, or the primary: the variant's own figures are its
        if v.metrics is not None and v.metrics.score is not None:
            return OutputFigure(score=v.metrics.score, share=v.metrics.share)
        if v.output_error is not None:
            return OutputFigure(mse=v.output_error.mse, variance=v.output_error.float_variance)
        if head is None:
            return None
    if head.metrics is not None and head.metrics.score is not None:
        return OutputFigure(score=head.metrics.score, share=head.metrics.share)
    if head.output_error is not None:
        return OutputFigure(mse=head.output_error.mse, variance=head.output_error.float_variance)
    if head.agreement_with_float is not None:
        return OutputFigure(agreement=head.agreement_with_float)
    return None


def clipped(report: "Report", v: "VariantResult", output: str) -> Fact:
    """The warning that `v`'s integer output `output` clips, with that output's own figures: `v`'s, and those
    of the output's own fix where one was built for `v` (FIQ only), so that the words compare like with like."""
    figure = output_figure(report, v, output)
    fix = report.variant(variants.OUTPUT_FLOAT)
    base = dict(subject=v.name, detail=output, output=output, figure=figure)
    if v.name != variants.FIQ or fix is None:
        return Fact("output_clipped", **base, fix_state=FIX_NONE)
    if not fix.ok:
        return Fact("output_clipped", **base, fix_state=FIX_FAILED, fix_error=fix.error or "")
    mine = output_figure(report, fix, output)
    comparable = mine is not None and figure is not None and mine.measured and figure.measured and (
        (mine.score is None) == (figure.score is None))
    if not comparable:
        return Fact("output_clipped", **base, fix=mine, fix_state=FIX_UNMEASURED)
    return Fact("output_clipped", **base, fix=mine, fix_state=FIX_MEASURED)


def shared_scales(report: "Report", cols: list) -> list[Fact]:
    """One warning per output whose parts of different ranges share one integer scale that rounds them away
    (judgement.shared_scale_notable): about FIQ where it has it, else the first model that does (`items`: the other
    models that share it), with that output's figures and those of the repair rung that quantizes the parts apart
    where the ladder built it (FIX_NONE where it did not)."""
    by_output: dict[str, list] = {}
    for v in cols:
        for output, s in (v.shared_scales.items() if v.ok else ()):
            if jd.shared_scale_notable(s.ratio, [p.zero_share for p in s.parts]):
                by_output.setdefault(output, []).append(v)
    facts = []
    for output, found in by_output.items():
        v = next((v for v in found if v.name == variants.FIQ), found[0])
        base = dict(subject=v.name, detail=output, output=output, figure=output_figure(report, v, output),
                    items=tuple(o.name for o in found if o is not v))
        rung = next((r for r in report.repairs if r.rung == SPLIT_RUNG), None)
        model = rung.model if rung is not None else None
        if rung is None or (model is None and not rung.error):
            facts.append(Fact("shared_scale", **base, fix_state=FIX_NONE))
        elif model is None or not model.ok:
            facts.append(Fact("shared_scale", **base, fix_state=FIX_FAILED,
                              fix_error=rung.error or (model.error if model is not None else "") or ""))
        else:
            mine = output_figure(report, model, output)
            own = base["figure"]
            comparable = mine is not None and own is not None and mine.measured and own.measured and (
                (mine.score is None) == (own.score is None))
            facts.append(Fact("shared_scale", **base, fix=mine,
                              fix_state=FIX_MEASURED if comparable else FIX_UNMEASURED))
    return facts


def nonfinite(report: "Report") -> list["VariantResult"]:
    """The measured models whose outputs were NaN or inf on some evaluation samples (the data are checked finite
    when read: the models made these values)."""
    return [v for v in columns(report) if v.ok and v.nonfinite_outputs]


def warnings(report: "Report") -> list[Fact]:
    """What makes the report's numbers less trustworthy than they look, in the order a reader should meet it."""
    out = []
    ds = report.dataset
    if ds.calibration_overlaps_eval:
        out.append(Fact("calibration_overlap"))
    asked = report.settings.calibration_samples
    if isinstance(asked, int) and asked > ds.num_calibration:
        out.append(Fact("calibration_short", count=asked))
    rec = report.recommendation
    sel = rec.search.selection_data if rec and rec.search else None
    if sel is not None and sel.overlaps_calibration:
        out.append(Fact("selection_overlap"))
    if report.model.stateful and report.layers:
        out.append(Fact("stateful"))
    k = report.model.num_classes
    flt = report.variant(variants.FLOAT)
    if k and flt is not None and flt.ok and flt.metrics and flt.metrics.classes_present is not None:
        present = set(flt.metrics.classes_present)  # once: k may be large
        missing = tuple(c for c in range(k) if c not in present)
        if missing:
            out.append(Fact("classes_missing", items=missing))
    cols = columns(report)
    out += [Fact("variant_failed", v.name) for v in cols if not v.ok]
    out += [Fact("measurement_failed", v.name, measurement)
            for v in cols if v.ok for measurement in v.measurement_errors]
    found = nonfinite(report)
    if found:
        out.append(Fact("nonfinite_outputs", items=tuple(v.name for v in found)))
    out += [clipped(report, v, output) for v in cols if v.ok for output in v.clipped_outputs
            if jd.clipping_notable(v.clipped_outputs[output].share)]
    out += shared_scales(report, cols)
    if report.debugger_error:
        out.append(Fact("debugger_failed"))
    if rec and rec.search and not rec.search.target_met and rec.selective is not None:
        out.append(Fact("target_not_met"))
    return out


def own_metric(report: "Report", main) -> bool:
    """The main metric is the task kind's own (its declared `main_metric`: mean IoU, micro-F1, mAP@0.5 ...), not the
    user's --metric: a user's metric that failed leaves the kind's own in its place."""
    return main.name == report.model.task_kind.main_metric


def hints(report: "Report", gap: GapFinding) -> list[Fact]:
    """How the report measured (task, labels, metric, latency), what the rmse/scale rule flagged needlessly or
    missed, and which output of several the main numbers read."""
    out = []
    model = report.model
    if model.twin_max_abs_difference is not None:
        out.append(Fact("keras_twin"))
    if model.input_changes:
        out.append(Fact("tflite_changed"))
    if model.fake_quant_pairs:
        base = tuple(name for name in (variants.BASE_FIQ, variants.BASE_FLOAT)
                     if (v := report.variant(name)) is not None and v.ok and v.metrics is not None)
        out.append(Fact("quantization_aware", count=model.fake_quant_pairs, items=base))
    if model.task_reason:
        out.append(Fact("task"))
    if model.label_note:
        out.append(Fact("labels_as_classes"))
    flt = report.variant(variants.FLOAT)
    main = flt.metrics.main if flt is not None and flt.metrics is not None else None
    spec = report.settings.metric
    if spec and main is not None and not own_metric(report, main):
        out.append(Fact("user_metric"))
    elif spec:
        out.append(Fact("user_metric_failed"))
    elif main is not None:
        out.append(Fact("bootstrap"))
    if report.settings.latency_runs == 0:
        out.append(Fact("latency_skipped"))
    timed = [v.latency_ms for v in report.variants if v.ok and v.latency_ms is not None]
    under = sum(jd.below_timing_floor(t.median, t.overhead) for t in timed)
    if under:  # said once: their latencies are shown, never compared (judgement.timing_spread)
        overhead = max(t.overhead for t in timed)
        out.append(Fact("latency_floor", count=under, items=(len(timed), jd.timing_floor(overhead), overhead)))
    rec = report.recommendation
    flagged = [layer for layer in report.layers if layer.suspect]
    if gap.status == "no_gap" and flagged:
        worst = max(flagged, key=lambda layer: layer.rmse_over_scale)
        out.append(Fact("rule_false_alarm", layer=worst, count=len(flagged)))
    if report.layers and rec is not None and rec.method != "search" and gap.status != "no_gap":  # the rule chose
        widest = max(report.layers, key=lambda layer: layer.range)
        ranges = sorted(layer.range for layer in report.layers)
        median = ranges[len(ranges) // 2]
        if not widest.suspect and widest.range >= jd.WIDE_RANGE_FACTOR * jd.positive_floor(median):
            out.append(Fact("wide_range", layer=widest))
    outputs = model.outputs
    if outputs:
        primary = next((o for o in outputs if o.primary), outputs[0])
        out.append(Fact("primary_output", primary.name, output=primary.name))
        out += [Fact("unlabelled_output", o.name, output=o.name) for o in outputs if not o.labelled]
    return out
