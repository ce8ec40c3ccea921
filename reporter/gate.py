"""The accuracy gate: fail a CI job when a quantized variant loses too much accuracy against float."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reporter.config import Gate
from reporter.report import Report


@dataclass(frozen=True)
class GateResult:
    passed: bool
    variant: str
    limit: float
    drop: Optional[float]  # float accuracy - variant accuracy (0..1); None when it cannot be measured
    message: str


def check(report: Report, gate: Gate) -> GateResult:
    """Compares `gate.variant`'s accuracy with float's; a missing or failed variant fails the gate."""
    ref, v = report.variant("float"), report.variant(gate.variant)

    def result(passed, drop, message):
        return GateResult(passed, gate.variant, gate.max_accuracy_drop, drop, message)

    if v is None:
        return result(False, None, f"{gate.variant} was not built, so the gate cannot pass")
    if not v.ok or ref is None or not ref.ok:
        return result(False, None, f"{gate.variant if not v.ok else 'float'} failed, so the gate cannot pass")
    if v.metrics is None or ref.metrics is None:
        return result(False, None, "the model is not a classifier: the accuracy gate does not apply")
    drop = ref.metrics.accuracy - v.metrics.accuracy
    points = f"{drop * 100:.1f} points"
    limit = f"{gate.max_accuracy_drop * 100:.1f}"
    # A tiny tolerance keeps a drop that equals the limit (up to float rounding) a pass.
    if drop <= gate.max_accuracy_drop + 1e-12:
        return result(True, drop, f"{gate.variant} accuracy drop {points} is within the limit of {limit}")
    return result(False, drop, f"{gate.variant} accuracy drop {points} exceeds the limit of {limit}")
