"""Figures for the report: pure functions from the data model to a PNG data URI.

Agg backend, every figure closed after saving, no software/timestamp metadata, so the same report
gives the same bytes. Variant labels come from reporter.core.variants, the rule's default threshold from
reporter.core.judgement. matplotlib's warnings never reach the terminal: during a run they go to run.log,
in `quant-report render` they are dropped (`_warnings_to_log`).
"""

from __future__ import annotations

import base64
import functools
import io
import math
import sys
import warnings
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from reporter.core import judgement as jd  # noqa: E402
from reporter.core import variants  # noqa: E402
from reporter.core.variants import short  # noqa: E402
from reporter.model.report import RMSE_OVER_SCALE_IDEAL, Report  # noqa: E402

SUSPECT = "#c0392b"
NORMAL = "#4a6fa5"
DPI = 130

plt.rcParams.update({
    "font.size": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "quant-report",
})


def _warnings_to_log(draw):
    """`draw(report)` with the warnings it raises (matplotlib's layout and glyph warnings) caught: written to
    run.log when a run captures its output there (reporter.core.progress), dropped otherwise."""

    @functools.wraps(draw)
    def quiet(report: Report) -> str:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            uri = draw(report)
        if caught and getattr(sys.stderr, "name", "").endswith("run.log"):
            for w in caught:
                print(f"{draw.__name__} chart: {w.category.__name__}: {w.message}", file=sys.stderr)
        return uri

    return quiet


def _data_uri(fig) -> str:
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    finally:
        plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


