"""Turning a report into HTML, PDF, Markdown and JSON: views, the findings' words, plots, templates."""

from __future__ import annotations

from reporter.core.schema import FORMATS  # noqa: E402 - the formats a run may write, declared with its settings
FILE_NAMES = {"html": "report.html", "pdf": "report.pdf", "md": "summary.md", "json": "report.json"}
