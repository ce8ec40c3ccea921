"""The multi-label kind: one sigmoid unit per label; exact-match accuracy (every label right), paired by McNemar."""

from __future__ import annotations

from typing import Optional

import numpy as np

from reporter.core.errors import InputError
from reporter.measure import metrics as qmetrics
from reporter.measure.kinds import reading
from reporter.measure.kinds.base import Kind, LabelSource, TaskReading
from reporter.measure.signature import Port
from reporter.measure.task import Task, columns, label_codes


class Multilabel(Kind):
    """k sigmoid units with rows of 0/1 labels, each label predicted at or above the threshold, never argmaxed.
    A sample's labels are kept as one code (reporter.measure.task.label_codes), so that `==` is exact match."""

    name = "multilabel"
    top_class = False  # a sigmoid per label: the largest is no prediction
    words = "multi-label"
    main_metric = "exact-match accuracy"
    accuracy_label = "Exact-match accuracy"
    share_metric = "exact-match accuracy"
    counted_as = "labels (multi-label)"
    class_count_compared = False
    per_class_title = "Per label"
    per_class_columns = ("precision / recall / F1 · accuracy · ROC AUC (coloured where the label's own McNemar"
                         " test against float is beyond noise)")

    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        y, size = np.asarray(labels.y), port.size
        rows = y.reshape(len(y), -1) if y.ndim >= 2 else None
        if rows is None or rows.shape[1] != size or not np.isin(rows, (0, 1)).all():
            raise InputError(labels.source, f"--task {self.name}: output {port.name} has {size} units but"
                                            f" '{labels.what}' has shape {y.shape}: expected rows of {size} 0/1 labels")
        return reading.label_sets(rows, size, threshold, "units")

    def predict(self, task: Task, out: np.ndarray) -> np.ndarray:
        return label_codes(bits(task, out))

    def scores(self, task: Task, out: np.ndarray) -> np.ndarray:
        return columns(out).astype(np.float64)

    def decode(self, task: Task, y: np.ndarray) -> np.ndarray:
        """The (N, labels) 0/1 rows behind `label_codes`."""
        raw = np.ascontiguousarray(y).view(np.uint8).reshape(len(y), -1)
        return np.unpackbits(raw, axis=1)[:, : task.num_classes]

    def metrics(self, task: Task, y: np.ndarray, out: np.ndarray, float_out: Optional[np.ndarray]):
        float_bits = None if float_out is None else bits(task, float_out)
        return qmetrics.multilabel(task.decode(y), bits(task, out), float_bits, task.scores(out))


def bits(task: Task, out: np.ndarray) -> np.ndarray:
    """(N, labels) 0/1, each label where its output is at least the threshold (a NaN output: absent)."""
    return (columns(out) >= task.threshold).astype(np.uint8)


KIND = Multilabel()