@_warnings_to_log
def confusion_matrices(report: Report) -> str:
    """Small multiples: one confusion matrix per measured variant, rows true, columns predicted."""
    variants = [v for v in report.variants if v.ok and v.metrics and v.metrics.confusion_matrix]
    rec = report.recommendation
    if rec and rec.selective and rec.selective.ok and rec.selective.metrics and rec.selective.metrics.confusion_matrix:
        variants.append(rec.selective)
    if not variants:  # nothing measured, or a multi-label model: no confusion matrix
        return ""
    n = len(variants)
    k = max(len(v.metrics.confusion_matrix) for v in variants)  # the matrices drawn (num_classes is only a claim)
    # Few classes: one row of small matrices. Many: two per row, big enough to read the counts.
    cols = n if k <= 4 else min(n, 2)
    rows = -(-n // cols)
    cell = 1.3 if k <= 4 else 2.2
    fig, axes = plt.subplots(rows, cols, figsize=(cell * cols + 0.4, (cell + 0.5) * rows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.axis("off")
    for ax, v in zip(flat, variants):
        cm = np.array(v.metrics.confusion_matrix, dtype=float)
        rows = cm.sum(axis=1, keepdims=True)
        share = np.divide(cm, rows, out=np.zeros_like(cm), where=rows > 0)
        ax.imshow(share, cmap="Greys", vmin=0, vmax=1)
        ax.set_title(f"{short(v.name)}\naccuracy {v.metrics.accuracy:.3f}", fontsize=7)
        ax.set_xticks(range(k))
        ax.set_yticks(range(k))
        ax.tick_params(labelsize=6, length=0)
        ax.set_xlabel("predicted", fontsize=7)
        if flat.index(ax) % cols == 0:
            ax.set_ylabel("true", fontsize=7)
        if k <= 12:
            for i in range(k):
                for j in range(k):
                    if cm[i, j]:
                        ax.text(j, i, f"{int(cm[i, j])}", ha="center", va="center", fontsize=6 if k > 4 else 7,
                                color="white" if share[i, j] > 0.5 else "black")
    fig.tight_layout()
    return _data_uri(fig)


# --- per-layer charts --------------------------------------------------------------------------
#
# Each layer chart is planned first (`layer_chart_plan`: a pure function of the report, tested without
# pixels) and then drawn from the plan (`_draw_layer_chart`).

FEW_LAYERS = 30  # up to this many layers the x axis names each one ("2 FULLY_CONNECTED")
MAX_INDEX_TICKS = 16  # more layers: bare indices, about this many ticks at most
ANNOTATE_TOP = 3  # more layers: the largest values are labelled with their index and op name...
STANDS_OUT = 2.0  # ...when they are more than this many times the median (no labels on a flat chart)
DECADE_SPAN = 10.0  # a log axis when the plotted positive values span more than this ratio
LAYER_FIGSIZE = (5.6, 2.9)  # inches: shown at ~68 % of an 1100 px page and in an A4 PDF
LABEL_BAND = 0.80  # with labels: the largest value reaches this share of the axis height
AXES_WIDTH_IN = LAYER_FIGSIZE[0] - 0.75  # the axes after the y label and margins (an estimate)
TICK_FONT = 6.5
ANNOTATION_FONT = 6.5
CHAR_WIDTH = 0.66  # a character of DejaVu Sans (upper case: op names), in font sizes, a little generous

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

    @property
    def heights(self) -> tuple:
        """The bars drawn: each value, inf cut at the top edge, NaN and -inf as no bar."""
        return tuple(v if math.isfinite(v) else self.ylim[1] if v == math.inf else 0.0 for v in self.values)


def spans_decades(values, ratio: float = DECADE_SPAN) -> bool:
    """True when the positive values span more than `ratio` (max / min): a log axis reads better."""
    positive = [float(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    return bool(positive) and max(positive) / min(positive) > ratio


def kept_in_float(report: Report) -> set:
    """Tensor names the recommended (measured) model keeps in float; empty without one."""
    rec = report.recommendation
    return set(rec.denylisted_nodes) if rec is not None and rec.selective is not None else set()


def layer_categories(report: Report) -> list[str]:
    """Per layer: "kept" (in float in the recommended model), "kept_flagged" (kept, and flagged by the
    rmse/scale rule), "flagged" (only flagged by the rule) or "other"."""
    kept = kept_in_float(report)
    out = []
    for layer in report.layers:
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


def layer_chart_plan(report: Report, values, title: str, ylabel: str, lines=()) -> LayerChartPlan:
    """The plan of a per-layer chart of `values` (one per layer) with horizontal reference `lines`."""
    layers = report.layers
    values = tuple(float(v) for v in values)
    n = len(layers)
    categories = tuple(layer_categories(report))
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
        nonfinite=nonfinite, note=_nonfinite_note(layers, values, nonfinite))


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


def _nice_below(v: float) -> float:
    """The largest 1, 2 or 5 x 10^k at or below `v` (> 0): a log axis then starts on a labelled tick."""
    k = math.floor(math.log10(v))
    for m in (5, 2, 1):
        if m * 10.0 ** k <= v * (1 + 1e-9):
            return m * 10.0 ** k
    return 10.0 ** k  # pragma: no cover


def _layer_ylim(plotted, log: bool, headroom: bool) -> tuple:
    """Y limits that show every value and reference line; with `headroom`, room above for the labels."""
    positive = [v for v in plotted if v > 0]
    top_value = max(positive) if positive else 1.0
    share = LABEL_BAND if headroom else 0.93
    if log:
        lo = math.log10(_nice_below(min(positive) / 1.2))
        hi = math.log10(top_value)
        return (10 ** lo, 10 ** (lo + (hi - lo) / share))
    return (0.0, top_value / share)


def layer_rmse_plan(report: Report) -> LayerChartPlan:
    threshold = report.recommendation.threshold if report.recommendation else jd.SUSPECT_THRESHOLD
    return layer_chart_plan(
        report,
        [layer.rmse_over_scale for layer in report.layers],
        "RMSE/scale per layer",
        "RMSE / scale",
        lines=(ReferenceLine(RMSE_OVER_SCALE_IDEAL, ":", IDEAL_COLOR,
                             f"ideal {RMSE_OVER_SCALE_IDEAL:.3f} (1/\u221a12: rounding only)"),
               ReferenceLine(threshold, "--", "black", f"rule threshold {threshold:g}")),
    )


def layer_ranges_plan(report: Report) -> LayerChartPlan:
    return layer_chart_plan(report, [layer.range for layer in report.layers], "Range per layer",
                            "range (255 x scale)")


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


def _draw_layer_chart(plan: LayerChartPlan) -> str:
    from matplotlib.legend_handler import HandlerTuple
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    n = len(plan.values)
    heights = plan.heights
    x = np.arange(n)
    fig, ax = plt.subplots(figsize=LAYER_FIGSIZE, layout="constrained")
    few = plan.names_on_axis
    faces = [CATEGORIES[c][0] for c in plan.categories]
    edges = [CATEGORIES[c][2] if CATEGORIES[c][1] else ("black" if few else "none") for c in plan.categories]
    bars = ax.bar(x, heights, width=plan.bar_width, color=faces, edgecolor=edges,
                  linewidth=0.4 if few else 0.0, zorder=2)
    for bar, category in zip(bars, plan.categories):
        hatch = CATEGORIES[category][1]
        if hatch:
            bar.set_hatch(hatch)
            bar.set_linewidth(0.6)
    for line in plan.lines:
        ax.axhline(line.value, linestyle=line.style, color=line.color, linewidth=1.1, zorder=3)

    if plan.log:
        ax.set_yscale("log")
        decades = math.log10(plan.ylim[1] / plan.ylim[0])
        subs = (1.0, 2.0, 5.0) if decades <= 1.6 else (1.0, 3.0) if decades <= 3.2 else (1.0,)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: short_number(v)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(*plan.ylim)
    ax.set_xlim(*plan.xlim)
    ax.grid(axis="y", which="major", color="#e3e3e3", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)

    ax.set_xticks(list(plan.ticks))
    if plan.tick_rotation:
        ax.set_xticklabels(plan.tick_labels, rotation=plan.tick_rotation, ha="right", rotation_mode="anchor",
                           fontsize=TICK_FONT)
    else:
        ax.set_xticklabels(plan.tick_labels, fontsize=TICK_FONT if few else 7)
    ax.tick_params(axis="x", length=2)
    ax.set_ylabel(plan.ylabel)
    ax.set_xlabel(plan.xlabel + (f"\n{plan.note}" if plan.note else ""), fontsize=7)
    ax.set_title(plan.title, fontsize=9, loc="left")

    for i, text, where in zip(plan.annotated, plan.annotations, plan.annotation_x):
        ax.annotate(text, xy=(i, heights[i]), xycoords="data", xytext=(where, 0.975),
                    textcoords="axes fraction", ha="center", va="top", fontsize=ANNOTATION_FONT,
                    arrowprops={"arrowstyle": "-", "color": "#444444", "linewidth": 0.5, "shrinkA": 1,
                                "shrinkB": 1},
                    zorder=4)

    marker = {"marker": "v", "markersize": 4, "color": KEPT, "markeredgecolor": "white", "markeredgewidth": 0.3,
              "linestyle": "none"}
    for i in plan.zeros:
        ax.text(i, 0.01, "0", transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=TICK_FONT,
                color="#444444")
    if plan.marked:
        tops = [heights[i] * (1.25 if plan.log else 1.0) + (0 if plan.log else 0.03 * plan.ylim[1])
                for i in plan.marked]
        ax.plot(list(plan.marked), tops, zorder=4, **marker)

    for i in plan.nonfinite:  # each value that is not finite said above its bar, at the top edge
        ax.text(i, 1.0, f"{plan.values[i]:g}", transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                fontsize=TICK_FONT, color=SUSPECT, fontweight="bold", zorder=5, clip_on=False)

    # The legend: layer categories in the first column, reference lines in the second.
    cats = []
    for key, (face, hatch, edge, _) in CATEGORIES.items():
        if key not in plan.categories:
            continue
        label = _category_label(key, plan.categories)
        handle = Patch(facecolor=face, edgecolor=edge if hatch else face, hatch=hatch, linewidth=0.6)
        if plan.marked and key.startswith("kept"):
            handle = (handle, plt.Line2D([], [], **marker))
        cats.append((handle, label))
    refs = [(plt.Line2D([], [], linestyle=line.style, color=line.color, linewidth=1.0), line.label)
            for line in plan.lines]
    if not plan.legend_labels:
        return _data_uri(fig)
    assert tuple(label for _, label in cats + refs) == plan.legend_labels
    if refs:
        rows = max(len(cats), len(refs))
        blank = (Patch(visible=False), "")
        entries = cats + [blank] * (rows - len(cats)) + refs + [blank] * (rows - len(refs))
        ncol = 2
    else:
        one_row = sum(_text_width_in(label, 7) + 0.6 for _, label in cats)
        entries, ncol = cats, len(cats) if one_row <= LAYER_FIGSIZE[0] - 0.2 else min(len(cats), 2)
    fig.legend([h for h, _ in entries], [label for _, label in entries], loc="outside lower center", ncol=ncol,
               fontsize=7, frameon=False, handlelength=2.2, columnspacing=2.0,
               handler_map={tuple: HandlerTuple(ndivide=None, pad=0.3)})
    return _data_uri(fig)


@_warnings_to_log
def layer_ranges(report: Report) -> str:
    if not report.layers:
        return ""
    return _draw_layer_chart(layer_ranges_plan(report))


@_warnings_to_log
def layer_rmse(report: Report) -> str:
    if not report.layers:
        return ""
    return _draw_layer_chart(layer_rmse_plan(report))


@_warnings_to_log
def tradeoff(report: Report) -> str:
    """The search's candidates: their selection score (the score every candidate was chosen by, on the selection
    samples) against size and against float layers, the Pareto front joined, the chosen model, FIQ and the
    rmse/scale rule's pick marked."""
    rec = report.recommendation
    if not rec or not rec.search or not rec.search.steps:
        return ""
    unique = {}
    for step in rec.search.steps:
        unique.setdefault(tuple(step.denylisted_nodes), step)
    steps = list(unique.values())
    quality = [s.selection_score for s in steps]
    ylabel = f"selection score ({rec.search.selection_data.num_samples} samples)"
    from matplotlib.ticker import MaxNLocator

    from reporter.core.pareto import front as pareto_front

    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.0), sharey=True)
    for ax, xs, xlabel in (
        (axes[0], [s.size_bytes / 1024 for s in steps], "model size (KB)"),
        (axes[1], [len(s.denylisted_nodes) for s in steps], "layers kept in float"),
    ):
        ax.scatter(xs, quality, s=14, color=NORMAL, alpha=0.7, label="candidate", zorder=2)
        on_front = pareto_front([(x, -q) for x, q in zip(xs, quality)])  # size or layers against the score
        front = sorted((x, q) for x, q, flag in zip(xs, quality, on_front) if flag)
        if front:
            ax.plot([p[0] for p in front], [p[1] for p in front], color=NORMAL, linewidth=1, label="Pareto front",
                    zorder=1)
        chosen = [(x, q) for x, q, s in zip(xs, quality, steps) if s.chosen]
        if chosen:
            ax.scatter(*chosen[0], s=90, marker="*", color="#2e7d32", edgecolor="black", linewidth=0.5,
                       label="recommended", zorder=4)
        rule = rec.rule
        if rule and rule.selective and rule.selective.ok and rule.selection_score is not None:
            rx = rule.selective.size_bytes / 1024 if xlabel.startswith("model") else len(rule.denylisted_nodes)
            ax.scatter(rx, rule.selection_score, s=40, marker="X", color=SUSPECT, label="rmse/scale rule", zorder=3)
        fiq = next((s for s in rec.search.steps if s.phase == variants.FIQ), None)
        if fiq is not None:
            ax.axhline(fiq.selection_score, linestyle="--", color="black", linewidth=0.7,
                       label=f"FIQ {fiq.selection_score:.3f}")
        ax.axhline(rec.search.target, linestyle=":", color="black", linewidth=0.7,
                   label=f"target {rec.search.target:.3f}")
        ax.set_xlabel(xlabel)
    axes[1].xaxis.set_major_locator(MaxNLocator(integer=True))
    if spans_decades([s.size_bytes for s in steps]):
        axes[0].set_xscale("log")  # sizes a decade apart or more: a linear axis piles the small ones up
    axes[0].set_ylabel(ylabel)
    fig.suptitle("Search: selection score against size and against layers kept in float", fontsize=9, x=0.01,
                 ha="left")
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, frameon=False, loc="lower center", ncol=min(len(labels), 6))
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return _data_uri(fig)
