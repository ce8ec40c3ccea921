"""Findings: what the measured report means, decided (the records are reporter.model.findings).

`decide(report)` is a pure function of the measured report (no TensorFlow, no files, no sentences): the
verdict per variant with its significance, the gap and whether the fix closed it, the culprit layers and why,
the lighter schemes tried for them, degenerate outputs, every output of a model with several, the model to ship
for the target with the one comparison table (reporter.findings.decision), the notices
(reporter.findings.notices) and the gate (reporter.findings.gate). Thresholds and
noise rules come from reporter.core.judgement, variant names from reporter.core.variants.

The sentences that word these decisions are reporter.render.words' (`attach` there gives a report its
findings, decided and worded, as report.json keeps them): a record's sentence fields stay empty here (a
comparison's difference, the gap's reason and the cells of the per-output and trade-off tables included),
and what their words read beyond the stored numbers is in the records' `unstored` fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from reporter.core import judgement as jd
from reporter.core import statistics
from reporter.core import targets as tg
from reporter.core import variants
from reporter.core.variants import short
from reporter.findings import gate as gt
from reporter.findings import notices
from reporter.findings import rule as rl
from reporter.findings import decision as choice
from reporter.findings.basis import columns, compare, layer_of, measurable, metric_of
from reporter.model import findings as mf
from reporter.model.findings import (AlternativeFinding, BlameFinding, Culprit, Degenerate, Findings, FixFinding,
                                     GapFinding, HeadFinding, Reason, VariantFinding)

if TYPE_CHECKING:  # pragma: no cover
    from reporter.model.report import Metrics, Report, VariantResult


@dataclass(frozen=True)
class Decisions:
    """Everything `decide` found: the findings as report.json keeps them, each sentence still empty, and what
    their sentences need beyond them."""

    findings: Findings
    warnings: list[notices.Fact]
    hints: list[notices.Fact]
    gate: Optional[gt.Verdict] = None  # the run's gate (--max-accuracy-drop), when one was asked for


# --- deciding them --------------------------------------------------------------------------------------
def decide(report: "Report") -> Decisions:
    """The findings of a measured report, without their sentences. Pure: same report, same decisions."""
    task = report.model.task_kind.name
    decision = choice.decide(report)
    judged = {o.name: o for o in decision.options} if decision is not None else {}
    found = [_variant(report, v, judged) for v in columns(report)]
    gap = _gap(report, next((v for v in found if v.name == variants.FIQ), None), judged)
    fix = _fix(report, gap, found)
    heads = _heads(report)
    limit = report.settings.max_accuracy_drop
    verdict = None
    if limit is not None:
        gate = gt.Gate(limit, report.settings.gate_variant or variants.GATE_DEFAULT)
        verdict = gt.decide(found, heads, gate, primary_output(report)) if report.settings.gate_variant \
            or decision is None else gt.decide_target(decision, choice.vs_float(decision), limit)
    findings = Findings(task=task, headline=[], variants=found, gap=gap, culprits=_culprits(report, gap), fix=fix,
                        warnings=[], hints=[], alternatives=_alternatives(report), heads=heads,
                        tradeoff=choice.table(report, decision), decision=decision,
                        engines=choice.engines(report, decision))
    return Decisions(findings, notices.warnings(report), notices.hints(report, gap), verdict)


def primary_output(report: "Report") -> Optional[str]:
    """The output the main metric reads, for a model with several outputs (None for one output)."""
    return next((o.name for o in report.model.outputs if o.primary), None)


# --- several outputs -------------------------------------------------------------------------------
def _heads(report: "Report") -> list[HeadFinding]:
    """Every output of every measured variant: accuracy against its labels (paired with float's), or, without
    labels, agreement with float's class or the error against float's output."""
    if not report.model.outputs:
        return []
    cols = [v for v in columns(report) if v.ok]
    flt = report.variant(variants.FLOAT)
    out = []
    for o in report.model.outputs:
        ref = flt.heads.get(o.name) if flt is not None and flt.ok else None
        for v in cols:
            h = v.heads.get(o.name)
            if h is None:
                continue
            if h.metrics is not None:
                cmp = compare(h.metrics, ref.metrics, variants.FLOAT) \
                    if v.name != variants.FLOAT and ref and ref.metrics else None
                worse = bool(cmp and cmp.significant and cmp.delta < 0)
                main = h.metrics.main  # an output judged by its own main metric (micro-F1 of many labels)
                if main is not None:
                    out.append(HeadFinding(o.name, v.name, main.name, main.value, cmp, worse, low=main.low,
                                           high=main.high))
                    continue
                n = report.dataset.num_eval
                low, high = statistics.wilson_interval(round(h.metrics.accuracy * n), n, jd.CONFIDENCE)
                out.append(HeadFinding(o.name, v.name, "accuracy", h.metrics.accuracy, cmp, worse, low=low, high=high))
            elif h.agreement_with_float is not None:
                out.append(HeadFinding(o.name, v.name, "agreement with float", h.agreement_with_float))
            else:
                error = h.output_error
                out.append(HeadFinding(o.name, v.name, "output MSE", error.mse if error else None,
                                       variance=error.float_variance if error else None))
    return out


# --- the fix's lighter schemes ------------------------------------------------------------------------
def _alternatives(report: "Report") -> list[AlternativeFinding]:
    """Each lighter scheme tried for the recommended layers, judged against the recommended model: a
    lighter fix only when it is smaller and not worse beyond noise on the same samples."""
    rec = report.recommendation
    sel = rec.selective if rec else None
    if rec is None or sel is None or not sel.ok:
        return []
    out = []
    for alt in rec.alternatives:
        m = alt.model
        if not alt.applicable:
            out.append(AlternativeFinding(alt.scheme, "", "not_applicable"))
            continue
        if alt.error or m is None or not m.ok:
            out.append(AlternativeFinding(alt.scheme, getattr(m, "converter", ""), "failed"))
            continue
        size_delta = m.size_bytes - sel.size_bytes if m.size_bytes and sel.size_bytes else None
        cmp = compare(m.metrics, sel.metrics, variants.SELECTIVE) if m.metrics and sel.metrics else None
        if cmp is None:
            status = "not_lighter"
        elif jd.worse_beyond_noise(cmp.significant, cmp.delta):
            status = "worse"
        elif size_delta is not None and size_delta < 0 and cmp.p_value is not None:
            status = "lighter"
        else:
            status = "not_lighter"
        out.append(AlternativeFinding(alt.scheme, m.converter, status if alt.scheme != variants.FLOAT else "reference",
                                      m.metrics.score if m.metrics else None, cmp, size_delta))
    return out


def _main_metric(metrics: "Metrics", task: str = "") -> tuple[str, Optional[float]]:
    """The second metric beside the main one: pixel accuracy (dense), accuracy (a user's metric leads), else
    ROC AUC, top-5 accuracy or macro F1."""
    if metrics.main is not None:
        if metrics.accuracy is None:
            return "", None
        from reporter.core import tasks  # `task` as recorded (model.task): a binary sigmoid reads as a classifier
        return tasks.recorded(task, False, True).accuracy_label, metrics.accuracy
    if metrics.roc_auc is not None:
        return "ROC AUC", metrics.roc_auc
    if metrics.top5_accuracy is not None:
        return "Top-5 accuracy", metrics.top5_accuracy
    return "F1 (macro)", metrics.f1


def _degenerate(metrics: "Metrics", ref: Optional["Metrics"]) -> Optional[Degenerate]:
    """A quantized model that answers one class whatever its input (reporter.findings.decision.one_class: far more
    often than the labels hold it), where float does not."""
    label = choice.one_class(metrics)
    if label is None or (ref is not None and choice.one_class(ref) is not None):
        return None
    float_shares = choice.class_shares(ref)
    return Degenerate(label, choice.class_shares(metrics)[0][label], max(float_shares[0]) if float_shares else 0.0)


# --- each variant -----------------------------------------------------------------------------------
def _variant(report: "Report", v: "VariantResult", judged: dict[str, mf.Option]) -> VariantFinding:
    label = variants.QAT_SHORT.get(v.name, short(v.name)) if report.model.fake_quant_pairs else short(v.name)
    label = variants.BASE_SHORT.get(v.name, label)
    if not v.ok:
        return VariantFinding(v.name, label, False, error=v.error or "", direction="failed")
    ref = report.variant(variants.FLOAT)
    ref = ref if ref is not None and ref.ok else None
    fiq = report.variant(variants.FIQ)
    fiq = fiq if fiq is not None and fiq.ok else None
    size_ratio = v.size_bytes / ref.size_bytes if ref and ref.size_bytes and v.size_bytes else None
    lat = v.latency_ms.median if v.latency_ms else None
    ref_lat = ref.latency_ms.median if ref and ref.latency_ms else None
    lat_ratio = lat / ref_lat if lat and ref_lat else None
    slower = bool(lat_ratio and lat_ratio >= jd.LATENCY_NOTABLE_RATIO and v.name != variants.FLOAT
                  and jd.faster(ref_lat, choice.spread(ref.latency_ms), lat, choice.spread(v.latency_ms)))
    base = dict(size_bytes=v.size_bytes, size_ratio=size_ratio, latency_ms=lat, latency_ratio=lat_ratio,
                slower=slower, not_measured=dict(v.measurement_errors),
                latency_vs_float=choice.latency_step(v, ref) if v.name != variants.FLOAT else None,
                latency_vs_fiq=choice.latency_step(v, fiq) if v.name in (variants.SELECTIVE, variants.RULE) else None)
    if v.not_measured("metrics") or v.not_measured("output_error"):
        finding = dict(direction="not_measured")
    elif v.metrics is not None:
        m = v.metrics
        n = report.dataset.num_eval
        metric, share = metric_of(report)
        plain = report.metric_plain()
        if m.main is not None:
            low, high = m.main.low, m.main.high
        else:
            low, high = statistics.wilson_interval(round(m.accuracy * n), n, jd.CONFIDENCE)
        main, main_value = _main_metric(m, report.model.task) if m.accuracy is not None else ("", None)
        vs_float = compare(m, ref.metrics, variants.FLOAT) if ref and ref.metrics and v.name != variants.FLOAT \
            else None
        vs_fiq = compare(m, fiq.metrics, variants.FIQ) \
            if fiq and fiq.metrics and v.name in (variants.SELECTIVE, variants.RULE) else None
        degenerate = _degenerate(m, ref.metrics if ref else None) if v.name != variants.FLOAT else None
        if v.name == variants.FLOAT:
            direction = "reference"
        elif vs_float is None:
            direction = "not_measurable"
        elif not jd.accuracy_differs(vs_float.significant, vs_float.delta):
            direction = "same"
        else:
            direction = "worse" if vs_float.delta < 0 else "better"
        beyond = [i for i, c in enumerate(m.per_class) if c.p_vs_float is not None and jd.significant(c.p_vs_float)] \
            if v.name != variants.FLOAT else []
        finding = dict(direction=direction, accuracy=m.score, accuracy_low=low, accuracy_high=high,
                       main_metric=main, main_value=main_value, vs_float=vs_float, vs_fiq=vs_fiq,
                       labels_beyond_noise=beyond,
                       degenerate=degenerate, score_name="" if plain else metric, score_share=share)
    else:
        finding = dict(direction="reference" if v.name == variants.FLOAT else "not_measurable",
                       output_mse=v.output_error.mse if v.output_error else None,
                       output_variance=v.output_error.float_variance if v.output_error else None)
    blame = _blame(v, ref, judged) if finding.get("direction") == "worse" else None
    return VariantFinding(v.name, label, True, blame=blame, **base, **finding, **_what_it_quantized(report, v))


def drq_quantized_nothing(report: "Report", v: "VariantResult") -> bool:
    """DRQ came out as large as float with no int8 tensor: the converter quantized no weight."""
    ref = report.variant(variants.FLOAT)
    return v.name == variants.DRQ and ref is not None and ref.ok and v.size_bytes == ref.size_bytes \
        and not v.tensor_types.get("int8")


def quantized_little(v: "VariantResult") -> bool:
    """A quantized variant that stores none or almost none of its weights below float32 (judgement
    ALMOST_NOTHING_SHARE of the weight values)."""
    share = v.weights_share()
    return v.name != variants.FLOAT and share is not None and share < jd.ALMOST_NOTHING_SHARE


def _what_it_quantized(report: "Report", v: "VariantResult") -> dict:
    """What the variant stores below float32, decided once for its verdict."""
    read = bool(v.tensor_types) and not v.not_measured("ops")
    return dict(quantized=tg.quantized(v.tensor_types, v.weight_coverage) if read else None,
                drq_nothing=drq_quantized_nothing(report, v), quantized_little=quantized_little(v),
                weights_share=v.weights_share())


def _blame(v: "VariantResult", ref, judged: dict[str, mf.Option]) -> Optional[BlameFinding]:
    """The layer to blame for a variant that loses accuracy, and what keeping the blamed layers in float
    measured (a fix only when the fixed model meets the accuracy target, as the decision judged it)."""
    errors = v.layer_errors
    if errors is None or errors.culprit is None:
        return None
    row = next((e for e in errors.layers if e.tensor_name == errors.culprit), None)
    if row is None:
        return None
    found = dict(tensor=row.tensor_name, layer=layer_of(row.tensor_name), op=row.op_name, snr_db=row.snr_db,
                 snr_drop_db=row.snr_drop_db, weight_snr_db=row.weight_snr_db)
    fix = v.fix
    if fix is None:
        return BlameFinding(**found)
    if fix.error or fix.model is None or not fix.model.ok:
        return BlameFinding(**found, fix_status="failed", fix_layers=list(fix.layers))
    m = fix.model
    if m.metrics is None or ref is None or ref.metrics is None:
        return BlameFinding(**found, fix_status="open", fix_layers=list(fix.layers), fix_converter=m.converter)
    cmp = compare(m.metrics, ref.metrics, variants.FLOAT)
    judged_fix = judged.get(m.name)
    fixed = judged_fix is not None and judged_fix.meets
    return BlameFinding(**found, fix_status="fixed" if fixed else "open", fix_layers=list(fix.layers),
                        fix_accuracy=m.metrics.score, fix_vs_float=cmp, fix_converter=m.converter)


# --- the gap, its culprits and the fix -----------------------------------------------------------------
def _gap(report: "Report", fiq_found: Optional[VariantFinding], judged: dict[str, mf.Option]) -> GapFinding:
    """Whether FIQ meets the accuracy target (a gap when it does not), and once a recommended model was measured,
    whether it does (recovered) or not (open): read from the decision's judged options, the one rule on every
    labelled output. When the search measured the same (`recommendation.gap`: its status, drop and paired test),
    its figures are what the words say, with how they stand against the target (`GapFinding.standing`)."""
    rec = report.recommendation
    fiq = report.variant(variants.FIQ)
    if fiq is None or not fiq.ok:
        return GapFinding("not_measurable", "", why=mf.FIQ_NOT_BUILT if fiq is None else mf.FIQ_FAILED)
    if not measurable(report):
        return GapFinding("not_measurable", "", why=mf.NOT_CLASS_SCORES)
    flt = report.variant(variants.FLOAT)
    for v in (fiq, flt):
        if v is not None and v.ok and v.not_measured("metrics"):
            return GapFinding("not_measurable", "", why=mf.METRIC_NOT_MEASURED, variant=v.name)
    mine = judged.get(variants.FIQ)
    if flt is None or not flt.ok or flt.metrics is None or fiq.metrics is None or mine is None \
            or mine.vs_float is None:
        return GapFinding("not_measurable", "", why=mf.FLOAT_NOT_MEASURED)
    drop, p = -mine.vs_float.delta, mine.vs_float.p_value
    if not mine.meets and choice.TargetRule.of(report).without_limit()(fiq, flt):
        # beyond --max-accuracy-drop, but every paired test says noise: a gap the data do not show, nothing to win back
        return GapFinding("gap", "", drop, p, why=mf.NOISE)
    if mine.meets:
        status, why = "no_gap", {jd.NOT_WORSE: mf.NOT_WORSE, jd.NOISE: mf.NOISE}.get(mine.standing, mf.ALLOWED)
    else:
        fixed = judged.get(variants.SELECTIVE) if rec is not None and rec.selective is not None else None
        status = "gap" if fixed is None else ("recovered" if fixed.meets else "open")
        why = mf.LOSES if fixed is None else (mf.FIX_MEETS if fixed.meets else mf.FIX_MISSES)
    if rec is not None and rec.gap is not None and rec.gap.status == status:
        # the search measured the same: its figures are said, as they stand against the target
        searched = rl.standing(rl.Standing(rec.gap.drop, rec.gap.p_value), report.settings.max_accuracy_drop)
        return GapFinding(status, "", drop, p, why=mf.SEARCHED, standing=searched)
    return GapFinding(status, "", drop, p, why=why)


def _culprits(report: "Report", gap: GapFinding) -> list[Culprit]:
    """The kept layers when a recommended model was built; else the rule's flags while a gap is open."""
    rec = report.recommendation
    if rec is None or gap.status == "no_gap":
        return []
    by_name = {layer.tensor_name: layer for layer in report.layers}
    necessity = rec.search.necessity if rec.search else {}
    if rec.selective is not None:
        names, kept = rec.denylisted_nodes, True
    elif rec.method == "search":
        return []  # the search measured that no layer helps: the rule's flags are not culprits
    else:
        names, kept = [layer.tensor_name for layer in report.layers if layer.suspect], False
    out = []
    for name in names:
        layer = by_name.get(name)
        reasons = []
        if name in rec.forced_nodes:
            reasons.append(Reason("forced", ""))
        if name in necessity:
            reasons.append(Reason("needed", "", necessity[name]))
        if layer is not None:
            if layer.rmse_over_scale > rec.threshold:
                reasons.append(Reason("rmse_over_scale", "", layer.rmse_over_scale, rec.threshold))
            if layer.index < rec.first_layers:
                reasons.append(Reason("first_layers", "", layer.index, rec.first_layers))
        out.append(Culprit(layer.index if layer else -1, layer.op_name if layer else "", name, layer_of(name),
                           reasons, kept))
    return out


def _fix(report: "Report", gap: GapFinding, found: list[VariantFinding]) -> Optional[FixFinding]:
    """What keeping layers in float measured against FIQ's gap; None without a gap the data show (none, or within
    noise: a model the search built is then no fix, since there is no loss to win back)."""
    rec = report.recommendation
    if rec is None or gap.status == "no_gap" or gap.why == mf.NOISE:
        return None
    n = len(rec.denylisted_nodes)
    rule = rec.rule
    rule_bits = dict(rule_layers=len(rule.denylisted_nodes) if rule and rec.method == "search" else None,
                     rule_share_of_gap=rule.accuracy_gap_recovered if rule and rec.method == "search" else None)
    sel = rec.selective
    if sel is None:
        return FixFinding(n, False, "not_built", **rule_bits)
    if not sel.ok:
        return FixFinding(n, True, "failed", **rule_bits)
    mine = next((v for v in found if v.name == variants.SELECTIVE), None)
    fiq = report.variant(variants.FIQ)
    if sel.metrics is None:
        return FixFinding(n, True, "measured", size_cost_bytes=rec.size_cost_bytes,
                          output_mse=sel.output_error.mse if sel.output_error else None,
                          fiq_output_mse=fiq.output_error.mse if fiq and fiq.ok and fiq.output_error else None,
                          **rule_bits)
    if gap.status == "not_measurable":  # float's or FIQ's accuracy was not measured: nothing to win back
        return FixFinding(n, True, "measured", accuracy=sel.metrics.score, size_cost_bytes=rec.size_cost_bytes,
                          **rule_bits)
    won = (sel.metrics.score - fiq.metrics.score) * (1 if sel.metrics.higher_is_better else -1) \
        if fiq and fiq.ok and fiq.metrics else None
    status = gap.status if gap.status in ("recovered", "open") else "open"
    return FixFinding(n, True, status, accuracy=sel.metrics.score, points_won_back=won,
                      share_of_gap=sel.accuracy_gap_recovered, vs_fiq=mine.vs_fiq if mine else None,
                      vs_float=mine.vs_float if mine else None, size_cost_bytes=rec.size_cost_bytes,
                      **rule_bits)
