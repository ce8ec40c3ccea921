"""One quantized output shared by values of different ranges, measured.

A model whose output CONCATENATES values of different ranges (a YOLO head: boxes in pixels, 0..320, and sigmoid
class scores, 0..1, in one [1, 4+nc, N] output) gets ONE scale for that output in full-integer quantization: the
small-range part then rounds to a few codes, most of it to 0. Here the float model's graph says which parts make each
output (followed back from the output through reshapes, transposes and concatenations, `joined_outputs`), each
part's values are read from float's own output on the evaluation data (where every value sits is known from the
graph, so no intermediate tensor is read), and each is quantized with the scale and zero point of the variant's
integer output, read from its file: the share of its nonzero values that round to 0 is counted (`measured`). Whether
that matters is reporter.findings' to decide (judgement's SHARED_SCALE_RATIO); the repair rung
reporter.convert.rungs.split_output_scale builds the model with the parts quantized apart.
"""

from __future__ import annotations

import dataclasses
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np

from reporter.core import variants
from reporter.core.errors import one_line
from reporter.measure import evaluate, graph, runtime
from reporter.model.shared_scale import ScalePart, SharedScale

if TYPE_CHECKING:  # pragma: no cover
    from reporter.measure.measurer import Measurer
    from reporter.model.report import VariantResult

JOIN = "CONCATENATION"
# Ops that move every value of their first input into their output unchanged: an output made through them holds
# the values of the op before them, each at a place the shapes say.
RESHAPES = frozenset({"RESHAPE", "SQUEEZE", "EXPAND_DIMS"})
PASS = frozenset({"QUANTIZE", "DEQUANTIZE"})
TRANSPOSE = "TRANSPOSE"
ROWS_AT_ONCE = 64  # samples of an output read at a time while its parts are measured


@dataclass(frozen=True)
class Part:
    """A tensor of the float model whose values a concatenation carries to an output unchanged."""

    tensor: int
    name: str
    op: str  # the op that makes it ("" for a constant or a model input)


@dataclass(frozen=True)
class Joined:
    """An output made by concatenations: its parts, where each of its values comes from (`labels`: one entry per
    output value of a sample, in the row order LiteRT gives, the index of its part), the concatenation nearest the
    output, and the tensors of the ops from the concatenations up to the output (what keeps the parts apart when
    those ops compute in float)."""

    key: str  # the signature's output name
    concatenation: str
    parts: tuple[Part, ...]
    labels: np.ndarray
    joining: tuple[str, ...]  # tensor names: every CONCATENATION and every op after one, up to the output

    def stats(self, rows: np.ndarray, scale: float = 0.0) -> list[tuple[float, float, int, int]]:
        """Each part's (smallest, largest finite value, nonzero values, of those the ones round(v / scale) makes 0)
        in `rows` (the output, one flattened row per sample), read ROWS_AT_ONCE samples at a time: a YOLO output
        holds hundreds of thousands of values per sample."""
        rows = np.asarray(rows).reshape(len(rows), -1)
        if rows.shape[1] != self.labels.size:
            raise ValueError(f"output {self.key} holds {rows.shape[1]} values per sample, its concatenation"
                             f" {self.labels.size}")
        found = [[np.inf, -np.inf, 0, 0] for _ in self.parts]
        places = [np.flatnonzero(self.labels == k) for k in range(len(self.parts))]
        for start in range(0, len(rows), ROWS_AT_ONCE):
            chunk = rows[start:start + ROWS_AT_ONCE]
            for k, where in enumerate(places):
                values = chunk[:, where].astype(np.float64).reshape(-1)
                values = values[np.isfinite(values)]
                if not values.size:
                    continue
                f = found[k]
                f[0], f[1] = min(f[0], float(values.min())), max(f[1], float(values.max()))
                nonzero = values[values != 0]
                f[2] += int(nonzero.size)
                if scale > 0:
                    f[3] += int(np.count_nonzero(np.round(nonzero / scale) == 0))
        return [(lo, hi, n, z) if np.isfinite(lo) else (0.0, 0.0, 0, 0) for lo, hi, n, z in found]

    def spans(self, rows: np.ndarray) -> list[float]:
        """Each part's float span (largest minus smallest finite value) in `rows`."""
        return [hi - lo for lo, hi, _, _ in self.stats(rows)]


def joined_outputs(model: bytes) -> dict[str, Joined]:
    """Each output of `model` (by signature key) made by at least one CONCATENATION of two or more parts, followed
    back through reshapes, transposes, QUANTIZE/DEQUANTIZE and nested concatenations; an output whose values cannot
    be placed (a concatenation across samples, a shape the tensors do not give) is left out."""
    it = runtime.allocated(model)
    details = {d["index"]: d for d in it.get_tensor_details()}
    ops = graph.op_details(model)
    producer = {t: op for op in ops for t in op["outputs"] if t >= 0}
    found = {}
    for key, port in runtime.port_details(model)[1].items():
        walk = _Walk(it, details, producer)
        try:
            labels = walk.labels(int(port["index"]))
        except _Unplaced:
            continue
        if walk.first_join is None or len(walk.parts) < 2:
            continue
        found[key] = Joined(key, _short(details[walk.first_join]["name"]), tuple(walk.parts),
                            labels.reshape(-1), tuple(walk.joining))
    return found


class _Unplaced(Exception):
    """The output's values cannot be placed from the graph."""


