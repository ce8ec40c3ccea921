"""The words of the decision (reporter.findings.decision decides it): the headline's first sentence, naming the
model to ship for the target and why, its runner-up, and for integer-only hardware the reference kernels'
agreement; or, when no quantized model for the target meets the accuracy target, what to do instead and what
would meet it."""

from __future__ import annotations

from typing import Optional

from reporter.core import targets as tg
from reporter.core import variants
from reporter.core.errors import plain
from reporter.core.formatting import fmt_amount, fmt_mse, fmt_percent, fmt_score, p_text
from reporter.model import findings as mf
from reporter.model.findings import Decision, Findings, Option
from reporter.model.variant import OnTarget
from reporter.model.kernels import ReferenceAgreement
from reporter.model.report import Report
from reporter.render import steps, tools
from reporter.render.tools import grouped as _grouped
from reporter.render.words.comparison import text as comparison_text, worse_words
from reporter.render.words.verdicts import size_words, speed_words


# Why an option is not the model shipped, in the comparison table's last column (`Option.why`).
WHY_NOT = {
    mf.OPT_REFERENCE: "", mf.OPT_RUNNER_UP: "",
    mf.OPT_NOT_MEASURED: "not measured on the report's metric",
    mf.OPT_NOT_ON_TARGET: "does not run on the target",
    mf.OPT_NOT_QUANTIZED: "quantized nothing",
    mf.OPT_DOES_NOT_MEET: "misses the accuracy target",
    mf.OPT_COSTS_MORE: "costs more",
    mf.OPT_TIE_LESS_ACCURATE: "as cheap, less accurate beyond noise",
    mf.OPT_TIE_LARGER: "as cheap and accurate, larger",
}


def why_not(code: str) -> str:
    """Why an option is not the model shipped, in a table cell ("" for the shipped one, float and the runner-up,
    which the role names)."""
    return WHY_NOT.get(code, code)


def sentence(report: Report, found: Findings, d: Decision) -> str:
    """The headline's first sentence (and the runner-up's), `found` worded; read from the decision's judged
    options."""
    target = tg.of(d.target)
    where = target.words
    flt = d.option(variants.FLOAT)
    if d.why == mf.MEETS:
        ship = d.option(d.variant)
        text = (f"Ship {d.label} {where}: it meets the accuracy target ({_quality(report, ship, flt)})"
                f"{_cost(ship, flt, target)}.")
        if d.input_transform is not None:
            text += " " + host_transform(d.input_transform)
        said = hardware(d.hardware) if d.hardware is not None else ""
        if said:
            text += " " + said
        if d.runner_up:
            text += f" Runner-up: {d.runner_up_label}, {_trade(d.option(d.runner_up), ship, target)}."
        if d.reference_agreement is not None:
            text += " " + agreement(d.reference_agreement)
        return text
    if d.why == mf.FLOAT_DEGENERATE:
        return f"Nothing to ship: {_degenerate_float(report, d, flt)}; check the data before reading any comparison."
    if d.why == mf.FLOAT_CHEAPER:
        best = d.option(d.runner_up)
        return (f"Keep float {where}: the quantized model that meets the accuracy target at the lowest cost,"
                f" {d.runner_up_label} ({_quality(report, best, flt)}), is {_trade(best, flt, target, accuracy=False)}"
                f" than float here; ship it where size matters more than speed.")
    if d.why == mf.NO_CANDIDATE:
        adds = target.adds  # a variant the target added: its error is said here (no other line says it)
        judged = {o.name: o for o in d.options}
        reasons = [f"{variants.short(v.name)} failed" + (f": {in_user_terms(v.error)}" if v.name in adds else "")
                   if not v.ok
                   else f"{variants.short(v.name)} quantized nothing"
                   for v in report.variants if v.name != variants.FLOAT
                   and (not v.ok or (v.name in judged and not judged[v.name].quantized))]
        said = [tool.kept_off(d.options) for tool in tools.every()]  # the reasons a tool words itself
        own = {name for names, _ in said for name in names}
        reasons += _grouped([(o.label, in_user_terms(o.not_there)) for o in d.options if o.not_there
                             and o.name not in own])
        reasons += [clause for _, clauses in said for clause in clauses]
        why = f"no quantized model that runs {where} was measured" + (f" ({'; '.join(reasons)})" if reasons else "")
    elif d.runner_up:
        closest = d.option(d.runner_up)
        why = (f"no quantized model that runs {where} meets the accuracy target{_limit(report)}"
               f" (the nearest to float, {d.runner_up_label}, {_loss(report, closest)})")
    else:
        why = f"no quantized model that runs {where} meets the accuracy target{_limit(report)}" + one_class_clause(d)
    text = (f"Keep float {where}: {why}." if d.variant == variants.FLOAT else f"Nothing to ship {where}: {why}.")
    text += "".join(tool.judged(d.options) for tool in tools.every())
    if d.would_meet:
        would = d.option(d.would_meet)
        text += (f" {d.would_meet_label} meets it ({_quality(report, would, flt)}),"
                 f" but {in_user_terms(would.not_there) or target.runs_not or 'it does not run there'}.")
    return text


