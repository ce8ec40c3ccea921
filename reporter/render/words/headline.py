"""The words of the headline, the story a reader meets first: what FIQ lost, what caused it, what keeping
it in float won back and at what cost, the other variants' blamed layers, and the outputs that lost accuracy
(reporter.findings.derive decides all of it)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Optional

from reporter.core import targets as tg
from reporter.core import variants
from reporter.core.errors import plain
from reporter.core.formatting import (fmt_amount, fmt_bytes, fmt_ms, fmt_mse, fmt_number, fmt_percent, fmt_score,
                                      fmt_signed_bytes, p_text)
from reporter.findings.notices import Fact
from reporter.model import findings as mf
from reporter.model.findings import Culprit, Findings, FixFinding, VariantFinding
from reporter.model.report import Report
from reporter.render.words.comparison import worse_words
from reporter.render.words.notices import nonfinite_text
from reporter.render.words.verdicts import size_words

def headline(report: Report, found: Findings, recommendation: str, nonfinite: Optional[Fact]) -> list[str]:
    """A few sentences (`found` worded but for its headline; `recommendation` the sentence of
    reporter.render.words.recommendation): the model to ship for the target first (after non-finite outputs,
    which change every figure the decision stands on), then what FIQ lost, its cause and what keeping it in float
    measured."""
    lines = [nonfinite_text(report, nonfinite)] if nonfinite is not None else []
    lines += [found.decision.reason] if found.decision is not None and found.decision.reason else []
    return lines + _story(report, found, recommendation) + _head_lines(found)


def _story(report: Report, found: Findings, recommendation: str) -> list[str]:
    culprits, fix = found.culprits, found.fix
    fiq, flt = found.variant(variants.FIQ), found.variant(variants.FLOAT)
    if flt is None or not flt.ok:
        return ["The float model could not be measured, so nothing can be compared with it."]
    if fiq is None:
        return ["FIQ was not built (not among the variants asked for): " + _others(found.variants)] \
            + _blames(found.variants)
    if not fiq.ok:
        return [f"FIQ could not be built: {plain(fiq.error)}."] + _blames(found.variants)
    lines = [_gap_line(report, found, fiq, flt)]
    rec = report.recommendation
    if fix is not None and culprits:
        said = found.decision is not None and found.decision.variant == variants.SELECTIVE  # its figures led the story
        lines += _fix_lines(report, fix, culprits, flt, said) + _not_shipped(report, found)
    elif fix is not None and (fix.status == "not_built" or (rec is not None and rec.denylisted_ops)):
        lines.append(recommendation)
    lines += _blames(found.variants)
    if fiq.slower:
        lines.append(f"On this machine FIQ runs {fiq.latency_ratio:.1f}x slower than float"
                     f" ({fmt_ms(fiq.latency_ms)} against {fmt_ms(flt.latency_ms)} per sample, one thread).")
    return lines


def _gap_line(report: Report, found: Findings, fiq: VariantFinding, flt: VariantFinding) -> str:
    """What FIQ lost against float, or that it lost nothing beyond noise, or why that cannot be told."""
    gap = found.gap
    size = size_words(fiq.size_ratio) if fiq.size_ratio else ""
    if gap.status == "not_measurable":
        heads = [h for h in found.heads if h.variant == variants.FIQ]
        if heads:  # several outputs: each head's own measure, never "accuracy is not measured" beside a measured one
            return (f"FIQ is {size}; each output is judged by its own measure: "
                    + "; ".join(f"output {h.output}, {h.measure}: {h.text}" for h in heads) + "." + _targets(report))
        if fiq.output_mse is not None:
            return (f"The model's output is not class scores, so accuracy is not measured: FIQ's output differs from"
                    f" float's, {fmt_mse(fiq.output_mse, fiq.output_variance)}; FIQ is {size}." + _targets(report))
        return f"FIQ's accuracy gap is not measurable ({gap.reason})."
    metric, share = report.metric()
    if gap.status == "no_gap":
        good = "as accurate as float" if report.metric_plain() else f"as good as float on {metric}"
        what = (f"FIQ is {size} and {good} ({fmt_score(fiq.accuracy, share)} against"
                f" {fmt_score(flt.accuracy, share)}" + (f"; {fiq.vs_float.text}" if fiq.vs_float else "") + ")")
        if fiq.vs_float is not None and fiq.vs_float.delta < 0 and _lost(report, -fiq.vs_float.delta) != \
                _lost(report, 0.0):
            what = (f"FIQ is {size} and {worse_words(_lost(report, -fiq.vs_float.delta))}"
                    f" ({fmt_score(flt.accuracy, share)} → {fmt_score(fiq.accuracy, share)}), {gap.reason}")
        return what + ": no layer needs to stay in float."
    p = p_text(gap.p_value) if gap.p_value is not None else "p not recorded"
    if gap.why == mf.NOISE:  # it misses --max-accuracy-drop, but no paired test tells its drop from noise
        limit = report.settings.max_accuracy_drop
        beyond = f"beyond --max-accuracy-drop {limit:g}" if limit is not None else "short of the accuracy target"
        return (f"FIQ is {size} and within noise of float on {metric} ({fmt_score(flt.accuracy, share)} →"
                f" {fmt_score(fiq.accuracy, share)}, {p}), though its drop is {beyond}: the data show no loss to win"
                " back, so no fix is offered.")
    judged = found.decision.option(variants.FIQ) if found.decision is not None else None
    if judged is not None and judged.kernels and judged.score is not None:  # the gap as the target's kernels give it
        default = f"; {_lost(report, -fiq.vs_float.delta)} on LiteRT's default kernels" \
            if fiq.vs_float is not None and fiq.vs_float.delta < 0 else ""
        text = (f"FIQ {worse_words(_lost(report, gap.fiq_drop))} against float on {judged.kernels}"
                f" ({fmt_score(flt.accuracy, share)} → {fmt_score(judged.score, share)}, {p}{default})")
    else:
        text = (f"FIQ {worse_words(_lost(report, gap.fiq_drop))} against float ({fmt_score(flt.accuracy, share)} →"
                f" {fmt_score(fiq.accuracy, share)}, {p})")
    if fiq.degenerate is not None:
        unit = report.model.task_kind.unit
        text += f" and predicts class {fiq.degenerate.label} for {fmt_percent(fiq.degenerate.share, 0)} of {unit}"
    return text + "."


def _fix_lines(report: Report, fix: FixFinding, culprits: list[Culprit], flt: VariantFinding,
               said: bool = False) -> list[str]:
    """The culprits, and what keeping them in float won back at what cost (or why nothing was built); `said`: the
    model it built ships, and the headline's first sentence gave its figures against float already."""
    rec = report.recommendation
    where = culprit_phrase(culprits)
    it = "it" if len(culprits) == 1 else "them"
    if rec is not None and rec.denylisted_ops:  # forced op types are kept too: say so wherever "it" is
        it += " and every " + " and ".join(rec.denylisted_ops) + " op (--keep-float-ops)"
    if fix.status in ("recovered", "open") and fix.accuracy is not None:
        metric, share = report.metric()
        won = (f"wins back {fmt_amount(fix.points_won_back, share, metric, report.metric_plain())} ({fmt_percent(fix.share_of_gap, 0)} of"
               " the gap)" if fix.points_won_back is not None and fix.share_of_gap is not None else "was measured")
        against = f"{fmt_score(fix.accuracy, share)} against float's {fmt_score(flt.accuracy, share)}" + (
            f" ({fix.vs_float.text})" if fix.vs_float else "")
        if fix.status == "recovered":
            return [f"The cause is {where}. Keeping {it} in float {won}"
                    + (f", {_cost(report, fix)}." if said else f": {against}, {_cost(report, fix)}.")]
        return [f"The search blames {where}. Keeping {it} in float {won}, but the gap stays open:"
                f" {against}, {_cost(report, fix)}."]
    if fix.status == "measured" and fix.text and (fix.output_mse is None or fix.fiq_output_mse is None):
        return [f"A model keeping {where} in float was built, {_cost(report, fix)}, but {fix.text}."]
    if fix.status == "measured":
        mse = (f"lowers the output error from MSE {fmt_number(fix.fiq_output_mse)} to {fmt_number(fix.output_mse)}"
               if fix.output_mse is not None and fix.fiq_output_mse is not None else "was measured")
        return [f"Keeping {where} in float {mse}, {_cost(report, fix)}."]
    if fix.status == "failed":
        return [f"Keeping {where} in float was chosen, but {fix.text}."]
    return [f"The rmse/scale rule flags {where}; no model was built with {it} in float."]


