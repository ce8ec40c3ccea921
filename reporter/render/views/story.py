"""The story panel, first in the report: the title and model line, every variant's accuracy with its
interval, the paired test against float, size and latency, then the headline, warnings and hints."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from reporter.core import targets, variants
from reporter.core.formatting import (NOT_MEASURED, capital, fmt_bytes, fmt_metric, fmt_ms, fmt_mse, fmt_number,
                                      fmt_score, or_missing)
from reporter.measure.task import BINARY_THRESHOLD
from reporter.render.words.verdicts import size_change, speed_words
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

    @property
    def latency_label(self) -> str:
        """The latency column's header: the host's latency is said to be the host's where the target's is not it
        (a microcontroller, an NPU), and is then shown without a colour."""
        return "Latency (median)" if self._host_is_target else "Host latency (median)"

    @cached_property
    def _host_is_target(self) -> bool:
        return targets.of(self.basis.report.settings.target).timed

    def _latency_tone(self, step) -> str:
        return step_tone(step) if self._host_is_target else "neutral"

    @cached_property
    def panel_rows(self) -> list[PanelRow]:
        """Every measured variant with accuracy, its interval, the paired test against float, the task's
        main metric, size and latency (the rule's pick stays in the search section)."""
        rows = []
        decision = self.basis.findings.decision
        shipped = decision.variant if decision is not None else variants.SELECTIVE  # highlighted: the model to ship
        built = {f.name for f in self.basis.findings.variants}
        for f in self.basis.findings.variants:
            if f.name == variants.RULE:
                continue
            label, long = self._label(f), self.basis.long(f.name)
            if not f.ok:
                rows.append(PanelRow(label, long, Cell("failed"), "", Cell(f.error or ""), Cell(""), Cell(""),
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
                label, long, Cell(NOT_MEASURED if missing else fmt_score(f.accuracy, f.score_share)), interval, vs,
                Cell(NOT_MEASURED if missing else fmt_metric(f.main_value)),
                Cell(fmt_bytes(f.size_bytes), tone=ratio_tone(f.size_ratio, 0.0), note=size_note),
                Cell(or_missing(f.latency_ms, fmt_ms), tone=self._latency_tone(step), note=lat_note),
                f.name == shipped))
            if f.name == variants.FLOAT and shipped and shipped not in built and decision.option(shipped) is not None:
                rows.append(self.option_row(decision.option(shipped), True))  # a repair's model ships: after float
        return rows

    def _label(self, f) -> str:
        """A variant's name in the panel: what it is. The search's float-keep set by what it keeps ("FIQ with 2 ops in
        float", as the decision's table names it), never "Recommended", which is the model to ship's role."""
        return self.basis.label(f.name) if f.name == variants.SELECTIVE else f.label

    @cached_property
    def evidence_rows(self) -> list[PanelRow]:
        """What a reviewer reads first: the model to ship, float, and the runner-up where there is one (the decision's
        options); without a decision, float and FIQ as the panel has them."""
        d = self.basis.findings.decision
        if d is None or not d.variant or d.option(d.variant) is None:
            return [r for r, f in zip(self.panel_rows, self._panel_names()) if f in (variants.FLOAT, variants.FIQ)]
        names = dict.fromkeys(n for n in (d.variant, variants.FLOAT, d.runner_up) if n and d.option(n) is not None)
        return [self.option_row(d.option(n), n == d.variant) for n in names]

    def _panel_names(self) -> list[str]:
        """The variant (or shipped model) each of `panel_rows` shows, in order."""
        d = self.basis.findings.decision
        names = []
        for f in self.basis.findings.variants:
            if f.name == variants.RULE:
                continue
            names.append(f.name)
            if f.name == variants.FLOAT and d is not None and d.variant and d.option(d.variant) is not None and \
                    d.variant not in {v.name for v in self.basis.findings.variants}:
                names.append(d.variant)
        return names

    def option_row(self, o, chosen: bool) -> PanelRow:
        """A model as the decision judged it (its option), for a table of models: the one to ship when it is not a
        variant (a repair rung's model), the runner-up. No interval: the decision keeps its paired test."""
        decision = self.basis.findings.decision
        share = self.basis.metric[1]
        flt = decision.option(variants.FLOAT)
        ratio = o.size_bytes / flt.size_bytes if flt is not None and flt.size_bytes else None
        vs = Cell("reference") if o.name == variants.FLOAT else \
            Cell(o.vs_float.text, "", "neutral") if o.vs_float is not None else Cell("–")
        found = self.basis.findings.variant(o.name)  # a variant's step is stored; an option's is not (a fresh run's)
        step = found.latency_vs_float if found is not None else o.latency_vs_float
        speed = "" if step is None or flt is None or not flt.latency_ms else \
            ("~ same" if step == 0 else speed_words(o.latency_ms / flt.latency_ms))
        return PanelRow(o.label, o.label, Cell(NOT_MEASURED if o.score is None else fmt_score(o.score, share)), "",
                        vs, Cell(""), Cell(fmt_bytes(o.size_bytes), tone=ratio_tone(ratio, 0.0),
                                           note=size_change(ratio) if ratio and o.name != variants.FLOAT else ""),
                        Cell(or_missing(o.latency_ms, fmt_ms), tone=self._latency_tone(step), note=speed), chosen)


def _shape(shape) -> str:
    return "(" + ", ".join("None" if d == -1 else str(d) for d in shape) + ")"
