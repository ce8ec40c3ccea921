"""What every section's view stands on: the basis (the report, its findings, the variants shown side by
side, float, names), the table cell and row, and how a change against float is drawn: arrows, ratio
words, tones. The steps are reporter.render.steps' (from reporter.core.judgement's thresholds, which
`threshold_words` states); a latency's step, whether it is beyond timing noise, is a findings' field."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

from reporter.core import judgement as jd
from reporter.core import variants
from reporter.core.formatting import fmt_percent
from reporter.core.variants import LITERT, LONG_NAMES, short
from reporter.model.findings import Findings
from reporter.model.report import Report, VariantResult
from reporter.model.settings import Settings
from reporter.render import steps
from reporter.render.words.verdicts import speed_words

ARROWS = {0: "~", 1: "↑", 2: "↑↑", -1: "↓", -2: "↓↓"}  # a step (reporter.render.steps, a finding's latency)
DIRECTION_TONES = {"worse": "bad", "better": "good"}  # a variant's accuracy against float, beyond noise


@dataclass(frozen=True)
class Cell:
    """One table cell: the formatted value, an arrow against float, its meaning (good/bad/neutral), and
    a ratio against float said beside the value ("1.4x smaller")."""

    text: str
    arrow: str = ""
    tone: str = "neutral"
    note: str = ""


@dataclass(frozen=True)
class Row:
    label: str
    cells: list
    wrap: bool = False  # cells hold words, not numbers: they may wrap


def count_arrow(value: Optional[float], ref: Optional[float], same_ratio: float = 0.0) -> str:
    """~ equal (or within `same_ratio` of ref), ↑/↓ changed, ↑↑/↓↓ changed by more than
    judgement.COUNT_BIG_RATIO times (or from/to zero); empty when either is missing."""
    step = steps.count_step(value, ref, same_ratio)
    return "" if step is None else ARROWS[step]


def metric_arrow(value: Optional[float], ref: Optional[float]) -> str:
    """~ within judgement.METRIC_SAME_POINTS, ↑/↓ up to judgement.METRIC_BIG_POINTS, ↑↑/↓↓ beyond
    (values are 0..1); empty when either is missing."""
    step = steps.metric_step(value, ref)
    return "" if step is None else ARROWS[step]


def tone(arrow: str, higher_is_better: Optional[bool]) -> str:
    """"good" where the arrow points the way that helps, "bad" the other way, else "neutral"."""
    if higher_is_better is None or arrow in ("", "~"):
        return "neutral"
    return "good" if arrow.startswith("↑") == higher_is_better else "bad"


def ratio_words(ratio: Optional[float], down: str, up: str, same: float = 0.0) -> str:
    """"1.4x smaller", "2.5x slower", "same" for a ratio against float ("~ same" within a `same` tolerance)."""
    if ratio is None:
        return ""
    if steps.same_ratio(ratio, same):
        return "same" if same == 0 else "~ same"
    return f"{1 / ratio:.1f}x {down}" if ratio < 1 else f"{ratio:.1f}x {up}"


def latency_cell_words(step: Optional[int], v: Optional[VariantResult], ref: Optional[VariantResult]) -> str:
    """"1.8x faster", "4 % slower", "~ same" (`step` 0: neither faster beyond timing noise, as the findings decided
    it: VariantFinding.latency_vs_float / latency_vs_fiq); "" when either was not timed (`step` None)."""
    if step is None:
        return ""
    return "~ same" if step == 0 else speed_words(v.latency_ms.median / ref.latency_ms.median)


def step_tone(step: Optional[int]) -> str:
    """A latency step's colour: "good" faster, "bad" slower, "neutral" a tie or not timed."""
    return "neutral" if not step else ("good" if step < 0 else "bad")


def ratio_tone(ratio: Optional[float], same: float) -> str:
    """A size or latency ratio against float: "good" when lower, "bad" when higher, "neutral" when the same."""
    if ratio is None or steps.same_ratio(ratio, same):
        return "neutral"
    return "good" if ratio < 1 else "bad"


