"""The mask kind: a regression whose output is a mask, also judged by mask IoU at the threshold.

Sigmoid or softmax values with targets 0/1 or in [0, 1] of the output's shape: compared with the targets and with
float, and judged by mask IoU (paired by a bootstrap over whole samples); also a sigmoid at every frame or pixel
reshaped flat (reporter.measure.kinds.reading.per_position), and any output --task mask names. report.json records
the model's task as "regression" with `model.main_metric` "mask IoU", and each output of several as "mask".
"""

from __future__ import annotations

import numpy as np

from reporter.core import tasks
from reporter.core.errors import InputError
from reporter.measure import metrics as qmetrics
from reporter.measure.kinds.base import LabelSource, TaskReading, shape, values_per_sample
from reporter.measure.kinds.regression import Regression
from reporter.measure.scoring import BOOTSTRAP_DENSE, Score, Scored, resample_weights
from reporter.measure.signature import Port
from reporter.measure.task import MASK_TARGET, Task, columns

MASK_IOU = "mask IoU"  # the mask kind's main metric


class Mask(Regression):
    """Values in [0, 1] judged as a mask (value >= threshold) against the targets' (target >= MASK_TARGET)."""

    name = "mask"
    words = "a regression of a mask"
    record = tasks.Record("regression")
    main_metric = MASK_IOU
    paired_test = tasks.BOOTSTRAP
    accuracy_label = "Mask IoU"
    share_metric = MASK_IOU
    plain_points = False
    unit = "pixels"

    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        # Any op when --task names the kind (the user knows its values are a mask's); read from the labels, only a
        # sigmoid or softmax is one (reporter.measure.kinds.reading decides that before it asks here).
        y, what = np.asarray(labels.y), labels.what
        if values_per_sample(y) != port.size or not (
                y.size and np.all(np.isfinite(y)) and y.min() >= 0 and y.max() <= 1):
            raise InputError(labels.source, f"--task {self.name}: '{what}' must hold targets in [0, 1] of output"
                                            f" {port.name}'s shape {shape(port)} ({port.size} values per sample); it"
                                            f" has shape {y.shape}{_range(y)}")
        values = "0/1" if np.isin(y, (0, 1)).all() else "in [0, 1]"
        op = {"LOGISTIC": "a sigmoid", "SOFTMAX": "a softmax"}.get(made_by, made_by or "its op")
        dims = tuple(getattr(made_by, "shape", ()))[1:]
        where = f" at every position of {dims}, reshaped to {shape(port)}," if dims and dims != shape(port) else ""
        return TaskReading(y.astype(np.float32), Task(self, None, threshold),
                           f"output {port.name} is made by {op}{where} and '{what}' holds targets {values} of its"
                           f" shape {shape(port)}: a mask, each variant's output measured against the targets (MAE,"
                           f" RMSE, R²) and against float's, and its mask (values at least {threshold:g}) against the"
                           f" targets' (at least {MASK_TARGET:g}) by mask IoU")

    def predict(self, task: Task, out: np.ndarray) -> np.ndarray:
        """(N, values) bool: each value in the mask where its output is at least the threshold."""
        with np.errstate(invalid="ignore"):
            return columns(out) >= task.threshold

    def score(self, task: Task, y: np.ndarray) -> Score:
        return MaskIoU(task, y)


def _range(y: np.ndarray) -> str:
    """", values a..b" of labels outside [0, 1], for a refusal ("" when they are within it or hold NaN or inf)."""
    if not y.size or not np.all(np.isfinite(y)) or (y.min() >= 0 and y.max() <= 1):
        return ""
    return f", values {float(y.min()):g}..{float(y.max()):g}"


def in_mask(task: Task, out: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(predicted, true), each (N, values) bool: the output at least the threshold, the targets `y` at least
    MASK_TARGET. A value whose output is NaN or inf is predicted wrong (the opposite of its target)."""
    out, truth = columns(out), columns(y) >= MASK_TARGET
    return np.where(np.isfinite(out), task.classes(out), ~truth), truth


class MaskIoU(Score):
    """A mask: IoU of the values at or above the threshold with the targets' mask, over every value of every
    sample, bootstrapped over whole samples like mean IoU (reporter.measure.metrics.mask_iou)."""

    bootstrapped = True

    def __init__(self, task: Task, y: np.ndarray):
        super().__init__(task, y, MASK_IOU)
        self.weights = resample_weights(len(y), BOOTSTRAP_DENSE)

    def counts(self, out) -> np.ndarray:
        """(n, 2): each sample's intersection and union."""
        return qmetrics.mask_counts(*in_mask(self.task, out, self.y))

    def value(self, out) -> float:
        return float(qmetrics.mask_iou(self.counts(out).sum(axis=0))[0])

    def measure(self, out) -> Scored:
        per = self.counts(out)
        return Scored(float(qmetrics.mask_iou(per.sum(axis=0))[0]), boot=qmetrics.mask_iou(self.weights @ per))


KIND = Mask()
