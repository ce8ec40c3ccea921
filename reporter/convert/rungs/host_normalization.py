"""Rung `host_normalization`: a leading SUB, then MUL or DIV by constants, moved off the model to the host when the
input's int8 scale leaves some feature with at most MAX_CODES codes; the host feeds (x - subtract) / divide
(reporter.model.repair.InputTransform), and the model without those ops is exact in float on that input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.convert.rungs.base import Plain, Workspace, candidate, static_int8
from reporter.convert.rungs.ranges import ranged
from reporter.measure import graph_edits, runtime
from reporter.model.repair import InputTransform

MAX_CODES = 2  # host normalization applies when some input feature spans at most this many int8 codes
WHY_NOT = {"output": "the normalization's result is a model output",
           "none": "the model does not start with a SUB then MUL or DIV by constants on a float input"}


@dataclass(frozen=True)
class Normalization:
    """A leading SUB then MUL/DIV by constants on a float input: (input signature name, the model without those two
    ops, per-feature subtract and divide along the last axis)."""

    input: str
    model: bytes
    subtract: np.ndarray
    divide: np.ndarray


def find_normalization(float_model: bytes) -> tuple[Optional[Normalization], str]:
    """The model's leading normalization moved out (the input feeds the next op directly), or None and why not."""
    found, why = graph_edits.without_leading_normalization(float_model)
    if found is None:
        return None, WHY_NOT[why]
    name, model, mean, factor, divides = found
    divide = factor.ravel() if divides else 1.0 / factor.ravel()
    return Normalization(name, model, mean.ravel().astype(np.float64), divide.astype(np.float64)), ""


def starved_features(x: np.ndarray, scale: float, zero_point: int) -> int:
    """Input features (last axis) that the int8 input quantization leaves with at most MAX_CODES codes over `x`."""
    codes = np.clip(np.round(x / scale + zero_point), -128, 127).reshape(-1, x.shape[-1])
    return int(sum(len(np.unique(codes[:, j])) <= MAX_CODES for j in range(codes.shape[1])))


class HostNormalization(Plain):
    code, label = "host_normalization", "LiteRT static int8, input normalization on the host"
    exact = True

    def _found(self, data: Workspace) -> tuple[Optional[Normalization], str, float, int]:
        """(the normalization, why none, the plain int8 model's input scale, features it starves)."""
        def make():
            found, why = find_normalization(data.float_model)
            if found is None:
                return None, why, 0.0, 0
            scale, zero = runtime.port_details(data.base.plain())[0][found.input]["quantization"]
            starved = starved_features(data.base.calib[found.input], scale, zero) if scale else 0
            return found, "", scale, starved
        return data.once(self.code, make)

    def applies(self, model: bytes, data: Workspace) -> Optional[str]:
        found, why, scale, starved = self._found(data)
        if found is None:
            return why
        if not starved:
            return f"the input's int8 scale ({scale:.4g}) leaves every feature more than {MAX_CODES} codes"
        return None

    def build(self, model: bytes, data: Workspace):
        found, _, scale, starved = self._found(data)
        transform = InputTransform(found.input, [float(v) for v in found.subtract], [float(v) for v in found.divide])
        host = data.rewrite(found.model, transform.apply(data.base.calib), transform.apply(data.select))
        _, calibration, words = ranged(data, host)
        return candidate(self, model=static_int8(host.batch1()[0], calibration), input_transform=transform,
                         rewritten=found.model, detail=(
                             f"the input's int8 scale ({scale:.4g}) leaves {starved} of"
                             f" {data.base.calib[found.input].shape[-1]} features with at most {MAX_CODES} codes; the"
                             f" model without its leading normalization, fed (x - subtract) / divide; {words}"))


RUNG = HostNormalization()
