"""What the reports show, derived from a Report: arrows, verdicts, table rows. No TensorFlow here.

Templates only lay these values out; every comparison, threshold and sort happens in this module,
where it is tested.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

from reporter.core.formatting import (fmt_bytes, fmt_metric, fmt_ms, fmt_mse, fmt_number, fmt_percent, fmt_points,  # noqa: F401
                                 fmt_signed_bytes, size_ratio_text)
from reporter.findings import derive as fnd
from reporter.model.report import RMSE_OVER_SCALE_IDEAL, LayerStat, Report, VariantResult

SHORT_NAMES = fnd.NAMES
LONG_NAMES = {
    "float": "Float TFLite (reference)",
    "drq": "Dynamic-range quantization (weights int8)",
    "fiq": "Full-integer quantization (float I/O)",
    "f16": "Float16 weights",
    "int16x8": "16-bit activations, 8-bit weights",
    "int8_io": "Integer only (int8 input and output)",
    "wo8": "Weight-only int8 (dequantized to float at run time)",
    "selective": "FIQ with the recommended layers left in float",
    "rule": "FIQ with the rmse/scale rule's layers left in float",
    "alt_float": "FIQ with the recommended layers in float",
    "alt_int16x8": "FIQ with the recommended layers in 16x8 (int16 activations)",
    "alt_drq": "FIQ with the recommended layers in dynamic range (int8 weights, float activations)",
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
# A value a built model should have but does not (its measurement failed, or latency was skipped): never a
# blank or a zero, which would read as a measured value.
NOT_MEASURED = "not measured"

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


def ratio_words(ratio: Optional[float], down: str, up: str, same: float = 0.0) -> str:
    """"1.4x smaller", "2.5x slower", "same" for a ratio against float."""
    if ratio is None:
        return ""
    if abs(ratio - 1) <= max(same, 0.005):
        return "same" if same == 0 else "~ same"
    return f"{1 / ratio:.1f}x {down}" if ratio < 1 else f"{ratio:.1f}x {up}"


def _or_missing(value, fmt) -> str:
    """`value` formatted, or "not measured" (a built model's value that is missing is never blank)."""
    return NOT_MEASURED if value is None else fmt(value)


def _ratio_tone(ratio: Optional[float], same: float) -> str:
    if ratio is None or abs(ratio - 1) <= max(same, 0.005):
        return "neutral"
    return "good" if ratio < 1 else "bad"


def shorten(name: str, limit: int = 60) -> str:
    """A long tensor name shortened in the middle (the full name goes in a title or a code span)."""
    if len(name) <= limit:
        return name
    head = (limit - 1) * 2 // 5
    return name[:head] + "…" + name[len(name) - (limit - 1 - head):]


@dataclass(frozen=True)
class PanelRow:
    label: str
    long: str
    accuracy: "Cell"
    interval: str
    vs_float: "Cell"
    main: "Cell"
    size: "Cell"
    latency: "Cell"
    recommended: bool
    failed: bool = False


@dataclass(frozen=True)
class Row:
    label: str
    cells: list
    note: str = ""
    wrap: bool = False  # cells hold words, not numbers: they may wrap


@dataclass(frozen=True)
class SchemeErrorRow:
    index: int
    op: str
    tensor: str
    snr: str
    snr_drop: str
    cosine: str
    weight_snr: str
    blamed: bool


@dataclass(frozen=True)
class SchemeErrors:
    """One quantized variant's per-layer error against float, for the HTML."""

    name: str
    label: str
    rows: list  # SchemeErrorRow, the layers that lose the most SNR first (at most SCHEME_ROWS)
    total: int
    csv: str  # the file beside the report with every row
    summary: str  # what the comparison covered, and the finding when the variant loses accuracy
    error: str = ""


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
    layer: str = ""


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
    def _float_quality_missing(self) -> bool:
        """The float model ran but its accuracy (or output) could not be measured: nothing compares with it."""
        flt = self.float
        return flt is not None and bool(flt.not_measured("metrics"))

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
        """The variant's description, and which converter built it when that is not TensorFlow's."""
        text = LONG_NAMES.get(name, name)
        found = self.report.variant(name)
        if found is None and name.startswith("alt_") and self.report.recommendation:
            found = next((a.model for a in self.report.recommendation.alternatives if a.model and a.model.name == name),
                         None)
        converter = getattr(found, "converter", "")
        if converter == "LiteRT Quantizer":
            text = text.replace(" (float I/O)", " (int8 input and output)" if name == "fiq" else "")
            return f"{text}, by LiteRT Quantizer"
        if converter == "given":
            return "Float TFLite as given (reference)"
        return text

    @property
    def title(self) -> str:
        return f"Quantization report: {self.report.model.name}"

    @property
    def input_shape(self) -> str:
        return "(" + ", ".join("None" if d == -1 else str(d) for d in self.report.model.input_shape) + ")"

    @property
    def suspects(self) -> list[LayerStat]:
        return [layer for layer in self.report.layers if layer.suspect]

    # --- the story: findings first ------------------------------------------------------------
    @cached_property
    def findings(self) -> fnd.Findings:
        if self.report.findings is None:  # derived once, by the pipeline or reporter.findings.load_report
            raise ValueError("the report has no findings: load it with reporter.findings.load_report")
        return self.report.findings

    @property
    def headline(self) -> list[str]:
        return self.findings.headline

    @property
    def verdicts(self) -> list[str]:
        """One line per variant against float (the float reference itself is not repeated)."""
        return [v.verdict for v in self.findings.variants if v.name != "float"]

    @property
    def warnings(self) -> list[str]:
        return [n.text for n in self.findings.warnings]

    @property
    def hints(self) -> list[str]:
        return [n.text for n in self.findings.hints]

    @property
    def main_metric_label(self) -> str:
        flt = self.findings.variant("float")
        return flt.main_metric if flt and flt.main_metric else ""

    @cached_property
    def panel_rows(self) -> list[PanelRow]:
        """The story panel: every measured variant with accuracy, its interval, the paired test against
        float, the task's main metric, size and latency (the rule's pick stays in the search section)."""
        rows = []
        for f in self.findings.variants:
            if f.name == "rule":
                continue
            if not f.ok:
                rows.append(PanelRow(f.label, self.long(f.name), Cell("failed"), "", Cell(f.error or ""), Cell(""),
                                     Cell(""), Cell(""), f.name == "selective", failed=True))
                continue
            quality_error = f.not_measured.get("metrics") or f.not_measured.get("output_error")
            if quality_error:
                vs = Cell(f"{NOT_MEASURED}: {quality_error}")
            elif f.direction == "reference":
                vs = Cell("reference")
            elif f.vs_float is not None:
                vs = Cell(f.vs_float.text, "", {"worse": "bad", "better": "good"}.get(f.direction, "neutral"))
            elif f.output_mse is not None:
                vs = Cell(fmt_mse(f.output_mse, f.output_variance))
            elif self._float_quality_missing:
                vs = Cell(f"float {NOT_MEASURED}")
            else:
                vs = Cell("–")
            interval = "" if f.accuracy_low is None else f"{f.accuracy_low * 100:.1f}–{f.accuracy_high * 100:.1f}"
            size_note = "" if f.size_ratio is None or f.name == "float" else ratio_words(f.size_ratio, "smaller",
                                                                                         "larger")
            lat_note = "" if f.latency_ratio is None or f.name == "float" else ratio_words(
                f.latency_ratio, "faster", "slower", LATENCY_SAME_RATIO)
            missing = quality_error and f.accuracy is None
            rows.append(PanelRow(
                f.label, self.long(f.name), Cell(NOT_MEASURED if missing else fmt_percent(f.accuracy)), interval, vs,
                Cell(NOT_MEASURED if missing else fmt_metric(f.main_value)),
                Cell(fmt_bytes(f.size_bytes), size_note, _ratio_tone(f.size_ratio, 0.0)),
                Cell(_or_missing(f.latency_ms, fmt_ms), lat_note, _ratio_tone(f.latency_ratio, LATENCY_SAME_RATIO)),
                f.name == "selective"))
        return rows

    # --- section 2: structure ------------------------------------------------------------
    @cached_property
    def tensor_rows(self) -> list[Row]:
        ref = self.float
        rows = []
        ref_ok = ref is not None and not ref.not_measured("ops")
        for key, label in TENSOR_TYPES:
            cells = []
            for v in self.ok_columns:
                if v.not_measured("ops"):
                    cells.append(Cell(NOT_MEASURED))
                    continue
                value = v.tensor_types.get(key, 0)
                arrow = "" if v is ref or not ref_ok else count_arrow(value, ref.tensor_types.get(key, 0))
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
                out.append(Cell(_or_missing(value, fmt), arrow, tone(arrow, higher_is_better=False)))
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
        ref_ok = ref is not None and not ref.not_measured("ops")
        rows = []
        for op in names:
            cells = []
            for v in self.ok_columns:
                if v.not_measured("ops"):
                    cells.append(Cell(NOT_MEASURED))
                    continue
                value = v.ops.get(op, 0)
                arrow = "" if v is ref or not ref_ok else count_arrow(value, ref.ops.get(op, 0))
                cells.append(Cell(f"{value:,}" if value else "·", arrow))
            rows.append(Row(op, cells))
        return rows

    # --- section 3: quality ------------------------------------------------------------------
    def _beyond_noise(self, name: str) -> bool:
        """Whether the variant's accuracy differs from float's beyond noise: only then are its
        metric changes coloured."""
        f = self.findings.variant(name)
        return f is not None and f.direction in ("worse", "better")

    @cached_property
    def metric_rows(self) -> list[Row]:
        """Each metric per variant, arrowed against float; coloured only when the variant's accuracy
        differs from float's beyond noise (exact McNemar), so a one-sample change is never a win."""
        if not self.is_classification:
            return []
        ref = self.float
        keys = list(METRICS)
        for key, label in (("top5_accuracy", "Top-5 accuracy"), ("roc_auc", "ROC AUC")):
            if any(v.metrics and getattr(v.metrics, key) is not None for v in self.ok_columns):
                keys.insert(1, (key, label))
        rows = []
        for key, label in keys:
            cells = []
            for v in self.ok_columns:
                if v.metrics is None and v.not_measured("metrics"):
                    cells.append(Cell(NOT_MEASURED))
                    continue
                value = getattr(v.metrics, key) if v.metrics else None
                ref_value = getattr(ref.metrics, key) if ref and ref.metrics else None
                arrow = "" if v is ref else metric_arrow(value, ref_value)
                shade = tone(arrow, higher_is_better=True) if self._beyond_noise(v.name) else "neutral"
                cells.append(Cell(fmt_metric(value), arrow, shade))
            rows.append(Row(label, cells))
        cells = []
        for v in self.ok_columns:
            f = self.findings.variant(v.name)
            if v.not_measured("metrics"):
                text = f"{NOT_MEASURED}: {v.not_measured('metrics')}"
            elif v is ref:
                text = "reference"
            elif f and f.vs_float:
                text = f.vs_float.text
            else:
                text = f"float {NOT_MEASURED}" if self._float_quality_missing else "–"
            cells.append(Cell(text, "", {"worse": "bad", "better": "good"}.get(f.direction if f else "", "neutral")))
        rows.append(Row("Accuracy vs float (McNemar)", cells, wrap=True))
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
                cells.append(Cell(NOT_MEASURED if v.not_measured("output_error") else fmt_number(value)))
            rows.append(Row(label, cells))
        return rows

    @cached_property
    def per_class_rows(self) -> list[Row]:
        """Class, support, then "precision / recall / F1" per variant, F1 arrowed against float."""
        if not self.is_classification or not self.float:
            return []
        # The classes and their support are the data's: any measured variant has them.
        measured = [v for v in self.ok_columns if v.metrics is not None]
        if not measured:
            return []
        flt = self.float.metrics.per_class if self.float.metrics else None
        rows = []
        for i, base in enumerate(measured[0].metrics.per_class):
            cells = [Cell(f"{base.support:,}")]
            for v in self.ok_columns:
                if v.metrics is None:
                    cells.append(Cell(NOT_MEASURED))
                    continue
                c = v.metrics.per_class[i]
                arrow = "" if v is self.float or flt is None else metric_arrow(c.f1, flt[i].f1)
                text = f"{c.precision:.2f} / {c.recall:.2f} / {c.f1:.2f}"
                cells.append(Cell(text, arrow, tone(arrow, higher_is_better=True) if self._beyond_noise(v.name)
                                  else "neutral"))
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

    SCHEME_ROWS = 10

    @property
    def explorer_commands(self) -> list[tuple[str, str]]:
        """The model-explorer command line for each variant that has overlays."""
        from reporter.debug.overlays import explorer_command

        return [(self.long(v.name), explorer_command(f"{v.name}.tflite", v.overlays))
                for v in self.report.variants if v.ok and v.overlays]

    @property
    def layers_from_comparison(self) -> bool:
        """The FIQ layer table comes from comparing LiteRT Quantizer's model with float, not from TF's debugger."""
        rec = self.report.recommendation
        return rec is not None and rec.quantizer == "litert-quantizer"

    @cached_property
    def scheme_errors(self) -> list[SchemeErrors]:
        """Every quantized variant against float, tensor by tensor (any converter, any scheme)."""
        out = []
        for v in self.report.variants:
            errors = v.layer_errors
            if errors is None:
                continue
            label = self.short(v.name)
            if errors.error:
                out.append(SchemeErrors(v.name, label, [], 0, "", "", error=errors.error))
                continue
            if all(e.snr_db is None for e in errors.layers):
                out.append(SchemeErrors(v.name, label, [], len(errors.layers), f"layer_errors_{v.name}.csv",
                                        f"Every one of the {len(errors.layers)} op outputs compared equals float's"
                                        f" exactly on {errors.samples} samples: quantization changed nothing"
                                        " this comparison can see."))
                continue
            found = self.findings.variant(v.name)
            blames = found is not None and found.blame is not None  # only a variant that loses accuracy blames
            order = sorted(errors.layers, key=lambda e: (e.tensor_name != errors.culprit, not e.error_starts_here,
                                                         -(e.snr_drop_db if e.snr_drop_db is not None else -1e9),
                                                         e.index))
            rows = [SchemeErrorRow(
                index=e.index, op=e.op_name, tensor=e.tensor_name,
                snr="no error" if e.snr_db is None else f"{e.snr_db:.1f}",
                snr_drop="all of it" if e.error_starts_here else
                ("–" if e.snr_drop_db is None else f"{e.snr_drop_db:+.1f}"),
                cosine=f"{e.cosine:.4f}", weight_snr="–" if e.weight_snr_db is None else f"{e.weight_snr_db:.1f}",
                blamed=e.tensor_name == errors.culprit and blames) for e in order[: self.SCHEME_ROWS]]
            covered = (errors.note.rstrip(".") + ".") if errors.note else (
                f"{len(errors.layers)} op outputs compared on {errors.samples} calibration samples"
                + (f"; {errors.unmatched} could not be matched with a float tensor" if errors.unmatched else "") + ".")
            summary = (found.blame.text + " " if found and found.blame else "") + covered
            out.append(SchemeErrors(v.name, label, rows, len(errors.layers), f"layer_errors_{v.name}.csv", summary))
        return out

    @cached_property
    def kept_names(self) -> set:
        rec = self.report.recommendation
        return set(rec.denylisted_nodes) if rec and rec.selective else set()

    @cached_property
    def kept_rows(self) -> list[KeptRow]:
        """The recommended float layers (the findings' culprits), with the measured reason for each."""
        rows = []
        by_name = {layer.tensor_name: layer for layer in self.report.layers}
        for c in self.findings.culprits:
            if not c.kept:
                continue
            layer = by_name.get(c.tensor)
            rows.append(KeptRow(
                index=str(c.index) if c.index >= 0 else "–", op=c.op or "–", tensor=c.tensor,
                rmse_over_scale=f"{layer.rmse_over_scale:.3f}" if layer else "–",
                range=fmt_number(layer.range) if layer else "–",
                why="; ".join(r.text for r in c.reasons) or "–", layer=c.layer))
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
        for alt in self.report.recommendation.alternatives:
            m = alt.model
            if m is None or not m.ok:
                continue
            rows.append(self._tradeoff_row(
                alt.layers, f"the recommended layers in {fnd.SCHEME_NAMES[alt.scheme]} ({m.converter})", m.size_bytes,
                None, m.metrics.accuracy if m.metrics else None, m.output_error.mse if m.output_error else None,
                m.latency_ms.median if m.latency_ms else None, False, False, rule=True))
        return rows

    @property
    def lighter_fixes(self) -> list[str]:
        return [a.text for a in self.findings.alternatives if a.status == "lighter"]

    @property
    def alternative_lines(self) -> list[str]:
        """What each lighter scheme for the recommended layers measured, or why it has no row."""
        return [a.text for a in self.findings.alternatives]

    def _tradeoff_row(self, nodes, change, size, selection, accuracy, mse, latency, pareto, chosen, rule=False):
        return TradeoffRow(
            float_layers=len(nodes), change=change, size=fmt_bytes(size),
            selection="–" if selection is None else f"{selection:.3f}",
            accuracy=fmt_metric(accuracy) if self.is_classification else fmt_number(mse),
            latency=_or_missing(latency, fmt_ms), pareto=pareto, chosen=chosen, rule=rule)

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

    # --- section 5: recommendation -------------------------------------------------------------
    @cached_property
    def before_after_rows(self) -> list[Row]:
        """Float, FIQ and the recommended model, then the recommended model against FIQ and against
        float: each change coloured by whether it helps, and only when it is beyond noise."""
        rec = self.report.recommendation
        fix = self.findings.fix
        if not rec or not rec.selective or not rec.selective.ok or fix is None:
            return []
        flt, fiq, sel = self.float, self.report.variant("fiq"), rec.selective
        if flt is None or fiq is None or not fiq.ok:
            return []
        rows = []
        if self.is_classification and sel.metrics:
            def comparison_cell(c):
                if c is None:
                    return Cell("–")
                return Cell(c.text, "", "neutral" if not c.significant else ("good" if c.delta > 0 else "bad"))
            rows.append(Row("Accuracy", [Cell(fmt_percent(v.metrics.accuracy) if v.metrics else NOT_MEASURED)
                                         for v in (flt, fiq, sel)]
                            + [comparison_cell(fix.vs_fiq), comparison_cell(fix.vs_float)]))
            if fix.share_of_gap is not None:
                rows.append(Row("Share of the gap won back", [Cell(""), Cell("0 %"), Cell(fmt_percent(fix.share_of_gap, 0))]
                                + [Cell(""), Cell("")]))
        elif sel.output_error and fiq.output_error:
            mse = (fiq.output_error.mse, sel.output_error.mse)
            rows.append(Row("Output MSE vs float", [Cell("0"), Cell(fmt_number(mse[0])), Cell(fmt_number(mse[1])),
                                                    Cell(ratio_words(mse[1] / mse[0] if mse[0] else None, "lower",
                                                                     "higher"), "",
                                                         _ratio_tone(mse[1] / mse[0] if mse[0] else None, 0.0)),
                                                    Cell("")]))
        for label, get, fmt, same, toned in (
            ("Size", lambda v: v.size_bytes, fmt_bytes, 0.0, True),
            ("Latency, median", lambda v: v.latency_ms.median if v.latency_ms else None, fmt_ms, LATENCY_SAME_RATIO,
             True),
            ("Float32 tensors", lambda v: None if v.not_measured("ops") else v.tensor_types.get("float32", 0),
             lambda n: f"{n:,}", 0.0, False),
        ):
            values = [get(v) for v in (flt, fiq, sel)]
            cells = [Cell(_or_missing(x, fmt)) for x in values]
            for ref in (values[1], values[0]):
                ratio = values[2] / ref if values[2] is not None and ref else None
                if label == "Size":
                    text = fmt_signed_bytes(values[2] - ref) if ref is not None else "–"
                    if ratio is not None:
                        text += f" ({ratio_words(ratio, 'smaller', 'larger')})"
                elif label == "Float32 tensors":
                    text = f"{values[2] - ref:+,}" if ref is not None and values[2] is not None else "–"
                else:
                    text = ratio_words(ratio, "faster", "slower", same) or "–"
                cells.append(Cell(text, "", _ratio_tone(ratio, same) if toned else "neutral"))
            rows.append(Row(label, cells))
        return rows

    @property
    def before_after_columns(self) -> list[str]:
        return ["Float", "FIQ", "Recommended", "Recommended vs FIQ", "Recommended vs float"]

    # --- per-layer tables: the layers that matter first -------------------------------------------
    TOP_LAYERS = 15  # with more layers than this, the top ones first and the full table after

    @cached_property
    def top_layer_rows(self) -> list[LayerRow]:
        """Kept layers first, then the largest local or propagated error, in model order."""
        rows = self.layer_rows
        if len(rows) <= self.TOP_LAYERS:
            return rows

        def weight(row):
            layer = row.layer
            return (row.kept, layer.suspect, max(layer.rmse_over_scale, layer.propagated_rmse_over_scale or 0.0))

        top = sorted(rows, key=weight, reverse=True)[: self.TOP_LAYERS]
        return sorted(top, key=lambda row: row.layer.index)

    @property
    def layers_truncated(self) -> bool:
        return len(self.layer_rows) > len(self.top_layer_rows)

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

    ANALYZER_HEAD_LINES = 40
    MD_KEPT_ROWS = 8  # keeps the Markdown summary short enough for a PR comment

    @property
    def analyzer_files(self) -> list[tuple[str, str, str, int]]:
        """(variant, file beside the report, its first lines, total lines) for each Analyzer text."""
        out = []
        for c in self.columns:
            if c.analyzer_text:
                lines = c.analyzer_text.splitlines()
                out.append((self.long(c.name), f"analyzer_{c.name}.txt",
                            "\n".join(lines[: self.ANALYZER_HEAD_LINES]), len(lines)))
        return out

    @property
    def analyzer_missing(self) -> list[tuple[str, str]]:
        """(variant, error) for each built variant whose Analyzer text could not be taken."""
        return [(self.long(c.name), c.not_measured("analyzer")) for c in self.ok_columns if c.not_measured("analyzer")]

    @property
    def latency_note(self) -> str:
        """How latency was timed beyond the legend's words: skipped, or one model at a time in a batch."""
        settings = self.report.settings
        if settings.get("latency_runs") == 0:
            return "Not measured in this report: latency runs were set to 0."
        timing = settings.get("latency_timing")
        return f"{timing[:1].upper()}{timing[1:]}." if timing else ""

    @property
    def latency_timing_note(self) -> str:
        """The batch's timing note alone (a skipped latency is already a hint of its own)."""
        return "" if self.report.settings.get("latency_runs") == 0 else self.latency_note

    @property
    def legend(self):
        note = self.latency_note
        if not note:
            return LEGEND
        return tuple((term, f"{text} {note}" if term == "Latency" else text) for term, text in LEGEND)

    @property
    def threshold_text(self) -> str:
        rec = self.report.recommendation
        return f"{rec.threshold:g}" if rec else ""

    @property
    def rmse_ideal(self) -> str:
        return f"{RMSE_OVER_SCALE_IDEAL:.3f}"
