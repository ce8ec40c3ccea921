"""The words of each variant's verdict line, of the layer its per-layer error blames, and of each output's cell
for a model with several (reporter.findings.derive decides them)."""

from __future__ import annotations

from typing import Optional

from reporter.core import judgement as jd
from reporter.core import variants
from reporter.core.errors import plain
from reporter.core.formatting import fmt_ms, fmt_mse, fmt_percent, fmt_score, fmt_signed_bytes
from reporter.render import steps
from reporter.model.report import layer_of
from reporter.model.findings import BlameFinding, HeadFinding, VariantFinding
from reporter.model.report import Report, VariantResult


def verdict(report: Report, v: VariantResult, f: VariantFinding) -> str:
    """One line: "FIQ: accuracy 63.2 % against float's 95.6 % (−32.5 points, p < 0.001); 3.9x smaller than
    float"."""
    if not f.ok:
        return f"{f.label}: failed: {plain(v.error)}"
    ref = report.variant(variants.FLOAT)
    ref = ref if ref is not None and ref.ok else None
    parts = []
    quality_error = f.not_measured.get("metrics") or f.not_measured.get("output_error")
    if quality_error:
        what = "accuracy" if f.not_measured.get("metrics") else "output error"
        parts.append(f"{what} not measured ({quality_error})")
    elif v.metrics is not None:
        metric, share = report.metric()
        if f.direction == "not_measurable" and ref and ref.metrics is None:
            parts.append(f"float's {metric} was not measured")
        if f.vs_float is not None:
            parts.append(f"{metric} {fmt_score(f.accuracy, share)} against float's"
                         f" {fmt_score(ref.metrics.score, share)} ({f.vs_float.text})")
        else:
            parts.append(f"{metric} {fmt_score(f.accuracy, share)}")
        if f.degenerate is not None:
            unit = report.model.task_kind.unit
            parts.append(f"predicts class {f.degenerate.label} for {fmt_percent(f.degenerate.share, 0)} of {unit}")
    elif f.name != variants.FLOAT and f.output_mse is not None:
        parts.append(f"output {fmt_mse(f.output_mse, f.output_variance)} against float")
    if f.name != variants.FLOAT and f.size_ratio is not None:
        parts.append(size_words(f.size_ratio))
    if f.drq_nothing:
        parts.append(drq_words(report.model.largest_weight_elements))
    elif f.name != variants.FLOAT and f.quantized is False:
        taken = f" ({coverage_words(v)})" if v.weight_coverage else ""
        parts.append(f"quantized nothing: every tensor is still float32{taken}, so it is float by another name")
    elif f.quantized_little:
        share = f.weights_share
        what = "no weight" if share == 0 else "almost nothing"
        parts.append(f"quantized {what}: {coverage_words(v)}, {fmt_percent(share, 1)} of the weight values")
    if f.slower:
        parts.append(f"{f.latency_ratio:.1f}x slower than float ({fmt_ms(f.latency_ms)} vs"
                     f" {fmt_ms(ref.latency_ms.median)} per sample)")
    if f.name == variants.FLOAT:
        parts = parts if quality_error else ["reference"]
    return f"{f.label}: " + "; ".join(parts)


