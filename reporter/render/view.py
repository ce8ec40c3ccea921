"""What the reports show, derived from a Report: one view per section, composed. No TensorFlow here.

The section views live in reporter.render.views; templates read them by section (`v.story.panel_rows`,
`v.quality.metric_rows`, `v.markdown.search_line`) and only lay their values out.
"""

from __future__ import annotations

from reporter.model.report import Report
from reporter.render.views.appendix import AppendixView
from reporter.render.views.common import Basis
from reporter.render.views.engines import EnginesView
from reporter.render.views.target import TargetView
from reporter.render.views.repairs import RepairsView
from reporter.render.views.layers import LayersView
from reporter.render.views.markdown import MarkdownView
from reporter.render.views.quality import QualityView
from reporter.render.views.recommendation import RecommendationView
from reporter.render.views.story import StoryView
from reporter.render.views.structure import StructureView


class ReportView:
    """Everything the HTML and Markdown templates show, computed once from a Report, section by section."""

    SECTIONS = ("story", "quality", "recommendation", "target", "repairs", "engines", "layers", "structure", "appendix", "markdown")

    def __init__(self, report: Report):
        self.report = report
        self.basis = basis = Basis(report)
        self.story = StoryView(basis)
        self.quality = QualityView(basis)
        self.recommendation = RecommendationView(basis)
        self.engines = EnginesView(basis)
        self.target = TargetView(basis)
        self.repairs = RepairsView(basis)
        self.layers = LayersView(basis)
        self.structure = StructureView(basis)
        self.appendix = AppendixView(basis)
        self.markdown = MarkdownView(basis, self.recommendation, self.quality)

    @property
    def is_classification(self) -> bool:
        return self.basis.is_classification

    @property
    def column_labels(self) -> list[str]:
        """The built variants' short names, for the tables' header rows."""
        return self.basis.column_labels

    def __getattr__(self, name: str):
        """A section's value by its own name (`ReportView(r).legend`), for callers that ask the whole
        report rather than a section; the first section that has it answers."""
        if name.startswith("_") or "markdown" not in self.__dict__:
            raise AttributeError(name)
        for section in self.SECTIONS:
            view = self.__dict__[section]
            if hasattr(type(view), name) or name in view.__dict__:
                return getattr(view, name)
        raise AttributeError(f"{type(self).__name__} has no section with {name!r}")