class _Walk:
    """One output followed back to its parts: each tensor's labels (which part each of its values comes from, one
    sample's worth: the shapes LiteRT allocates, batch 1)."""

    def __init__(self, it, details: dict, producer: dict):
        self.it, self.details, self.producer = it, details, producer
        self.parts: list[Part] = []
        self.first_join: Optional[int] = None
        self.joining: list[str] = []

    def shape(self, t: int) -> tuple:
        shape = tuple(int(d) for d in self.details[t]["shape"])
        if not shape or shape[0] != 1 or any(d <= 0 for d in shape):
            raise _Unplaced(f"tensor {t} has shape {shape}")
        return shape

    def labels(self, t: int) -> np.ndarray:
        """(labels of tensor `t`); records its parts, and whether a concatenation is at or below it."""
        labels, _ = self._labels(t)
        return labels

    def _labels(self, t: int) -> tuple[np.ndarray, bool]:
        shape = self.shape(t)
        op = self.producer.get(t)
        name = op["op_name"] if op is not None else ""
        data = [i for i in op["inputs"] if i >= 0] if op is not None else []
        if name == JOIN and len(data) >= 2:
            if self.first_join is None:
                self.first_join = t
            inner = [self._labels(i)[0] for i in data]
            joined = _concatenated(inner, shape)
            self.joining.append(self.details[t]["name"])
            return joined, True
        if (name in RESHAPES or name in PASS or name == TRANSPOSE) and data:
            below, joins = self._labels(data[0])
            if name == TRANSPOSE:
                perm = [int(p) for p in np.asarray(self.it.get_tensor(op["inputs"][1])).reshape(-1)]
                below = np.transpose(below, perm)
            if below.size != int(np.prod(shape)):
                raise _Unplaced(f"{name} changes the number of values")
            if joins:
                self.joining.append(self.details[t]["name"])
            return below.reshape(shape), joins
        self.parts.append(Part(t, _short(self.details[t]["name"]), name))
        return np.full(shape, len(self.parts) - 1, np.int32), False


def _concatenated(inner: list[np.ndarray], shape: tuple) -> np.ndarray:
    """The parts' labels joined along the one axis (never the batch's) that makes `shape`."""
    for axis in range(1, len(shape)):
        if all(a.ndim == len(shape) and all(a.shape[d] == shape[d] for d in range(len(shape)) if d != axis)
               for a in inner) and sum(a.shape[axis] for a in inner) == shape[axis]:
            return np.concatenate(inner, axis=axis)
    raise _Unplaced("no axis joins the parts into the concatenation's shape")


def _short(name: str) -> str:
    """A tensor's first name (TF's converter joins the names of fused ops with ';')."""
    return name.split(";")[0]


def measured(joined: Joined, rows: np.ndarray, scale: float, zero_point: int, dtype: str) -> SharedScale:
    """`joined`'s parts on the output's one grid (`scale`, `zero_point`): each part's float range in `rows` (float's
    output, one row per sample) and the share of its nonzero values that quantize to the zero point (round(v / scale)
    is 0: they read back as 0)."""
    parts = [ScalePart(part.name, part.op, int(np.sum(joined.labels == k)), lo, hi, zeros / nonzero if nonzero else 0.0)
             for k, (part, (lo, hi, nonzero, zeros)) in enumerate(zip(joined.parts, joined.stats(rows, scale)))]
    return SharedScale(joined.concatenation, dtype, float(scale), int(zero_point), parts)


def _float_rows(m: "Measurer") -> dict[str, tuple[str, np.ndarray]]:
    """Float's output on the evaluation data by signature key, with the name the report gives that output: each
    output of a model with several, or the one output (a detector's joined outputs are not one tensor: none)."""
    if variants.FLOAT not in m.outputs:
        return {}
    if m.heads:
        outs = m.head_outputs.get(variants.FLOAT, {})
        return {h.key: (h.name, outs[h.name]) for h in m.heads if h.name in outs}
    return {"": ("", m.outputs[variants.FLOAT])}


def attach(m: "Measurer", float_model: bytes, results: dict[str, "VariantResult"]) -> dict[str, "VariantResult"]:
    """`results` with each quantized model's integer outputs that a concatenation joins measured on the grid they
    share (`VariantResult.shared_scales`, by output name); a measurement that fails is recorded in that model's
    `measurement_errors` ("shared_scale"), the model stands."""
    floats = _float_rows(m)
    if not floats:
        return results
    try:
        joined = joined_outputs(float_model)
    except Exception:  # noqa: BLE001 - a graph this cannot read has no shared-scale figures; the run goes on
        traceback.print_exc()  # into run.log
        return results
    if "" in floats:  # the one output: by the float model's one signature key
        keys = list(runtime.port_details(float_model)[1])
        floats = {keys[0]: (keys[0], floats[""][1])} if len(keys) == 1 else {}
    joined = {key: j for key, j in joined.items() if key in floats}
    if not joined:
        return results
    out = dict(results)
    for name, v in results.items():
        if name == variants.FLOAT or not v.ok:
            continue
        path = m.folder / f"{name}.tflite"
        try:
            found = {}
            for key, (low, _, scale, dtype) in evaluate.integer_output_ranges(path.read_bytes()).items():
                if key in joined:
                    zero = int(round(np.iinfo(np.dtype(dtype)).min - low / scale))
                    label, rows = floats[key]
                    found[label] = measured(joined[key], rows, scale, zero, dtype)
        except Exception as exc:  # noqa: BLE001 - one measurement's failure; the model and its others stand
            traceback.print_exc()  # into run.log
            out[name] = dataclasses.replace(v, measurement_errors={**v.measurement_errors,
                                                                   "shared_scale": one_line(exc)})
            continue
        if found:
            out[name] = dataclasses.replace(v, shared_scales=found)
    return out
