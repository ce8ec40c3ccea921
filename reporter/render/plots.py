"""Figures for the report: pure functions from the data model to a PNG data URI.

Agg backend, every figure closed after saving, no software/timestamp metadata, so the same report
gives the same bytes. Variant labels come from reporter.core.variants; what a per-layer chart shows (the rule's
default threshold from reporter.core.judgement among it) is planned in reporter.render.layer_plan. matplotlib's
warnings never reach the terminal: during a run they go to run.log, in `quant-report render` they are dropped
(`_warnings_to_log`).
"""

from __future__ import annotations

import base64
import functools
import io
import math
import sys
import warnings
from typing import Optional
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from reporter.core import variants  # noqa: E402
from reporter.core.variants import short  # noqa: E402
from reporter.model.report import Report  # noqa: E402
from reporter.render.layer_plan import (  # noqa: E402
    ANNOTATION_FONT, CATEGORIES, KEPT, LAYER_FIGSIZE, NORMAL, SUSPECT, TICK_FONT, ConfusionPlan, LayerChartPlan,
    _category_label, _text_width_in, confusion_plan, index_tick_step, layer_ranges_plan, layer_rmse_plan, spans_decades)
from reporter.render.layer_plan import (  # noqa: E402,F401  (read through this module before the plan had its own)
    AXES_WIDTH_IN, MAX_INDEX_TICKS, _label_positions, kept_in_float, layer_categories, short_number)

DPI = 130

plt.rcParams.update({
    "font.size": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "quant-report",
})


def _warnings_to_log(draw):
    """`draw(report)` (or `draw(plan)`) with the warnings it raises (matplotlib's layout and glyph warnings) caught:
    written to run.log when a run captures its output there (reporter.core.progress), dropped otherwise."""

    @functools.wraps(draw)
    def quiet(what) -> str:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            uri = draw(what)
        if caught and getattr(sys.stderr, "name", "").endswith("run.log"):
            for w in caught:
                print(f"{draw.__name__} chart: {w.category.__name__}: {w.message}", file=sys.stderr)
        return uri

    return quiet


def _data_uri(fig, tight: bool = True) -> str:
    """The figure as a PNG data: URI, closed. `tight`: cropped to what is drawn; else the figure's own size (a
    figure drawn at its printed size keeps it)."""
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight" if tight else None, metadata={"Software": None})
    finally:
        plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


# --- log axes ----------------------------------------------------------------------------------

PLAIN_DECADES = (-3, 3)  # decades written as plain numbers ("0.001" .. "1,000"); beyond, every label is 10ⁿ
_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def decade_labels(exponents, shown=None) -> list[str]:
    """Labels of the decades 10^e, e in `exponents`, in one format for the whole axis: plain numbers ("0.01", "1",
    "1,000") when every decade `shown` (default: all of them) lies within PLAIN_DECADES, else powers of ten
    ("10⁻⁴", "10⁰", "10²")."""
    exponents = [int(e) for e in exponents]
    shown = exponents if shown is None else [int(e) for e in shown]
    if all(PLAIN_DECADES[0] <= e <= PLAIN_DECADES[1] for e in shown):
        return [f"{10 ** e:,}" if e >= 0 else f"{10.0 ** e:.{-e}f}" for e in exponents]
    return ["10" + str(e).translate(_SUPERSCRIPT) for e in exponents]


def _decade_formatter():
    from matplotlib.ticker import Formatter

    class DecadeFormatter(Formatter):
        """A log axis' major labels from `decade_labels`, the format chosen from the decades in view (the
        locator also places one decade beyond each end, never drawn)."""

        def __call__(self, x, pos=None):
            return self.format_ticks([x])[0]

        def format_ticks(self, values):
            exps = [round(math.log10(v)) for v in values]
            if self.axis is None:
                return decade_labels(exps)
            lo, hi = sorted(self.axis.get_view_interval())
            shown = [e for e, v in zip(exps, values) if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]
            return decade_labels(exps, shown or exps)

    return DecadeFormatter()


def log_axis(axis) -> None:
    """A matplotlib axis (ax.xaxis or ax.yaxis) on a log scale with labelled ticks at powers of ten only, as many
    as its length leaves room for (LogLocator's automatic count: two font heights apart), in one format."""
    from matplotlib.ticker import LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0,)))
    axis.set_major_formatter(_decade_formatter())
    axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10))))
    axis.set_minor_formatter(NullFormatter())


# --- confusion matrices ------------------------------------------------------------------------
#
# Drawn at the size they are printed: report.css prints the figure at 52 % of A4's 184 mm text width
# (`#confusion img`), so one inch of the figure is one printed inch and a font size is the printed size.

