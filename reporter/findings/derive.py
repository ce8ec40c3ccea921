"""Findings: what the measured report means (the records are reporter.model.findings).

`derive(report)` is a pure function of the measured report (no TensorFlow, no files): the verdict per
variant with its significance, the gap and whether the fix closed it, the culprit layers and why,
degenerate outputs, warnings, hints, the gate, and the headline a reader sees first. Thresholds and noise
rules come from reporter.core.judgement, variant names from reporter.core.variants; numbers are worded with
reporter.core.formatting. Templates only lay these out.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Optional

from reporter.core import judgement as jd
from reporter.core.formatting import (fmt_amount, fmt_bytes, fmt_change, fmt_ms, fmt_mse, fmt_number, fmt_percent,
                                      fmt_points, fmt_score, fmt_signed_bytes)
from reporter.core.variants import LABELS, short
from reporter.findings import picks as pk
from reporter.model.findings import (AlternativeFinding, BlameFinding, Comparison, Culprit, Degenerate, FixFinding,
                                    Findings, GapFinding, GateFinding, HeadFinding, Notice, Reason, TradeoffPoint,
                                    VariantFinding)

if TYPE_CHECKING:  # pragma: no cover
    from reporter.model.report import Metrics, Report, VariantResult

# --- deriving them --------------------------------------------------------------------------------------
def derive(report: "Report") -> Findings:
    """The findings of a measured report. Pure: same report, same findings."""
    task = report.model.task if report.model.task in ("multilabel", "segmentation") else \
        ("binary" if report.model.binary_sigmoid else "classification") if report.model.num_classes else "regression"
    variants = [_variant(report, v) for v in _columns(report)]
    gap = _gap(report, next((v for v in variants if v.name == "fiq"), None))
    culprits = _culprits(report, gap)
    fix = _pick(report, _fix(report, gap, variants))
    heads = _heads(report)
    limit = report.settings.get("max_accuracy_drop")
    gate = gate_finding(report, variants, report.settings.get("gate_variant", "fiq"), limit, heads) \
        if limit is not None else None
    headline = [_nonfinite_text(report)] if _nonfinite_text(report) else []  # first: it changes every figure
    headline += _headline(report, variants, gap, culprits, fix) + _head_lines(report, heads)
    return Findings(task=task, headline=headline,
                    variants=variants, gap=gap, culprits=culprits, fix=fix, warnings=_warnings(report),
                    hints=_hints(report, gap) + _head_hints(report), gate=gate,
                    recommendation=_recommendation_text(report, gap, fix), alternatives=_alternatives(report),
                    heads=heads, tradeoff=_tradeoff(report, fix))


# --- several outputs -------------------------------------------------------------------------------
def _heads(report: "Report") -> list[HeadFinding]:
    """Every output of every measured variant: accuracy against its labels (paired with float's), or, without
    labels, agreement with float's class or the error against float's output."""
    if not report.model.outputs:
        return []
    cols = [v for v in _columns(report) if v.ok]
    flt = report.variant("float")
    out = []
    for o in report.model.outputs:
        ref = flt.heads.get(o.name) if flt is not None and flt.ok else None
        for v in cols:
            h = v.heads.get(o.name)
            if h is None:
                continue
            if h.metrics is not None:
                cmp = compare(h.metrics, ref.metrics, "float") if v.name != "float" and ref and ref.metrics else None
                worse = bool(cmp and cmp.significant and cmp.delta < 0)
                n = report.dataset.num_eval
                low, high = jd.wilson_interval(round(h.metrics.accuracy * n), n)
                text = (f"{fmt_percent(h.metrics.accuracy)} [{low * 100:.1f}–{high * 100:.1f}]"
                        + (f" ({cmp.text})" if cmp else ""))
                out.append(HeadFinding(o.name, v.name, "accuracy", h.metrics.accuracy, cmp, worse, text))
            elif h.agreement_with_float is not None:
                out.append(HeadFinding(o.name, v.name, "agreement with float", h.agreement_with_float,
                                       text=fmt_percent(h.agreement_with_float)))
            else:
                mse = h.output_error.mse if h.output_error else None
                out.append(HeadFinding(o.name, v.name, "output MSE", mse,
                                       text="reference" if v.name == "float" else
                                       (fmt_mse(mse, h.output_error.float_variance) if h.output_error else "")))
    return out


def _head_lines(report: "Report", heads: list[HeadFinding]) -> list[str]:
    """A line for each output that FIQ (or the recommended model) makes less accurate than float beyond noise."""
    lines = []
    for name in ("fiq", "selective"):
        for h in heads:
            if h.variant == name and h.worse and h.vs_float is not None:
                who = "FIQ" if name == "fiq" else "The recommended model"
                lines.append(f"Output {h.output}: {who} loses {-h.vs_float.delta * 100:.1f} accuracy points against"
                             f" float ({h.text}).")
    return lines


def _head_hints(report: "Report") -> list[Notice]:
    outputs = report.model.outputs
    if not outputs:
        return []
    primary = next((o for o in outputs if o.primary), outputs[0])
    chosen = report.settings.get("primary_output")
    out = [Notice("primary_output", f"The model has {len(outputs)} outputs; the main numbers are about output"
                                    f" {primary.name} ({'--primary-output' if chosen else 'the first with labels'}),"
                                    " and every output is in the per-output table.")]
    for o in outputs:
        if not o.labelled:
            out.append(Notice("unlabelled_output", f"Output {o.name} has no labels (no y_{o.name}): it is compared"
                                                    " with float's output only."))
    return out


def attach(report: "Report") -> "Report":
    """The report with its findings, and the recommendation's sentence taken from them."""
    import dataclasses

    found = derive(report)
    rec = report.recommendation
    if rec is not None:
        rec = dataclasses.replace(rec, summary=found.recommendation)
    return dataclasses.replace(report, recommendation=rec, findings=found)


def _recommendation_text(report: "Report", gap: GapFinding, fix: Optional[FixFinding]) -> str:
    """What the recommendation keeps in float and what that model measured, in one sentence."""
    rec = report.recommendation
    if rec is None:
        return ""
    if gap.status == "no_gap":
        return f"FIQ needs no fix: {gap.reason}, so no layer is kept in float and no selective model is built."
    search = rec.search
    n = len(rec.denylisted_nodes)
    if fix is None or fix.status == "not_built":
        if rec.method == "search" and search is not None and search.target_met:
            return f"FIQ already meets the search's target ({search.target_text}): no layer needs to stay in float."
        if rec.method == "search":
            none = _none_measurable(search, gap if metric_of(report)[1] else None)
            others = _variants_that_close(report)
            if others:
                return f"{none}, but a measured variant wins the gap back: " + "; ".join(others) + "."
            return f"{none}; FIQ stays as it is."
        return "No layer is flagged by the rmse/scale rule: nothing to keep in float."
    layers = _kept_words(rec)
    if fix.status == "failed":
        return f"Keeping {layers} was chosen, but {fix.text}."
    how = "The search keeps" if rec.method == "search" else "The rmse/scale rule keeps"
    cost = f" at {fmt_signed_bytes(fix.size_cost_bytes)} against FIQ" if fix.size_cost_bytes is not None else ""
    if fix.status == "measured":
        text = f"{how} {layers}{cost}" + (
            f"; output MSE against float falls from {fmt_number(fix.fiq_output_mse)} to {fmt_number(fix.output_mse)}"
            if fix.output_mse is not None and fix.fiq_output_mse is not None else (f"; {fix.text}" if fix.text else ""))
    else:
        metric = metric_of(report)[0]
        text = f"{how} {layers} and wins back {fmt_percent(fix.share_of_gap, 0)} of the float-to-FIQ" \
               f" {metric} gap{cost} ({gap.reason})"
    if rec.method == "search" and search is not None and not search.target_met:
        text += f"; the search's target was not reached on its {search.selection_data.num_samples:,} selection samples"
    if fix.status == "open":
        others = _variants_that_close(report)
        if others:
            text += ". A measured variant wins the gap back instead: " + "; ".join(others)
    if fix.scheme != "float":
        text += f". The pick: {fix.scheme_reason}"
    if fix.rule_layers is not None and fix.rule_share_of_gap is not None:
        text += (f". The rmse/scale rule would keep {fix.rule_layers} layer{'s' if fix.rule_layers != 1 else ''}"
                 f" and win back {fmt_percent(fix.rule_share_of_gap, 0)}")
    return text + "."


def _none_measurable(search, gap: Optional[GapFinding] = None) -> str:
    """No float layer passed: said as what the selection data could show, not as "no layer helps"; when FIQ's
    whole loss is below that limit, said too (no layer could have shown it)."""
    if search is None:
        return "No layer was kept in float"
    sel = search.selection_data
    if sel.detectable is None:
        return f"No float layer changed FIQ measurably on {sel.num_samples:,} selection samples"
    text = (f"No float layer changed FIQ measurably on {sel.num_samples:,} selection samples (the smallest change"
            f" {sel.num_samples:,} samples can show is {fmt_points(sel.detectable).lstrip('+')} points of agreement"
            " with float")
    lost = gap.fiq_drop if gap is not None else None
    if lost is not None and 0 < lost < sel.detectable:
        text += (f"; FIQ's whole loss, {fmt_points(lost).lstrip('+')} points, is below it: more x_calib samples"
                 " (--selection-samples) are needed to find its cause")
    return text + ")"


def _kept_words(rec) -> str:
    """What the recommended model keeps in float, forced layers and op types counted and named: "3 layers in float
    (1 of them forced by --keep-float) and every MEAN op (--keep-float-ops)"."""
    n = len(rec.denylisted_nodes)
    forced = [node for node in rec.forced_nodes if node in rec.denylisted_nodes]
    text = "no layer in float" if n == 0 and rec.denylisted_ops else \
        ("1 layer in float" if n == 1 else f"{n} layers in float")
    if forced:
        text += f" ({'forced by --keep-float' if n == 1 else f'{len(forced)} of them forced by --keep-float'})"
    if rec.denylisted_ops:
        ops = list(rec.denylisted_ops)
        names = ops[0] if len(ops) == 1 else ", ".join(ops[:-1]) + " and " + ops[-1]
        text += f"{' beyond' if n == 0 else ' and'} every {names} op (--keep-float-ops)"
    return text


BOOTSTRAP_WORDS = "a seeded bootstrap, the same resamples for every model"
BLAMED_IN_HEADLINE = ("drq", "wo8", "int16x8", "f16", "int8_io")
SCHEME_NAMES = {"float": "float", "int16x8": "16x8", "drq": "dynamic range"}  # a scheme in a sentence


def _pick(report: "Report", fix: Optional[FixFinding]) -> Optional[FixFinding]:
    """A recovered fix whose layers do as well in a lighter scheme (16x8, dynamic range): the smallest such
    alternative is the pick, when it is also not worse than float beyond noise (or the allowed drop)."""
    import dataclasses

    if fix is None or fix.status != "recovered" or report.recommendation is None:
        return fix
    flt = report.variant("float")
    limit = report.settings.get("max_accuracy_drop")
    found = {a.scheme: a for a in report.recommendation.alternatives}
    best = None
    for alt in _alternatives(report):
        model = found[alt.scheme].model if alt.scheme in found else None
        if alt.status != "lighter" or model is None or model.metrics is None or flt is None or flt.metrics is None:
            continue
        cmp = compare(model.metrics, flt.metrics, "float")
        if jd.loss_stays(cmp.significant, cmp.delta, limit):
            continue
        if best is None or alt.size_delta_bytes < best[0].size_delta_bytes:
            best = (alt, cmp)
    if best is None:
        return fix
    alt, cmp = best
    words = SCHEME_NAMES.get(alt.scheme, alt.scheme)
    reason = (f"the same layers in {words} ({alt.converter}) are as good within noise ({cmp.text} against float) and"
              f" {fmt_signed_bytes(alt.size_delta_bytes)} against keeping them in float")
    return dataclasses.replace(fix, scheme=alt.scheme, scheme_reason=reason)


def _variants_that_close(report: "Report") -> list[str]:
    """Every quantized variant other than FIQ that is not worse than float beyond noise (and the allowed drop) on
    the main metric, with its size and latency: the measured trade-off when no float layer closes FIQ's gap."""
    flt = report.variant("float")
    if flt is None or not flt.ok or flt.metrics is None:
        return []
    metric, share = metric_of(report)
    limit = report.settings.get("max_accuracy_drop")
    out = []
    for v in report.variants:
        if v.name in ("float", "fiq") or not v.ok or v.metrics is None or not v.size_bytes:
            continue
        cmp = compare(v.metrics, flt.metrics, "float")
        if cmp.p_value is None or jd.loss_stays(cmp.significant, cmp.delta, limit):
            continue
        speed = ""
        if v.latency_ms and flt.latency_ms and flt.latency_ms.median:
            ratio = v.latency_ms.median / flt.latency_ms.median
            speed = f", {max(ratio, 1 / ratio):.1f}x {'slower' if ratio >= 1 else 'faster'} than float on this machine" \
                if not jd.same_ratio(ratio, jd.LATENCY_SAME_RATIO) else ", as fast as float"
        fiq = report.variant("fiq")
        bigger = (f", {fmt_signed_bytes(v.size_bytes - fiq.size_bytes)} against FIQ"
                  if fiq is not None and fiq.ok and fiq.size_bytes else "")
        out.append(f"{short(v.name)} ({v.converter or 'TensorFlow converter'}) gives {metric}"
                   f" {fmt_score(v.metrics.score, share)} ({cmp.text} against float) at {fmt_bytes(v.size_bytes)}"
                   f"{bigger}{speed}")
    return out


def _tradeoff(report: "Report", fix: Optional[FixFinding]) -> list[TradeoffPoint]:
    """Every quantized model measured on the main metric (the variants, the recommended model, its layers in a
    lighter scheme), on the Pareto front over size, latency and the metric, with the three named picks. Empty
    when fewer than two models can be compared."""
    flt = report.variant("float")
    if flt is None or not flt.ok or flt.metrics is None or not _measurable(report):
        return []
    rec = report.recommendation
    models = [v for v in report.variants if v.name != "float"]
    if rec is not None and rec.selective is not None:
        models.append(rec.selective)
    if rec is not None:
        models += [a.model for a in rec.alternatives if a.model is not None and a.model.name != "alt_float"]
    limit = report.settings.get("max_accuracy_drop")
    rows = []
    for v in models:
        if not v.ok or v.metrics is None or not v.size_bytes or v.metrics.score is None:
            continue
        cmp = compare(v.metrics, flt.metrics, "float")
        meets = cmp.p_value is not None and not jd.loss_stays(cmp.significant, cmp.delta, limit)
        latency = v.latency_ms.median if v.latency_ms else None
        rows.append((v, cmp, pk.Point(v.name, v.size_bytes, latency,
                                      v.metrics.score * (1 if v.metrics.higher_is_better else -1), meets)))
    if len(rows) < 2:
        return []
    points = [p for _, _, p in rows]
    chosen = None
    if fix is not None and fix.built and fix.status != "failed":
        chosen = "selective" if fix.scheme == "float" else f"alt_{fix.scheme}"
    named = pk.picks(points)
    return [TradeoffPoint(
        name=v.name, label=LABELS.get(v.name, v.name), score=v.metrics.score,
        score_text=fmt_score(v.metrics.score, v.metrics.share), vs_float=cmp, size_bytes=v.size_bytes,
        latency_ms=p.latency_ms, meets_target=p.meets_target, pareto=on_front,
        picks=[name for name in pk.PICKS if named.get(name) == v.name], chosen=v.name == chosen)
        for (v, cmp, p), on_front in zip(rows, pk.front(points))]


def _alternatives(report: "Report") -> list[AlternativeFinding]:
    """Each lighter scheme tried for the recommended layers, judged against the recommended model: a
    lighter fix only when it is smaller and not worse beyond noise on the same samples."""
    rec = report.recommendation
    sel = rec.selective if rec else None
    if rec is None or sel is None or not sel.ok:
        return []
    out = []
    for alt in rec.alternatives:
        words = SCHEME_NAMES.get(alt.scheme, alt.scheme)
        m = alt.model
        if not alt.applicable:
            out.append(AlternativeFinding(alt.scheme, "", "not_applicable", text=(
                f"{words.capitalize()} for the recommended layers is not applicable: it quantizes only ops with"
                " weights, and none of them has any.")))
            continue
        if alt.error or m is None or not m.ok:
            out.append(AlternativeFinding(alt.scheme, getattr(m, "converter", ""), "failed",
                                          text=f"{words.capitalize()} for the recommended layers could not be built:"
                                               f" {alt.error or (m.error if m else '')}"))
            continue
        size_delta = m.size_bytes - sel.size_bytes if m.size_bytes and sel.size_bytes else None
        cmp = compare(m.metrics, sel.metrics, "selective") if m.metrics and sel.metrics else None
        if cmp is None:
            status = "not_lighter"
        elif jd.worse_beyond_noise(cmp.significant, cmp.delta):
            status = "worse"
        elif size_delta is not None and size_delta < 0 and cmp.p_value is not None:
            status = "lighter"
        else:
            status = "not_lighter"
        what = (f"The recommended layers in {words} ({m.converter}): "
                + (f"{fmt_score(m.metrics.score, m.metrics.share)}" if m.metrics else "accuracy not measured")
                + (f", {cmp.text} against the recommended model" if cmp else "")
                + (f", {fmt_signed_bytes(size_delta)}" if size_delta is not None else ""))
        verdict = {"lighter": " — as accurate within noise and smaller: a lighter fix.",
                   "worse": " — worse than keeping them in float.",
                   "not_lighter": "."}[status]
        if alt.scheme == "float":
            verdict = (" — the same layers in float through the converter that mixes schemes, so that 16x8 and"
                       " dynamic range are read against it too.")
        out.append(AlternativeFinding(alt.scheme, m.converter, status if alt.scheme != "float" else "reference",
                                      m.metrics.score if m.metrics else None, cmp, size_delta, what + verdict))
    return out


def _columns(report: "Report") -> list:
    cols = list(report.variants)
    rec = report.recommendation
    if rec and rec.selective:
        cols.append(rec.selective)
    if rec and rec.rule and rec.rule.selective and rec.method == "search":
        cols.append(rec.rule.selective)
    return cols


def _main_metric(metrics: "Metrics", task: str = "") -> tuple[str, Optional[float]]:
    """The second metric beside the main one: pixel accuracy (dense), accuracy (a user's metric leads), else
    ROC AUC, top-5 accuracy or macro F1."""
    if metrics.main is not None:
        if metrics.accuracy is None:
            return "", None
        return ("Pixel accuracy" if task == "segmentation" else
                "Exact-match accuracy" if task == "multilabel" else "Accuracy"), metrics.accuracy
    if metrics.roc_auc is not None:
        return "ROC AUC", metrics.roc_auc
    if metrics.top5_accuracy is not None:
        return "Top-5 accuracy", metrics.top5_accuracy
    return "F1 (macro)", metrics.f1


def metric_of(report: "Report") -> tuple[str, bool]:
    """The main metric's name and whether it is a share (0..1): what every verdict of this report reads."""
    flt = report.variant("float")
    main = flt.metrics.main if flt is not None and flt.metrics is not None else None
    if main is not None:
        return main.name, main.share
    return report.model.main_metric or ("exact-match accuracy" if report.model.task == "multilabel" else "accuracy"), True


def _measurable(report: "Report") -> bool:
    """The report has a main metric to judge by (class scores, or the user's metric)."""
    return report.model.num_classes is not None or bool(report.model.main_metric)


def compare(metrics: "Metrics", ref_metrics: "Metrics", reference: str) -> Comparison:
    """The main metric's difference (positive: better) with its paired test (exact McNemar on samples right,
    or the paired bootstrap of mean IoU or a user's metric), worded."""
    main = metrics.main
    if main is not None or ref_metrics.main is not None:
        if main is None or ref_metrics.main is None or main.name != ref_metrics.main.name:
            return Comparison(reference, 0.0, None, None, "not comparable: measured by different metrics")
        raw = main.value - ref_metrics.main.value
        delta = raw if main.higher_is_better else -raw
        change = fmt_change(raw, main.share)
        paired_score = main.paired.get(reference)
        if paired_score is None:
            return Comparison(reference, delta, None, None, f"{change}, significance not recorded")
        p = paired_score.p_value
        if not jd.nonzero(raw) and p >= jd.ALPHA:
            return Comparison(reference, delta, p, False, f"{change}: the same value")
        if not jd.significant(p):
            return Comparison(reference, delta, p, False, f"within noise: {change}, {jd.p_text(p)}")
        return Comparison(reference, delta, p, True, f"{change}, {jd.p_text(p)}")
    delta = metrics.accuracy - ref_metrics.accuracy
    paired = metrics.paired.get(reference) if metrics.paired else None
    points = f"{fmt_points(delta)} points"
    if paired is None:
        return Comparison(reference, delta, None, None, f"{points}, significance not recorded")
    p = jd.mcnemar_p_counts(paired.reference_only, paired.variant_only)
    sig = jd.significant(p)
    if paired.reference_only == paired.variant_only == 0:
        return Comparison(reference, delta, p, False, "±0.0 points: right on exactly the same samples")
    if not sig:
        return Comparison(reference, delta, p, False, f"within noise: {points}, {jd.p_text(p)}")
    return Comparison(reference, delta, p, True, f"{points}, {jd.p_text(p)}")


def _degenerate(metrics: "Metrics", ref: Optional["Metrics"]) -> Optional[Degenerate]:
    cm = metrics.confusion_matrix
    if not cm:
        return None
    totals = [sum(row[j] for row in cm) for j in range(len(cm[0]))]
    n = sum(totals)
    if n == 0 or len(totals) < 2:
        return None
    label = max(range(len(totals)), key=lambda j: (totals[j], -j))
    share = totals[label] / n
    float_share = 0.0
    if ref is not None and ref.confusion_matrix:
        ref_totals = [sum(row[j] for row in ref.confusion_matrix) for j in range(len(ref.confusion_matrix[0]))]
        float_share = max(ref_totals) / max(sum(ref_totals), 1)
    if share >= jd.DEGENERATE_SHARE and float_share < jd.DEGENERATE_SHARE:
        return Degenerate(label, share, float_share)
    return None


def _variant(report: "Report", v: "VariantResult") -> VariantFinding:
    label = short(v.name)
    if not v.ok:
        return VariantFinding(v.name, label, False, error=v.error or "", direction="failed",
                              verdict=f"{label}: failed: {v.error}")
    ref = report.variant("float")
    ref = ref if ref is not None and ref.ok else None
    fiq = report.variant("fiq")
    fiq = fiq if fiq is not None and fiq.ok else None
    size_ratio = v.size_bytes / ref.size_bytes if ref and ref.size_bytes and v.size_bytes else None
    lat = v.latency_ms.median if v.latency_ms else None
    ref_lat = ref.latency_ms.median if ref and ref.latency_ms else None
    lat_ratio = lat / ref_lat if lat and ref_lat else None
    slower = bool(lat_ratio and lat_ratio >= jd.LATENCY_NOTABLE_RATIO and v.name != "float")
    base = dict(size_bytes=v.size_bytes, size_ratio=size_ratio, latency_ms=lat, latency_ratio=lat_ratio,
                slower=slower, not_measured=dict(v.measurement_errors))
    parts = []
    quality_error = v.not_measured("metrics") or v.not_measured("output_error")
    if quality_error:
        what = "accuracy" if v.not_measured("metrics") else "output error"
        parts.append(f"{what} not measured ({quality_error})")
        finding = dict(direction="not_measured")
    elif v.metrics is not None:
        m = v.metrics
        n = report.dataset.num_eval
        metric, share = metric_of(report)
        if m.main is not None:
            low, high = m.main.low, m.main.high
        else:
            low, high = jd.wilson_interval(round(m.accuracy * n), n)
        main, main_value = _main_metric(m, report.model.task) if m.accuracy is not None else ("", None)
        vs_float = compare(m, ref.metrics, "float") if ref and ref.metrics and v.name != "float" else None
        vs_fiq = compare(m, fiq.metrics, "fiq") if fiq and fiq.metrics and v.name in ("selective", "rule") \
            else None
        degenerate = _degenerate(m, ref.metrics if ref else None) if v.name != "float" else None
        if v.name == "float":
            direction = "reference"
        elif vs_float is None:
            direction = "not_measurable"
            if ref and ref.metrics is None:
                parts.append(f"float's {metric} was not measured")
        elif not jd.accuracy_differs(vs_float.significant, vs_float.delta):
            direction = "same"
        else:
            direction = "worse" if vs_float.delta < 0 else "better"
        if vs_float is not None:
            parts.append(f"{metric} {fmt_score(m.score, share)} against float's {fmt_score(ref.metrics.score, share)}"
                         f" ({vs_float.text})")
        else:
            parts.append(f"{metric} {fmt_score(m.score, share)}")
        if degenerate is not None:
            unit = "pixels" if report.model.task == "segmentation" else "samples"
            parts.append(f"predicts class {degenerate.label} for {fmt_percent(degenerate.share, 0)} of {unit}")
        finding = dict(direction=direction, accuracy=m.score, accuracy_low=low, accuracy_high=high,
                       main_metric=main, main_value=main_value, vs_float=vs_float, vs_fiq=vs_fiq,
                       degenerate=degenerate, score_name="" if metric == "accuracy" else metric, score_share=share)
    else:
        mse = v.output_error.mse if v.output_error else None
        variance = v.output_error.float_variance if v.output_error else None
        if v.name != "float" and mse is not None:
            parts.append(f"output {fmt_mse(mse, variance)} against float")
        finding = dict(direction="reference" if v.name == "float" else "not_measurable", output_mse=mse,
                       output_variance=variance)
    if v.name != "float" and size_ratio is not None:
        parts.append(_size_words(size_ratio))
    if v.name == "drq" and ref and v.size_bytes == ref.size_bytes and not v.tensor_types.get("int8"):
        parts.append(_drq_words(report.model.largest_weight_elements))
    if slower:
        parts.append(f"{lat_ratio:.1f}x slower than float ({fmt_ms(lat)} vs {fmt_ms(ref_lat)} per sample)")
    if v.name == "float":
        parts = parts if quality_error else ["reference"]
    verdict = f"{label}: " + "; ".join(parts)
    blame = _blame(report, v, label, ref) if finding.get("direction") == "worse" else None
    return VariantFinding(v.name, label, True, verdict=verdict, blame=blame, **base, **finding)


def _blame(report: "Report", v: "VariantResult", label: str, ref) -> Optional[BlameFinding]:
    """The layer to blame for a variant that loses accuracy, and what keeping the blamed layers in float
    measured (a fix only when it is no longer worse than float beyond noise or the allowed drop)."""
    errors = v.layer_errors
    if errors is None or errors.culprit is None:
        return None
    row = next((e for e in errors.layers if e.tensor_name == errors.culprit), None)
    if row is None:
        return None
    why = []
    if row.error_starts_here:
        snr = "no error" if row.snr_db is None else f"{row.snr_db:.1f} dB"
        why.append(f"its output's SNR is {snr} although its inputs are exact")
    elif row.snr_drop_db is not None:
        why.append(f"{row.snr_drop_db:.1f} dB of SNR lost at this op")
    where = f"{layer_of(row.tensor_name)} ({row.op_name}" + (f": {', '.join(why)})" if why else ")")
    found = dict(tensor=row.tensor_name, layer=layer_of(row.tensor_name), op=row.op_name, snr_db=row.snr_db,
                 snr_drop_db=row.snr_drop_db, weight_snr_db=row.weight_snr_db)
    fix = v.fix
    if fix is None:
        return BlameFinding(**found, text=f"{label}'s per-layer error blames {where}.")
    layers = ", ".join(layer_of(n) for n in fix.layers)
    if fix.error or fix.model is None or not fix.model.ok:
        return BlameFinding(**found, fix_status="failed", fix_layers=list(fix.layers),
                            text=f"{label}'s per-layer error blames {where}; the model keeping {layers} in float"
                                 f" could not be built: {fix.error or (fix.model.error if fix.model else '')}.")
    m = fix.model
    if m.metrics is None or ref is None or ref.metrics is None:
        return BlameFinding(**found, fix_status="open", fix_layers=list(fix.layers), fix_converter=m.converter,
                            text=f"{label}'s per-layer error blames {where}; keeping {layers} in float"
                                 f" ({m.converter}) was built, but its accuracy was not measured.")
    cmp = compare(m.metrics, ref.metrics, "float")
    limit = report.settings.get("max_accuracy_drop")
    fixed = not jd.loss_stays(cmp.significant, cmp.delta, limit)
    metric, share = metric_of(report)
    result = (f"keeping {layers} in float ({m.converter}, {fmt_signed_bytes(m.size_bytes - v.size_bytes)} against"
              f" {label}) gives {metric} {fmt_score(m.metrics.score, share)}, {cmp.text} against float")
    text = (f"{label}'s loss is caused by {where}: {result}: fixed." if fixed else
            f"{label}'s per-layer error blames {where}, but {result}: the loss stays.")
    return BlameFinding(**found, fix_status="fixed" if fixed else "open", fix_layers=list(fix.layers),
                        fix_accuracy=m.metrics.score, fix_vs_float=cmp, fix_converter=m.converter, text=text)


def _size_words(ratio: float) -> str:
    """"2.0x smaller than float", "3 % larger than float" (close to float's), "same size as float"."""
    if jd.same_ratio(ratio):
        return "same size as float"
    if jd.ratio_in_percent(ratio):
        return f"{abs(1 - ratio) * 100:.0f} % {'smaller' if ratio < 1 else 'larger'} than float"
    return f"{1 / ratio:.1f}x smaller than float" if ratio < 1 else f"{ratio:.1f}x larger than float"


def _drq_words(largest: Optional[int]) -> str:
    if largest is not None and largest < jd.DRQ_MIN_WEIGHT_ELEMENTS:
        return (f"DRQ quantized no weight: the largest weight tensor has {largest:,} elements, under the"
                f" converter's minimum of {jd.DRQ_MIN_WEIGHT_ELEMENTS:,}")
    if largest is not None:
        return (f"DRQ quantized no weight although the largest weight tensor has {largest:,} elements"
                " (the converter keeps weights in float for ops without a dynamic-range kernel)")
    return "DRQ quantized no weight"


def _gap(report: "Report", fiq_found: Optional[VariantFinding]) -> GapFinding:
    rec = report.recommendation
    fiq = report.variant("fiq")
    if fiq is None or not fiq.ok:
        return GapFinding("not_measurable", "FIQ was not built" if fiq is None else f"FIQ failed: {fiq.error}")
    if not _measurable(report):
        return GapFinding("not_measurable", "the model's output is not class scores, so there is no accuracy;"
                                            " the report compares output error instead")
    flt = report.variant("float")
    metric, share = metric_of(report)
    for name, v in (("FIQ", fiq), ("float", flt)):
        if v is not None and v.ok and v.not_measured("metrics"):
            return GapFinding("not_measurable", f"{name}'s {metric} was not measured: {v.not_measured('metrics')}")
    if rec is not None and rec.gap is not None:
        g = rec.gap
        # The stored p-value is the last comparison made (the fixed model's, once fixed); the gap's
        # own p-value is FIQ's against float.
        p = fiq_found.vs_float.p_value if fiq_found and fiq_found.vs_float else None
        return GapFinding(g.status, g.reason, g.fiq_drop, p if p is not None else
                          (g.p_value if g.status in ("gap", "no_gap") else None))
    ref = report.variant("float")
    if ref is None or not ref.ok or ref.metrics is None or fiq.metrics is None:
        return GapFinding("not_measurable", "float was not measured")
    c = compare(fiq.metrics, ref.metrics, "float")
    drop = -c.delta
    why = jd.gap_kind(drop, c.p_value)
    if why == "not_worse":
        return GapFinding("no_gap", f"FIQ is at least as good as float on {metric}", drop, c.p_value)
    if why == "noise":
        return GapFinding("no_gap", f"the drop is within noise ({jd.p_text(c.p_value)})", drop, c.p_value)
    return GapFinding("gap", f"FIQ loses {fmt_amount(drop, share, metric)}", drop, c.p_value)


def layer_of(tensor: str) -> str:
    """The Keras layer a TFLite tensor comes from, read from its name: "model/normalization/Sub" ->
    "normalization". Empty when the name has no scope."""
    parts = [p for p in tensor.split(";")[0].split("/") if p]
    return parts[-2] if len(parts) >= 2 else ""


def _culprits(report: "Report", gap: GapFinding) -> list[Culprit]:
    """The kept layers when a recommended model was built; else the rule's flags while a gap is open."""
    rec = report.recommendation
    if rec is None or gap.status == "no_gap":
        return []
    by_name = {layer.tensor_name: layer for layer in report.layers}
    necessity = rec.search.necessity if rec.search else {}
    classification = report.model.num_classes is not None
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
            reasons.append(Reason("forced", "asked for (--keep-float)"))
        if name in necessity:
            lost = necessity[name]
            text = (f"without it, agreement with float on the selection data drops {lost * 100:.1f} points"
                    if classification else f"without it, the selection score (1 - output MSE / variance) drops"
                                           f" {lost:.3g}")
            reasons.append(Reason("needed", text, lost))
        if layer is not None:
            if layer.rmse_over_scale > rec.threshold:
                reasons.append(Reason("rmse_over_scale", f"RMSE/scale {layer.rmse_over_scale:.3g} is above the"
                                                         f" rule's {rec.threshold:g}", layer.rmse_over_scale,
                                      rec.threshold))
            if layer.index < rec.first_layers:
                reasons.append(Reason("first_layers", f"one of the first {rec.first_layers} layers",
                                      layer.index, rec.first_layers))
        out.append(Culprit(layer.index if layer else -1, layer.op_name if layer else "", name, layer_of(name),
                           reasons, kept))
    return out


def culprit_phrase(culprits: list[Culprit]) -> str:
    """"the SUB and MUL of layer normalization": culprits grouped by the layer they belong to."""
    groups: "OrderedDict[str, list[str]]" = OrderedDict()
    for c in culprits:
        groups.setdefault(c.layer or c.tensor, []).append(c.op or "op")
    pieces = []
    for layer, ops in groups.items():
        ops_text = _and(list(dict.fromkeys(ops)))
        named = next(c for c in culprits if (c.layer or c.tensor) == layer)
        pieces.append(f"the {ops_text} of layer {layer}" if named.layer else f"the {ops_text} tensor {layer}")
    if len(pieces) > 3:
        return f"{len(culprits)} layers, first {pieces[0]} and {pieces[1]}"
    return _and(pieces)


def _and(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _fix(report: "Report", gap: GapFinding, variants: list[VariantFinding]) -> Optional[FixFinding]:
    rec = report.recommendation
    if rec is None or gap.status == "no_gap":
        return None
    n = len(rec.denylisted_nodes)
    rule = rec.rule
    rule_bits = dict(rule_layers=len(rule.denylisted_nodes) if rule and rec.method == "search" else None,
                     rule_share_of_gap=rule.accuracy_gap_recovered if rule and rec.method == "search" else None)
    sel = rec.selective
    if sel is None:
        return FixFinding(n, False, "not_built", **rule_bits)
    if not sel.ok:
        return FixFinding(n, True, "failed", text=f"the recommended model failed: {sel.error}", **rule_bits)
    found = next((v for v in variants if v.name == "selective"), None)
    fiq = report.variant("fiq")
    if sel.metrics is None:
        missing = sel.not_measured("metrics") or sel.not_measured("output_error")
        return FixFinding(n, True, "measured", size_cost_bytes=rec.size_cost_bytes,
                          text=f"the recommended model's {'accuracy' if sel.not_measured('metrics') else 'output error'}"
                               f" was not measured: {missing}" if missing else "",
                          output_mse=sel.output_error.mse if sel.output_error else None,
                          fiq_output_mse=fiq.output_error.mse if fiq and fiq.ok and fiq.output_error else None,
                          **rule_bits)
    if gap.status == "not_measurable":  # float's or FIQ's accuracy was not measured: nothing to win back
        return FixFinding(n, True, "measured", accuracy=sel.metrics.score, size_cost_bytes=rec.size_cost_bytes,
                          text=gap.reason, **rule_bits)
    won = (sel.metrics.score - fiq.metrics.score) * (1 if sel.metrics.higher_is_better else -1) \
        if fiq and fiq.ok and fiq.metrics else None
    status = gap.status if gap.status in ("recovered", "open") else "open"
    return FixFinding(n, True, status, accuracy=sel.metrics.score, points_won_back=won,
                      share_of_gap=sel.accuracy_gap_recovered, vs_fiq=found.vs_fiq if found else None,
                      vs_float=found.vs_float if found else None, size_cost_bytes=rec.size_cost_bytes,
                      **rule_bits)


def _headline(report: "Report", variants, gap: GapFinding, culprits, fix: Optional[FixFinding]) -> list[str]:
    by = {v.name: v for v in variants}
    fiq, flt = by.get("fiq"), by.get("float")
    if flt is None or not flt.ok:
        return ["The float model could not be measured, so nothing can be compared with it."]
    if fiq is None:
        return ["FIQ was not built (not among the variants asked for): " + _others(variants)] + _blames(variants)
    if not fiq.ok:
        return [f"FIQ could not be built: {fiq.error}."] + _blames(variants)
    lines = []
    size = _size_words(fiq.size_ratio) if fiq.size_ratio else ""
    if gap.status == "not_measurable":
        if fiq.output_mse is not None:
            lines.append(f"The model's output is not class scores, so accuracy is not measured: FIQ's output"
                         f" differs from float's, {fmt_mse(fiq.output_mse, fiq.output_variance)}; FIQ"
                         f" is {size}.")
        else:
            lines.append(f"FIQ's accuracy gap is not measurable ({gap.reason}).")
    elif gap.status == "no_gap":
        metric, share = metric_of(report)
        good = "as accurate as float" if metric == "accuracy" else f"as good as float on {metric}"
        what = (f"FIQ is {size} and {good} ({fmt_score(fiq.accuracy, share)} against"
                f" {fmt_score(flt.accuracy, share)}" + (f"; {fiq.vs_float.text}" if fiq.vs_float else "") + ")")
        if fiq.vs_float is not None and fiq.vs_float.delta < 0 and _lost(-fiq.vs_float.delta, metric, share) != \
                _lost(0.0, metric, share):
            what = (f"FIQ is {size} and loses {_lost(-fiq.vs_float.delta, metric, share)}"
                    f" ({fmt_score(flt.accuracy, share)} → {fmt_score(fiq.accuracy, share)}), {gap.reason}")
        lines.append(what + ": no layer needs to stay in float.")
    else:
        metric, share = metric_of(report)
        text = (f"FIQ loses {_lost(gap.fiq_drop, metric, share)} against float ({fmt_score(flt.accuracy, share)} →"
                f" {fmt_score(fiq.accuracy, share)}, {jd.p_text(gap.p_value) if gap.p_value is not None else 'p not recorded'})")
        if fiq.degenerate is not None:
            unit = "pixels" if report.model.task == "segmentation" else "samples"
            text += f" and predicts class {fiq.degenerate.label} for {fmt_percent(fiq.degenerate.share, 0)} of {unit}"
        lines.append(text + ".")
    rec = report.recommendation
    if fix is not None and culprits:
        where = culprit_phrase(culprits)
        it = "it" if len(culprits) == 1 else "them"
        if rec is not None and rec.denylisted_ops:  # forced op types are kept too: say so wherever "it" is
            it += " and every " + " and ".join(rec.denylisted_ops) + " op (--keep-float-ops)"
        if fix.status in ("recovered", "open") and fix.accuracy is not None:
            metric, share = metric_of(report)
            won = (f"wins back {fmt_amount(fix.points_won_back, share, metric)} ({fmt_percent(fix.share_of_gap, 0)} of"
                   " the gap)" if fix.points_won_back is not None and fix.share_of_gap is not None else "was measured")
            against = f"{fmt_score(fix.accuracy, share)} against float's {fmt_score(flt.accuracy, share)}" + (
                f" ({fix.vs_float.text})" if fix.vs_float else "")
            if fix.status == "recovered":
                lines.append(f"The cause is {where}. Keeping {it} in float {won}: {against}, {_cost(report, fix)}.")
                if fix.scheme != "float":
                    lines.append(f"Cheaper: {fix.scheme_reason}; that is the pick.")
            else:
                lines.append(f"The search blames {where}. Keeping {it} in float {won}, but the gap stays open:"
                             f" {against}, {_cost(report, fix)}.")
        elif fix.status == "measured" and fix.text and (fix.output_mse is None or fix.fiq_output_mse is None):
            lines.append(f"A model keeping {where} in float was built, {_cost(report, fix)}, but {fix.text}.")
        elif fix.status == "measured":
            mse = (f"lowers the output error from MSE {fmt_number(fix.fiq_output_mse)} to {fmt_number(fix.output_mse)}"
                   if fix.output_mse is not None and fix.fiq_output_mse is not None else "was measured")
            lines.append(f"Keeping {where} in float {mse}, {_cost(report, fix)}.")
        elif fix.status == "failed":
            lines.append(f"Keeping {where} in float was chosen, but {fix.text}.")
        else:
            lines.append(f"The rmse/scale rule flags {where}; no model was built with {it} in float.")
    elif fix is not None and (fix.status == "not_built" or (rec is not None and rec.denylisted_ops)):
        lines.append(_recommendation_text(report, gap, fix))
    lines += _blames(variants)
    if fiq.slower:
        lines.append(f"On this machine FIQ runs {fiq.latency_ratio:.1f}x slower than float"
                     f" ({fmt_ms(fiq.latency_ms)} against {fmt_ms(flt.latency_ms)} per sample, one thread).")
    return lines


def _lost(drop: float, metric: str, share: bool) -> str:
    """"4.3 accuracy points", "4.3 points of mean IoU", "0.0123 of top2"."""
    if metric == "accuracy":
        return f"{drop * 100:.1f} accuracy points"
    return fmt_amount(drop, share, metric)


def _blames(variants) -> list[str]:
    """A line for each variant other than FIQ (which has the search) that loses accuracy: the layer to blame
    and what keeping it in float measured."""
    return [v.blame.text for v in variants if v.name in BLAMED_IN_HEADLINE and v.blame is not None]


def _cost(report: "Report", fix: FixFinding) -> str:
    flt = report.variant("float")
    sel = report.recommendation.selective
    cost = f"at {fmt_signed_bytes(fix.size_cost_bytes)} against FIQ"
    if flt is not None and flt.ok and sel is not None and sel.ok and sel.size_bytes:
        cost += f" ({fmt_bytes(sel.size_bytes)}, {_size_words(sel.size_bytes / flt.size_bytes)})"
    return cost


def _others(variants) -> str:
    return "; ".join(v.verdict for v in variants if v.name != "float") or "only the float model was measured."


def _warnings(report: "Report") -> list[Notice]:
    out = []
    ds = report.dataset
    if ds.calibration_overlaps_eval:
        out.append(Notice("calibration_overlap",
                          f"Calibration used the first {ds.num_calibration:,} samples of the evaluation data (no"
                          " x_calib given): calibration and evaluation data overlap, so the quantized scores may"
                          " be optimistic."))
    asked = report.settings.get("calibration_samples")
    if isinstance(asked, int) and asked > ds.num_calibration:
        where = "x_calib" if ds.calibration_source == "x_calib" else "the evaluation data"
        out.append(Notice("calibration_short",
                          f"Asked for {asked:,} calibration samples, but {where} holds {ds.num_calibration:,}: FIQ"
                          f" and the debugger were calibrated on those {ds.num_calibration:,}."))
    sel = report.recommendation.search.selection_data if report.recommendation and report.recommendation.search \
        else None
    if sel is not None and sel.overlaps_calibration:
        out.append(Notice("selection_overlap",
                          f"The search chose on {sel.num_samples:,} samples of x_calib that include the"
                          f" {ds.num_calibration:,} calibration samples (too few remained beyond them): a layer"
                          " judged on the data it was calibrated on may look better than it is. Give more x_calib"
                          " samples, or fewer --calibration-samples."))
    if report.model.stateful and report.layers:
        out.append(Notice("stateful",
                          "This model keeps state between invokes (variable tensors, as fused LSTM ops have)."
                          " quant-report resets that state before every evaluation sample, but the TF Quantization"
                          " Debugger does not: its per-layer numbers for stateful layers include state carried over"
                          " from the previous sample, so a high RMSE/scale there can be a false alarm. Trust the"
                          " measured accuracy first."))
    k = report.model.num_classes
    flt = report.variant("float")
    if k and flt is not None and flt.ok and flt.metrics and flt.metrics.classes_present is not None:
        present = set(flt.metrics.classes_present)  # once: k may be large
        missing = [c for c in range(k) if c not in present]
        if missing:
            shown = ", ".join(map(str, missing[:10])) + (" …" if len(missing) > 10 else "")
            out.append(Notice("classes_missing",
                              f"The evaluation data has no samples of {len(missing)} of the model's {k} classes"
                              f" ({shown}): macro precision, recall, F1 and balanced accuracy average over the"
                              f" {k - len(missing)} classes present."))
    failed = [v for v in _columns(report) if not v.ok]
    for v in failed:
        out.append(Notice("variant_failed", f"{short(v.name)} failed: {v.error}"))
    for v in _columns(report):
        for measurement, error in (v.measurement_errors.items() if v.ok else ()):
            out.append(Notice("measurement_failed", f"{short(v.name)}: {_measurement_words(measurement)}"
                                                    f" not measured: {error}"))
    if _nonfinite_text(report):
        how = ("Those samples count as wrong (they predict no class); errors against float leave them out."
               if report.model.num_classes else "Errors against float leave those samples out.")
        out.append(Notice("nonfinite_outputs", f"{_nonfinite_text(report)} {how}"))
    if report.debugger_error:
        out.append(Notice("debugger_failed", f"The quantization debugger failed: {report.debugger_error}"))
    rec = report.recommendation
    if rec and rec.search and not rec.search.target_met and rec.selective is not None:
        out.append(Notice("target_not_met", f"The search stopped before its target ({rec.search.target_text}):"
                                            f" {rec.search.stop_reason}."))
    return out


def _nonfinite_text(report: "Report") -> str:
    """"The float model produced NaN or inf on 10 of 200 evaluation samples; DRQ on 10.", or "" when every
    model's outputs were finite (the data are checked finite when read: the models made these values)."""
    found = [v for v in _columns(report) if v.ok and v.nonfinite_outputs]
    if not found:
        return ""
    n = report.dataset.num_eval
    named = ["the float model" if v.name == "float" else short(v.name) for v in found]
    text = f"{named[0][0].upper()}{named[0][1:]} produced NaN or inf on {found[0].nonfinite_outputs:,} of {n:,}" \
           f" evaluation samples"
    return text + "".join(f"; {w} on {v.nonfinite_outputs:,}" for w, v in zip(named[1:], found[1:])) + "."


def _measurement_words(measurement: str) -> str:
    from reporter.model.report import MEASUREMENTS

    return MEASUREMENTS.get(measurement, measurement)

TASK_WORDS = {"multilabel": "multi-label", "classification": "a classifier", "regression": "a regression",
              "segmentation": "segmentation (a class at every position)"}
TASK_WORDS = {"multilabel": "multi-label", "classification": "a classifier", "regression": "a regression"}


def _hints(report: "Report", gap: GapFinding) -> list[Notice]:
    out = []
    model = report.model
    if model.task_reason:
        kind = "a binary classifier" if model.binary_sigmoid else TASK_WORDS.get(model.task, model.task)
        out.append(Notice("task", f"Measured as {kind} ({model.task_reason})."))
    if model.label_note:
        out.append(Notice("labels_as_classes", f"{model.label_note}."))
    flt = report.variant("float")
    main = flt.metrics.main if flt is not None and flt.metrics is not None else None
    spec = report.settings.get("metric")
    if spec and main is not None and main.name not in ("mean IoU",):
        way = "higher is better" if main.higher_is_better else "lower is better (--metric-mode min)"
        out.append(Notice("user_metric", f"Every verdict, gap, gate and fix reads your metric {main.name} ({spec},"
                                         f" {way}); its intervals and paired tests resample whole samples"
                                         f" ({BOOTSTRAP_WORDS})."))
    elif spec:
        out.append(Notice("user_metric_failed", f"Your metric ({spec}) was not measured (see run.log), so the report"
                                                f" reads {metric_of(report)[0]} instead."))
    elif main is not None:
        out.append(Notice("bootstrap", f"Mean IoU is not a mean over samples: its intervals and paired tests resample"
                                       f" whole images ({BOOTSTRAP_WORDS}), never pixels."))
    if report.settings.get("latency_runs") == 0:
        out.append(Notice("latency_skipped", "Latency was not measured: latency runs were set to 0."))
    rec = report.recommendation
    flagged = [layer for layer in report.layers if layer.suspect]
    if gap.status == "no_gap" and flagged:
        worst = max(flagged, key=lambda layer: layer.rmse_over_scale)
        out.append(Notice("rule_false_alarm",
                          f"The rmse/scale rule flags {len(flagged)} layer{'s' if len(flagged) != 1 else ''}"
                          f" (worst: {worst.op_name} at {worst.rmse_over_scale:.3g}), but FIQ loses no accuracy"
                          f" beyond noise, so keeping {'it' if len(flagged) == 1 else 'them'} in float is not"
                          " needed."))
    if report.layers and rec is not None and rec.method == "rule" and gap.status != "no_gap":
        widest = max(report.layers, key=lambda layer: layer.range)
        ranges = sorted(layer.range for layer in report.layers)
        median = ranges[len(ranges) // 2]
        if not widest.suspect and widest.range >= jd.WIDE_RANGE_FACTOR * jd.positive_floor(median):
            out.append(Notice("wide_range",
                              f"Layer {widest.index} ({widest.op_name}) has by far the widest range"
                              f" ({fmt_number(widest.range)}) but an RMSE/scale of {widest.rmse_over_scale:.3f}, so"
                              " the rule does not flag it. A wide range spreads the 256 int8 steps thinly; if the"
                              " selective model does not recover the whole gap, try keeping this layer in float"
                              f" too (for example with --first-layers {widest.index + 1}) or use --recommend"
                              " search."))
    return out


def gate_finding(report: "Report", variants: list[VariantFinding], variant: str, limit: float,
                 heads: Optional[list[HeadFinding]] = None) -> GateFinding:
    """The accuracy gate: `variant` may lose at most `limit` (0..1) accuracy against float, on every labelled
    output of a model with several outputs (`heads`)."""
    found = next((v for v in variants if v.name == variant), None)
    label = variant  # as the user named it (--gate-variant)

    def result(passed, drop, p, message):
        return GateFinding(passed, variant, limit, drop, p, message)

    if found is None:
        return result(False, None, None, f"{variant} was not built, so the gate cannot pass")
    flt = next((v for v in variants if v.name == "float"), None)
    if not found.ok or flt is None or not flt.ok:
        return result(False, None, None, f"{variant if not found.ok else 'float'} failed, so the gate cannot pass")
    if found.vs_float is None:
        for name, f in ((variant, found), ("float", flt)):
            if f.not_measured.get("metrics"):
                return result(False, None, None, f"{name} accuracy was not measured ({f.not_measured['metrics']}),"
                                                 " so the gate cannot pass")
        return result(False, None, None, "the model's output is not class scores and no --metric was given: the"
                                         " accuracy gate does not apply")
    drop = -found.vs_float.delta
    p = found.vs_float.p_value
    noise = f", {jd.p_text(p)}" if p is not None else ""
    metric, share = metric_of(report)
    if metric == "accuracy":
        points, lim = f"{drop * 100:.1f} points", f"{limit * 100:.1f}"
    else:
        points = (f"{drop * 100:.1f} points" if share else f"{fmt_number(drop)}")
        lim = f"{limit * 100:.1f}" + (" points" if share else "") if share else f"{limit:g}"
    label = f"{label} {metric}" if metric != "accuracy" else f"{label} accuracy"
    primary = next((o.name for o in report.model.outputs if o.primary), None)
    where = f" on output {primary}" if primary else ""
    if not jd.gate_passes(drop, limit):
        return result(False, drop, p, f"{label} drop {points}{noise}{where} exceeds the limit of {lim}")
    for h in heads or []:
        if h.variant == variant and h.output != primary and h.vs_float is not None:
            head_drop = -h.vs_float.delta
            if not jd.gate_passes(head_drop, limit):
                head_p = f", {jd.p_text(h.vs_float.p_value)}" if h.vs_float.p_value is not None else ""
                return result(False, head_drop, h.vs_float.p_value, f"{variant} accuracy drop {head_drop * 100:.1f} points"
                                                                   f"{head_p} on output {h.output} exceeds the limit of {lim}")
    return result(True, drop, p, f"{label} drop {points}{noise}{where} is within the limit of {lim}")
