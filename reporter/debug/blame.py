"""Every quantized variant, layer by layer: its error against float, the layer to blame, and for a
variant that loses accuracy, the model with the blamed layers kept in float, built and measured.

TF's debugger covers int8 full-integer models only; this covers every scheme from either converter
(reporter.debug.layer_error runs float and quantized models side by side with every tensor kept). FIQ has
the search (reporter.search.engine); the fixes here are for the other schemes, built by LiteRT Quantizer,
which can keep chosen layers in float in any scheme.
"""

from __future__ import annotations

import math
import traceback
from typing import TYPE_CHECKING, Callable, Optional

import numpy as np

from reporter.convert import litert
from reporter.core import variants
from reporter.core.errors import one_line
from reporter.debug import equalization
from reporter.measure.measurer import Measurer
from reporter.model.report import LayerError, LayerErrors, LayerStat, SchemeFix, VariantResult

if TYPE_CHECKING:
    from reporter.debug.layer_error import Cost

COMPARE_SAMPLES = 32  # samples run through both models with every tensor kept (per-tensor error converges fast)
FIX_MAX_LAYERS = 3  # blamed layers tried in float, one more at a time, until the loss is gone


def layer_errors(float_model: bytes, model: bytes, x) -> tuple[LayerErrors, list[str]]:
    """The variant against float, tensor by tensor, as the report records it, and the float model's names of
    the layers to try in float, most to blame first (reporter.debug.culprit); the comparison's failure is
    recorded, not raised."""
    return all_layer_errors(float_model, {"": model}, x)[0][""]


def all_layer_errors(float_model: bytes, models: dict[str, bytes], x) -> tuple[dict, Optional["Cost"]]:
    """`layer_errors` of several variants at once (the float model run once per sample for all of them, through
    reporter.debug.layer_error.compare_all): ({name: (LayerErrors, names to blame)}, the comparison's Cost, or None
    when it failed as a whole)."""
    from reporter.debug import layer_error

    try:
        compared, cost = layer_error.compare_all(float_model, models, x, max_samples=COMPARE_SAMPLES)
    except Exception as exc:  # noqa: BLE001 - the variants' other measurements stand
        traceback.print_exc()  # into run.log
        return {name: (LayerErrors(error=one_line(exc)), []) for name in models}, None
    return {name: _recorded(found) for name, found in compared.items()}, cost


def _recorded(compared) -> tuple[LayerErrors, list[str]]:
    """One variant's comparison (or the exception it raised) as the report records it, and the names to blame."""
    try:
        from reporter.debug import culprit as rule

        if isinstance(compared, Exception):
            raise compared
        culprit = rule.culprit(compared)
        to_blame = rule.blamed(compared, FIX_MAX_LAYERS)
    except Exception as exc:  # noqa: BLE001 - the variant's other measurements stand
        traceback.print_exc()  # into run.log
        return LayerErrors(error=one_line(exc)), []
    rows = [
        LayerError(
            index=e.index, op_name=e.op_name, tensor_name=e.tensor_name, float_tensor_name=e.float_tensor_name,
            matched_by=e.matched_by, mse=_finite(e.mse), snr_db=_snr(e.snr_db), cosine=_finite(e.cosine),
            snr_drop_db=_finite(e.snr_drop_db),
            error_starts_here=e.snr_drop_db == math.inf and math.isfinite(e.snr_db),
            weight_snr_db=_finite(e.weight_snr_db),
            weight_mse=None if e.weight_mse is None else float(e.weight_mse), quantized_dtype=e.quantized_dtype,
        )
        for e in compared.layers
    ]
    return LayerErrors(rows, compared.samples, compared.unmatched, culprit.tensor_name if culprit else None,
                       compared.note), to_blame


CSV_COLUMNS = ("index", "op_name", "tensor_name", "float_tensor_name", "matched_by", "mse", "snr_db", "cosine",
               "snr_drop_db", "error_starts_here", "weight_snr_db", "weight_mse", "quantized_dtype")


def csv_text(errors: LayerErrors) -> str:
    """layer_errors_<variant>.csv: every compared op output (an empty SNR means no error at all)."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS + ("blamed",))
    for e in errors.layers:
        writer.writerow([("" if getattr(e, c) is None else getattr(e, c)) for c in CSV_COLUMNS]
                        + [int(e.tensor_name == errors.culprit)])
    return buf.getvalue()


SNR_FLOOR_DB = -200.0  # an overflowing op (infinite error) is recorded at this SNR: JSON has no -inf


def _snr(value) -> Optional[float]:
    if value is None or math.isnan(value) or value == math.inf:
        return None  # no error at all
    return max(float(value), SNR_FLOOR_DB)


def _finite(value) -> Optional[float]:
    """JSON has no infinity: an error-free tensor's SNR (and anything not a finite number) is None."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def fix(name: str, names: list[str], build: Callable[[list[str]], bytes],
        measure: Callable[[bytes], VariantResult], still_loses: Callable[[VariantResult], bool],
        code: Callable[[list[str]], str]) -> Optional[SchemeFix]:
    """Keeps the blamed layers (`names`, most to blame first) in float, one more at a time, and measures each
    model until one no longer loses accuracy against float; returns the last model measured (fixed or not),
    or None when nothing is blamed."""
    if not names:
        return None
    result, layers = None, []
    for k in range(1, len(names) + 1):
        layers = names[:k]
        try:
            result = measure(build(layers))
        except Exception as exc:  # noqa: BLE001 - the variant's report stands without its fix
            traceback.print_exc()
            return SchemeFix(layers, error=f"{name} with {', '.join(layers)} in float: {one_line(exc)}")
        if not result.ok or not still_loses(result):
            break
    return SchemeFix(layers, result, code(layers))


