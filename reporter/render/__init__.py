"""Turning a report into HTML, PDF, Markdown and JSON: views, the findings' words, plots, templates."""

from __future__ import annotations

FORMATS = ("html", "pdf", "md", "json")
FILE_NAMES = {"html": "report.html", "pdf": "report.pdf", "md": "summary.md", "json": "report.json"}
