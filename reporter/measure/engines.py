"""The same scheme from the two engines, measured against each other (reporter.core.variants.ENGINE_PAIRS)."""

from __future__ import annotations

import numpy as np

from reporter.core import variants
from reporter.core.errors import one_line
from reporter.measure import metrics as qmetrics
from reporter.measure.measurer import Measurer
from reporter.model.variant import EnginePair, VariantResult


# The measurement a pair's comparison is recorded under when it fails, in the LiteRT model's measurement_errors
# (report.json: variants[].measurement_errors; a report's notices say "<model>: engines not measured: <error>"):
# the pair keeps its row, its figure None, and the error says why.
MEASUREMENT = "engines"


def pairs(m: Measurer, results: dict[str, VariantResult]) -> list[EnginePair]:
    """Every pair of the registry whose two models were built and ran: their agreement on the primary output
    (the same class, or the MSE between their outputs) and the op types whose counts differ. A comparison that
    cannot be made (no sample with finite outputs from both) is recorded as the LiteRT model's measurement
    error `MEASUREMENT`, never left silently absent."""
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
            except ValueError as exc:
                _record(b, f"output MSE against {variants.short(tf)}: {one_line(exc)}")
            reference = m.outputs.get(variants.FLOAT)
            try:  # float's output variance over its finite rows, as every output error is read
                variance = qmetrics.output_error(reference, reference).float_variance if reference is not None else None
            except ValueError as exc:
                if mse is not None:  # the MSE stands; only the scale it is read on is missing
                    _record(b, f"float's output variance, the scale of the output MSE against {variants.short(tf)}:"
                               f" {one_line(exc)}")
        ops = sorted(set(a.ops) | set(b.ops))
        differ = {op: [a.ops.get(op, 0), b.ops.get(op, 0)] for op in ops if a.ops.get(op, 0) != b.ops.get(op, 0)}
        found.append(EnginePair(scheme, tf, litert, agreement, mse, variance, differ))
    return found


def _record(result: VariantResult, error: str) -> None:
    """`error` in the model's measurement_errors. The results are already in the report being assembled (the pairs
    are measured last, from them), so the record's own dict takes it: the same object report.json is written
    from."""
    result.measurement_errors[MEASUREMENT] = error
