"""A measured report concluded: its findings decided once (reporter.findings) and worded (reporter.render.words),
as report.json keeps them; and the readers of saved reports that need findings (render, batch index, diff).

This is the one place that both decides and words: reporter.render only reads the records decided here, and calls
no deciding function (tests/test_architecture.py checks it). The stages that measure before the report exists (the
search, the blame) are handed the one rule of the accuracy target from here (`target_rule`): they measure, it decides.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from reporter.findings import decision as choice
from reporter.findings import diff as decided_diff
from reporter.findings import gate as gt
from reporter.findings.derive import decide
from reporter.model.findings import Findings, GateFinding
from reporter.model.report import Report
from reporter.render import words
from reporter.render.words import diff as diff_words
from reporter.render.words import gate as gate_words

if TYPE_CHECKING:  # pragma: no cover
    from reporter.measure.measurer import Measurer
    from reporter.inputs.settings import RunSettings


def target_rule(settings: "RunSettings", m: "Measurer") -> choice.TargetRule:
    """The run's accuracy target as the stages that measure before the report exists are handed it (the search, the
    blame, the repair ladder): called with (model, float), whether a model meets it against float by the decision's
    one rule; its acceptance on the search's selection samples and the ladder's screen (reporter.findings.decision.
    TargetRule). Read on the report's scale (Report.measurable: class scores or a main metric, else the output
    error)."""
    measurable = m.task.num_classes is not None or m.score is not None
    return choice.TargetRule(settings.target, settings.max_accuracy_drop, measurable)


def findings_of(report: Report) -> Findings:
    """The findings of a measured report, decided and worded. Pure: same report, same findings."""
    return words.word(report, decide(report))


def attach(report: Report) -> Report:
    """The report with its findings, and the recommendation's sentence taken from them."""
    found = findings_of(report)
    rec = report.recommendation
    if rec is not None:
        rec = dataclasses.replace(rec, summary=found.recommendation)
    return dataclasses.replace(report, recommendation=rec, findings=found)


def with_findings(report: Report) -> Report:
    """`report` with findings: as stored, or decided and worded (once) when an older version's were dropped."""
    return report if report.findings is not None else attach(report)


def report_from_json(text: str) -> Report:
    """The text of a report.json, read and migrated, with its findings (see `load_report`)."""
    return with_findings(Report.from_json(text))


def load_report(path) -> Report:
    """A report.json read and migrated, with its findings: as stored, or decided and worded here when an older
    version's findings were dropped by the migration. Every command that reads a report uses this."""
    return report_from_json(Path(path).read_text(encoding="utf-8"))


def check_gate(report: Report, gate: gt.Gate) -> GateFinding:
    """`gate` applied to a saved report with findings (a batch's [gate] on each model): decided by
    reporter.findings.gate.decide on the findings, worded. A run's own gate is `report.findings.gate`."""
    found = report.findings
    return gate_words.finding(report, found,
                              gt.decide(found.variants, found.heads, gate, report.primary_output()))


def compare_runs(base_path, new_path, max_accuracy_drop: Optional[float] = None) -> decided_diff.Diff:
    """BASE and NEW compared (reporter.findings.diff) and worded: what `quant-report diff` renders and its gate's
    messages read (raises reporter.findings.diff.DiffError when a side cannot be read, and a UsageError naming
    max_accuracy_drop, before either is read, when it is not a number from 0 to 1)."""
    if max_accuracy_drop is not None:  # the gate's declaration, as the flags and a batch file's [gate] check it
        gt.checked_limit(max_accuracy_drop)
    return diff_words.word(decided_diff.compare(base_path, new_path, max_accuracy_drop))
