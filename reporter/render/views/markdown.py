"""The Markdown summary's own choices: short enough for a pull-request comment, so fewer kept layers,
one line on the search, the lighter fixes, and the latency timing note outside a legend."""

from __future__ import annotations

from reporter.render.views.common import Basis, latency_note
from reporter.render.views.recommendation import KeptRow, RecommendationView


class MarkdownView:
    """What summary.md shows that the HTML lays out otherwise."""

    KEPT_ROWS = 8  # keeps the Markdown summary short enough for a PR comment

    def __init__(self, basis: Basis, recommendation: RecommendationView):
        self.basis = basis
        self.recommendation = recommendation

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
    def lighter_fixes(self) -> list[str]:
        """The lighter schemes for the recommended layers: as accurate within noise and smaller."""
        return [a.text for a in self.basis.findings.alternatives if a.status == "lighter"]

    @property
    def latency_timing_note(self) -> str:
        """The batch's timing note alone (a skipped latency is already a hint of its own)."""
        settings = self.basis.report.settings
        return "" if settings.get("latency_runs") == 0 else latency_note(settings)
