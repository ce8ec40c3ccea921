"""What the reports show, derived from a Report: arrows, verdicts, table rows. No TensorFlow here.

Templates only lay these values out; every comparison, threshold and sort happens in this module,
where it is tested.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

from reporter.report import RMSE_OVER_SCALE_IDEAL, LayerStat, Report, VariantResult

SHORT_NAMES = {
    "float": "Float",
    "drq": "DRQ",
    "fiq": "FIQ",
    "f16": "Float16",
    "int16x8": "16x8",
    "int8_io": "Int8 I/O",
    "selective": "Recommended",
    "rule": "Rule",
}
LONG_NAMES = {
    "float": "Float TFLite (reference)",
    "drq": "Dynamic-range quantization (weights int8)",
    "fiq": "Full-integer quantization (float I/O)",
    "f16": "Float16 weights",
    "int16x8": "16-bit activations, 8-bit weights",
    "int8_io": "Integer only (int8 input and output)",
    "selective": "FIQ with the recommended layers left in float",
    "rule": "FIQ with the rmse/scale rule's layers left in float",
}

METRICS = (
    ("accuracy", "Accuracy"),
    ("precision", "Precision (macro)"),
    ("recall", "Recall (macro)"),
    ("f1", "F1 (macro)"),
    ("balanced_accuracy", "Balanced accuracy"),
    ("cohen_kappa", "Cohen's kappa"),
    ("agreement_with_float", "Agreement with float"),
)
TENSOR_TYPES = (("int8", "Int8"), ("int16", "Int16"), ("int32", "Int32"), ("float32", "Float32"),
                ("other", "Other"), ("total", "Total"))

METRIC_SAME_POINTS = 0.5  # within this many points (of 100): "~"
METRIC_BIG_POINTS = 5.0  # beyond this many points: a double arrow
COUNT_BIG_RATIO = 2.0  # a count that more than doubles or halves: a double arrow
LATENCY_SAME_RATIO = 0.10  # latency within 10 % of float: "~" (timing noise, not a change)

LEGEND = (
    ("~", "equal to the float model (tensor counts, sizes), within 10 % of it (latency), or within 0.5 points"
          " of it (metrics)."),
    ("↑ / ↓", "higher / lower than the float model."),
    ("↑↑ / ↓↓", "more than 2x higher / lower (counts, sizes, latency), or more than 5 points (metrics)."),
    ("good / bad colour", "green where the change helps (smaller, faster, more accurate), red where it hurts;"
                          " the arrows carry the same meaning in grey print."),
    ("Accuracy", "share of evaluation samples whose top class is the true label."),
    ("Precision, recall, F1 (macro)", "per-class precision, recall and their harmonic mean, averaged over"
                                      " classes with equal weight."),
    ("Balanced accuracy", "the mean of per-class recall; robust to unbalanced classes."),
    ("Cohen's kappa", "agreement with the true labels beyond chance: 1 perfect, 0 no better than chance."),
    ("Agreement with float", "share of samples where the variant predicts the same class as the float model."),
    ("Latency", "median and 90th percentile of one single-sample invoke on one thread after warm-up,"
                " on the machine that made the report."),
    ("Range", "255 x scale: the span of float values the tensor's int8 grid covers."),
    ("RMSE/scale", "root-mean-square error between float and quantized output, in quantization steps;"
                   f" about {RMSE_OVER_SCALE_IDEAL:.3f} (1/sqrt(12)) when the error is pure rounding."),
    ("Propagated RMSE/scale", "the same error measured against a float copy of the whole model (whole-model"
                              " verify): where error piles up, while RMSE/scale shows where it is made."),
    ("Flagged by the rule", "a layer with RMSE/scale above the threshold, or among the first N layers if asked:"
                            " the seed notebook's rule, shown for comparison with the measured search."),
    ("Selection score", "what the search chooses on: agreement with the float model's predictions on the"
                        " selection samples (or 1 - output MSE / variance for a regression output)."),
    ("Pareto", "a candidate that no other candidate beats on both size and accuracy."),
    ("Gap recovered", "(recommended - FIQ) / (float - FIQ) accuracy: 100 % means the recommended model is as"
                      " accurate as float."),
)


@dataclass(frozen=True)
class Cell:
    """One table cell: the formatted value, an arrow against float, and its meaning (good/bad/neutral)."""

    text: str
    arrow: str = ""
    tone: str = "neutral"


def count_arrow(value: Optional[float], ref: Optional[float], same_ratio: float = 0.0) -> str:
    """~ equal (or within `same_ratio` of ref), ↑/↓ changed, ↑↑/↓↓ changed by more than 2x (or from/to zero)."""
    if value is None or ref is None:
        return ""
    if value == ref or (ref and abs(value - ref) <= same_ratio * abs(ref)):
        return "~"
    up = value > ref
    lo, hi = (ref, value) if up else (value, ref)
    big = lo <= 0 or hi / lo > COUNT_BIG_RATIO
    return ("↑↑" if big else "↑") if up else ("↓↓" if big else "↓")


def metric_arrow(value: Optional[float], ref: Optional[float]) -> str:
    """~ within 0.5 points, ↑/↓ up to 5 points, ↑↑/↓↓ beyond 5 points (values are 0..1)."""
    if value is None or ref is None:
        return ""
    points = (value - ref) * 100.0
    if abs(points) <= METRIC_SAME_POINTS:
        return "~"
    if points > 0:
        return "↑↑" if points > METRIC_BIG_POINTS else "↑"
    return "↓↓" if -points > METRIC_BIG_POINTS else "↓"


def tone(arrow: str, higher_is_better: Optional[bool]) -> str:
    if higher_is_better is None or arrow in ("", "~"):
        return "neutral"
    return "good" if arrow.startswith("↑") == higher_is_better else "bad"


def fmt_bytes(n: Optional[float]) -> str:
    if n is None:
        return "–"
    n = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} GB"  # pragma: no cover


def fmt_signed_bytes(n: Optional[int]) -> str:
    if n is None:
        return "–"
    return ("+" if n >= 0 else "−") + fmt_bytes(abs(n))


def fmt_ms(ms: Optional[float]) -> str:
    """Latency with three significant digits; tiny models run in microseconds."""
    if ms is None:
        return "–"
    if ms < 1:
        return f"{ms * 1000:.3g} µs"
    return f"{ms:.3g} ms"


def fmt_metric(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.3f}"


def fmt_percent(x: Optional[float], digits: int = 1) -> str:
    return "–" if x is None else f"{x * 100:.{digits}f} %"


def fmt_points(delta: float) -> str:
    """Accuracy difference in points of 100, always signed."""
    points = delta * 100.0
    if abs(points) < 0.05:
        return "±0.0"
    return f"{points:+.1f}".replace("-", "−")


def fmt_number(x: Optional[float]) -> str:
    """A debugger statistic: 4 significant digits, scientific only when very small or large."""
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.3e}"
    return f"{x:.4g}"


def size_ratio_text(size: int, ref: int) -> str:
    if size == ref:
        return "same size as float"
    if size < ref:
        return f"{ref / size:.1f}x smaller than float"
    return f"{size / ref:.1f}x larger than float"


@dataclass(frozen=True)
class Row:
    label: str
    cells: list
    note: str = ""


@dataclass(frozen=True)
class LayerRow:
    layer: LayerStat
    num_elements: str
    scale: str
    range: str
    rmse_over_scale: str
    max_abs_error: str
    reasons: str
    propagated: str = "–"
    kept: bool = False  # in the recommended model's float layers


@dataclass(frozen=True)
class KeptRow:
    """One layer of the recommendation, with why it is there."""

    index: str
    op: str
    tensor: str
    rmse_over_scale: str
    range: str
    why: str


@dataclass(frozen=True)
class TradeoffRow:
    float_layers: int
    change: str
    size: str
    selection: str
    accuracy: str
    latency: str
    pareto: bool
    chosen: bool
    rule: bool = False


class ReportView:
    """Everything the HTML and Markdown templates show, computed once from a Report."""

    def __init__(self, report: Report):
        self.report = report

    # --- the variants shown side by side: the built ones, then the selective model ----------
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
    def failed(self) -> list[VariantResult]:
        return [v for v in self.columns if not v.ok]

    @cached_property
    def float(self) -> Optional[VariantResult]:
        v = self.report.variant("float")
        return v if v and v.ok else None

    @property
    def is_classification(self) -> bool:
        return self.report.model.num_classes is not None

    def short(self, name: str) -> str:
        return SHORT_NAMES.get(name, name)

    def long(self, name: str) -> str:
        return LONG_NAMES.get(name, name)

    @property
    def title(self) -> str:
        return f"Quantization report: {self.report.model.name}"

    @property
    def input_shape(self) -> str:
        return "(" + ", ".join("None" if d == -1 else str(d) for d in self.report.model.input_shape) + ")"

    @property
    def suspects(self) -> list[LayerStat]:
        return [layer for layer in self.report.layers if layer.suspect]

    # --- header --------------------------------------------------------------------------
    @cached_property
    def verdicts(self) -> list[str]:
        """One line per variant against float: accuracy change, size, and for FIQ the fix."""
        lines = []
        ref = self.float
        rec = self.report.recommendation
        for v in self.report.variants:
            if v.name == "float":
                continue
            if not v.ok:
                lines.append(f"{self.short(v.name)}: failed: {v.error}")
                continue
            parts = []
            if ref and v.metrics and ref.metrics:
                parts.append(f"{fmt_points(v.metrics.accuracy - ref.metrics.accuracy)} accuracy points")
            elif v.output_error:
                parts.append(f"output MSE {fmt_number(v.output_error.mse)} against float")
            if ref:
                text = size_ratio_text(v.size_bytes, ref.size_bytes)
                if v.name == "drq" and v.size_bytes == ref.size_bytes:
                    text += " (no weight tensor was big enough to quantize: DRQ skips those under 1,024 elements)"
                parts.append(text)
            if v.name == "fiq" and rec is not None:
                sel = rec.selective
                n = len(rec.denylisted_nodes)
                if rec.gap is not None and rec.gap.status == "no_gap":
                    parts.append(f"no fix needed ({rec.gap.reason})")
                elif sel and sel.ok and sel.accuracy_gap_recovered is not None:
                    parts.append(
                        f"keeping {n} layer{'s' if n != 1 else ''} in float recovers"
                        f" {fmt_percent(sel.accuracy_gap_recovered, 0)} of the gap"
                        f" at {fmt_signed_bytes(rec.size_cost_bytes)} (measured)"
                    )
                elif sel and not sel.ok:
                    parts.append(f"the recommended model failed: {sel.error}")
            lines.append(f"{self.short(v.name)}: " + ", ".join(parts))
        if self.report.debugger_error:
            lines.append(f"Debugger: failed: {self.report.debugger_error}")
        return lines

    @property
    def warnings(self) -> list[str]:
        out = []
        ds = self.report.dataset
        if ds.calibration_overlaps_eval:
            out.append(
                f"Calibration used the first {ds.num_calibration} samples of the evaluation data (no x_calib given):"
                " calibration and evaluation data overlap, so the quantized scores may be optimistic."
            )
        if self.report.model.stateful and self.report.layers:
            out.append(
                "This model keeps state between invokes (variable tensors, as fused LSTM ops have). quant-report"
                " resets that state before every evaluation sample, but the TF Quantization Debugger does not:"
                " its per-layer numbers for stateful layers include state carried over from the previous sample,"
                " so a high RMSE/scale there can be a false alarm. Trust the measured accuracy first."
            )
        return out

    # --- section 2: structure ------------------------------------------------------------
    @cached_property
    def tensor_rows(self) -> list[Row]:
        ref = self.float
        rows = []
        for key, label in TENSOR_TYPES:
            cells = []
            for v in self.ok_columns:
                value = v.tensor_types.get(key, 0)
                arrow = "" if v is ref or ref is None else count_arrow(value, ref.tensor_types.get(key, 0))
                cells.append(Cell(f"{value:,}", arrow))
            rows.append(Row(label, cells))
        return rows

    @cached_property
    def size_latency_rows(self) -> list[Row]:
        ref = self.float

        def cells(get, fmt, same_ratio=0.0):
            out = []
            for v in self.ok_columns:
                value = get(v)
                arrow = "" if v is ref or ref is None else count_arrow(value, get(ref), same_ratio)
                out.append(Cell(fmt(value), arrow, tone(arrow, higher_is_better=False)))
            return out

        return [
            Row("Size", cells(lambda v: v.size_bytes, fmt_bytes)),
            Row("Latency, median", cells(lambda v: v.latency_ms.median if v.latency_ms else None, fmt_ms,
                                         LATENCY_SAME_RATIO)),
            Row("Latency, p90", cells(lambda v: v.latency_ms.p90 if v.latency_ms else None, fmt_ms,
                                      LATENCY_SAME_RATIO)),
        ]

    @cached_property
    def op_rows(self) -> list[Row]:
        names = sorted({op for v in self.ok_columns for op in v.ops})
        ref = self.float
        rows = []
        for op in names:
            cells = []
            for v in self.ok_columns:
                value = v.ops.get(op, 0)
                arrow = "" if v is ref or ref is None else count_arrow(value, ref.ops.get(op, 0))
                cells.append(Cell(f"{value:,}" if value else "·", arrow))
            rows.append(Row(op, cells))
        return rows

    # --- section 3: quality ------------------------------------------------------------------
    @cached_property
    def metric_rows(self) -> list[Row]:
        if not self.is_classification:
            return []
        ref = self.float
        rows = []
        for key, label in METRICS:
            cells = []
            for v in self.ok_columns:
                value = getattr(v.metrics, key) if v.metrics else None
                ref_value = getattr(ref.metrics, key) if ref and ref.metrics else None
                arrow = "" if v is ref else metric_arrow(value, ref_value)
                cells.append(Cell(fmt_metric(value), arrow, tone(arrow, higher_is_better=True)))
            rows.append(Row(label, cells))
        return rows

    @cached_property
    def output_error_rows(self) -> list[Row]:
        if self.is_classification:
            return []
        rows = []
        for key, label in (("mse", "Output MSE vs float"), ("max_abs_error", "Max abs error vs float")):
            cells = []
            for v in self.ok_columns:
                value = getattr(v.output_error, key) if v.output_error else (0.0 if v is self.float else None)
                cells.append(Cell(fmt_number(value)))
            rows.append(Row(label, cells))
        return rows

    @cached_property
    def per_class_rows(self) -> list[Row]:
        """Class, support, then "precision / recall / F1" per variant, F1 arrowed against float."""
        if not self.is_classification or not self.float:
            return []
        ref = self.float.metrics.per_class
        rows = []
        for i, base in enumerate(ref):
            cells = [Cell(f"{base.support:,}")]
            for v in self.ok_columns:
                c = v.metrics.per_class[i]
                arrow = "" if v is self.float else metric_arrow(c.f1, base.f1)
                text = f"{c.precision:.2f} / {c.recall:.2f} / {c.f1:.2f}"
                cells.append(Cell(text, arrow, tone(arrow, higher_is_better=True)))
            rows.append(Row(str(base.label), cells))
        return rows

    # --- section 4: layers -----------------------------------------------------------------
    @cached_property
    def layer_rows(self) -> list[LayerRow]:
        return [
            LayerRow(
                layer=layer,
                num_elements=f"{layer.num_elements:,.0f}",
                scale=fmt_number(layer.scale),
                range=fmt_number(layer.range),
                rmse_over_scale=f"{layer.rmse_over_scale:.3f}",
                max_abs_error=fmt_number(layer.max_abs_error),
                reasons="; ".join(layer.reasons),
                propagated="–" if layer.propagated_rmse_over_scale is None else f"{layer.propagated_rmse_over_scale:.3f}",
                kept=layer.tensor_name in self.kept_names,
            )
            for layer in self.report.layers
        ]

    @cached_property
    def kept_names(self) -> set:
        rec = self.report.recommendation
        return set(rec.denylisted_nodes) if rec and rec.selective else set()

    @cached_property
    def kept_rows(self) -> list[KeptRow]:
        """The recommended float layers, with the measured reason each one is needed."""
        rec = self.report.recommendation
        if not rec or not rec.selective:
            return []
        by_name = {layer.tensor_name: layer for layer in self.report.layers}
        necessity = rec.search.necessity if rec.search else {}
        rows = []
        for name in rec.denylisted_nodes:
            layer = by_name.get(name)
            why = []
            if name in rec.forced_nodes:
                why.append("asked for (--keep-float)")
            if name in necessity and self.is_classification:
                why.append(f"without it, agreement on the selection data drops {necessity[name] * 100:.1f} points")
            elif name in necessity:
                why.append(f"without it, the selection score (1 - output MSE / variance) drops {necessity[name]:.3g}")
            if layer is not None and layer.reasons:
                why.append("rule: " + "; ".join(layer.reasons))
            rows.append(KeptRow(
                index=str(layer.index) if layer else "–", op=layer.op_name if layer else "–", tensor=name,
                rmse_over_scale=f"{layer.rmse_over_scale:.3f}" if layer else "–",
                range=fmt_number(layer.range) if layer else "–", why="; ".join(why) or "–"))
        return rows

    # --- the search's trade-off --------------------------------------------------------------------
    @property
    def search(self):
        rec = self.report.recommendation
        return rec.search if rec else None

    @cached_property
    def tradeoff_rows(self) -> list[TradeoffRow]:
        """Each distinct candidate the search measured, fewest float layers first, then the rule's pick."""
        search = self.search
        if not search:
            return []
        unique = {}
        for step in search.steps:
            key = tuple(step.denylisted_nodes)
            if key not in unique or step.chosen:
                unique[key] = step
        steps = sorted(unique.values(), key=lambda st: (len(st.denylisted_nodes), st.size_bytes))
        rows = [self._tradeoff_row(st.denylisted_nodes, st.change if st.phase != "fiq" else "FIQ (nothing in float)",
                                   st.size_bytes, st.selection_score, st.accuracy, st.output_mse, st.latency_ms,
                                   st.pareto, st.chosen) for st in steps]
        rule = self.report.recommendation.rule
        if rule and rule.selective and rule.selective.ok:
            sel = rule.selective
            rows.append(self._tradeoff_row(
                rule.denylisted_nodes, "the rmse/scale rule's pick", sel.size_bytes, rule.selection_score,
                sel.metrics.accuracy if sel.metrics else None, sel.output_error.mse if sel.output_error else None,
                sel.latency_ms.median if sel.latency_ms else None, False, False, rule=True))
        return rows

    def _tradeoff_row(self, nodes, change, size, selection, accuracy, mse, latency, pareto, chosen, rule=False):
        return TradeoffRow(
            float_layers=len(nodes), change=change, size=fmt_bytes(size),
            selection="–" if selection is None else f"{selection:.3f}",
            accuracy=fmt_metric(accuracy) if self.is_classification else fmt_number(mse),
            latency=fmt_ms(latency), pareto=pareto, chosen=chosen, rule=rule)

    @property
    def search_facts(self) -> list[tuple[str, str]]:
        """The search's settings and outcome, as term and text."""
        search = self.search
        if not search:
            return []
        sd = search.selection_data
        where = ("x_calib (unlabelled; not evaluation samples)" if sd.source == "x_calib" else
                 f"a seeded half of the evaluation data ({sd.heldout_num:,} samples held out)")
        facts = [
            ("Chosen on", f"{sd.num_samples:,} samples of {where}; score: {sd.score}"),
            ("Reported on", f"the {self.report.dataset.num_eval:,} evaluation samples"),
            ("Target", f"{search.target_text}: {'met' if search.target_met else 'NOT met'}"),
            ("Stopped because", search.stop_reason or "–"),
            ("Cost", f"{search.evaluations} candidate models (budget {search.budget}) in {search.seconds:.2f} s,"
                     f" {search.seconds_per_candidate * 1000:.0f} ms each"),
        ]
        if sd.overlaps_evaluation and sd.heldout_accuracy:
            h = sd.heldout_accuracy
            facts.append(("Held-out check", f"on the {sd.heldout_num:,} evaluation samples the search did not see:"
                                            f" float {fmt_metric(h.get('float'))}, FIQ {fmt_metric(h.get('fiq'))},"
                                            f" recommended {fmt_metric(h.get('selective'))}"))
        rec = self.report.recommendation
        if rec.quantizer_note:
            facts.append(("Note", rec.quantizer_note))
        return facts

    @property
    def search_line(self) -> str:
        """One line on the search for the Markdown summary."""
        search = self.search
        if not search:
            return ""
        sd = search.selection_data
        where = "x_calib" if sd.source == "x_calib" else "held-out evaluation"
        return (f"Search: {search.evaluations} candidate model{'s' if search.evaluations != 1 else ''} in {search.seconds:.2f} s, chosen on"
                f" {sd.num_samples:,} {where} samples, reported on {self.report.dataset.num_eval:,} evaluation"
                f" samples; target ({search.target_text}) {'met' if search.target_met else 'NOT met'}.")

    @property
    def rule_comparison(self) -> str:
        """"the rmse/scale rule: 3 layers, -37 % of the gap; the search: 2 layers, 100 %"."""
        rec = self.report.recommendation
        if not rec or not rec.rule or not rec.selective or rec.method != "search":
            return ""
        rule = rec.rule
        n_rule, n = len(rule.denylisted_nodes), len(rec.denylisted_nodes)

        def result(v, share):
            if v is None or not v.ok:
                return "not built" if v is None else f"failed ({v.error})"
            if share is not None:
                return f"{fmt_percent(share, 0)} of the gap, {fmt_bytes(v.size_bytes)}"
            return fmt_bytes(v.size_bytes)

        if n_rule == 0:
            return f"The rmse/scale rule (threshold {rule.threshold:g}) flags no layer; the search keeps {n}."
        return (f"The rmse/scale rule: {n_rule} layer{'s' if n_rule != 1 else ''},"
                f" {result(rule.selective, rule.accuracy_gap_recovered)}; the search: {n} layer{'s' if n != 1 else ''},"
                f" {result(rec.selective, rec.selective.accuracy_gap_recovered)}.")

    MD_SUSPECT_ROWS = 10  # keeps the Markdown summary short enough for a PR comment

    @property
    def suspect_rows_md(self) -> list[LayerRow]:
        return [row for row in self.layer_rows if row.layer.suspect][: self.MD_SUSPECT_ROWS]

    @property
    def suspects_not_shown(self) -> int:
        return max(0, len(self.suspects) - self.MD_SUSPECT_ROWS)

    @property
    def widest_range_layer(self) -> Optional[LayerStat]:
        """The layer with the widest range, when it is not a suspect: a hint the rmse/scale rule misses."""
        if not self.report.layers:
            return None
        widest = max(self.report.layers, key=lambda layer: layer.range)
        median = sorted(layer.range for layer in self.report.layers)[len(self.report.layers) // 2]
        if widest.suspect or widest.range < 10 * max(median, 1e-12):
            return None
        return widest

    @property
    def widest_range_note(self) -> str:
        layer = self.widest_range_layer
        rec = self.report.recommendation
        if layer is None or (rec is not None and rec.method == "search"):
            return ""  # the search measures range problems; the hint is for the rule only
        return (
            f"Layer {layer.index} ({layer.op_name}) has by far the widest range ({fmt_number(layer.range)}) but"
            f" an RMSE/scale of {layer.rmse_over_scale:.3f}, so the rule does not flag it. A wide range spreads"
            " the 256 int8 steps thinly; if the selective model does not recover the whole gap, try keeping"
            f" this layer in float too (for example with --first-layers {layer.index + 1})."
        )

    # --- section 5: recommendation -------------------------------------------------------------
    @cached_property
    def before_after_rows(self) -> list[Row]:
        """Float, FIQ and selective side by side, each arrowed against float."""
        rec = self.report.recommendation
        if not rec or not rec.selective or not rec.selective.ok:
            return []
        trio = [v for v in (self.float, self.report.variant("fiq"), rec.selective) if v is not None and v.ok]
        ref = self.float
        rows = []
        if self.is_classification:
            for key, label in (("accuracy", "Accuracy"), ("f1", "F1 (macro)"), ("cohen_kappa", "Cohen's kappa")):
                cells = []
                for v in trio:
                    a = "" if v is ref else metric_arrow(getattr(v.metrics, key), getattr(ref.metrics, key))
                    cells.append(Cell(fmt_metric(getattr(v.metrics, key)), a, tone(a, True)))
                rows.append(Row(label, cells))
        for label, get, fmt, same in (
            ("Size", lambda v: v.size_bytes, fmt_bytes, 0.0),
            ("Latency, median", lambda v: v.latency_ms.median, fmt_ms, LATENCY_SAME_RATIO),
            ("Float32 tensors", lambda v: v.tensor_types.get("float32", 0), lambda n: f"{n:,}", 0.0),
        ):
            cells = []
            for v in trio:
                a = "" if v is ref else count_arrow(get(v), get(ref), same)
                cells.append(Cell(fmt(get(v)), a, tone(a, False) if label != "Float32 tensors" else "neutral"))
            rows.append(Row(label, cells))
        return rows

    @property
    def before_after_columns(self) -> list[str]:
        rec = self.report.recommendation
        names = [v.name for v in (self.float, self.report.variant("fiq"), rec.selective if rec else None)
                 if v is not None and v.ok]
        return [self.short(n) for n in names]

    # --- appendix ---------------------------------------------------------------------------
    @property
    def timings(self) -> list[tuple[str, str]]:
        items = list(self.report.timings_s.items())
        total = sum(v for _, v in items)
        return [(k, f"{v:.2f} s") for k, v in items] + [("total", f"{total:.2f} s")]

    @property
    def settings(self) -> list[tuple[str, str]]:
        return [(k, ", ".join(map(str, v)) if isinstance(v, list) else str(v))
                for k, v in self.report.settings.items()]

    @property
    def legend(self):
        return LEGEND

    @property
    def threshold_text(self) -> str:
        rec = self.report.recommendation
        return f"{rec.threshold:g}" if rec else ""

    @property
    def rmse_ideal(self) -> str:
        return f"{RMSE_OVER_SCALE_IDEAL:.3f}"
