"""Turning a report into HTML, PDF, Markdown and JSON: views, the findings' words, plots, templates."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from reporter.model.report import Report

FORMATS = ("html", "pdf", "md", "json")
FILE_NAMES = {"html": "report.html", "pdf": "report.pdf", "md": "summary.md", "json": "report.json"}


# --- a saved report read back, with its findings ---------------------------------------------------------
def load_report(path) -> "Report":
    """A report.json read and migrated, with its findings: as stored, or decided and worded here when an older
    version's findings were dropped by the migration. Every command that reads a report uses this."""
    return report_from_json(Path(path).read_text(encoding="utf-8"))


def report_from_json(text: str) -> "Report":
    """The text of a report.json, read and migrated, with its findings (see `load_report`)."""
    from reporter.model.report import Report

    return with_findings(Report.from_json(text))


def with_findings(report: "Report") -> "Report":
    """`report` with findings: decided and worded (once) when it has none (reporter.render.words.attach)."""
    if report.findings is not None:
        return report
    from reporter.render.words import attach

    return attach(report)
