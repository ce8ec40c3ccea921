"""What each per-layer chart shows, planned before anything is drawn: a pure function of the report (no matplotlib),
tested without pixels; reporter.render.plots draws the plan. A plan reads three things of a report (`LayerFacts`):
its layers, the layers the recommended model keeps in float and the rule's threshold, so that a run can plan (and
draw) the charts as soon as the search has chosen, before the report is done. The confusion matrices are planned
here too (`ConfusionPlan`: the measured variants' matrices), for the same reason.

The layers' categories (kept in float, flagged by the rmse/scale rule) and their colours, the axis (log when the
values span more than a decade), the ticks, the labels of the values that stand out, and the figure's height.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.core import judgement as jd
from reporter.model.report import RMSE_OVER_SCALE_IDEAL, Report

FEW_LAYERS = 30  # up to this many layers the x axis names each one ("2 FULLY_CONNECTED")
MAX_INDEX_TICKS = 16  # more layers: bare indices, about this many ticks at most
ANNOTATE_TOP = 3  # more layers: the largest values are labelled with their index and op name...
STANDS_OUT = 2.0  # ...when they are more than this many times the median (no labels on a flat chart)
DECADE_SPAN = 10.0  # a log axis when the plotted positive values span more than this ratio
LAYER_FIGSIZE = (5.6, 2.9)  # inches: shown at ~68 % of an 1100 px page; printed at its own size (report.css:
# 79 % of A4's text width), so that its fonts print at their point size
LABEL_BAND = 0.80  # with labels: the largest value reaches this share of the axis height
AXES_WIDTH_IN = LAYER_FIGSIZE[0] - 0.75  # the axes after the y label and margins (an estimate)
TICK_FONT = 6.5
AXES_MIN_HEIGHT_IN = 1.35  # the bars' own height at least, whatever the labels around them take
CHART_TITLE_IN = 0.3  # the title line above the axes
CHART_XLABEL_IN = 0.3  # the x axis' label and the layout's margins
ANNOTATION_FONT = 6.5
CHAR_WIDTH = 0.66  # a character of DejaVu Sans (upper case: op names), in font sizes, a little generous

SUSPECT = "#c0392b"  # flagged by the rule (reporter.render.plots draws the trade-off chart's rule pick in it too)
NORMAL = "#4a6fa5"
KEPT = "#2e7d32"  # the same green as the recommended model in the trade-off chart
IDEAL_COLOR = "#505050"

# Layer categories, drawn in this order in the legend. Colour, hatch, hatch/edge colour, legend label.
CATEGORIES = {
    "kept": (KEPT, "", KEPT, "kept in float (recommended)"),
    "kept_flagged": (KEPT, "////", SUSPECT, "kept in float (recommended), flagged by the rule too"),
    "flagged": (SUSPECT, "", SUSPECT, "flagged by the rmse/scale rule"),
    "other": (NORMAL, "", NORMAL, "other layers"),
}


@dataclass(frozen=True)
class ReferenceLine:
    value: float
    style: str  # matplotlib linestyle
    color: str
    label: str


@dataclass(frozen=True)
class LayerChartPlan:
    """What one per-layer chart shows, decided before anything is drawn."""

    title: str
    ylabel: str
    xlabel: str
    values: tuple  # one per layer, in report order
    categories: tuple  # one CATEGORIES key per layer
    log: bool  # log y axis: the plotted values (reference lines included) span more than a decade
    ylim: tuple  # (bottom, top)
    xlim: tuple  # (left, right), in layer positions
    ticks: tuple  # x positions that carry a label
    tick_labels: tuple  # "0 SUB" with few layers, "40" with many
    names_on_axis: bool  # tick labels name the op (few layers)
    tick_rotation: int  # degrees: 45 when the names would not fit side by side
    bar_width: float  # in layer slots: narrower with very few layers
    lines: tuple  # ReferenceLine, in legend order
    legend_labels: tuple  # only categories with at least one layer, then the reference lines
    annotated: tuple  # many layers: positions of the (up to 3) largest values that stand out, left to right
    annotations: tuple  # their labels: "37 CONV_2D: 60"
    annotation_x: tuple  # their centres in axes fraction, spread so that they do not overlap
    marked: tuple  # many layers: positions of the layers kept in float, marked above their thin bars
    zeros: tuple  # few layers on a log axis: positions whose value is 0 (no bar), labelled "0"
    # Positions whose value is not finite (an error that overflowed): inf is drawn to the top edge, NaN not at all,
    # each labelled with its value; the limits and the log scale read the finite values only.
    nonfinite: tuple = ()
    note: str = ""  # under the chart, naming the layers whose value is not finite
    height: float = LAYER_FIGSIZE[1]  # inches: taller when slanted op names need more room under the axes

    @property
    def heights(self) -> tuple:
        """The bars drawn: each value, inf cut at the top edge, NaN and -inf as no bar."""
        return tuple(v if math.isfinite(v) else self.ylim[1] if v == math.inf else 0.0 for v in self.values)


def spans_decades(values, ratio: float = DECADE_SPAN) -> bool:
    """True when the positive values span more than `ratio` (max / min): a log axis reads better."""
    positive = [float(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    return bool(positive) and max(positive) / min(positive) > ratio


@dataclass(frozen=True)
class LayerFacts:
    """What the per-layer charts read of a report: its layers (LayerStat, in report order), the tensor names the
    recommended (measured) model keeps in float and the rmse/scale rule's threshold."""

    layers: tuple
    kept: frozenset
    threshold: float

    @classmethod
    def of(cls, report: Report) -> "LayerFacts":
        rec = report.recommendation
        return cls(tuple(report.layers), frozenset(kept_in_float(report)),
                   rec.threshold if rec is not None else jd.SUSPECT_THRESHOLD)


