"""Rung `host_normalization`: a leading SUB, then MUL or DIV by constants, moved off the model to the host when the
input's int8 scale leaves some feature with at most MAX_CODES codes; the host feeds (x - subtract) / divide
(reporter.model.repair.InputTransform), and the model without those ops is exact in float on that input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.convert.rungs.base import Plain, Workspace, candidate, static_int8
from reporter.convert.rungs.ranges import ranged
from reporter.measure import graph, runtime
from reporter.model.repair import InputTransform

MAX_CODES = 2  # host normalization applies when some input feature spans at most this many int8 codes


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
    obj = graph.read_model(float_model)
    sg = obj.subgraphs[0]
    sig = next((s for s in obj.signatureDefs or [] if s.subgraphIndex == 0), None)
    names = {int(p.tensorIndex): (p.name.decode() if isinstance(p.name, bytes) else p.name)
             for p in (sig.inputs if sig else [])}
    for index in [int(i) for i in sg.inputs]:
        users = graph.consumers(sg, index)
        if len(users) != 1 or graph.op_name(obj, users[0]) != "SUB" or int(users[0].inputs[0]) != index:
            continue
        sub = users[0]
        mean = graph.constant(obj, int(sub.inputs[1]))
        nexts = graph.consumers(sg, int(sub.outputs[0]))
        if mean is None or len(nexts) != 1 or graph.op_name(obj, nexts[0]) not in ("MUL", "DIV"):
            continue
        scale_op = nexts[0]
        other = [int(i) for i in scale_op.inputs if int(i) != int(sub.outputs[0])]
        divides = graph.op_name(obj, scale_op) == "DIV"
        if len(other) != 1 or (divides and int(scale_op.inputs[0]) != int(sub.outputs[0])):
            continue
        factor = graph.constant(obj, other[0])
        if factor is None or any(d != 1 for c in (mean, factor) for d in c.shape[:-1]):
            continue
        if getattr(sub.builtinOptions, "fusedActivationFunction", 0) or \
                getattr(scale_op.builtinOptions, "fusedActivationFunction", 0):
            continue
        out = int(scale_op.outputs[0])
        if out in [int(i) for i in sg.outputs]:
            return None, "the normalization's result is a model output"
        for op in sg.operators:
            op.inputs = np.array([index if int(i) == out else int(i) for i in op.inputs], np.int32)
        sg.operators = [op for op in sg.operators if op is not sub and op is not scale_op]
        graph.compact(obj)
        divide = factor.ravel() if graph.op_name(obj, scale_op) == "DIV" else 1.0 / factor.ravel()
        return Normalization(names.get(index, ""), graph.write_model(obj), mean.ravel().astype(np.float64),
                             divide.astype(np.float64)), ""
    return None, "the model does not start with a SUB then MUL or DIV by constants on a float input"


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
