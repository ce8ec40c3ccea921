"""The story panel, first in the report: the title and model line, every variant's accuracy with its
interval, the paired test against float, size and latency, then the headline, warnings and hints."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from reporter.core import variants
from reporter.core.formatting import (NOT_MEASURED, capital, fmt_bytes, fmt_metric, fmt_ms, fmt_mse, fmt_number,
                                      fmt_score, or_missing)
from reporter.measure.task import BINARY_THRESHOLD
from reporter.render.words.verdicts import size_change
from reporter.render.views.common import (DIRECTION_TONES, Basis, Cell, latency_cell_words, ratio_tone,
                                          step_tone, threshold_words)


@dataclass(frozen=True)
class PanelRow:
    label: str
    long: str
    accuracy: Cell
    interval: str
    vs_float: Cell
    main: Cell
    size: Cell
    latency: Cell
    recommended: bool
    failed: bool = False


class StoryView:
    """The title, the panel's rows and the findings' headline, warnings and hints."""

    def __init__(self, basis: Basis):
        self.basis = basis

    @property
    def title(self) -> str:
        return f"Quantization report: {self.basis.report.model.name}"

    @property
    def input_shape(self) -> str:
        """"input (None, 13)" for one input; "inputs numeric (None, 13), category (None, 1) int32" for several
        (a type is named where it is not float32)."""
        model = self.basis.report.model
        if len(model.inputs) <= 1:
            return "input " + _shape(model.input_shape)
        return "inputs " + ", ".join(f"{i.name} {_shape(i.shape)}" + ("" if i.dtype == "float32" else f" {i.dtype}")
                                     for i in model.inputs)

    @property
    def classes_text(self) -> str:
        """"10 classes", or "4 labels (multi-label)"."""
        model = self.basis.report.model
        return f"{model.num_classes} {model.task_kind.counted_as}"

    @property
    def binary_threshold(self) -> str:
        """The output above which one sigmoid unit predicts class 1."""
        return f"{(self.basis.report.settings.threshold if self.basis.report.settings.threshold is not None else BINARY_THRESHOLD):g}"

    @property
    def interval_label(self) -> str:
        return f"{threshold_words().confidence} interval"

    @property
    def headline(self) -> list[str]:
        return self.basis.findings.headline

    @property
    def decision_text(self) -> str:
        """The headline's sentence on the model to ship (set in bold); "" without a decision."""
        decision = self.basis.findings.decision
        return decision.reason if decision is not None else ""

    @property
    def warnings(self) -> list[str]:
        return [n.text for n in self.basis.findings.warnings]

    @property
    def hints(self) -> list[str]:
        return [n.text for n in self.basis.findings.hints]

    @property
    def scored(self) -> bool:
        """The panel shows the main metric (else each variant's output error against float)."""
        return self.basis.scored

    @property
    def score_label(self) -> str:
        """The panel's first column: "Accuracy", "Exact-match accuracy", "Mean IoU", or the user's metric."""
        metric = self.basis.metric[0]
        main = self.basis.float.metrics.main if self.basis.float and self.basis.float.metrics else None
        label = capital(metric) if main is None or main.share else metric
        return label + (" (lower is better)" if main is not None and not main.higher_is_better else "")

    @property
    def main_metric_label(self) -> str:
        flt = self.basis.findings.variant(variants.FLOAT)
        return flt.main_metric if flt and flt.main_metric else ""

    @cached_property
    def panel_rows(self) -> list[PanelRow]:
        """Every measured variant with accuracy, its interval, the paired test against float, the task's
        main metric, size and latency (the rule's pick stays in the search section)."""
        rows = []
        decision = self.basis.findings.decision
        shipped = decision.variant if decision is not None else variants.SELECTIVE  # highlighted: the model to ship
        for f in self.basis.findings.variants:
            if f.name == variants.RULE:
                continue
            long = self.basis.long(f.name)
            if not f.ok:
                rows.append(PanelRow(f.label, long, Cell("failed"), "", Cell(f.error or ""), Cell(""), Cell(""),
                                     Cell(""), f.name == shipped, failed=True))
                continue
            quality_error = f.not_measured.get("metrics") or f.not_measured.get("output_error")
            if quality_error:
                vs = Cell(f"{NOT_MEASURED}: {quality_error}")
            elif f.direction == "reference":
                vs = Cell("reference")
            elif f.vs_float is not None:
                vs = Cell(f.vs_float.text, "", DIRECTION_TONES.get(f.direction, "neutral"))
            elif f.output_mse is not None:
                vs = Cell(fmt_mse(f.output_mse, f.output_variance))
            elif self.basis.float_quality_missing:
                vs = Cell(f"float {NOT_MEASURED}")
            else:
                vs = Cell("–")
            if f.accuracy_low is None:
                interval = ""
            elif f.score_share:
                interval = f"{f.accuracy_low * 100:.1f}–{f.accuracy_high * 100:.1f}"
            else:
                interval = f"{fmt_number(f.accuracy_low)}–{fmt_number(f.accuracy_high)}"
            size_note = "" if f.size_ratio is None or f.name == variants.FLOAT else size_change(f.size_ratio)
            measured = self.basis.report.variant(f.name)
            step = f.latency_vs_float
            lat_note = "" if f.name == variants.FLOAT else latency_cell_words(step, measured, self.basis.float)
            missing = quality_error and f.accuracy is None
            rows.append(PanelRow(
                f.label, long, Cell(NOT_MEASURED if missing else fmt_score(f.accuracy, f.score_share)), interval, vs,
                Cell(NOT_MEASURED if missing else fmt_metric(f.main_value)),
                Cell(fmt_bytes(f.size_bytes), tone=ratio_tone(f.size_ratio, 0.0), note=size_note),
                Cell(or_missing(f.latency_ms, fmt_ms), tone=step_tone(step), note=lat_note),
                f.name == shipped))
        return rows


def _shape(shape) -> str:
    return "(" + ", ".join("None" if d == -1 else str(d) for d in shape) + ")"
