"""The accuracy gate: fail a CI job when a quantized variant loses too much accuracy against float.

One rule (reporter.core.judgement.gate_passes) judges every gate: a report's own (`derive.gate_finding`),
one applied afterwards (`run --max-accuracy-drop`, the batch's [gate]: `check`) and the baseline gate of
`quant-report diff`. reporter.core.exit_codes maps the results to the exit code.
"""

from __future__ import annotations

from dataclasses import dataclass

from reporter.findings import derive as fnd
from reporter.findings import with_findings
from reporter.model.findings import GateFinding
from reporter.model.report import Report


@dataclass(frozen=True)
class Gate:
    """`variant` may lose at most `max_accuracy_drop` (0..1) accuracy against float."""

    max_accuracy_drop: float
    variant: str = "fiq"


def check(report: Report, gate: Gate) -> GateFinding:
    """Compares `gate.variant`'s accuracy with float's; a missing or failed variant fails the gate."""
    found = with_findings(report).findings
    return fnd.gate_finding(report, found.variants, gate.variant, gate.max_accuracy_drop, found.heads)
