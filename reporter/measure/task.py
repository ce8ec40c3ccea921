"""What a model's raw output means: class scores (softmax, or one sigmoid unit), a regression value, or a mask.

The one place that turns raw outputs into predicted classes and class scores: the pipeline, the
metrics and the search all call it, so that every accuracy in a report counts the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.core import tasks

BINARY_THRESHOLD = 0.5  # one sigmoid unit: class 1 when the output is at least this
# The class predicted by an output that holds NaN or inf (a row, or a dense position): no class, so that it
# is never right and never agrees with a finite prediction (the model "produced NaN or inf" on that sample).
NO_CLASS = -1
# A mask's targets (0/1, or values in [0, 1]): a value is in the true mask where its target is at least this.
MASK_TARGET = 0.5
TASK_KINDS = tasks.NAMES  # what --task may name (reporter.core.tasks)


@dataclass(frozen=True)
class Task:
    """Classification with `num_classes` classes, multi-label with `num_classes` labels, or regression
    (num_classes None; `mask`: of a mask, each value in it where it is at least the threshold)."""

    num_classes: Optional[int]
    binary_sigmoid: bool = False  # one output unit read as P(class 1)
    multilabel: bool = False  # one sigmoid unit per label, each label predicted at >= threshold
    threshold: float = BINARY_THRESHOLD  # sigmoid outputs: class 1 (or the label) where the output is at least this
    dense: bool = False  # class scores at every position (pixel, timestep): the last axis holds the classes
    mask: bool = False  # regression of a mask (sigmoid or softmax values against targets in [0, 1]): mask IoU too

    @property
    def classification(self) -> bool:
        return self.num_classes is not None

    @property
    def entry(self) -> tasks.TaskKind:
        """The registry's entry for this reading (reporter.core.tasks)."""
        return tasks.reading(self.classification, self.binary_sigmoid, self.multilabel, self.dense, self.mask)

    @property
    def kind(self) -> str:
        """"classification", "binary", "multilabel", "segmentation", "regression": the entry's name."""
        return self.entry.name

    @classmethod
    def of(cls, kind: tasks.TaskKind, size: int, shape: tuple, threshold: float = BINARY_THRESHOLD) -> "Task":
        """The task `kind` names for an output of `size` values and `shape` (without the batch), read without
        labels: its classes are its units, the last axis's length (dense), 2 (one sigmoid unit), or none."""
        classes = None if not kind.classes else 2 if kind.binary_sigmoid else \
            (shape[-1] if shape else 1) if kind.dense else size
        return cls(classes, binary_sigmoid=kind.binary_sigmoid, multilabel=kind.multilabel, dense=kind.dense,
                   threshold=threshold, mask=kind.mask)

    def classes(self, out: np.ndarray) -> np.ndarray:
        """One comparable value per sample: the class id, or for multi-label the whole set of labels as one
        code, so that `classes(out) == y` is exact-match correctness and agreement with float everywhere. Dense:
        (N, positions) class ids, the top score at each position (compared position by position). An output
        holding NaN or inf predicts NO_CLASS (a dense model: at that position); multi-label thresholds each
        output, so a NaN output predicts its label absent."""
        if self.dense:
            out = np.asarray(out)  # rows of (positions * classes), the classes last
            scores = out.reshape(len(out), -1, self.num_classes)
            found = scores.argmax(axis=-1).astype(np.int64)
            found[~np.isfinite(scores).all(axis=-1)] = NO_CLASS
            return found
        if self.multilabel:
            return label_codes(self.bits(out))
        return predicted_classes(out, self.binary_sigmoid, self.threshold)

    def bits(self, out: np.ndarray) -> np.ndarray:
        """Multi-label: (N, labels) 0/1, each label where its output is at least the threshold."""
        return (_columns(out) >= self.threshold).astype(np.uint8)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Multi-label: the (N, labels) 0/1 rows behind `label_codes`."""
        raw = np.ascontiguousarray(codes).view(np.uint8).reshape(len(codes), -1)
        return np.unpackbits(raw, axis=1)[:, : self.num_classes]

    def in_mask(self, out: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A mask: (predicted, true), each (N, values) bool: the output at least the threshold, the targets `y`
        at least MASK_TARGET. A value whose output is NaN or inf is predicted wrong (the opposite of its target)."""
        out, truth = _columns(out), _columns(y) >= MASK_TARGET
        with np.errstate(invalid="ignore"):
            found = out >= self.threshold
        return np.where(np.isfinite(out), found, ~truth), truth

    def scores(self, out: np.ndarray) -> np.ndarray:
        if self.multilabel:
            return _columns(out).astype(np.float64)
        return class_scores(out, self.binary_sigmoid)


def label_codes(bits: np.ndarray) -> np.ndarray:
    """Each row of 0/1 labels as one value (its packed bytes), so that rows compare with `==`."""
    packed = np.packbits(np.asarray(bits, np.uint8), axis=1)
    return np.ascontiguousarray(packed).view(np.dtype((np.void, packed.shape[1]))).ravel()


def binary_sigmoid_labels(num_outputs: int, y: np.ndarray, labels_are_classes: bool) -> bool:
    """One output unit and integer labels that are all 0 or 1: the usual Keras binary head."""
    if num_outputs != 1 or not labels_are_classes or len(y) == 0:
        return False
    return bool(np.isin(np.unique(y), (0, 1)).all())


def _columns(out: np.ndarray) -> np.ndarray:
    out = np.asarray(out)
    return out.reshape(len(out), -1)


def predicted_classes(out: np.ndarray, binary_sigmoid: bool, threshold: float = BINARY_THRESHOLD) -> np.ndarray:
    """Class ids (int64) from raw outputs (N, k): the top score, or output >= threshold for one sigmoid unit;
    NO_CLASS for a row holding NaN or inf (argmax would pick the NaN's column, a class by accident)."""
    out = _columns(out)
    found = (out[:, 0] >= threshold).astype(np.int64) if binary_sigmoid else out.argmax(axis=1).astype(np.int64)
    found[~np.isfinite(out).all(axis=1)] = NO_CLASS
    return found


def nonfinite_rows(out) -> np.ndarray:
    """(N,) bool: the samples whose output (one array, or a dict of outputs by name) holds NaN or inf."""
    arrays = list(out.values()) if isinstance(out, dict) else [out]
    bad = None
    for a in arrays:
        a = np.asarray(a)
        rows = ~np.isfinite(a.reshape(len(a), -1)).all(axis=1) if a.dtype.kind in "fc" else np.zeros(len(a), bool)
        bad = rows if bad is None else bad | rows
    return bad if bad is not None else np.zeros(0, bool)


def class_scores(out: np.ndarray, binary_sigmoid: bool) -> np.ndarray:
    """Scores per class (N, num_classes): the outputs, or (1 - p, p) for one sigmoid unit."""
    out = _columns(out).astype(np.float64)
    if binary_sigmoid:
        return np.column_stack([1.0 - out[:, 0], out[:, 0]])
    return out


def positive_score(out: np.ndarray, binary_sigmoid: bool) -> np.ndarray:
    """Binary classifiers: the score of class 1 (the sigmoid output, or the second softmax column)."""
    return class_scores(out, binary_sigmoid)[:, 1]
