"""Section 2's "On the target": each candidate checked where it ships (--target int8, micro, ethos-u*), as the
target's own tool said: whether it runs there (or why not, in the tool's words), its accuracy on the target's
kernels beside LiteRT's default kernels', and the tool's figures as the tool's render module lays them out
(reporter.render.tools)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from reporter.core import targets
from reporter.core.formatting import NOT_MEASURED, fmt_mse, fmt_score
from reporter.render import tools
from reporter.render.views.common import Basis


@dataclass(frozen=True)
class TargetRow:
    model: str
    runs: str  # "yes", or "no: <the tool's reason>"
    on_target: str  # the score on the target's kernels, against float (a model without a metric: its output error)
    default: str  # the score (or output error) on LiteRT's default kernels
    figures: str  # the tool's figures
    cpu_ops: list[str]  # the lines under the row the tool adds (Vela: each op left on the CPU, "OP: reason")
    chosen: bool


def figure(basis: Basis, o) -> str:
    """A judged option's figure on the target's kernels against float: its score ("85.3 % (within noise: ...)"), or
    without a metric its output error (the decision's R² is a ranking, no figure to show)."""
    if not basis.report.measurable():
        return fmt_mse(o.output_mse, o.output_variance) if o.output_mse is not None else NOT_MEASURED
    score = fmt_score(o.score, basis.metric[1]) if o.score is not None else NOT_MEASURED
    return score + (f" ({o.vs_float.text})" if o.vs_float is not None and o.vs_float.text else "")


class TargetView:
    def __init__(self, basis: Basis):
        self.basis = basis

    @property
    def title(self) -> str:
        decision = self.basis.findings.decision
        target = targets.of(decision.target if decision else None)
        return f"On the target: {target.name}, checked with {target.tool}" if target.tool else ""

    @property
    def tool_heading(self) -> str:
        decision = self.basis.findings.decision
        return targets.of(decision.target if decision else None).tool_heading

    @property
    def kernels(self) -> str:
        decision = self.basis.findings.decision
        return targets.of(decision.target if decision else None).kernels

    @property
    def tools(self) -> str:
        return ", ".join(f"{name} {version}" for name, version in self.basis.report.target_tools.items())

    @cached_property
    def rows(self) -> list[TargetRow]:
        decision = self.basis.findings.decision
        if decision is None or not targets.of(decision.target).checked:
            return []
        share = self.basis.metric[1]
        rows = []
        for o in decision.options:
            model = self.basis.report.column(o.name) or next(
                (m for m in self._models() if m.name == o.name), None)
            on = model.on_target if model is not None else None
            if on is None:
                continue
            if self.basis.report.measurable():
                default = model.metrics.score if model.metrics is not None else None
                shown = fmt_score(default, share) if default is not None else NOT_MEASURED
            else:  # no metric: the output error against float
                error = model.output_error
                shown = fmt_mse(error.mse, error.float_variance) if error is not None else NOT_MEASURED
            rows.append(TargetRow(
                model=o.label, runs=self._runs(on), on_target=figure(self.basis, o), default=shown,
                figures=self._figures(on), chosen=o.name == decision.variant,
                cpu_ops=[line for tool, found in tools.held(on.tools) for line in tool.rows(found)]))
        return rows

    def _models(self):
        rec = self.basis.report.recommendation
        found = [v.fix.model for v in self.basis.report.variants if v.fix is not None and v.fix.model is not None]
        if rec is not None:
            found += [a.model for a in rec.alternatives if a.model is not None]
        return found

    @staticmethod
    def _runs(on) -> str:
        """"yes" (with what the host CPU runs beside it), "no: <the tool's reason>", or "not checked: <quant-report's
        own failure>"."""
        if on.tool_failure:
            return f"not checked: {on.error}"
        host = targets.on_host(on.host_ops)
        return ("yes" + (f"; {host}" if host else "")) if on.runs else f"no: {on.error}"

    @staticmethod
    def _figures(on) -> str:
        return next((cell for tool, found in tools.held(on.tools) if (cell := tool.cell(found))), "")