def _not_shipped(report: Report, found: Findings) -> list[str]:
    """Where the float-keep set does not run on the target and another model ships: that path, said once."""
    d = found.decision
    kept = d.option(variants.SELECTIVE) if d is not None and d.variant and d.variant != variants.SELECTIVE else None
    if kept is None or kept.runs:
        return []
    return [f"{kept.label} does not run {tg.of(d.target).words}, so {d.label} ships instead."]


def _head_lines(found: Findings) -> list[str]:
    """A line for each output that FIQ (or the recommended model) makes less accurate than float beyond noise."""
    lines = []
    for name in (variants.FIQ, variants.SELECTIVE):
        for h in found.heads:
            if h.variant == name and h.worse and h.vs_float is not None:
                who = "FIQ" if name == variants.FIQ else "The recommended model"
                lines.append(f"Output {h.output}: {who} loses {-h.vs_float.delta * 100:.1f} accuracy points against"
                             f" float ({h.text}).")
    return lines


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


def _lost(report: Report, drop: float) -> str:
    """"4.3 accuracy points" (the share of samples right: Report.metric_plain), "4.3 points of mean IoU", "0.0123 of
    top2"."""
    if report.metric_plain():
        return f"{drop * 100:.1f} {report.model.task_kind.accuracy_label.lower()} points"
    metric, share = report.metric()
    return fmt_amount(drop, share, metric, False)