@dataclass(frozen=True)
class ThresholdWords:
    """The judgement's thresholds as the report states them, for the legend and the sections' sentences."""

    metric_same: str  # "0.5 points"
    metric_big: str  # "5 points"
    count_big: str  # "2x"
    alpha: str  # "0.05"
    confidence: str  # "95 %"


def threshold_words() -> ThresholdWords:
    """The thresholds in reporter.core.judgement now, worded."""
    return ThresholdWords(
        metric_same=f"{jd.METRIC_SAME_POINTS:g} points",
        metric_big=f"{jd.METRIC_BIG_POINTS:g} points",
        count_big=f"{jd.COUNT_BIG_RATIO:g}x",
        alpha=f"{jd.ALPHA:g}",
        confidence=fmt_percent(jd.CONFIDENCE, 0),
    )


def latency_note(settings: Settings) -> str:
    """How latency was timed beyond the legend's words: skipped, or one model at a time in a batch."""
    if settings.latency_runs == 0:
        return "Not measured in this report: latency runs were set to 0."
    timing = settings.latency_timing
    return f"{timing[:1].upper()}{timing[1:]}." if timing else ""


class Basis:
    """What every section reads, computed once from a Report: its findings, the variants shown side by
    side (the built ones, then the recommended model), the float reference, and the variants' names."""

    def __init__(self, report: Report):
        self.report = report

    @cached_property
    def findings(self) -> Findings:
        if self.report.findings is None:  # derived once, by the pipeline or reporter.render.load_report
            raise ValueError("the report has no findings: load it with reporter.render.load_report")
        return self.report.findings

    @cached_property
    def columns(self) -> list[VariantResult]:
        cols = list(self.report.variants)
        rec = self.report.recommendation
        if rec and rec.selective:
            cols.append(rec.selective)
        return cols

    @cached_property
    def ok_columns(self) -> list[VariantResult]:
        return [v for v in self.columns if v.ok]

    @property
    def column_labels(self) -> list[str]:
        """The built variants' short names, for the tables' header rows (the search's float-keep set by what it
        keeps: `label`)."""
        return [self.label(v.name) for v in self.ok_columns]

    def label(self, name: str) -> str:
        """A variant's short name; the search's float-keep set as the decision names it ("FIQ with 2 ops in float"),
        never "Recommended", which is the model to ship's role."""
        decision = self.findings.decision
        option = decision.option(name) if decision is not None and name == variants.SELECTIVE else None
        return option.label if option is not None else short(name)

    @cached_property
    def float(self) -> Optional[VariantResult]:
        v = self.report.variant(variants.FLOAT)
        return v if v and v.ok else None

    @property
    def is_classification(self) -> bool:
        return self.report.model.num_classes is not None

    @property
    def scored(self) -> bool:
        """The report has a main metric (class scores, or the user's --metric on any output)."""
        return self.is_classification or bool(self.report.model.main_metric)

    @property
    def metric(self) -> tuple[str, bool]:
        """The main metric's name and whether it is a share (shown in percent)."""

        return self.report.metric()

    @property
    def float_quality_missing(self) -> bool:
        """The float model ran but its accuracy (or output) could not be measured: nothing compares with it."""
        flt = self.float
        return flt is not None and bool(flt.not_measured("metrics"))

    def long(self, name: str) -> str:
        """The variant's description, and which converter built it when that is not TensorFlow's."""
        text = LONG_NAMES.get(name, name)
        found = self.report.variant(name)
        rec = self.report.recommendation
        if found is None and rec:
            found = next((a.model for a in rec.alternatives if a.model and a.model.name == name), None)
        converter = getattr(found, "converter", "")
        if converter == LITERT:
            text = text.replace(" (float I/O)", " (int8 input and output)" if name == variants.FIQ else "")
            return f"{text}, by {LITERT}"
        if converter == "given":
            return "Float TFLite as given (reference)"
        return text
