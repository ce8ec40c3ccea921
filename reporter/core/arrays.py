"""Reading large arrays in parts, so that a memory-mapped data set stays on disk."""

from __future__ import annotations

import numpy as np

CHUNK_BYTES = 64 * 1024 * 1024  # a pass over an array larger than this reads it in parts (memory stays flat)


def chunks(a: np.ndarray):
    """`a` in parts along its first axis, each at most CHUNK_BYTES."""
    step = max(1, CHUNK_BYTES // max(1, a[:1].nbytes))
    for start in range(0, len(a), step):
        yield a[start:start + step]


def all_finite(a: np.ndarray) -> bool:
    return all(np.isfinite(part).all() for part in chunks(a))
