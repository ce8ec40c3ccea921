"""A loss no float layer inside the model fixes: FIQ's output is an int8 tensor whose range, set by the
calibration data, cannot hold float's values on the evaluation data, so they clip. The fix is the output's own:
the op that makes it kept in float (its output is then float, with no int8 range), built from the one calibration
and measured like every variant, so that the report can call it a fix only when it measured one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from reporter.core import judgement as jd
from reporter.core import variants
from reporter.measure import evaluate

if TYPE_CHECKING:  # pragma: no cover
    from reporter.measure.measurer import Measurer
    from reporter.model.report import VariantResult
    from reporter.search.recommend import Quantizer


def clipped_keys(m: "Measurer", fiq: "VariantResult") -> list[str]:
    """The signature keys of FIQ's outputs that clip a notable share of float's values (judgement)."""
    notable = {name for name, c in fiq.clipped_outputs.items() if jd.clipping_notable(c.share)}
    if not m.heads:
        return sorted(notable)
    return sorted(h.key for h in m.heads if h.name in notable)


def output_float_fix(m: "Measurer", quantizer: "Quantizer", fiq: "VariantResult",
                     fiq_model: bytes) -> Optional["VariantResult"]:
    """FIQ with the ops that make its clipped outputs in float, measured; None when no output clips notably or
    the ops cannot be told (a failed build is recorded as a failed variant, as for every variant)."""
    keys = clipped_keys(m, fiq)
    if not keys:
        return None
    nodes = [name for name in evaluate.integer_output_names(fiq_model, keys) if _known(quantizer, name)]
    if not nodes:
        return None
    return m.build_and_measure(variants.OUTPUT_FLOAT, lambda: quantizer.quantize(nodes[:len(keys)]),
                               quantizer.converter)


def _known(quantizer: "Quantizer", name: str) -> bool:
    """The quantizer can keep the op called `name` in float (its name is a tensor of the model it calibrated)."""
    from reporter.convert.quantize import UnknownNodeError

    try:
        quantizer.check_nodes([name])
    except UnknownNodeError:
        return False
    return True