CONFUSION_WIDTH_IN = 0.52 * 184 / 25.4  # 3.77 in
COUNT_FONT_MIN = 7.0  # points, printed: a count smaller than this is not drawn (the cell's shade still shows it)
COUNT_FONT_MAX = 10.0
CONFUSION_TITLE_FONT = 7.0
CONFUSION_TICK_FONT = 7.0
DIGIT_WIDTH = 0.62  # a digit of DejaVu Sans, in font sizes
ZERO_COLOR = "#9a9a9a"  # the "0" of an empty cell: there, but quieter than a count
MIN_SHADE = 0.18  # the lightest shade of a cell with at least one sample (#e3e3e3): told apart from an empty (white) one
MAX_CLASS_TICKS = 20  # more classes: every n-th class is labelled
CONFUSION_MAX_HEIGHT_IN = 8.5  # the figure fits an A4 page (263 mm of text height) with its caption


@dataclass(frozen=True)
class ConfusionLayout:
    """How the confusion matrices are laid out at their printed size (pure arithmetic, tested without pixels)."""

    cols: int
    rows: int
    cell_pt: float  # one cell's side, in printed points
    count_font: float  # the counts' size, in printed points
    tick_step: int  # every n-th class labelled on the axes

    def fits(self, count: int) -> bool:
        """The count's digits fit inside its cell at `count_font` (and the font is at least the minimum)."""
        width = len(str(count)) * DIGIT_WIDTH * self.count_font
        return self.count_font >= COUNT_FONT_MIN and width <= 0.9 * self.cell_pt and \
            self.count_font <= 0.85 * self.cell_pt