def kept_in_float(report: Report) -> set:
    """Tensor names the recommended (measured) model keeps in float; empty without one."""
    rec = report.recommendation
    return set(rec.denylisted_nodes) if rec is not None and rec.selective is not None else set()


def layer_categories(report) -> list[str]:
    """Per layer: "kept" (in float in the recommended model), "kept_flagged" (kept, and flagged by the
    rmse/scale rule), "flagged" (only flagged by the rule) or "other". `report`: a Report or its LayerFacts."""
    facts = report if isinstance(report, LayerFacts) else LayerFacts.of(report)
    kept = facts.kept
    out = []
    for layer in facts.layers:
        if layer.tensor_name in kept:
            out.append("kept_flagged" if layer.suspect else "kept")
        else:
            out.append("flagged" if layer.suspect else "other")
    return out


def index_tick_step(n: int, max_ticks: int = MAX_INDEX_TICKS) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that puts at most `max_ticks` ticks on `n` layers."""
    magnitude = 1
    while True:
        for m in (1, 2, 5):
            step = m * magnitude
            if -(-n // step) <= max_ticks:
                return step
        magnitude *= 10


def short_number(v: float) -> str:
    """A value for a label: 3 significant digits, no exponent below 100,000."""
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        return f"{v:.2e}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def layer_chart_plan(report, values, title: str, ylabel: str, lines=()) -> LayerChartPlan:
    """The plan of a per-layer chart of `values` (one per layer) with horizontal reference `lines`. `report`: a
    Report or its LayerFacts."""
    facts = report if isinstance(report, LayerFacts) else LayerFacts.of(report)
    layers = facts.layers
    values = tuple(float(v) for v in values)
    n = len(layers)
    categories = tuple(layer_categories(facts))
    lines = tuple(lines)
    nonfinite = tuple(i for i, v in enumerate(values) if not math.isfinite(v))
    finite = [v for v in values if math.isfinite(v)]
    plotted = finite + [line.value for line in lines]
    log = spans_decades(plotted)

    names_on_axis = n <= FEW_LAYERS
    if names_on_axis:
        ticks = tuple(range(n))
        tick_labels = tuple(f"{layer.index} {layer.op_name}" for layer in layers)
        xlabel = "layer (debugger order): index and op"
        widest = max((_text_width_in(label, TICK_FONT) for label in tick_labels), default=0.0)
        tick_rotation = 0 if widest < 0.9 * AXES_WIDTH_IN / max(n, 1) else 45
    else:
        step = index_tick_step(n)
        ticks = tuple(i for i, layer in enumerate(layers) if layer.index % step == 0)
        tick_labels = tuple(str(layers[i].index) for i in ticks)
        xlabel = "layer index (debugger order)"
        tick_rotation = 0

    annotated = ()
    if not names_on_axis:
        median = float(np.median(finite)) if finite else 0.0
        ranked = sorted((i for i in range(n) if math.isfinite(values[i]) and values[i] > STANDS_OUT * median
                         and values[i] > 0),
                        key=lambda i: (-values[i], i))
        annotated = tuple(sorted(ranked[:ANNOTATE_TOP]))
    annotations = tuple(f"{layers[i].index} {layers[i].op_name}: {short_number(values[i])}" for i in annotated)
    marked = () if names_on_axis else tuple(i for i, c in enumerate(categories) if c.startswith("kept"))

    ylim = _layer_ylim(plotted, log, headroom=bool(annotated))
    xlim = (-0.6, n - 0.4) if names_on_axis else (-1.0, float(n))
    annotation_x = tuple(_label_positions(
        [(i - xlim[0]) / (xlim[1] - xlim[0]) for i in annotated],
        [_text_width_in(text, ANNOTATION_FONT) / AXES_WIDTH_IN for text in annotations]))
    legend_labels = tuple(_category_label(key, categories) for key in CATEGORIES if key in categories)
    if legend_labels == (_category_label("other", categories),) and not lines:
        legend_labels = ()  # nothing highlighted and no line: a legend would only say "layers"
    legend_labels += tuple(line.label for line in lines)
    return LayerChartPlan(
        title=title, ylabel=ylabel, xlabel=xlabel, values=values, categories=categories, log=log, ylim=ylim,
        xlim=xlim,
        ticks=ticks, tick_labels=tick_labels, names_on_axis=names_on_axis, tick_rotation=tick_rotation,
        bar_width=round(min(0.75, 0.75 * n / 8), 3) if names_on_axis else 0.8, lines=lines,
        legend_labels=legend_labels, annotated=annotated, annotations=annotations, annotation_x=annotation_x,
        marked=marked,
        zeros=tuple(i for i in range(n) if values[i] <= 0) if log and names_on_axis else (),
        nonfinite=nonfinite, note=_nonfinite_note(layers, values, nonfinite),
        height=_layer_chart_height(tick_labels if names_on_axis else (), tick_rotation, len(legend_labels)))


def _layer_chart_height(tick_labels, rotation: int, legend_entries: int) -> float:
    """The figure's height: LAYER_FIGSIZE's, or more when the slanted tick labels or the legend's rows would leave
    the axes less than AXES_MIN_HEIGHT_IN (constrained layout shrinks the axes, not the labels)."""
    widest = max((_text_width_in(label, TICK_FONT) for label in tick_labels), default=0.0)
    ticks = widest * math.sin(math.radians(rotation)) + TICK_FONT / 72 if rotation else 0.15
    legend = -(-legend_entries // 2) * 0.17 if legend_entries else 0.0  # two columns (one row: one line)
    needed = CHART_TITLE_IN + AXES_MIN_HEIGHT_IN + ticks + CHART_XLABEL_IN + legend
    return round(max(LAYER_FIGSIZE[1], needed), 2)


def _nonfinite_note(layers, values, positions) -> str:
    """The chart's note on the layers whose value is not finite: "Not finite: layer 3 CONV_2D (inf, drawn to the top
    edge)"; "" when every value is finite."""
    if not positions:
        return ""
    shown = [f"layer {layers[i].index} {layers[i].op_name} ({values[i]:g}"
             f"{', drawn to the top edge' if values[i] == math.inf else ', not drawn'})" for i in positions[:3]]
    more = f" and {len(positions) - 3} more" if len(positions) > 3 else ""
    return "Not finite: " + ", ".join(shown) + more


