"""Section 2's "Repairs in integers": each rung of the integer-only repair ladder (cheapest first) with what its
model measured against float on the target's kernels, its size, whether it is integer-only and runs on the target,
and why the ladder stopped (reporter.pipeline.repairs ran it; the decision judged each model)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from reporter.core import variants
from reporter.core.formatting import NOT_MEASURED, fmt_bytes
from reporter.model import repair as rp
from reporter.render.views.common import Basis
from reporter.render.views.target import figure

STATUS = {
    rp.MEETS: "meets the accuracy target: the ladder stops here",
    rp.MISSES: "misses the accuracy target",
    rp.NOT_ON_TARGET: "does not run on the target",
    rp.FAILED: "could not be built",
    rp.DOES_NOT_APPLY: "does not apply",
    rp.NOT_TRIED: "not tried: an earlier rung met the target",
    rp.SCREENED: "not measured on the evaluation data nor on the target",
}


@dataclass(frozen=True)
class RepairRow:
    rung: str
    detail: str
    accuracy: str  # on the target's kernels, against float
    size: str
    runs: str  # "yes", or "no: the tool's reason"
    status: str
    chosen: bool


class RepairsView:
    def __init__(self, basis: Basis):
        self.basis = basis

    @cached_property
    def rows(self) -> list[RepairRow]:
        report, decision = self.basis.report, self.basis.findings.decision
        rows = []
        for r in report.repairs:
            option = decision.option(r.model.name) if decision is not None and r.model is not None else None
            accuracy = "–" if r.status in (rp.DOES_NOT_APPLY, rp.NOT_TRIED) else NOT_MEASURED  # nothing was built
            if option is not None and (option.score is not None or option.output_mse is not None):
                accuracy = figure(self.basis, option)
            runs = "–" if option is None else "yes" if option.runs else f"no: {option.not_there or 'not integer-only'}"
            status = STATUS.get(r.status, r.status) + (f": {r.error}" if r.error else "")
            if r.screen is not None:
                accuracy = f"{r.screen.words} agreement with float on {r.screen.samples:,} selection samples"
                status += (f": on the selection samples it is no closer to float, beyond noise, than"
                           f" {self._label(r.screen.against)}, which misses the target")
            rows.append(RepairRow(r.label, r.detail, accuracy, fmt_bytes(r.model.size_bytes) if r.model else "–",
                                  runs, status, decision is not None and r.model is not None
                                  and r.model.name == decision.variant))
        return rows

    def _label(self, rung: str) -> str:
        """A rung's label, or a variant's name as the report shows it."""
        return next((r.label for r in self.basis.report.repairs if r.rung == rung), None) or variants.get(rung).label
