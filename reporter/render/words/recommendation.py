"""The words of the recommendation: the gap's reason, its one sentence, why each layer is kept, what the fix
measured, the lighter schemes tried for the recommended layers, the variants that win FIQ's gap back instead,
and the trade-off points' scores (reporter.findings.derive decides all of them)."""

from __future__ import annotations

from typing import NamedTuple, Optional

from reporter.core import judgement as jd
from reporter.core import variants
from reporter.core.errors import plain
from reporter.core.formatting import (fmt_amount, fmt_number, fmt_percent, fmt_points, fmt_score,
                                      fmt_signed_bytes, p_text)
from reporter.model import findings as mf
from reporter.model.findings import (AlternativeFinding, Decision, Findings, FixFinding, GapFinding, Reason,
                                     TradeoffPoint)
from reporter.model.report import Alternative, Recommendation, Report, SearchResult
from reporter.core.variants import SEARCH_METHOD
from reporter.render.words import search as search_words
from reporter.render.words.comparison import text as comparison_text, worse_words

# A scheme in a sentence (float is called by its name).
SCHEME_NAMES = variants.SCHEME_WORDS  # a scheme in a sentence: "dynamic range"


def gap_reason(report: Report, gap: GapFinding, decision: Optional[Decision] = None) -> str:
    """Why FIQ's gap is what it is (`GapFinding.why`): "FIQ loses 32.5 points", "FIQ failed: ..."."""
    why = gap.why
    if why == mf.FIQ_NOT_BUILT:
        return "FIQ was not built"
    if why == mf.FIQ_FAILED:
        return f"FIQ failed: {plain(report.variant(variants.FIQ).error)}"
    if why == mf.NOT_CLASS_SCORES:
        return ("the model's output is not class scores, so there is no accuracy; the report compares output error"
                " instead")
    if why == mf.SEARCHED:  # a report written before the search stopped wording its figures kept its words
        return report.recommendation.gap.reason or _searched(report, gap)
    if why == mf.FLOAT_NOT_MEASURED:
        return "float was not measured"
    metric, share = report.metric()
    if why == mf.METRIC_NOT_MEASURED:
        name = "FIQ" if gap.variant == variants.FIQ else gap.variant
        return f"{name}'s {metric} was not measured: {report.variant(gap.variant).not_measured('metrics')}"
    if why == mf.NOT_WORSE:
        return f"FIQ is at least as good as float on {metric}"
    if why == mf.NOISE:
        return f"the drop is within noise ({p_text(gap.p_value)})"
    if why == mf.LOSES:
        return f"FIQ {worse_words(fmt_amount(gap.fiq_drop, share, metric, report.metric_plain()))}"
    limit = report.settings.max_accuracy_drop
    if why == mf.ALLOWED:
        return f"the drop is within --max-accuracy-drop {limit:g}"
    if why in (mf.FIX_MEETS, mf.FIX_MISSES):
        fixed = decision.option(variants.SELECTIVE) if decision is not None else None
        cmp = fixed.vs_float if fixed is not None else None
        said = f" ({comparison_text(cmp)})" if cmp is not None else ""
        if why == mf.FIX_MEETS:
            return f"the search's model meets the accuracy target{said}"
        return f"the search's model does not meet the accuracy target{said}"
    raise ValueError(f"a gap for an unknown reason {why!r}")


def _searched(report: Report, gap: GapFinding) -> str:
    """The gap as the search measured it (Recommendation.gap: FIQ's drop and its paired test, or the recommended
    model's once built), said by how those figures stand against the accuracy target (`GapFinding.standing`)."""
    found = report.recommendation.gap
    metric, share = report.metric()
    return searched_words(gap.status, gap.standing, found.drop, found.p_value, report.settings.max_accuracy_drop,
                          Scale(metric, share, _test_name(report), report.metric_plain()))


class Scale(NamedTuple):
    """The main metric a gap is said on: its name, whether it is a share (points), its paired test ("McNemar" ...)."""

    metric: str
    share: bool
    test: str
    plain: bool = True  # the share of samples right, said in plain points (Report.metric_plain)


def searched_words(status: str, standing: str, drop: Optional[float], p_value: Optional[float],
                   limit: Optional[float], scale: Scale) -> str:
    """A gap (`status` "no_gap" or "gap": FIQ's; "recovered" or "open": the recommended model's) from its drop on
    the main metric and its paired test, by how they stand against the accuracy target (`standing`:
    reporter.core.judgement.NOT_WORSE ... LOSES): "FIQ loses 4.3 points (McNemar p < 0.005)"."""
    metric, share, test, plain = scale
    amount = fmt_amount(drop, share, metric, plain) if drop is not None else ""
    tested = f"{test} {p_text(p_value) if p_value is not None else 'not tested'}"
    if status in ("no_gap", "gap"):
        if standing == jd.NOT_WORSE:
            return "FIQ is at least as good as float"
        if standing == jd.ALLOWED:
            return f"the drop is within --max-accuracy-drop {limit:g}"
        if standing == jd.NOISE:
            return f"the drop is within noise ({tested})"
        return f"FIQ {worse_words(amount)} ({tested})"
    if standing == jd.NOT_WORSE:
        return "the search's model is as good as float"
    if standing == jd.NOISE:
        return f"{amount} below float, within noise: {tested}"
    if standing == jd.ALLOWED:
        return f"{amount} below float: within --max-accuracy-drop {limit:g}"
    return f"the search's model still {worse_words(amount)}, {tested}"


