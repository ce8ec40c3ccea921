"""`quant-report diff`: two runs compared (reporter.findings.diff decides, reporter.render.words.diff words; both
called by reporter.pipeline.conclude.compare_runs), rendered as Markdown, HTML or JSON."""

from __future__ import annotations

from typing import Optional

from reporter.core import judgement as jd
from reporter.core.formatting import fmt_ms
from reporter.findings.diff import Diff
from reporter.render.formats import environment, markdown_environment
from reporter.render.words import diff as words
from reporter.render.words.diff import summary

__all__ = ["render", "summary"]


def render(diff: Diff, fmt: str) -> bytes:
    """A worded diff (`compare`) as diff.json, diff.md or diff.html."""
    if fmt == "json":
        return diff.to_json().encode("utf-8")
    template = {"md": "diff.md.j2", "html": "diff.html.j2"}[fmt]
    env = environment(True) if fmt == "html" else markdown_environment()  # every value escaped in both
    return env.get_template(template).render(
        d=diff, w=words, summary=summary(diff), latency_ratio=f"{jd.LATENCY_CHANGE_RATIO:g}",
        latency_floor=fmt_ms(jd.LATENCY_CHANGE_MIN_MS)
    ).encode("utf-8")