def _category_label(key: str, categories) -> str:
    if key == "other" and set(categories) == {"other"}:
        return "layers"
    return CATEGORIES[key][3]


def _text_width_in(text: str, fontsize: float) -> float:
    return len(text) * CHAR_WIDTH * fontsize / 72


def _layer_ylim(plotted, log: bool, headroom: bool) -> tuple:
    """Y limits that show every value and reference line; with `headroom`, room above for the labels."""
    positive = [v for v in plotted if v > 0]
    top_value = max(positive) if positive else 1.0
    share = LABEL_BAND if headroom else 0.93
    if log:
        lo = math.log10(min(positive) / 1.2)
        hi = math.log10(top_value)
        top = lo + (hi - lo) / share
        if math.floor(top) - math.ceil(lo) < 1:  # fewer than two powers of ten in view: down to the decade below
            lo = math.floor(lo)
            top = lo + (hi - lo) / share
        return (10 ** lo, 10 ** top)
    return (0.0, top_value / share)


def layer_rmse_plan(report) -> LayerChartPlan:
    """`report`: a Report or its LayerFacts."""
    facts = report if isinstance(report, LayerFacts) else LayerFacts.of(report)
    threshold = facts.threshold
    return layer_chart_plan(
        facts,
        [layer.rmse_over_scale for layer in facts.layers],
        "RMSE/scale per layer",
        "RMSE / scale",
        lines=(ReferenceLine(RMSE_OVER_SCALE_IDEAL, ":", IDEAL_COLOR,
                             f"ideal {RMSE_OVER_SCALE_IDEAL:.3f} (1/\u221a12: rounding only)"),
               ReferenceLine(threshold, "--", "black", f"rule threshold {threshold:g}")),
    )