def _blames(found: list[VariantFinding]) -> list[str]:
    """A line for each variant other than FIQ (which has the search) that loses accuracy: the layer to blame
    and what keeping it in float measured."""
    return [v.blame.text for v in found if variants.blamed_in_headline(v.name) and v.blame is not None]


def _cost(report: Report, fix: FixFinding) -> str:
    flt = report.variant(variants.FLOAT)
    sel = report.recommendation.selective
    cost = f"at {fmt_signed_bytes(fix.size_cost_bytes)} against FIQ"
    if flt is not None and flt.ok and sel is not None and sel.ok and sel.size_bytes:
        cost += f" ({fmt_bytes(sel.size_bytes)}, {size_words(sel.size_bytes / flt.size_bytes)})"
    return cost


def _others(found: list[VariantFinding]) -> str:
    return "; ".join(v.verdict for v in found if v.name != variants.FLOAT) or "only the float model was measured."


def _targets(report: Report) -> str:
    """A regression output measured against its targets: FIQ's MAE and R² against float's ("" when not)."""
    by = {v.name: v.target_error for v in report.variants if v.ok}
    fiq, flt = by.get(variants.FIQ), by.get(variants.FLOAT)
    if fiq is None or flt is None:
        return ""
    r2 = "" if fiq.r2 is None or flt.r2 is None else f", R² {fiq.r2:.3f} against {flt.r2:.3f}"
    return f" Against the targets FIQ's MAE is {fiq.mae:.4g} against float's {flt.mae:.4g}{r2}."