def _test_name(report: Report) -> str:
    """The paired test of the main metric: McNemar on the samples right (accuracy), a paired t-test for a user's
    metric with one value per sample or over blocks of samples (one that returns a number), else the paired bootstrap
    (mean IoU)."""
    flt = report.variant(variants.FLOAT)
    main = flt.metrics.main if flt is not None and flt.metrics is not None else None
    if main is None:
        return "McNemar"
    return "paired t-test" if main.per_sample or main.blocks else "paired bootstrap"


def score_text(point: TradeoffPoint) -> str:
    """A trade-off point's main metric, as measured: "85.3 %", or a plain number."""
    return fmt_score(point.score, point.share)


def sentence(report: Report, found: Findings) -> str:
    """What the recommendation keeps in float and what that model measured, in one sentence (`found` worded)."""
    rec, gap, fix = report.recommendation, found.gap, found.fix
    if rec is None:
        return ""
    if gap.status == "no_gap":
        return f"FIQ needs no fix: {gap.reason}, so no layer is kept in float and no selective model is built."
    if gap.why == mf.NOISE:  # a gap by --max-accuracy-drop alone: nothing measured to win back, whatever was built
        built = rec.selective is not None and rec.selective.ok
        return (f"No fix is offered: {gap.reason}, so the data show no loss for layers in float to win back"
                + (f"; the search's model, with {kept_words(rec)}, is judged with the other models" if built else "")
                + ".")
    search = rec.search
    if fix is None or fix.status == "not_built":
        if rec.method == SEARCH_METHOD and search is not None and search.target_met and _misses_on_evaluation(found):
            sel = search.selection_data
            if sel.differs:  # measured: the evaluation data show FIQ's loss where the selection samples do not
                return (f"FIQ meets the search's target ({search.target_text}) on its {sel.num_samples:,} selection"
                        f" samples ({sel.source}), but not on the evaluation data: those samples do not show FIQ's"
                        " loss, so the search kept no layer in float; give x_calib samples that look like the"
                        " evaluation data.")
            return (f"FIQ meets the search's target ({search.target_text}) on its {sel.num_samples:,} selection"
                    f" samples ({sel.source}) but misses the accuracy target on the evaluation data, and the two"
                    " were not measured to differ: the search's target does not see the loss the accuracy target"
                    " reads, so the search kept no layer in float.")
        if rec.method == SEARCH_METHOD and search is not None and search.target_met:
            return f"FIQ already meets the search's target ({search.target_text}): no layer needs to stay in float."
        if rec.method == SEARCH_METHOD and search is not None and search.beyond is not None \
                and search.beyond.outcome in search_words.NOT_FOUND:
            return (f"{search_words.beyond_text(search.beyond)}. No layer is kept in float: the model to ship comes"
                    " from the whole-model and mixed schemes measured.")
        if rec.method == SEARCH_METHOD and search is not None and search.spread:  # a report without the record
            return (f"{search.stop_reason}. No layer is kept in float: the model to ship comes from the whole-model"
                    " and mixed schemes measured.")
        if rec.method == SEARCH_METHOD:
            none = none_measurable(search, gap if report.metric()[1] else None)
            return f"{none}; no layer is kept in float."
        return "No layer is flagged by the rmse/scale rule: nothing to keep in float."
    layers = kept_words(rec)
    if fix.status == "failed":
        return f"Keeping {layers} was chosen, but {fix.text}."
    how = "The search keeps" if rec.method == SEARCH_METHOD else "The rmse/scale rule keeps"
    if rec.method == SEARCH_METHOD and search is not None and search.beyond is not None \
            and search.beyond.outcome in search_words.FOUND:
        how = f"{search_words.beyond_text(search.beyond)}. {how}"
    cost = f" at {fmt_signed_bytes(fix.size_cost_bytes)} against FIQ" if fix.size_cost_bytes is not None else ""
    if fix.status == "measured":
        text = f"{how} {layers}{cost}" + (
            f"; output MSE against float falls from {fmt_number(fix.fiq_output_mse)} to {fmt_number(fix.output_mse)}"
            if fix.output_mse is not None and fix.fiq_output_mse is not None else (f"; {fix.text}" if fix.text else ""))
    else:
        metric = report.metric()[0]
        text = f"{how} {layers} and wins back {fmt_percent(fix.share_of_gap, 0)} of the float-to-FIQ" \
               f" {metric} gap{cost} ({gap.reason})"
    if rec.method == SEARCH_METHOD and search is not None and not search.target_met:
        text += f"; the search's target was not reached on its {search.selection_data.num_samples:,} selection samples"
    if rec.method == SEARCH_METHOD and search is not None and search.out_of_budget:
        text += f"; the search stopped at its budget, {_budget_words(search)}, and keeps the best set it measured"
    if fix.rule_layers is not None and fix.rule_share_of_gap is not None:
        layers = f"{fix.rule_layers} layer{'s' if fix.rule_layers != 1 else ''}"
        won = f"win back {fmt_percent(fix.rule_share_of_gap, 0)}" if fix.rule_share_of_gap > 0 else \
            "win back none of the gap" + (f" (it ends {fmt_percent(-fix.rule_share_of_gap, 0)} of the gap below FIQ)"
                                          if fix.rule_share_of_gap < 0 else "")
        text += f". The rmse/scale rule would keep {layers} and {won}"
    return text + "."


