"""The runtime task of an output: its kind (reporter.measure.kinds), its number of classes and its threshold.

The one place that turns raw outputs into predicted classes and class scores: the pipeline, the metrics and the
search all call `Task`, which asks its kind, so that every accuracy in a report counts the same way. The
helpers below are the readings the kinds share (argmax, one sigmoid unit, label sets as one value).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from reporter.core.tasks import TaskKind

from reporter.core.judgement import BINARY_THRESHOLD  # noqa: E402,F401 - one sigmoid unit: class 1 from this
# The class predicted by an output that holds NaN or inf (a row, or a dense position): no class, so that it
# is never right and never agrees with a finite prediction (the model "produced NaN or inf" on that sample).
NO_CLASS = -1
# A mask's targets (0/1, or values in [0, 1]): a value is in the true mask where its target is at least this.
MASK_TARGET = 0.5


@dataclass(frozen=True)
class Task:
    """An output read as `kind` (a reporter.measure.kinds.base.Kind, registered in reporter.core.tasks) with
    `num_classes` classes (labels for multi-label; None for a kind without classes) and `threshold` for sigmoid
    outputs and masks. Every behaviour is the kind's."""

    kind: TaskKind
    num_classes: Optional[int] = None
    threshold: float = BINARY_THRESHOLD  # sigmoid outputs: class 1 (or the label) where the output is at least this

    @property
    def classification(self) -> bool:
        """The output counts classes (its predictions are class ids, or label sets)."""
        return self.num_classes is not None

    @classmethod
    def of(cls, kind: TaskKind, size: int, shape: tuple, threshold: float = BINARY_THRESHOLD) -> "Task":
        """The task `kind` names for an output of `size` values and `shape` (without the batch), read without
        labels: its classes as the kind counts them from the output."""
        return cls(kind, kind.classes_of(size, shape), threshold)

    def classes(self, out: np.ndarray) -> np.ndarray:
        """One comparable value per sample (dense: per position), so that `classes(out) == y` is correctness and
        agreement with float everywhere; an output holding NaN or inf predicts no class (NO_CLASS)."""
        return self.kind.predict(self, out)

    def scores(self, out: np.ndarray) -> np.ndarray:
        """Scores per class or label (N, classes), for top-5 accuracy and ROC AUC."""
        return self.kind.scores(self, out)

    def decode(self, y: np.ndarray) -> np.ndarray:
        """The labels `y` (as the reading keeps them) as the metrics read them."""
        return self.kind.decode(self, y)

    def agreement(self, out: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """(N,) each sample's agreement of `out` with a reference output `ref` (float's), in 0..1: what the search's
        selection score averages on samples without labels."""
        return self.kind.agreement(self, out, ref)

    def correct(self, out: np.ndarray, y: np.ndarray) -> Optional[np.ndarray]:
        """(N,) bool, which samples are right: what the paired test reads; None when a sample is not right or wrong
        as a whole (the kind's main metric is then paired by a bootstrap over samples)."""
        return self.kind.correct(self, out, y)

    def metrics(self, y: np.ndarray, out: np.ndarray, float_out: Optional[np.ndarray]):
        """The kind's quality metrics of `out` against `y` (reporter.model.report.Metrics), None for a kind
        measured by its output error."""
        return self.kind.metrics(self, y, out, float_out)

    def score(self, y: np.ndarray):
        """The kind's own main metric on labels `y` (reporter.measure.scoring.Score), None for none."""
        return self.kind.score(self, y)

    def as_head(self) -> "Task":
        """The task one output of several is measured as (a mask's: a regression, reporter.measure.kinds.mask)."""
        return replace(self, kind=self.kind.head)


def label_codes(bits: np.ndarray) -> np.ndarray:
    """Each row of 0/1 labels as one value (its packed bytes), so that rows compare with `==`."""
    packed = np.packbits(np.asarray(bits, np.uint8), axis=1)
    return np.ascontiguousarray(packed).view(np.dtype((np.void, packed.shape[1]))).ravel()


def columns(out: np.ndarray) -> np.ndarray:
    out = np.asarray(out)
    return out.reshape(len(out), -1)


def top_class(out: np.ndarray) -> np.ndarray:
    """Class ids (int64) from class scores (N, k): the top score; NO_CLASS for a row holding NaN or inf (argmax
    would pick the NaN's column, a class by accident)."""
    out = columns(out)
    return _no_class_where_nonfinite(out, out.argmax(axis=1).astype(np.int64))


def sigmoid_class(out: np.ndarray, threshold: float = BINARY_THRESHOLD) -> np.ndarray:
    """Class ids (int64) from one sigmoid unit (N, 1) or (N,): 1 where the output is at least `threshold`;
    NO_CLASS for a NaN or inf output."""
    out = columns(out)
    return _no_class_where_nonfinite(out, (out[:, 0] >= threshold).astype(np.int64))


def _no_class_where_nonfinite(out: np.ndarray, found: np.ndarray) -> np.ndarray:
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


def class_scores(out: np.ndarray) -> np.ndarray:
    """Scores per class (N, num_classes): the outputs."""
    return columns(out).astype(np.float64)


def sigmoid_scores(out: np.ndarray) -> np.ndarray:
    """Scores per class (N, 2) of one sigmoid unit p: (1 - p, p)."""
    out = class_scores(out)
    return np.column_stack([1.0 - out[:, 0], out[:, 0]])
