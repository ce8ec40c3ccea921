"""The accuracy gate: fail a CI job when a quantized variant loses too much against its reference.

One function decides every gate, `failing`: a run's own (--max-accuracy-drop: `decide`, called by
reporter.findings.derive; the report keeps it as `Findings.gate`, which the CLI reads), a batch row's ([gate],
applied to each saved report by reporter.render.words.gate.check, which calls `decide`) and `quant-report
diff`'s against BASE (reporter.findings.diff). Each hands it the losses it reads (`Loss`); a loss beyond the
limit fails, and so does one that a run could not measure. The rule is the accuracy
target's one rule, reporter.findings.rule.meets_target; the words are reporter.render.words.gate's;
reporter.core.exit_codes maps the results to the exit code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from reporter.core import variants
from reporter.core.errors import UsageError
from reporter.core.schema import GATE_BY_NAME
from reporter.findings import rule as rl
from reporter.model.findings import Comparison, Decision, HeadFinding, VariantFinding

# Why a run's loss could not be measured (`Loss.unmeasured`).
NOT_BUILT, FAILED, FLOAT_FAILED = "not_built", "failed", "float_failed"
NOT_MEASURED, FLOAT_NOT_MEASURED, NOT_APPLICABLE = "not_measured", "float_not_measured", "not_applicable"
NONE_FOR_TARGET = "none_for_target"  # the gate by target: no model for the target was measured


@dataclass(frozen=True)
class Gate:
    """`variant` may lose at most `max_accuracy_drop` (0..1) accuracy against float."""

    max_accuracy_drop: float
    variant: str = variants.GATE_DEFAULT

    def __post_init__(self):
        checked_limit(self.max_accuracy_drop)


def checked_limit(limit: float) -> float:
    """`limit`, when the gate's declaration accepts it (reporter.core.schema: a number from 0 to 1); a UsageError in
    one line otherwise: a NaN or a negative limit would pass or fail every loss without judging any."""
    setting = GATE_BY_NAME["max_accuracy_drop"]
    if not setting.check(limit):
        raise UsageError(f"{setting.name} must be {setting.must_be}, not {limit!r}")
    return limit


@dataclass(frozen=True)
class Loss:
    """What the gate reads of one variant: its loss on the main metric, or on one more output's accuracy,
    against the reference (float in a run, BASE in a diff)."""

    variant: str
    drop: Optional[float]  # reference minus the variant, positive: worse (0..1 for a share); None: not measured
    p_value: Optional[float] = None
    output: str = ""  # the output whose accuracy this is; "" for the main metric (the primary output's)
    unmeasured: str = ""  # why `drop` is None: NOT_BUILT, FAILED, FLOAT_FAILED, NOT_MEASURED, ...


def failing(losses: Iterable[Loss], limit: float) -> list[Loss]:
    """The losses the gate fails on, in order: more than `limit`, or not measured. The gate passes when there
    are none. A limit the gate's declaration refuses is a UsageError (`checked_limit`)."""
    checked_limit(limit)
    return [loss for loss in losses if not rl.meets_target([rl.Standing(loss.drop, loss.p_value)], limit)]


@dataclass(frozen=True)
class Verdict:
    """A run's gate, decided: `loss` is the one it failed on, or the main metric's when it passed."""

    gate: Gate
    passed: bool
    loss: Loss
    decision: Optional[Decision] = None  # the gate by target (no --variant): the decision it holds


def run_losses(found: list[VariantFinding], heads: list[HeadFinding], variant: str,
               primary: Optional[str]) -> list[Loss]:
    """What a run's gate reads for `variant`: its main metric against float, then the accuracy of each other
    labelled output of a model with several (`primary` is the output the main metric reads); a single loss
    without a drop when it cannot be measured."""
    mine = next((v for v in found if v.name == variant), None)
    flt = next((v for v in found if v.name == variants.FLOAT), None)
    if mine is None:
        return [Loss(variant, None, unmeasured=NOT_BUILT)]
    if not mine.ok or flt is None or not flt.ok:
        return [Loss(variant, None, unmeasured=FAILED if not mine.ok else FLOAT_FAILED)]
    if mine.vs_float is None:
        why = NOT_MEASURED if mine.not_measured.get("metrics") else \
            FLOAT_NOT_MEASURED if flt.not_measured.get("metrics") else NOT_APPLICABLE
        return [Loss(variant, None, unmeasured=why)]
    out = [Loss(variant, -mine.vs_float.delta, mine.vs_float.p_value)]
    return out + [Loss(variant, -h.vs_float.delta, h.vs_float.p_value, output=h.output) for h in heads
                  if h.variant == variant and h.output != primary and h.vs_float is not None]


def decide(found: list[VariantFinding], heads: list[HeadFinding], gate: Gate, primary: Optional[str]) -> Verdict:
    """A run's gate (or a batch row's): passed when no loss `run_losses` reads fails (`failing`)."""
    losses = run_losses(found, heads, gate.variant, primary)
    failed = failing(losses, gate.max_accuracy_drop)
    return Verdict(gate, not failed, failed[0] if failed else losses[0])


def decide_target(decision: Decision, vs_float: Optional[Comparison], limit: float) -> Verdict:
    """The gate by target (no --variant given): it holds the model decided for the target, which meets the limit
    when a quantized model for the target does (reporter.findings.decision reads the limit as this gate does);
    otherwise it fails on the target's closest model (`vs_float`: that model's comparison with float)."""
    name = decision.variant if decision.meets_target else decision.runner_up
    if name == variants.FLOAT:  # on a CPU float ships when each quantized model that meets the limit costs more
        loss = Loss(name, 0.0)
    elif not name or vs_float is None:
        loss = Loss(name or decision.target, None, unmeasured=NONE_FOR_TARGET if not name else NOT_APPLICABLE)
    else:
        loss = Loss(name, -vs_float.delta, vs_float.p_value)
    return Verdict(Gate(limit, name), decision.meets_target and loss.drop is not None, loss, decision)
