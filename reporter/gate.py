"""The accuracy gate: fail a CI job when a quantized variant loses too much accuracy against float.

The verdict itself is a finding (reporter.findings.gate_finding); this module applies a gate that
may differ from the one recorded in the report (the batch's [gate], or `run --max-accuracy-drop`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reporter import findings as fnd
from reporter.config import Gate
from reporter.report import Report


@dataclass(frozen=True)
class GateResult:
    passed: bool
    variant: str
    limit: float
    drop: Optional[float]  # float accuracy - variant accuracy (0..1); None when it cannot be measured
    message: str
    p_value: Optional[float] = None  # exact McNemar test of that drop


def check(report: Report, gate: Gate) -> GateResult:
    """Compares `gate.variant`'s accuracy with float's; a missing or failed variant fails the gate."""
    found = report.findings if report.findings is not None else fnd.derive(report)
    g = fnd.gate_finding(report, found.variants, gate.variant, gate.max_accuracy_drop)
    return GateResult(g.passed, g.variant, g.limit, g.drop, g.message, g.p_value)