def layer_ranges_plan(report) -> LayerChartPlan:
    """`report`: a Report or its LayerFacts."""
    facts = report if isinstance(report, LayerFacts) else LayerFacts.of(report)
    return layer_chart_plan(facts, [layer.range for layer in facts.layers], "Range per layer",
                            "range (255 x scale)")


@dataclass(frozen=True)
class ConfusionPlan:
    """What the confusion chart shows: one matrix (counts, rows true) per measured variant with one, in the report's
    order, the recommended model last."""

    names: tuple
    accuracies: tuple
    matrices: tuple  # each a tuple of rows, each a tuple of counts


def confusion_plan(measured, selective=None) -> Optional[ConfusionPlan]:
    """The confusion chart's plan from the measured variants (report order) and the recommended model (None: none);
    None when no model has a confusion matrix (nothing measured, or a multi-label model)."""
    found = [v for v in measured if v.ok and v.metrics and v.metrics.confusion_matrix]
    if selective is not None and selective.ok and selective.metrics and selective.metrics.confusion_matrix:
        found.append(selective)
    if not found:
        return None
    return ConfusionPlan(tuple(v.name for v in found), tuple(v.metrics.accuracy for v in found),
                         tuple(tuple(tuple(row) for row in v.metrics.confusion_matrix) for v in found))


PLANS = {"ranges": layer_ranges_plan, "rmse": layer_rmse_plan}  # the per-layer charts, by their name in the report


def layer_plans(facts: LayerFacts) -> dict[str, LayerChartPlan]:
    """Each per-layer chart's plan ({} without layers: no chart)."""
    return {name: plan(facts) for name, plan in PLANS.items()} if facts.layers else {}


def _label_positions(wanted, widths, lo: float = 0.01, hi: float = 0.99, gap: float = 0.04) -> list[float]:
    """Centres near `wanted` (sorted, axes fraction) for labels `widths` wide that neither overlap nor
    leave [lo, hi]: pushed right where they collide, then back left from the right edge."""
    pos = [min(max(w, lo + width / 2), hi - width / 2) for w, width in zip(wanted, widths)]
    for i in range(1, len(pos)):
        pos[i] = max(pos[i], pos[i - 1] + (widths[i - 1] + widths[i]) / 2 + gap)
    if pos:
        pos[-1] = min(pos[-1], hi - widths[-1] / 2)
    for i in range(len(pos) - 2, -1, -1):
        pos[i] = min(pos[i], pos[i + 1] - (widths[i] + widths[i + 1]) / 2 - gap)
    return pos
