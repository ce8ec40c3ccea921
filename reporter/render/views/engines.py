"""Section 2's engine table: one scheme built by TensorFlow's converter and by LiteRT Quantizer, side by side
(accuracy, size, how often they agree, the ops where they differ, the better of the two for the target)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from reporter.core.formatting import NOT_MEASURED, fmt_bytes, fmt_mse, fmt_percent, or_missing
from reporter.model import findings as mf
from reporter.render.views.common import Basis

WHY = {
    mf.ENGINE_CHEAPER: "both meet the accuracy target; the cheaper for the target",
    mf.ENGINE_ONLY_MEETS: "the only one of the two that meets the accuracy target",
    mf.ENGINE_NEARER: "neither meets the accuracy target; the nearer to float beyond noise",
}
TIE = {
    mf.ENGINE_TIE: "a tie: nothing measured tells the two apart beyond noise",
}


@dataclass(frozen=True)
class EngineRow:
    scheme: str
    tf: str  # "95.1 %, 10.2 KB"
    litert: str
    agreement: str
    ops: str
    better: str


class EnginesView:
    def __init__(self, basis: Basis):
        self.basis = basis

    @cached_property
    def rows(self) -> list[EngineRow]:
        report, found = self.basis.report, self.basis.findings
        points = {t.name: t for t in found.tradeoff}
        choices = {(c.tf, c.litert): c for c in found.engines}
        rows = []
        for pair in report.engines:
            choice = choices.get((pair.tf, pair.litert))

            def cell(name: str) -> str:
                v, point = report.variant(name), points.get(name)
                score = point.score_text if point is not None else NOT_MEASURED
                return f"{name}: {score}, {or_missing(v.size_bytes if v else None, fmt_bytes)}"

            if pair.agreement is not None:
                agreement = f"same prediction on {fmt_percent(pair.agreement, 1)}"
            elif pair.output_mse is not None:
                agreement = f"outputs apart by {fmt_mse(pair.output_mse, pair.float_variance)}"
            else:
                agreement = NOT_MEASURED
            ops = "; ".join(f"{op} {a} vs {b}" for op, (a, b) in pair.op_differences.items()) or "the same ops"
            better = (f"{choice.better}: {WHY.get(choice.why, choice.why)}" if choice is not None and choice.better
                      else TIE[choice.why] if choice is not None and choice.why in TIE else NOT_MEASURED)
            rows.append(EngineRow(pair.scheme, cell(pair.tf), cell(pair.litert), agreement, ops, better))
        return rows