def one_class_clause(d: Decision) -> str:
    """": FIQ answers class 1 for every sample": the quantized models that run there but answer one class, which
    are never shipped or advised whatever their loss; "" when there are none."""
    stuck = [o for o in d.options if o.runs and o.quantized and o.name != variants.FLOAT and o.one_class is not None]
    if not stuck:
        return ""
    said = "; ".join(f"{o.label} answers class {o.one_class} for every sample" for o in stuck[:3])
    return f": {said}{'; and more' if len(stuck) > 3 else ''}"


def hardware(on: OnTarget) -> str:
    """What the target's own tool said of the shipped model (reporter.render.tools: Vela's compilation, TFLite
    Micro's run), and what the host CPU runs beside it."""
    host = tg.on_host(on.host_ops)
    host = f" {host[0].upper()}{host[1:]}." if host else ""
    for tool, figures in tools.held(on.tools):
        said = tool.shipped(figures)
        if said:
            return said + host
    return host.strip()


# A target tool's reason as it printed it (report.json and run.log keep it so), read for the sentence's words.
_SOURCE = tools.SOURCE  # a C++ source file and line


def in_user_terms(reason: str) -> str:
    """A target tool's reason (TFLite Micro's, Vela's, LiteRT's) in the user's terms, for a sentence: a tool's own
    reason as the tool words it (reporter.render.tools), never source files, node numbers or an exception's class."""
    for tool in tools.every():
        said = tool.reason(reason) if reason else ""
        if said:
            return said
    return plain(_SOURCE.sub("", reason)) if reason and reason.strip() else ""


def _degenerate_float(report: Report, d: Decision, flt: Optional[Option]) -> str:
    """"the float model predicts class 3 for every sample (9.3 % accuracy)", or a regression's constant output."""
    if d.degenerate_class is None:
        return "the float model's output does not vary across the evaluation samples"
    metric, share = report.metric()
    score = f" ({fmt_score(flt.score, share)} {metric})" if flt is not None and flt.score is not None else ""
    v = report.variant(variants.FLOAT)
    cm = v.metrics.confusion_matrix if v is not None and v.metrics is not None else None
    totals = [sum(row[j] for row in cm) for j in range(len(cm[0]))] if cm else []
    part = totals[d.degenerate_class] / sum(totals) if totals and sum(totals) else 1.0
    every = "every sample" if part >= 1.0 else f"{fmt_percent(part)} of the samples"
    held = f", where the labels hold it for {fmt_percent(sum(cm[d.degenerate_class]) / sum(totals))}" \
        if totals and sum(totals) and d.degenerate_class < len(cm) else ""
    return f"the float model predicts class {d.degenerate_class} for {every}{held}{score}"


def host_transform(t) -> str:
    """How the host must feed a model whose normalization was moved off it, counted, not listed: "It needs the host
    to standardize input x (30 means and 30 scales, in input_transform.json beside the model)."."""
    name = f" {t.input}" if t.input else ""
    means, scales = len(t.subtract), len(t.divide)
    return (f"It needs the host to standardize input{name} ({means} mean{'s' * (means != 1)} and {scales}"
            f" scale{'s' * (scales != 1)}, in input_transform.json beside the model).")


