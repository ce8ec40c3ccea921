"""The words of the accuracy gate's one-line result (reporter.findings.gate decides it; a batch's [gate] on a saved
report is applied by reporter.pipeline.conclude.check_gate)."""

from __future__ import annotations

from reporter.core import targets, variants
from reporter.core.formatting import fmt_number, p_text
from reporter.findings import gate as gt
from reporter.model import findings as mf
from reporter.model.findings import Findings, GateFinding
from reporter.model.report import Report
from reporter.render.words.decision import one_class_clause


def finding(report: Report, found: Findings, verdict: gt.Verdict) -> GateFinding:
    """The gate as report.json and the batch index keep it: the decision with its one line."""
    loss = verdict.loss
    return GateFinding(verdict.passed, verdict.gate.variant, verdict.gate.max_accuracy_drop, loss.drop, loss.p_value,
                       message(report, found, verdict))


def message(report: Report, found: Findings, verdict: gt.Verdict) -> str:
    """"fiq accuracy drop 32.5 points (p < 0.001) exceeds the limit of 2.0", or why the gate cannot pass."""
    loss, variant, limit = verdict.loss, verdict.gate.variant, verdict.gate.max_accuracy_drop
    if verdict.decision is not None and verdict.decision.why == mf.FLOAT_DEGENERATE:
        return "the float model answers one class for every sample (check the data), so the gate cannot pass"
    if verdict.decision is not None and loss.unmeasured == gt.NONE_FOR_TARGET:
        where = targets.of(verdict.decision.target).words
        stuck = one_class_clause(verdict.decision)
        if stuck:  # measured, but answering one class: no quantized model to ship
            return f"no quantized model that runs {where} can be shipped{stuck}; the gate cannot pass"
        return f"no model that runs {where} was measured, so the gate cannot pass"
    if loss.unmeasured == gt.NOT_BUILT:
        return f"{variant} was not built, so the gate cannot pass"
    if loss.unmeasured in (gt.FAILED, gt.FLOAT_FAILED):
        return f"{variant if loss.unmeasured == gt.FAILED else variants.FLOAT} failed, so the gate cannot pass"
    if loss.unmeasured in (gt.NOT_MEASURED, gt.FLOAT_NOT_MEASURED):
        name = variant if loss.unmeasured == gt.NOT_MEASURED else variants.FLOAT
        error = found.variant(name).not_measured["metrics"]
        return f"{name} accuracy was not measured ({error}), so the gate cannot pass"
    if loss.unmeasured == gt.NOT_APPLICABLE:
        return ("the model's output is not class scores and no --metric was given: the accuracy gate does not"
                " apply")
    noise = f", {p_text(loss.p_value)}" if loss.p_value is not None else ""
    metric, share = report.metric()
    plain = report.metric_plain()
    if plain:
        lim = f"{limit * 100:.1f}"
    else:
        lim = f"{limit * 100:.1f} points" if share else f"{limit:g}"
    if loss.output:
        return (f"{variant} accuracy drop {loss.drop * 100:.1f} points{noise} on output {loss.output} exceeds the"
                f" limit of {lim}")
    points = f"{loss.drop * 100:.1f} points" if share or plain else fmt_number(loss.drop)
    primary = report.primary_output()
    where = f" on output {primary}" if primary else ""
    outcome = "is within" if verdict.passed else "exceeds"
    d = verdict.decision
    if d is not None:  # the gate by target
        hardware = targets.of(d.target).words
        if verdict.passed:
            return f"{variant}, the model to ship {hardware}: {metric} drop {points}{noise}{where} is within the limit" \
                   f" of {lim}"
        text = f"no quantized model {hardware} meets the limit of {lim}: the nearest to float, {variant}, drops {points}{noise}"
        return text + (f"; {d.would_meet} would meet it, but does not run {hardware}" if d.would_meet else "")
    return f"{variant} {metric} drop {points}{noise}{where} {outcome} the limit of {lim}"
