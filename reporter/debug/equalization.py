"""The per-tensor schemes' own fix, next to blame's: a variant with one scale per weight tensor (fiq_per_tensor,
static_wi8_ai8_per_tensor) that does not meet the accuracy target is rebuilt from the float model after cross-layer
equalization (reporter.convert.rungs.per_tensor_equalization: each channel's weight range balanced between the layer
that makes it and the layers that read it, the same function in float), quantized per tensor by LiteRT Quantizer from
the run's calibration samples, and measured like every model."""

from __future__ import annotations

import traceback
from typing import Callable, Optional

from reporter.convert import litert
from reporter.convert.rungs.base import TOLERANCE, float_difference
from reporter.convert.rungs.per_tensor_equalization import equalize
from reporter.core import variants
from reporter.measure import runtime
from reporter.measure.measurer import Measurer
from reporter.model.report import VariantResult

CHECK_SAMPLES = 256  # calibration samples on which the equalized float model is checked against the original
FLOAT_FILE = f"{variants.PER_TENSOR_CLE}_float.tflite"  # the equalized float model, beside the quantized one


def per_tensor_fix(m: Measurer, float_model: bytes, results: dict[str, VariantResult],
                   loses: Callable[[VariantResult], bool]) -> Optional[VariantResult]:
    """The per-tensor model after cross-layer equalization, measured, when a per-tensor variant in `results` loses
    accuracy (`loses`: blame's test, the findings' rule); None when none loses or the model has no layer pair to
    equalize (said in the run's log). Its float rewrite is written beside it (FLOAT_FILE)."""
    lost = [name for name in variants.PER_TENSOR if name in results and results[name].ok and loses(results[name])]
    if not lost:
        return None
    try:
        rewritten, words = equalize(float_model)
    except (ValueError, RuntimeError, KeyError, IndexError):
        traceback.print_exc()  # into run.log
        m.progress.say(f"cross-layer equalization could not rewrite the float model for {' and '.join(lost)}"
                       " (the details are in run.log)")
        return None
    if not words:
        m.progress.say(f"{' and '.join(lost)}: no channel made by one weighted layer and read only by others,"
                       " nothing to equalize across layers")
        return None

    def build() -> bytes:
        x = runtime.keyed(m.data.x_calib, runtime.signature_names(float_model)[1])
        difference = float_difference(float_model, rewritten, {k: a[:CHECK_SAMPLES] for k, a in x.items()})
        m.progress.say(f"cross-layer equalization: {'; '.join(words)}; largest float difference {difference:.2g} of"
                       " the output's range on the calibration samples")
        if not difference <= TOLERANCE:
            raise ValueError(f"the equalized float model is not the same function (largest difference"
                             f" {difference:.2g} of the output's range)")
        (m.folder / FLOAT_FILE).write_bytes(rewritten)
        return litert.LiteRtModels(rewritten, m.data.x_calib).build(variants.LITERT_PER_TENSOR)

    said = f"{' and '.join(lost)} lose{'s' * (len(lost) == 1)} accuracy: cross-layer equalization, then per-tensor" \
           " int8 (LiteRT Quantizer)"
    with m.progress.stage(variants.PER_TENSOR_CLE, said):
        return m.build_and_measure(variants.PER_TENSOR_CLE, build, litert.CONVERTER)
