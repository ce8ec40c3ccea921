"""What a model costs to run, read from its file: its ops and its multiply-accumulates per sample. The search estimates
each candidate's cost from these before building it (reporter.search.budget), so that the same model and data take the
same candidates on any machine and at any load: nothing here is timed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reporter.measure import graph, structure


@dataclass(frozen=True)
class Work:
    """A model's work: `ops` in its main graph, `macs` per sample (the multiply-accumulates of its convolutions and
    matrix products plus one per output element of every other op) and its file's `size` in bytes."""

    ops: int
    macs: int
    size: int


def _elements(shape) -> int:
    """Elements of one sample of a tensor of `shape` (the batch dimension counted as 1; unknown dimensions too)."""
    dims = [max(int(d), 1) for d in (shape if shape is not None else [])]
    return int(np.prod(dims[1:], dtype=np.int64)) if len(dims) > 1 else 1


def work(model: bytes) -> Work:
    """The model's ops, multiply-accumulates per sample and size."""
    obj = structure.read(model)
    ops, shapes = graph.ops_and_shapes(obj)
    total = 0
    for name, inputs, outputs in ops:
        out = sum(_elements(shapes[i]) for i in outputs if i >= 0)
        weights = shapes[inputs[1]] if len(inputs) > 1 and inputs[1] >= 0 else None
        dims = [int(d) for d in weights] if weights is not None else []
        if name in ("CONV_2D", "CONV_3D") and len(dims) >= 4:
            total += out * int(np.prod(dims[1:], dtype=np.int64))
        elif name == "DEPTHWISE_CONV_2D" and len(dims) == 4:
            total += out * dims[1] * dims[2]
        elif name == "FULLY_CONNECTED" and len(dims) == 2:
            total += out * dims[1]
        elif name == "BATCH_MATMUL" and inputs and inputs[0] >= 0:
            lhs = shapes[inputs[0]]
            total += out * (max(int(lhs[-1]), 1) if lhs is not None and len(lhs) else 1)
        elif name == "TRANSPOSE_CONV" and len(inputs) > 2 and len(dims) >= 4:
            total += _elements(shapes[inputs[2]]) * int(np.prod(dims[:3], dtype=np.int64))
        else:
            total += out
    return Work(len(ops), int(total), len(model))
