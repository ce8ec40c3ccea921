"""The same scheme from the two engines, measured against each other (reporter.core.variants.ENGINE_PAIRS)."""

from __future__ import annotations

import numpy as np

from reporter.core import variants
from reporter.measure import metrics as qmetrics
from reporter.measure.measurer import Measurer
from reporter.model.variant import EnginePair, VariantResult


def pairs(m: Measurer, results: dict[str, VariantResult]) -> list[EnginePair]:
    """Every pair of the registry whose two models were built and ran: their agreement on the primary output
    (the same class, or the MSE between their outputs) and the op types whose counts differ."""
    found = []
    for tf, litert, scheme in variants.ENGINE_PAIRS:
        a, b = results.get(tf), results.get(litert)
        if a is None or b is None or not a.ok or not b.ok or tf not in m.outputs or litert not in m.outputs:
            continue
        agreement = mse = variance = None
        if m.task.classification:
            same = m.task.classes(m.outputs[tf]) == m.task.classes(m.outputs[litert])
            agreement = float(np.mean(same))
        else:
            try:
                mse = qmetrics.output_error(m.outputs[tf], m.outputs[litert]).mse
                reference = m.outputs.get(variants.FLOAT)
                # float's output variance over its finite rows, as every output error is read
                variance = qmetrics.output_error(reference, reference).float_variance if reference is not None else None
            except ValueError:
                pass
        ops = sorted(set(a.ops) | set(b.ops))
        differ = {op: [a.ops.get(op, 0), b.ops.get(op, 0)] for op in ops if a.ops.get(op, 0) != b.ops.get(op, 0)}
        found.append(EnginePair(scheme, tf, litert, agreement, mse, variance, differ))
    return found
