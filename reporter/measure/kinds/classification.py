"""The classification kind: class scores (softmax), the top score is the class; accuracy, paired by McNemar."""

from __future__ import annotations

import dataclasses

import numpy as np

from reporter.core.errors import InputError
from reporter.measure.kinds import reading
from reporter.measure.kinds.base import Kind, LabelSource, TaskReading
from reporter.measure.signature import Port
from reporter.measure.task import Task


class Classification(Kind):
    """Class scores with class-id or one-hot labels (the defaults of reporter.measure.kinds.base.Kind)."""

    name = "classification"
    words = "a classifier"

    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        if port.size < 2:
            raise InputError(labels.source, f"--task {self.name}: output {port.name} has one unit; use --task binary")
        found = reading.read_flat(dataclasses.replace(labels, y=np.asarray(labels.y)), port, "SOFTMAX", threshold)
        if not found.task.classification:
            raise InputError(labels.source, f"--task {self.name}: '{labels.what}' does not hold class ids or one-hot"
                                            f" rows for output {port.name}")
        return dataclasses.replace(found, task=Task(self, found.task.num_classes), reason="the top score is the class")


KIND = Classification()
