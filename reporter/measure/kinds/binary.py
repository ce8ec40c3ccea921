"""The binary kind: one sigmoid unit, class 1 at or above the threshold; accuracy, paired by McNemar.

report.json records it as "classification" with `model.binary_sigmoid` (the format reports have always had).
"""

from __future__ import annotations

import numpy as np

from reporter.core.errors import InputError
from reporter.core.tasks import Record
from reporter.measure.kinds.base import Kind, LabelSource, TaskReading
from reporter.measure.signature import Port
from reporter.measure.task import Task, sigmoid_class, sigmoid_scores


class Binary(Kind):
    """One output unit read as P(class 1), with 0/1 labels."""

    name = "binary"
    words = "a binary classifier"
    record = Record("classification", binary_sigmoid=True)
    class_count_compared = False

    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        y = np.asarray(labels.y)
        if port.size != 1 or y.ndim != 1 or not np.isin(y, (0, 1)).all():
            raise InputError(labels.source, f"--task {self.name}: output {port.name} must have one unit and"
                                            f" '{labels.what}' labels 0/1 (it has {port.size} unit(s), labels of shape"
                                            f" {y.shape})")
        return TaskReading(y.astype(np.int64), Task(self, 2, threshold),
                           f"class 1 where the output is at least {threshold:g}")

    def classes_of(self, size: int, shape: tuple) -> int:
        return 2

    def predict(self, task: Task, out: np.ndarray) -> np.ndarray:
        return sigmoid_class(out, task.threshold)

    def scores(self, task: Task, out: np.ndarray) -> np.ndarray:
        return sigmoid_scores(out)


KIND = Binary()
