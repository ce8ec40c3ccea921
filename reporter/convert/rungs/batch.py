"""The edit every int8 rung starts from: the float model with its batch fixed to 1, its SHAPE ops and the shape
arithmetic after them folded into constants (no DEQUANTIZE->SHAPE island, and XNNPACK refuses a computed RESHAPE)."""

from __future__ import annotations

from reporter.measure import graph_edits


def static_batch(float_model: bytes) -> tuple[bytes, str]:
    """The float model with its batch dimension fixed to 1: every shape made static, every SHAPE op folded into an
    int32 constant, and the shape arithmetic after it folded too; an op left with no reader (a RESHAPE only a SHAPE
    read) is removed. Returns (model, words); raises ValueError when a dimension other than the batch is dynamic."""
    model, was_dynamic, folded = graph_edits.with_static_batch(float_model)
    model, arithmetic = graph_edits.with_shape_arithmetic_folded(model)
    words = "batch fixed to 1 (was dynamic)" if was_dynamic else "batch already static"
    if folded:
        words += f"; {folded} SHAPE op{'s' * (folded != 1)} and {arithmetic} op{'s' * (arithmetic != 1)} of shape" \
                 " arithmetic folded into constants"
    return model, words
