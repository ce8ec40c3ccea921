"""An integer-only model run by LiteRT's reference kernels beside its default ones (the int8 target's check):
reference kernels are what TFLite Micro and many NPUs implement, and they may round differently from XNNPACK's.
The two runs read the same evaluation samples; the agreement is counted on the raw outputs."""

from __future__ import annotations

import numpy as np

from reporter.measure import evaluate, hardware
from reporter.model.kernels import ReferenceAgreement


def reference_agreement(model: bytes, x, samples: int, classes: bool) -> ReferenceAgreement:
    """The first `samples` samples of `x` (Inputs) through both kernel sets: the share of output values that are
    the same, the largest difference in quantization steps of the output (its own scale, or 1 for a float
    output) and, for class scores (`classes`), the share of samples with the same top class."""
    n = min(samples, len(evaluate.as_inputs(x)))
    default = evaluate.predict_all(model, evaluate.as_inputs(x)[:n])
    # every sample of `x` on the reference kernels, kept: the target's check reads the same run (each sample's
    # outputs are its own, whatever the samples run with it: reporter.measure.runtime.run)
    reference = {key: value[:n] for key, value in hardware.reference_outputs(model, x).items()}
    steps = {key: value[2] for key, value in evaluate.integer_output_ranges(model).items()}
    same, total, largest, top = 0, 0, 0.0, None
    for key, a in default.items():
        b = reference[key]
        same += int(np.sum(a == b))
        total += a.size
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        if diff.size:
            largest = max(largest, float(np.nanmax(diff)) / steps.get(key, 1.0))
        if classes and top is None and a.ndim == 2 and a.shape[1] > 1:
            top = float(np.mean(np.argmax(a, axis=1) == np.argmax(b, axis=1)))
    return ReferenceAgreement(n, same / total if total else 1.0, round(largest, 3), top)
