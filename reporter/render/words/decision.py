"""The words of the decision (reporter.findings.decision decides it): the headline's first sentence, naming the
model to ship for the target and why, its runner-up, and for integer-only hardware the reference kernels'
agreement; or, when no quantized model for the target meets the accuracy target, what to do instead and what
would meet it."""

from __future__ import annotations

from typing import Optional

from reporter.core import judgement as jd
from reporter.core import targets as tg
from reporter.core import variants
from reporter.core.formatting import fmt_amount, fmt_mse, fmt_percent, fmt_score
from reporter.findings import decision as choice
from reporter.findings.basis import metric_of
from reporter.model import findings as mf
from reporter.model.findings import Decision, Findings
from reporter.model.kernels import ReferenceAgreement
from reporter.model.report import Report
from reporter.render.words.comparison import text as comparison_text
from reporter.render.words.verdicts import size_words


def sentence(report: Report, found: Findings, d: Decision) -> str:
    """The headline's first sentence (and the runner-up's), `found` worded."""
    where = tg.of(d.target).words
    by_name = {o.name: o for o in choice.options(report)}
    flt = by_name.get(variants.FLOAT)
    if d.why == mf.MEETS:
        ship = by_name[d.variant]
        text = (f"Ship {d.label} {where}: it meets the accuracy target ({_quality(report, ship, flt)})"
                f"{_cost(ship, flt, d.target)}.")
        if d.runner_up:
            text += f" Runner-up: {d.runner_up_label}, {_trade(by_name[d.runner_up], ship, d.target)}."
        if d.reference_agreement is not None:
            text += " " + agreement(d.reference_agreement)
        return text
    if d.why == mf.FLOAT_CHEAPER:
        best = by_name[d.runner_up]
        return (f"Keep float {where}: the cheapest quantized model that meets the accuracy target, {d.runner_up_label}"
                f" ({_quality(report, best, flt)}), is {_trade(best, flt, d.target, accuracy=False)} than float here;"
                f" ship it where size matters more than speed.")
    if d.why == mf.NO_CANDIDATE:
        adds = tg.of(d.target).adds  # a variant the target added: its error is said here (no other line says it)
        reasons = [f"{variants.short(v.name)} failed" + (f": {v.error}" if v.name in adds else "") if not v.ok
                   else f"{variants.short(v.name)} quantized nothing"
                   for v in report.variants if v.name != variants.FLOAT
                   and (not v.ok or not tg.quantized(v.tensor_types, v.weight_coverage))]
        why = f"no quantized model that runs {where} was measured" + (f" ({'; '.join(reasons)})" if reasons else "")
    else:
        closest = by_name[d.runner_up]
        why = (f"no quantized model that runs {where} meets the accuracy target{_limit(report)}"
               f" (the nearest to float, {d.runner_up_label}, {_loss(report, closest)})")
    text = (f"Keep float {where}: {why}." if d.variant == variants.FLOAT else f"Nothing to ship {where}: {why}.")
    if d.would_meet:
        text += (f" {choice.label(report, d.would_meet)} meets it ({_quality(report, by_name[d.would_meet], flt)}),"
                 f" but {_why_not(report, d)}.")
    return text


def agreement(a: ReferenceAgreement) -> str:
    """"LiteRT's reference kernels (what TFLite Micro and many NPUs run) give the same output values as the default
    kernels on 99.8 % of values over 256 samples (largest difference 1 quantization step; same top class on 100 %)"."""
    text = (f"LiteRT's reference kernels (what TFLite Micro and many NPUs implement) give the same output values as"
            f" its default kernels on {fmt_percent(a.identical_share)} of values over {a.samples:,} samples")
    if a.max_steps > 0:
        text += f" (largest difference {a.max_steps:.0f} quantization step{'s' if a.max_steps >= 1.5 else ''}"
        text += f"; the same top class on {fmt_percent(a.top1_agreement)})" if a.top1_agreement is not None else ")"
    return text + "."


def _why_not(report: Report, d: Decision) -> str:
    """Why the model that meets the accuracy target is not for this target."""
    if d.target == tg.INT8:
        return "integer-only hardware runs no float or int16 op"
    return "a GPU delegate computes in float16 or float32 only"


def _limit(report: Report) -> str:
    limit = report.settings.get("max_accuracy_drop")
    return f" (--max-accuracy-drop {limit:g})" if limit is not None else ""


def _quality(report: Report, o: choice.Option, flt: Optional[choice.Option]) -> str:
    """"80.3 % against float's 80.9 %, within noise: −0.6 points, p = 0.41"; an output error without labels."""
    m = o.model
    if o.vs_float is not None and m.metrics is not None and flt is not None and flt.model.metrics is not None:
        share = metric_of(report)[1]
        return (f"{fmt_score(m.metrics.score, share)} against float's {fmt_score(flt.model.metrics.score, share)},"
                f" {comparison_text(o.vs_float)}")
    if m.output_error is not None:
        return f"output {fmt_mse(m.output_error.mse, m.output_error.float_variance)} against float"
    return "as measured"


def _loss(report: Report, o: choice.Option) -> str:
    if o.vs_float is not None:
        metric, share = metric_of(report)
        p = f", {jd.p_text(o.vs_float.p_value)}" if o.vs_float.p_value is not None else ""
        return f"{jd.worse_words(fmt_amount(-o.vs_float.delta, share, metric))}{p}"
    if o.model.output_error is not None:
        e = o.model.output_error
        return f"differs from float by {fmt_mse(e.mse, e.float_variance)}"
    return "falls short"


def _cost(ship: choice.Option, flt: Optional[choice.Option], target: str) -> str:
    """", 3.5x smaller and 1.8x faster than float": size, and latency where the target is timed here."""
    if flt is None or not flt.model.size_bytes:
        return ""
    parts = [size_words(ship.model.size_bytes / flt.model.size_bytes)]
    if tg.of(target).timed and ship.latency and flt.latency:
        parts.append(_speed(ship.latency / flt.latency, variants.FLOAT))
    return ", " + " and ".join(parts).replace(" than float and ", " and ")


def _speed(ratio: float, other: str) -> str:
    if jd.same_ratio(ratio, jd.LATENCY_SAME_RATIO):
        return f"as fast as {other}"
    return f"{1 / ratio:.1f}x faster than {other}" if ratio < 1 else f"{ratio:.1f}x slower than {other}"


def _trade(o: choice.Option, ship: choice.Option, target: str, accuracy: bool = True) -> str:
    """How `o` trades against `ship`: "1.2x smaller but 1.3x slower", "3 % smaller but 2.0x slower"; and, where the
    shipped model loses beyond noise (within the allowed drop) and `o` does not, that `o` is within noise."""
    parts = []
    ratio = o.model.size_bytes / ship.model.size_bytes
    if not jd.same_ratio(ratio):
        parts.append(size_words(ratio).removesuffix(" than float"))
    if tg.of(target).timed and (tg.faster(o.latency, ship.latency) or tg.faster(ship.latency, o.latency)):
        parts.append(_speed(o.latency / ship.latency, "").removesuffix(" than ").strip())
    text = " but ".join(parts) if parts else "as cheap"
    if accuracy and _loses(ship) and not _loses(o):
        text += f"; not worse than float beyond noise ({comparison_text(o.vs_float)})"
    return text


def _loses(o: choice.Option) -> bool:
    return o.vs_float is not None and jd.worse_beyond_noise(o.vs_float.significant, o.vs_float.delta)
