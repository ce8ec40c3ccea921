"""Turning a report into HTML, PDF, Markdown and JSON: views per section, plots, templates."""

FORMATS = ("html", "pdf", "md", "json")
FILE_NAMES = {"html": "report.html", "pdf": "report.pdf", "md": "summary.md", "json": "report.json"}
