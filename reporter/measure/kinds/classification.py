"""The classification kind: class scores (softmax), the top score is the class; accuracy, paired by McNemar."""

from __future__ import annotations

import dataclasses

import numpy as np

from reporter.core.errors import InputError
from reporter.measure.kinds import reading
from reporter.measure.kinds.base import Kind, LabelSource, TaskReading, choices
from reporter.measure.signature import Port
from reporter.measure.task import Task


class Classification(Kind):
    """Class scores with class-id or one-hot labels (the defaults of reporter.measure.kinds.base.Kind)."""

    name = "classification"
    words = "a classifier"

    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        if port.size < 2:
            raise InputError(labels.source, f"--task {self.name}: output {port.name} has one unit; use --task binary")
        per_sample = int(np.prod(np.shape(labels.y)[1:]))
        rows = np.asarray(labels.y).reshape(len(labels.y), -1) if per_sample == port.size > 1 else None
        one_hot = rows is not None and np.isin(rows, (0, 1)).all() and (rows.sum(axis=1) == 1).all()
        if per_sample != 1 and not one_hot:  # a class id, or one one-hot row, per sample: not a map of labels
            raise InputError(labels.source, f"--task {self.name}: '{labels.what}' holds {per_sample} values per"
                                            f" sample, neither one class id nor a one-hot row of output {port.name}'s"
                                            f" {port.size} scores" + choices())
        found = reading.read_flat(dataclasses.replace(labels, y=np.asarray(labels.y)), port, "SOFTMAX", threshold)
        if not found.task.classification:
            raise InputError(labels.source, f"--task {self.name}: '{labels.what}' does not hold class ids or one-hot"
                                            f" rows for output {port.name}")
        return dataclasses.replace(found, task=Task(self, found.task.num_classes), reason="the top score is the class")


KIND = Classification()
