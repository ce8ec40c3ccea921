"""Figures for the report: pure functions from the data model to a PNG data URI.

Agg backend, every figure closed after saving, no software/timestamp metadata, so the same report
gives the same bytes.
"""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from reporter.report import RMSE_OVER_SCALE_IDEAL, Report  # noqa: E402

SUSPECT = "#c0392b"
NORMAL = "#4a6fa5"
DPI = 130

plt.rcParams.update({
    "font.size": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "quant-report",
})


def _data_uri(fig) -> str:
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    finally:
        plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def confusion_matrices(report: Report, short_names: dict) -> str:
    """Small multiples: one confusion matrix per measured variant, rows true, columns predicted."""
    variants = [v for v in report.variants if v.ok and v.metrics]
    rec = report.recommendation
    if rec and rec.selective and rec.selective.ok and rec.selective.metrics:
        variants.append(rec.selective)
    if not variants:
        return ""
    n = len(variants)
    k = report.model.num_classes or 1
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
        ax.set_title(f"{short_names.get(v.name, v.name)}\naccuracy {v.metrics.accuracy:.3f}", fontsize=7)
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


def _layer_bars(report: Report, values, ylabel: str, title: str, lines=(), log=False) -> str:
    layers = report.layers
    if not layers:
        return ""
    x = np.arange(len(layers))
    colors = [SUSPECT if layer.suspect else NORMAL for layer in layers]
    hatches = ["////" if layer.suspect else "" for layer in layers]
    width = min(9.0, max(4.0, 0.22 * len(layers) + 2))
    fig, ax = plt.subplots(figsize=(width, 2.4))
    bars = ax.bar(x, values, color=colors, edgecolor="black", linewidth=0.3)
    for bar, hatch in zip(bars, hatches):
        bar.set_hatch(hatch)
    for value, style, label in lines:
        ax.axhline(value, linestyle=style, color="black", linewidth=0.8, label=label)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_xlabel("layer index (debugger order)")
    ax.set_title(title, fontsize=9, loc="left")
    step = max(1, len(layers) // 30)
    ax.set_xticks(x[::step])
    handles = [plt.Rectangle((0, 0), 1, 1, color=NORMAL), plt.Rectangle((0, 0), 1, 1, color=SUSPECT, hatch="////")]
    labels = ["layer", "suspect"]
    line_handles, line_labels = ax.get_legend_handles_labels()
    ax.legend(handles + line_handles, labels + line_labels, fontsize=7, frameon=False, loc="upper left",
              bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return _data_uri(fig)


def layer_ranges(report: Report) -> str:
    values = [layer.range for layer in report.layers]
    spread = max(values) / max(min(v for v in values if v > 0), 1e-12) if any(v > 0 for v in values) else 1
    return _layer_bars(report, values, "range (255 x scale)", "Range per layer", log=spread > 100)


def layer_rmse(report: Report) -> str:
    threshold = report.recommendation.threshold if report.recommendation else 0.7
    values = [layer.rmse_over_scale for layer in report.layers]
    spread = max(values) / threshold if values else 1
    return _layer_bars(
        report,
        values,
        "RMSE / scale",
        "RMSE/scale per layer",
        lines=((RMSE_OVER_SCALE_IDEAL, ":", f"ideal {RMSE_OVER_SCALE_IDEAL:.3f}"),
               (threshold, "--", f"threshold {threshold:g}")),
        log=spread > 20,
    )


def tradeoff(report: Report) -> str:
    """The search's candidates: accuracy (or output error) against size and against float layers,
    the Pareto front joined, the chosen model and the rmse/scale rule's pick marked."""
    rec = report.recommendation
    if not rec or not rec.search or not rec.search.steps:
        return ""
    classification = report.model.num_classes is not None
    unique = {}
    for step in rec.search.steps:
        unique.setdefault(tuple(step.denylisted_nodes), step)
    steps = list(unique.values())
    quality = [s.accuracy if classification else s.output_mse for s in steps]
    if any(q is None for q in quality):
        return ""
    ylabel = "accuracy (evaluation data)" if classification else "output MSE vs float (evaluation data)"
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.0), sharey=True)
    for ax, xs, xlabel in (
        (axes[0], [s.size_bytes / 1024 for s in steps], "model size (KB)"),
        (axes[1], [len(s.denylisted_nodes) for s in steps], "layers kept in float"),
    ):
        ax.scatter(xs, quality, s=14, color=NORMAL, alpha=0.7, label="candidate", zorder=2)
        from reporter.search import pareto

        better = quality if classification else [-q for q in quality]
        front = sorted((x, q) for x, q, flag in zip(xs, quality, pareto(list(zip(xs, better)))) if flag)
        if front:
            ax.plot([p[0] for p in front], [p[1] for p in front], color=NORMAL, linewidth=1, label="Pareto front",
                    zorder=1)
        chosen = [(x, q) for x, q, s in zip(xs, quality, steps) if s.chosen]
        if chosen:
            ax.scatter(*chosen[0], s=90, marker="*", color="#2e7d32", edgecolor="black", linewidth=0.5,
                       label="recommended", zorder=4)
        rule = rec.rule
        if rule and rule.selective and rule.selective.ok:
            rq = (rule.selective.metrics.accuracy if classification and rule.selective.metrics else
                  rule.selective.output_error.mse if rule.selective.output_error else None)
            if rq is not None:
                rx = rule.selective.size_bytes / 1024 if xlabel.startswith("model") else len(rule.denylisted_nodes)
                ax.scatter(rx, rq, s=40, marker="X", color=SUSPECT, label="rmse/scale rule", zorder=3)
        for name, style in (("float", ":"), ("fiq", "--")):
            v = report.variant(name)
            if v and v.ok and classification and v.metrics:
                ax.axhline(v.metrics.accuracy, linestyle=style, color="black", linewidth=0.7,
                           label=f"{'float' if name == 'float' else 'FIQ'} {v.metrics.accuracy:.3f}")
        ax.set_xlabel(xlabel)
    axes[1].xaxis.set_major_locator(MaxNLocator(integer=True))
    if not classification and all(q > 0 for q in quality):
        axes[0].set_yscale("log")
    axes[0].set_ylabel(ylabel)
    what = "accuracy" if classification else "output error"
    fig.suptitle(f"Search: {what} against size and against layers kept in float", fontsize=9, x=0.01,
                 ha="left")
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, frameon=False, loc="lower center", ncol=min(len(labels), 6))
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return _data_uri(fig)
