"""The regression kind: values compared with the targets and with float; no main metric of its own."""

from __future__ import annotations

from typing import Optional

import dataclasses

import numpy as np

from reporter.core.errors import InputError
from reporter.measure.kinds import reading
from reporter.measure.kinds.base import Kind, LabelSource, TaskReading, shape, values_per_sample
from reporter.measure.signature import Port
from reporter.measure.task import Task, columns


class Regression(Kind):
    """Targets of the output's shape: each variant measured against them (MAE, RMSE, R²) and against float's
    output (reporter.measure.metrics.target_error, output_error), which is its measure."""

    name = "regression"
    words = "a regression"
    has_classes = False
    main_metric = ""
    plain_points = False  # no share of samples right: a recorded main metric (mask IoU) is said by its name
    paired_test = ""
    class_count_compared = False
    sample_correct = False

    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        y, size = np.asarray(labels.y), port.size
        if y.ndim == 0 or values_per_sample(y) != size:
            raise InputError(labels.source, f"--task {self.name}: '{labels.what}' has shape {y.shape} but output"
                                            f" {port.name} has shape {shape(port)}: targets must have {size} value(s)"
                                            f" per sample (n, {', '.join(str(d) for d in shape(port)) or 1})")
        return dataclasses.replace(reading.regression(y, port, labels.what),
                                   reason="each variant's output is measured against the targets (MAE, RMSE, R²)"
                                          " and against float's")

    def classes_of(self, size: int, shape: tuple) -> None:
        return None

    def predict(self, task: Task, out: np.ndarray) -> np.ndarray:
        """Its values are its predictions."""
        return columns(out)

    def metrics(self, task: Task, y: np.ndarray, out: np.ndarray, float_out: Optional[np.ndarray]) -> None:
        return None  # measured by its output error against the targets and float's (reporter.measure.measurer)


KIND = Regression()
