"""What the measurements mean: findings derived once, the gate, two runs compared."""

from __future__ import annotations

from pathlib import Path


def load_report(path) -> "Report":  # noqa: F821 - typed in reporter.model.report
    """A report.json read and migrated, with its findings: as stored, or derived here when an older
    version's findings were dropped by the migration. Every command that reads a report uses this."""
    return report_from_json(Path(path).read_text(encoding="utf-8"))


def report_from_json(text: str) -> "Report":  # noqa: F821
    """The text of a report.json, read and migrated, with its findings (see `load_report`)."""
    from reporter.model.report import Report

    return with_findings(Report.from_json(text))


def with_findings(report):
    """`report` with findings: derived (once) when it has none."""
    if report.findings is not None:
        return report
    from reporter.findings.derive import attach

    return attach(report)