def confusion_layout(n: int, k: int, width_in: float = CONFUSION_WIDTH_IN) -> ConfusionLayout:
    """`n` matrices of `k` classes in a figure `width_in` wide: side by side as many as leave each its title's width
    and a two-digit count legible at COUNT_FONT_MIN (at most 4 in a row; of the column counts that take as few rows,
    the smallest, so that the rows are even), one per row when even that does not fit."""
    label_in = 0.42  # each matrix's tick labels and axis label beside it, and the gap to the next
    title_in = 0.9  # "Recommended" / "accuracy 0.956" at the title size, and a gap

    def counts_fit(c: int) -> bool:
        return (width_in / c - label_in) * 72 / k >= 2 * DIGIT_WIDTH * COUNT_FONT_MIN / 0.9

    # Each layout that leaves every title its width and fits a page; then those in which a count fits.
    shapes = [c for c in range(1, min(n, 4) + 1)
              if width_in / c >= title_in and -(-n // c) * (width_in / c + 0.15) <= CONFUSION_MAX_HEIGHT_IN]
    shapes = shapes or [min(n, 4)]
    legible = [c for c in shapes if counts_fit(c)]
    cols = min(legible, key=lambda c: (-(-n // c), c)) if legible else min(shapes)
    cell_pt = (width_in / cols - label_in) * 72 / max(k, 1)
    font = min(COUNT_FONT_MAX, max(COUNT_FONT_MIN, 0.42 * cell_pt))
    # Class labels side by side under the matrix: every n-th, so that the widest fits its share of the axis.
    step = index_tick_step(k, MAX_CLASS_TICKS)
    while step < k and len(str(k - 1)) * DIGIT_WIDTH * CONFUSION_TICK_FONT > 0.85 * cell_pt * step:
        step = index_tick_step(k, max(1, -(-k // step) - 1))
    return ConfusionLayout(cols=cols, rows=-(-n // cols), cell_pt=round(cell_pt, 2), count_font=round(font, 2),
                           tick_step=step)


def confusion_plan_of(report: Report) -> Optional[ConfusionPlan]:
    """The report's confusion chart planned (None: no model has a confusion matrix)."""
    rec = report.recommendation
    return confusion_plan(report.variants, rec.selective if rec else None)


def _confusion_variants(report: Report) -> list:
    found = [v for v in report.variants if v.ok and v.metrics and v.metrics.confusion_matrix]
    rec = report.recommendation
    if rec and rec.selective and rec.selective.ok and rec.selective.metrics and rec.selective.metrics.confusion_matrix:
        found.append(rec.selective)
    return found


def confusion_figure(report):
    """The confusion matrices as a matplotlib figure (None without one): one per measured variant, rows true,
    columns predicted, shade the share of the row; each count written where it fits at the printed size, an
    empty cell white with a grey "0". `report`: a Report or its ConfusionPlan."""
    from matplotlib.colors import ListedColormap

    plan = report if isinstance(report, ConfusionPlan) else confusion_plan_of(report)
    if plan is None:  # nothing measured, or a multi-label model: no confusion matrix
        return None
    k = max(len(matrix) for matrix in plan.matrices)  # the matrices drawn (num_classes is only a claim)
    lay = confusion_layout(len(plan.names), k)
    side_in = CONFUSION_WIDTH_IN / lay.cols
    greys = plt.get_cmap("Greys")
    # A non-empty cell is at least MIN_SHADE grey, an empty one white: the two never look alike.
    shades = ListedColormap(["white"] + [greys(MIN_SHADE + (1 - MIN_SHADE) * i / 255) for i in range(256)])
    fig, axes = plt.subplots(lay.rows, lay.cols, figsize=(CONFUSION_WIDTH_IN, (side_in + 0.15) * lay.rows),
                             squeeze=False, layout="constrained")
    flat = list(axes.flat)
    for ax in flat[len(plan.names):]:
        ax.axis("off")
    left_out = 0
    for position, (ax, name, accuracy, matrix) in enumerate(zip(flat, plan.names, plan.accuracies, plan.matrices)):
        cm = np.array(matrix, dtype=float)
        totals = cm.sum(axis=1, keepdims=True)
        share = np.divide(cm, totals, out=np.zeros_like(cm), where=totals > 0)
        # Colour index: 0 for an empty cell, 1..256 for a share of 0..1.
        ax.imshow(np.where(cm > 0, 1 + np.round(share * 255), 0), cmap=shades, vmin=0, vmax=256,
                  interpolation="nearest")
        ax.set_title(f"{short(name)}\naccuracy {accuracy:.3f}", fontsize=CONFUSION_TITLE_FONT)
        ticks = list(range(0, len(cm), lay.tick_step))
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        ax.tick_params(labelsize=CONFUSION_TICK_FONT, length=0 if lay.tick_step == 1 else 2)
        ax.set_xlabel("predicted", fontsize=CONFUSION_TITLE_FONT)
        if position % lay.cols == 0:
            ax.set_ylabel("true", fontsize=CONFUSION_TITLE_FONT)
        for i in range(len(cm)):
            for j in range(len(cm)):
                count = int(cm[i, j])
                if not lay.fits(count):
                    left_out += 1
                    continue
                color = ZERO_COLOR if count == 0 else "white" if share[i, j] > 0.5 else "black"
                ax.text(j, i, str(count), ha="center", va="center", fontsize=lay.count_font, color=color)
    if left_out:
        import textwrap

        note = (f"{k} classes: a count is written only where it fits at this size ({left_out:,} cells without);"
                " the shade shows every cell, white for none. Every count is in report.json.")
        chars = int(CONFUSION_WIDTH_IN * 72 / (0.55 * CONFUSION_TICK_FONT))
        fig.supxlabel("\n".join(textwrap.wrap(note, chars)), fontsize=CONFUSION_TICK_FONT, x=0.0, ha="left")
    return fig


@_warnings_to_log
def confusion_chart(plan: ConfusionPlan) -> str:
    """The confusion chart drawn from its plan (the same bytes as `confusion_matrices` of the report it was planned
    from)."""
    return _data_uri(confusion_figure(plan), tight=False)


@_warnings_to_log
def confusion_matrices(report: Report) -> str:
    """Small multiples: one confusion matrix per measured variant, rows true, columns predicted (a data: URI)."""
    fig = confusion_figure(report)
    return "" if fig is None else _data_uri(fig, tight=False)


# --- per-layer charts --------------------------------------------------------------------------
#
# Each layer chart is planned first (reporter.render.layer_plan: a pure function of the report, tested without
# pixels) and then drawn from the plan (`_draw_layer_chart`).

def _draw_layer_chart(plan: LayerChartPlan) -> str:
    return _data_uri(layer_figure(plan))


def layer_figure(plan: LayerChartPlan):
    """The per-layer chart drawn from its plan, as a matplotlib figure."""
    from matplotlib.legend_handler import HandlerTuple
    from matplotlib.patches import Patch

    n = len(plan.values)
    heights = plan.heights
    x = np.arange(n)
    fig, ax = plt.subplots(figsize=(LAYER_FIGSIZE[0], plan.height), layout="constrained")
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
        log_axis(ax.yaxis)
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
        return fig
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
    return fig


@_warnings_to_log
def layer_chart(plan: LayerChartPlan) -> str:
    """A per-layer chart drawn from its plan (the same bytes as `layer_ranges` or `layer_rmse` of the report it was
    planned from)."""
    return _draw_layer_chart(plan)


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
        log_axis(axes[0].xaxis)
    axes[0].set_ylabel(ylabel)
    fig.suptitle("Search: selection score against size and against layers kept in float", fontsize=9, x=0.01,
                 ha="left")
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, frameon=False, loc="lower center", ncol=min(len(labels), 6))
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return _data_uri(fig)
