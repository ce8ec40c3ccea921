"""The words of the shared-scale warning (reporter.findings.notices.shared_scales decides it): which parts of one
integer output share its scale, how far apart their float ranges are, what share of each rounds to 0, and what the
repair rung that quantizes them apart measured."""

from __future__ import annotations

from reporter.core import variants
from reporter.core.errors import plain
from reporter.core.formatting import fmt_mse, fmt_number, fmt_percent, fmt_score, shorten
from reporter.findings.notices import FIX_FAILED, FIX_MEASURED, FIX_NONE, Fact
from reporter.model import repair as rp
from reporter.model.report import Report
from reporter.model.shared_scale import SPLIT_RUNG, ScalePart

# What became of the repair rung, where it built no measured model (reporter.model.repair's statuses).
RUNG_STATUS = {rp.NOT_TRIED: "was not tried (an earlier rung met the accuracy target)"}
PARTS_SHOWN = 8  # parts named one by one; the rest counted


def text(report: Report, fact: Fact) -> str:
    """"FIQ's int8 output output_0 is a CONCATENATION of 2 parts whose float ranges differ 137x, quantized with one
    scale (1.152, zero point -128): boxes/mul (MUL: 32 values per sample, 2.17 to 297) rounds 0 % of its nonzero
    values to 0, scores/Sigmoid (LOGISTIC: ...) 58.0 %. ..."."""
    v = report.variant(fact.subject)
    shared = v.shared_scales[fact.detail]
    parts = sorted(shared.parts, key=lambda p: -p.span)
    said = [_part(p, first=i == 0) for i, p in enumerate(parts[:PARTS_SHOWN])]
    if len(parts) > PARTS_SHOWN:
        rest = parts[PARTS_SHOWN:]
        said.append(f"{len(rest)} more part{'s' * (len(rest) != 1)} (up to"
                    f" {fmt_percent(max(p.zero_share for p in rest))} rounded to 0)")
    others = [variants.short(name) for name in fact.items]
    also = f" {', '.join(others)} share{'s' * (len(others) == 1)} it too." if others else ""
    return (f"{variants.short(v.name)}'s {shared.dtype} output {fact.detail} is a CONCATENATION of {len(parts)} parts"
            f" whose float ranges differ {fmt_number(shared.ratio)}x on the evaluation data, quantized with one scale"
            f" ({fmt_number(shared.scale)}, zero point {shared.zero_point}): {'; '.join(said)}.{also} Giving each part"
            " its own scale repairs that (the concatenation and the ops after it kept in float, or the parts as outputs"
            f" of their own joined by the host): {_fix(report, fact)}.")


def _part(p: ScalePart, first: bool) -> str:
    what = f"{shorten(p.name)} ({p.op + ': ' if p.op else ''}{p.values:,} value{'s' * (p.values != 1)} per sample," \
           f" {p.low:.4g} to {p.high:.4g})"
    if first:
        return f"{what} rounds {fmt_percent(p.zero_share)} of its nonzero values to 0"
    return f"{what} {fmt_percent(p.zero_share)}"


def _fix(report: Report, fact: Fact) -> str:
    """What the repair rung that quantizes the parts apart came to in this run."""
    rung = next((r for r in report.repairs if r.rung == SPLIT_RUNG), None)
    if rung is None:
        return (f"the integer-only repair ladder's rung {SPLIT_RUNG} builds that model; this run built none (the"
                " ladder climbs for an integer-only --target when no model meets the accuracy target there)")
    named = f"the repair ladder's rung {SPLIT_RUNG} ({rung.label})"
    if fact.fix_state == FIX_FAILED:
        how = "does not apply" if rung.status == rp.DOES_NOT_APPLY else "could not be built"
        return f"{named} {how}: {plain(fact.fix_error)}"
    if fact.fix_state == FIX_NONE and rung.screen is not None:
        screen = rung.screen
        return (f"{named} was built, but on {screen.samples:,} selection samples it came no closer to float"
                f" ({screen.words}) than {screen.against}, which misses the accuracy target: it was not measured"
                " further")
    if fact.fix_state == FIX_NONE:
        return f"{named} {RUNG_STATUS.get(rung.status, rung.status.replace('_', ' '))}"
    on_target = {rp.MEETS: "; it meets the accuracy target on the target",
                 rp.MISSES: "; it misses the accuracy target on the target",
                 rp.NOT_ON_TARGET: "; it does not run on the target (its concatenation computes in float)"}.get(
        rung.status, "")
    if fact.fix_state != FIX_MEASURED:
        return f"{named} was built; its quality on {fact.output} was not measured{on_target}"
    fix, own = fact.fix, fact.figure
    label = variants.short(fact.subject)
    if fix.score is not None:
        measured = (f"measured {fmt_score(fix.score, fix.share)} on {fact.output} against {label}'s"
                    f" {fmt_score(own.score, own.share)}")
    elif fix.mse is not None:
        measured = (f"measured output {fmt_mse(fix.mse, fix.variance)} on {fact.output} against float, {label}"
                    f" {fmt_mse(own.mse, own.variance)}")
    else:
        measured = (f"kept float's class on {fact.output} for {fmt_percent(fix.agreement)} of the samples,"
                    f" {label} for {fmt_percent(own.agreement)}")
    return f"{named} {measured}{on_target}"