def agreement(a: ReferenceAgreement) -> str:
    """"LiteRT's reference kernels (what ... implement) give the same output values as the default
    kernels on 99.8 % of values over 256 samples (largest difference 1 quantization step; same top class on 100 %)"."""
    text = (f"{tg.REFERENCE_KERNELS} ({tg.reference_kernels_run_by()}) give the same output values as"
            f" its default kernels on {fmt_percent(a.identical_share)} of values over {a.samples:,} samples")
    if a.max_steps > 0:
        text += f" (largest difference {a.max_steps:.0f} quantization step{'s' if a.max_steps >= 1.5 else ''}"
        text += f"; the same top class on {fmt_percent(a.top1_agreement)})" if a.top1_agreement is not None else ")"
    return text + "."


def _limit(report: Report) -> str:
    limit = report.settings.max_accuracy_drop
    return f" (--max-accuracy-drop {limit:g})" if limit is not None else ""


def _quality(report: Report, o: Option, flt: Optional[Option]) -> str:
    """"80.3 % against float's 80.9 %, within noise: −0.6 points, p = 0.41"; an output error without labels."""
    if o.vs_float is not None and o.score is not None and flt is not None and flt.score is not None:
        share = report.metric()[1]
        where = f" on {o.kernels}" if o.kernels else ""
        return (f"{fmt_score(o.score, share)}{where} against float's {fmt_score(flt.score, share)},"
                f" {comparison_text(o.vs_float)}")
    if o.output_mse is not None:
        return f"output {fmt_mse(o.output_mse, o.output_variance)} against float"
    return "as measured"


def _loss(report: Report, o: Option) -> str:
    if o.vs_float is not None:
        metric, share = report.metric()
        p = f", {p_text(o.vs_float.p_value)}" if o.vs_float.p_value is not None else ""
        where = f" on {o.kernels}" if o.kernels else ""
        return f"{worse_words(fmt_amount(-o.vs_float.delta, share, metric, report.metric_plain()))}{where}{p}"
    if o.output_mse is not None:
        return f"differs from float by {fmt_mse(o.output_mse, o.output_variance)}"
    return "falls short"


def _cost(ship: Option, flt: Optional[Option], target: tg.Target) -> str:
    """", 3.5x smaller and 1.8x faster than float": size, and latency where the target is timed here."""
    if flt is None or not flt.size_bytes:
        return ""
    parts = [size_words(ship.size_bytes / flt.size_bytes)]
    if target.timed and _told(ship) and _told(flt):  # under the host's timing floor: no latency words at all
        parts.append(_speed(ship, flt, variants.FLOAT))
    return ", " + " and ".join(parts).replace(" than float and ", " and ")


def _told(o: Option) -> bool:
    """`o`'s latency can be compared on this host: timed with a spread (enough runs, above the timing floor)."""
    return bool(o.latency_ms) and o.latency_p90_ms is not None


def _speed(o: Option, other: Option, other_name: str) -> str:
    """"1.8x faster than float", "2.3x slower than float", or "as fast as float" when neither is faster beyond
    timing noise (judgement.faster: the rule the decision's cost reads)."""
    than = f" than {other_name}" if other_name else ""
    if o.latency_vs_float if other.name == variants.FLOAT else o.latency_vs_ship:
        return speed_words(o.latency_ms / other.latency_ms) + than
    return f"as fast as {other_name}" if other_name else "as fast"


def _trade(o: Option, ship: Option, target: tg.Target, accuracy: bool = True) -> str:
    """How `o` trades against `ship`: "1.2x smaller but 1.3x slower", "3 % smaller but 2.0x slower"; and, where the
    shipped model loses beyond noise (within the allowed drop) and `o` does not, that `o` is within noise."""
    parts = []
    ratio = o.size_bytes / ship.size_bytes
    if not steps.same_ratio(ratio):
        parts.append(size_words(ratio).removesuffix(" than float"))
    if target.timed and o.latency_ms and ship.latency_ms:
        speed = _speed(o, ship, "")
        if not speed.startswith("as fast"):
            parts.append(speed)
    text = " but ".join(parts) if parts else "as cheap"
    if accuracy and ship.loses and not o.loses:
        text += f"; not worse than float beyond noise ({comparison_text(o.vs_float)})"
    return text
