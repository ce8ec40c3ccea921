"""The data a run measures on, as the stages hand them on: the inputs by name and the data set.

Read by reporter.inputs (data loading, binding, labels), measured by reporter.measure, searched and debugged on
by reporter.search and reporter.debug: declared here so that every layer can type them. No TensorFlow here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np


class Inputs:
    """A model's input data by name: one array per input, all with the same number of samples.

    `len()` is the number of samples and indexing by a slice or indices takes those samples of every
    array, so code written for one array (x[:1], x[chosen], len(x)) reads several inputs unchanged;
    `inputs["numeric"]` is one input's array. (reporter.measure.signature.by_position puts them in a
    model's input order.)
    """

    def __init__(self, arrays: dict):
        self.arrays = dict(arrays)
        counts = {len(a) for a in self.arrays.values()}
        if len(counts) > 1:
            raise ValueError("the input arrays hold different numbers of samples: " + ", ".join(
                f"{k}: {len(a)}" for k, a in self.arrays.items()))

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values()))) if self.arrays else 0

    def __getitem__(self, index):
        if isinstance(index, str):
            return self.arrays[index]
        return Inputs({k: a[index] for k, a in self.arrays.items()})

    @property
    def names(self) -> list[str]:
        return list(self.arrays)

    def sample(self, i: int) -> dict:
        """Sample `i` of every input, batch dimension kept: what a converter's representative dataset yields."""
        return {k: a[i:i + 1] for k, a in self.arrays.items()}

    def single(self) -> Optional[np.ndarray]:
        """The array of a one-input model, else None."""
        return next(iter(self.arrays.values())) if len(self.arrays) == 1 else None


@dataclass
class Dataset:
    """The evaluation and calibration data of one run, and its labels by output."""

    source: str
    x: Inputs  # evaluation inputs by name ("" before `bind`: the one array `x` of a one-input model)
    y: np.ndarray  # class ids (int) or float targets
    x_calib: Inputs
    calibration_source: str  # "x_calib" or "x"
    labels_are_classes: bool
    x_pool: Optional[Inputs] = None  # every x_calib sample, beyond the calibration cap (for the search)
    # Labels by output name ("" for the one array `y`): (labels, labels_are_classes). `y` above is the
    # primary output's, once `bind_labels` has matched them to the model's outputs.
    labels: dict = field(default_factory=dict)
    # Per-sample arrays `meta_<name>` by name (one row per evaluation sample), for the user's metric.
    meta: dict = field(default_factory=dict)

    @property
    def calibration_overlaps_eval(self) -> bool:
        return self.calibration_source == "x"
