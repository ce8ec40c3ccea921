"""The Markdown summary's own choices: short enough for a pull-request comment, so fewer kept layers,
one line on the search, the lighter fixes, and the latency timing note outside a legend."""

from __future__ import annotations

from reporter.render.views.common import Basis, latency_note
from reporter.render.views.quality import QualityView
from reporter.render.views.recommendation import KeptRow, RecommendationView


class MarkdownView:
    """What summary.md shows that the HTML lays out otherwise."""

    KEPT_ROWS = 8  # keeps the Markdown summary short enough for a PR comment
    HEAD_ROWS = 8  # outputs in the per-output table; the rest are folded into one line

    def __init__(self, basis: Basis, recommendation: RecommendationView, quality: QualityView):
        self.basis = basis
        self.recommendation = recommendation
        self.quality = quality

    @property
    def head_rows(self) -> list:
        """The per-output rows, at most HEAD_ROWS: the outputs that lead or are worse than float beyond noise
        first, then the other labelled ones, then those without labels."""
        rows = self.quality.head_rows
        outputs = self.basis.report.model.outputs
        worse = {h.output for h in self.basis.findings.heads if h.worse}
        rank = {o.name: (not o.primary, o.name not in worse, not o.labelled, i) for i, o in enumerate(outputs)}
        ordered = [r for _, r in sorted(zip(outputs, rows), key=lambda pair: rank[pair[0].name])]
        return ordered[: self.HEAD_ROWS] if len(ordered) > self.HEAD_ROWS else rows

    @property
    def heads_more(self) -> int:
        """How many outputs are only in the HTML report."""
        return max(len(self.quality.head_rows) - self.HEAD_ROWS, 0)

    @property
    def kept_rows(self) -> list[KeptRow]:
        return self.recommendation.kept_rows[: self.KEPT_ROWS]

    @property
    def kept_more(self) -> int:
        """How many kept layers are only in the HTML report."""
        return max(len(self.recommendation.kept_rows) - self.KEPT_ROWS, 0)

    @property
    def search_line(self) -> str:
        """One line on the search."""
        search = self.recommendation.search
        if not search:
            return ""
        sd = search.selection_data
        where = "x_calib" if sd.source == "x_calib" else "held-out evaluation"
        return (f"Search: {search.evaluations} candidate model{'s' if search.evaluations != 1 else ''} in {search.seconds:.2f} s, chosen on"
                f" {sd.num_samples:,} {where} samples, reported on {self.basis.report.dataset.num_eval:,} evaluation"
                f" samples; target ({search.target_text}) {'met' if search.target_met else 'NOT met'}.")

    @property
    def latency_timing_note(self) -> str:
        """The batch's timing note alone (a skipped latency is already a hint of its own)."""
        settings = self.basis.report.settings
        return "" if settings.latency_runs == 0 else latency_note(settings)