def _budget_words(search) -> str:
    """What bounded the search: --search-share's estimate, or --search-budget's count."""
    c = search.cost
    if c is not None and c.candidates < search.budget:
        return (f"{c.candidates:,} candidates (--search-share {c.share:g} of the bare seed calls' estimated"
                f" {c.bare_seconds:.0f} s)")
    return f"{search.budget:,} candidates (--search-budget)"


def _misses_on_evaluation(found: Findings) -> bool:
    """FIQ does not meet the accuracy target on the evaluation data, as the decision judged it."""
    fiq = found.decision.option(variants.FIQ) if found.decision is not None else None
    return fiq is not None and fiq.score is not None and not fiq.meets


def none_measurable(search: Optional[SearchResult], gap: Optional[GapFinding] = None) -> str:
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
    if sel.grown_from:
        text += f"; grown from {sel.grown_from:,} to every x_calib sample beyond the calibration samples"
    if lost is not None and 0 < lost < sel.detectable:
        more = "more x_calib samples are" if sel.grown_from else "more x_calib samples (--selection-samples) are"
        text += (f"; FIQ's whole loss, {fmt_points(lost).lstrip('+')} points, is below it: {more} needed to find"
                 " its cause")
    return text + ")"


def kept_words(rec: Recommendation) -> str:
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


def reason_text(report: Report, reason: Reason) -> str:
    """Why a layer is kept in float: forced, needed (what the search measured without it), or the rule's flag."""
    rec = report.recommendation
    if reason.kind == "forced":
        return "asked for (--keep-float)"
    if reason.kind == "needed":
        lost = reason.value
        if report.model.num_classes is not None:
            return f"without it, agreement with float on the selection data drops {lost * 100:.1f} points"
        return f"without it, the selection score (1 - output MSE / variance) drops {lost:.3g}"
    if reason.kind == "rmse_over_scale":  # null in report.json: not finite (inf), so flagged
        return f"RMSE/scale {'inf' if reason.value is None else format(reason.value, '.3g')} is above the rule's" \
               f" {rec.threshold:g}"
    return f"one of the first {rec.first_layers} layers"


def fix_text(report: Report, fix: FixFinding, gap: GapFinding) -> str:
    """Why the recommended model failed or what of it was not measured; "" when it measured."""
    sel = report.recommendation.selective
    if fix.status == "failed":
        return f"the recommended model failed: {plain(sel.error)}"
    if fix.status != "measured":
        return ""
    if sel.metrics is None:
        missing = sel.not_measured("metrics") or sel.not_measured("output_error")
        what = "accuracy" if sel.not_measured("metrics") else "output error"
        return f"the recommended model's {what} was not measured: {missing}" if missing else ""
    return gap.reason  # float's or FIQ's accuracy was not measured: nothing to win back


def alternative_text(alt: Alternative, found: AlternativeFinding) -> str:
    """What the recommended layers in a lighter scheme measured against the recommended model, or why not."""
    words = SCHEME_NAMES.get(alt.scheme, alt.scheme)
    m = alt.model
    if found.status == "not_applicable":
        return (f"{words.capitalize()} for the recommended layers is not applicable: it quantizes only ops with"
                " weights, and none of them has any.")
    if found.status == "failed":
        error = alt.error or (m.error if m else "")
        return f"{words.capitalize()} for the recommended layers could not be built: {plain(error)}"
    cmp, size_delta = found.vs_recommended, found.size_delta_bytes
    what = (f"The recommended layers in {words} ({m.converter}): "
            + (f"{fmt_score(m.metrics.score, m.metrics.share)}" if m.metrics else "accuracy not measured")
            + (f", {cmp.text} against the recommended model" if cmp else "")
            + (f", {fmt_signed_bytes(size_delta)}" if size_delta is not None else ""))
    if alt.scheme == variants.FLOAT:
        return what + (" — the same layers in float through the converter that mixes schemes, so that 16x8 and"
                       " dynamic range are read against it too.")
    return what + {"lighter": " — as accurate within noise and smaller: a lighter fix.",
                   "worse": " — worse than keeping them in float.", "not_lighter": "."}[found.status]