def layer_stats(errors: LayerErrors, model: bytes) -> list[LayerStat]:
    """The debugger's table for a FIQ model the TFLite debugger cannot read (LiteRT Quantizer's), from its
    comparison with float: each quantized op output's scale and zero point from the model, and its error
    accumulated from the input as both the local and the propagated column (no per-layer verify exists
    for it, so the search ranks layers by where the accumulated error jumps)."""
    from reporter.measure import runtime

    details = {d["name"]: d for d in runtime.load(model).get_tensor_details()}
    stats = []
    for e in errors.layers:
        d = details.get(e.tensor_name)
        q = d.get("quantization_parameters", {}) if d else {}
        scales = q.get("scales") if q else None
        if d is None or e.mse is None or scales is None or len(scales) != 1 or not np.issubdtype(d["dtype"], np.integer):
            continue  # a float op (kept float, or dequantized) or a per-channel output: no int8 grid to compare with
        scale = float(scales[0])
        bits = np.iinfo(d["dtype"]).bits
        rmse = math.sqrt(e.mse) / scale if scale > 0 else 0.0
        stats.append(LayerStat(
            index=len(stats), op_name=e.op_name, tensor_name=e.float_tensor_name, tensor_idx=int(d["index"]),
            num_elements=float(np.prod(d["shape"])) if len(d["shape"]) else 1.0, stddev=None, mean_error=None,
            max_abs_error=None, mean_squared_error=e.mse, scale=scale, zero_point=int(q["zero_points"][0]),
            range=scale * (2 ** bits - 1), rmse_over_scale=rmse, propagated_mean_squared_error=e.mse,
            propagated_rmse_over_scale=rmse))
    return stats


def blame_variants(m: Measurer, float_model: bytes, results: dict[str, VariantResult], litert_models: litert.LiteRtModels,
                   target_rule: Callable[[VariantResult, VariantResult], bool]) -> None:
    """Per-layer error of every quantized variant in `results` against float (written beside it as
    layer_errors_<name>.csv), and for a variant that does not meet the accuracy target (`target_rule(model, float)`:
    the findings' rule, which the run hands down) and that the registry calls `fixable`, the model with the blamed
    layers kept in float (LiteRT Quantizer), measured; for a per-tensor one, the model after cross-layer
    equalization (reporter.debug.equalization). Updates `results` in place."""
    import dataclasses

    # The base model's float and post-training models (--base-model) are another model's: compared by their
    # figures, never blamed layer by layer against this model's float nor "fixed" as its variants.
    quantized = [name for name, v in results.items()
                 if name != variants.FLOAT and name not in variants.BASE_VARIANTS and v.ok]
    if not quantized or not results[variants.FLOAT].ok:
        return
    x_calib = m.data.x_calib
    to_blame: dict[str, list[str]] = {}
    with m.progress.stage("layer error", f"per-layer error of {', '.join(quantized)} against float"):
        models = {name: (m.folder / f"{name}.tflite").read_bytes() for name in quantized}
        compared, cost = all_layer_errors(float_model, models, x_calib)
        if cost is not None:
            print(cost.line())  # into run.log
        for name in quantized:
            errors, to_blame[name] = compared[name]
            results[name] = dataclasses.replace(results[name], layer_errors=errors)
            if errors.error is None:
                (m.folder / f"layer_errors_{name}.csv").write_text(csv_text(errors), encoding="utf-8")
    if m.score is None:
        return  # no metric to lose: the per-layer error is the evidence

    def loses(v: VariantResult) -> bool:  # its main metric measured against float's, and short of the target
        return m.drop(v.name) is not None and not target_rule(v, results[variants.FLOAT])

    def in_float(layers: list[str]) -> dict[str, str]:
        return {n: variants.FLOAT for n in layers}

    for name in quantized:
        v = results[name]
        if not variants.get(name).fixable or v.layer_errors is None or not loses(v):
            continue
        fixed_name = variants.fix(name)

        def measure(model, fixed_name=fixed_name):
            return dataclasses.replace(m.measure(fixed_name, model), converter=litert.CONVERTER)

        with m.progress.stage(variants.SELECTIVE, f"{name}: blamed layers kept in float (LiteRT Quantizer)"):
            found = fix(
                name, to_blame[name],
                build=lambda layers, name=name: litert_models.build(name, in_float(layers)),
                measure=measure,
                still_loses=lambda r: r.name in m.outputs and loses(r),
                code=lambda layers, name=name: litert.reproduction_code(name, in_float(layers), (), len(x_calib)))
        results[name] = dataclasses.replace(v, fix=found)
    equalized = equalization.per_tensor_fix(m, float_model, results, loses)
    if equalized is not None:
        results[variants.PER_TENSOR_CLE] = equalized
