"""The mask kind: a regression whose output is a mask, also judged by mask IoU at the threshold.

Sigmoid or softmax values with targets 0/1 or in [0, 1] of the output's shape: compared with the targets and with
float, and judged by mask IoU (paired by a bootstrap over whole samples). Read from the labels only (--task does
not name it); report.json records it as "regression" with `model.main_metric` "mask IoU".
"""

from __future__ import annotations

import numpy as np

from reporter.core import tasks
from reporter.core.errors import InputError
from reporter.measure import metrics as qmetrics
from reporter.measure.kinds.base import Kind, LabelSource, TaskReading, shape, values_per_sample
from reporter.measure.kinds.regression import Regression
from reporter.measure.scoring import BOOTSTRAP_DENSE, Score, Scored, resample_weights
from reporter.measure.signature import Port
from reporter.measure.task import MASK_TARGET, Task, columns

MASK_IOU = "mask IoU"  # the mask kind's main metric


class Mask(Regression):
    """Values in [0, 1] judged as a mask (value >= threshold) against the targets' (target >= MASK_TARGET)."""

    name = "mask"
    words = "a regression of a mask"
    named = False
    record = tasks.Record("regression")
    main_metric = MASK_IOU
    paired_test = tasks.BOOTSTRAP
    accuracy_label = "Mask IoU"
    share_metric = MASK_IOU
    unit = "pixels"

    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        y, what = np.asarray(labels.y), labels.what
        op = {"LOGISTIC": "a sigmoid", "SOFTMAX": "a softmax"}.get(made_by)
        if op is None or values_per_sample(y) != port.size or not (
                y.size and np.all(np.isfinite(y)) and y.min() >= 0 and y.max() <= 1):
            raise InputError(labels.source, f"a mask: output {port.name} ({made_by or 'its op'}) must be made by a"
                                            f" sigmoid or a softmax and '{what}' hold targets in [0, 1] of its shape"
                                            f" {shape(port)} (it has shape {y.shape})")
        values = "0/1" if np.isin(y, (0, 1)).all() else "in [0, 1]"
        return TaskReading(y.astype(np.float32), Task(self, None, threshold),
                           f"output {port.name} is made by {op} and '{what}' holds targets {values} of its shape"
                           f" {shape(port)}: a mask, each variant's output measured against the targets (MAE, RMSE,"
                           f" R²) and against float's, and its mask (values at least {threshold:g}) against the"
                           f" targets' (at least {MASK_TARGET:g}) by mask IoU")

    @property
    def head(self) -> Kind:
        # A mask head is measured as a regression (mask IoU is the primary output's main metric only) and
        # recorded under the name report.json gives a mask, as `model.task` is.
        return tasks.of("regression")

    def predict(self, task: Task, out: np.ndarray) -> np.ndarray:
        """(N, values) bool: each value in the mask where its output is at least the threshold."""
        with np.errstate(invalid="ignore"):
            return columns(out) >= task.threshold

    def score(self, task: Task, y: np.ndarray) -> Score:
        return MaskIoU(task, y)


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
