"""Rung `static_batch1`: LiteRT's static int8 from the float model with its batch fixed to 1 and its SHAPE ops folded
(no DEQUANTIZE->SHAPE island), calibrated with LiteRT's moving-average ranges."""

from __future__ import annotations

from typing import Optional

from reporter.convert.rungs.base import Plain, Workspace, candidate, samples
from reporter.measure import structure


class StaticBatch1(Plain):
    code, label = "static_batch1", "LiteRT static int8, static batch of 1"

    def applies(self, model: bytes, data: Workspace) -> Optional[str]:
        if not structure.op_tensor_types(model).get("float32"):
            return "the model computes with no float32 tensor: there is nothing to quantize"
        return None

    def build(self, model: bytes, data: Workspace):
        base = data.base
        return candidate(self, model=base.plain(), detail=(
            f"{base.batch1()[1]}; LiteRT's moving-average ranges over {samples(base.calib)} calibration samples"))


RUNG = StaticBatch1()
