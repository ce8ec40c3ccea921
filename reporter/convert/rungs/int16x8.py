"""Rung `int16x8`: the whole model with int16 activations and int8 weights (LiteRT Quantizer's static_wi8_ai16, the
run's own 16x8 variant), on a target whose tool runs them (TFLite Micro's 16x8 kernels, Vela's 16x8)."""

from __future__ import annotations

from typing import Optional

from reporter.convert.rungs.base import Plain, RepairCandidate, Workspace
from reporter.core import variants
from reporter.core.errors import first_line, plain
from reporter.measure import runtime


class Int16x8(Plain):
    code, label = variants.INT16X8, "16x8: int16 activations, int8 weights (LiteRT Quantizer)"  # the scheme's name

    def offered(self, target) -> bool:
        return target is not None and target.int16_activations

    def applies(self, model: bytes, data: Workspace) -> Optional[str]:
        return None if data.build_variant is not None else "the run builds no 16x8 variant here"

    def build(self, model: bytes, data: Workspace) -> RepairCandidate:
        # Not an int8 model: no integer-only check (the target's tool says whether it runs it).
        if variants.INT16X8 in data.measured:
            return RepairCandidate(self.code, self.label,
                                   error="measured above as the 16x8 variant (an option of the decision)")
        try:
            built = data.build_variant(variants.INT16X8)
            refused = loads(built)
        except Exception as exc:  # noqa: BLE001 - the rung's failure is its finding
            refused = _reason(exc)
        if refused:
            return RepairCandidate(self.code, self.label, error=f"16x8: LiteRT cannot build this model: {refused}")
        return RepairCandidate(self.code, self.label, model=built,
                               detail="LiteRT Quantizer's static_wi8_ai16 from the run's one calibration")


def loads(model: bytes) -> str:
    """"" when LiteRT prepares `model` on its default and its reference kernels, else the first refusal in the user's
    words (a 16x8 convolution whose im2col buffer passes 2**31 elements: "Conv im2col elements (3400151040) exceed the
    32-bit integer limit"), from LiteRT's text without its source positions and node numbers."""
    for reference in (False, True):
        try:
            runtime.load(model, reference=reference).allocate_tensors()
        except (RuntimeError, ValueError) as exc:
            return _reason(exc)
    return ""


def _reason(exc: BaseException) -> str:
    """A refusal's first line in the user's words, its sentences joined without stray full stops."""
    return plain(first_line(exc)).replace(".;", ";").rstrip(".")


RUNG = Int16x8()