def blame(report: Report, v: VariantResult, b: BlameFinding) -> str:
    """The layer to blame, why, and what keeping the blamed layers in float measured."""
    label = variants.short(v.name)
    row = next(e for e in v.layer_errors.layers if e.tensor_name == b.tensor)
    why = []
    if row.error_starts_here:
        snr = "no error" if row.snr_db is None else f"{row.snr_db:.1f} dB"
        why.append(f"its output's SNR is {snr} although its inputs are exact")
    elif row.snr_drop_db is not None:
        why.append(f"{row.snr_drop_db:.1f} dB of SNR lost at this op")
    where = f"{b.layer or b.tensor} ({b.op}" + (f": {', '.join(why)})" if why else ")")  # a .tflite: no scopes
    fix = v.fix
    if fix is None:
        return f"{label}'s per-layer error blames {where}."
    layers = ", ".join(layer_of(n) or n for n in b.fix_layers)
    if b.fix_status == "failed":
        return (f"{label}'s per-layer error blames {where}; the model keeping {layers} in float could not be built:"
                f" {plain(fix.error or (fix.model.error if fix.model else ''))}.")
    m = fix.model
    if b.fix_vs_float is None:
        return (f"{label}'s per-layer error blames {where}; keeping {layers} in float ({b.fix_converter}) was built,"
                " but its accuracy was not measured.")
    metric, share = report.metric()
    result = (f"keeping {layers} in float ({b.fix_converter}, {fmt_signed_bytes(m.size_bytes - v.size_bytes)}"
              f" against {label}) gives {metric} {fmt_score(b.fix_accuracy, share)}, {b.fix_vs_float.text} against"
              " float")
    if b.fix_status == "fixed":
        return f"{label}'s loss is caused by {where}: {result}: fixed."
    return f"{label}'s per-layer error blames {where}, but {result}: the loss stays."


def head_cell(h: HeadFinding) -> str:
    """One output of one variant, in its table cell: "51.9 % [42.3–61.2] (−44.4 points, p < 0.001)", an
    agreement with float's class, or the output's error against float's (`h` with its comparison worded)."""
    if h.measure not in ("agreement with float", "output MSE"):  # accuracy, or the output's own share (micro-F1)
        return (f"{fmt_percent(h.value)} [{h.low * 100:.1f}–{h.high * 100:.1f}]"
                + (f" ({h.vs_float.text})" if h.vs_float else ""))
    if h.measure == "agreement with float":
        return fmt_percent(h.value)
    if h.variant == variants.FLOAT:
        return "reference"
    return fmt_mse(h.value, h.variance) if h.value is not None else ""


def size_change(ratio: float) -> str:
    """A size ratio against another model's: "2.0x smaller", "3 % larger" (close to 1, where "1.0x" would read as no
    change), "same size"."""
    if steps.same_ratio(ratio):
        return "same size"
    if steps.ratio_in_percent(ratio):
        return f"{abs(1 - ratio) * 100:.0f} % {'smaller' if ratio < 1 else 'larger'}"
    return f"{1 / ratio:.1f}x smaller" if ratio < 1 else f"{ratio:.1f}x larger"


def size_words(ratio: float) -> str:
    """"2.0x smaller than float", "3 % larger than float" (close to float's), "same size as float"."""
    change = size_change(ratio)
    return f"{change} as float" if change == "same size" else f"{change} than float"


def speed_words(ratio: float) -> str:
    """A latency ratio against another model's that `judgement.faster` has found beyond timing noise: "1.8x
    faster", "4 % slower" (close to 1: a percentage, since "1.0x" reads as no change)."""
    if steps.ratio_in_percent(ratio):
        return f"{abs(1 - ratio) * 100:.0f} % {'faster' if ratio < 1 else 'slower'}"
    return f"{1 / ratio:.1f}x faster" if ratio < 1 else f"{ratio:.1f}x slower"


def coverage_words(v: VariantResult) -> str:
    """"1 of 3 weight tensors stored below float32 (CONV_2D 0 of 2, FULLY_CONNECTED 1 of 1)"."""
    rows = v.weight_coverage
    quantized, total = sum(c.quantized for c in rows.values()), sum(c.tensors for c in rows.values())
    each = ", ".join(f"{op} {c.quantized} of {c.tensors}" for op, c in rows.items())
    return f"{quantized} of {total} weight tensors stored below float32 ({each})"


def drq_words(largest: Optional[int]) -> str:
    if largest is not None and largest < jd.DRQ_MIN_WEIGHT_ELEMENTS:
        return (f"DRQ quantized no weight: the largest weight tensor has {largest:,} elements, under the"
                f" converter's minimum of {jd.DRQ_MIN_WEIGHT_ELEMENTS:,}")
    if largest is not None:
        return (f"DRQ quantized no weight although the largest weight tensor has {largest:,} elements"
                " (the converter keeps weights in float for ops without a dynamic-range kernel)")
    return "DRQ quantized no weight"
