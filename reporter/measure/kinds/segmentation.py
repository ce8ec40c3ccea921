"""The segmentation kind: class scores at every position (pixel, timestep), judged by mean IoU.

Mean IoU is paired by a bootstrap over whole samples (positions are not samples); its accuracy counts pixels.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.core.tasks import BOOTSTRAP
from reporter.measure import metrics as qmetrics
from reporter.measure.kinds import reading
from reporter.measure.kinds.base import Kind, LabelSource, TaskReading
from reporter.measure.scoring import BOOTSTRAP_DENSE, Score, Scored, resample_weights
from reporter.measure.signature import Port
from reporter.measure.task import NO_CLASS, Task
from reporter.model import figures
from reporter.model.bounds import SHARE, figure


@dataclass(frozen=True)
class SegmentationMetrics:
    """Segmentation's figures (report.json's `metrics.figures.segmentation`): IoU per class (None for a class
    neither in the labels nor predicted) and their mean over the others (as Keras MeanIoU), over pixels."""

    mean_iou: Optional[float] = figure(SHARE, None)
    iou_per_class: Optional[list[Optional[float]]] = figure(SHARE, None)


class Segmentation(Kind):
    """Dense classes: the last axis holds the classes, a label per position (class ids, or one-hot)."""

    name = "segmentation"
    words = "segmentation (a class at every position)"
    main_metric = "mean IoU"
    plain_points = False
    paired_test = BOOTSTRAP
    accuracy_label = "Pixel accuracy"
    unit = "pixels"
    per_class_title = "Per class, over pixels"
    per_class_columns = "precision / recall / F1 · IoU"
    sample_correct = False  # positions are not samples: mean IoU is paired by a bootstrap over whole samples

    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        return reading.dense_labels(labels, port, self, required=True)

    def detect(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> Optional[TaskReading]:
        return reading.dense_labels(labels, port, self)

    def classes_of(self, size: int, shape: tuple) -> int:
        return shape[-1] if shape else 1

    def predict(self, task: Task, out: np.ndarray) -> np.ndarray:
        """(N, positions) class ids, the top score at each position; NO_CLASS where a position's scores hold NaN
        or inf."""
        out = np.asarray(out)  # rows of (positions * classes), the classes last
        scores = out.reshape(len(out), -1, task.num_classes)
        found = scores.argmax(axis=-1).astype(np.int64)
        found[~np.isfinite(scores).all(axis=-1)] = NO_CLASS
        return found

    def metrics(self, task: Task, y: np.ndarray, out: np.ndarray, float_out: Optional[np.ndarray]):
        float_pred = None if float_out is None else task.classes(float_out)
        found = qmetrics.dense(y, task.classes(out), task.num_classes, float_pred)
        cm = np.asarray(found.confusion_matrix, np.int64).reshape(task.num_classes, task.num_classes)
        iou = iou_per_class(cm)
        mine = SegmentationMetrics(float(mean_iou(cm[None])[0]), [None if v is None else float(v) for v in iou])
        return dataclasses.replace(found, figures=figures.Figures({"segmentation": mine}))

    def score(self, task: Task, y: np.ndarray) -> Score:
        return MeanIoU(task, y)


class MeanIoU(Score):
    """Dense classes (per pixel or per timestep): mean IoU over the classes in the labels or the predictions."""

    bootstrapped = True

    def __init__(self, task: Task, y: np.ndarray):
        super().__init__(task, y, "mean IoU")
        self.weights = resample_weights(len(y), BOOTSTRAP_DENSE)

    def confusions(self, out) -> np.ndarray:
        """(n, classes * classes): each sample's pixel confusion matrix, flattened (rows: true)."""
        return qmetrics.per_sample_confusion(self.y, self.task.classes(out), self.task.num_classes)

    def value(self, out) -> float:
        k = self.task.num_classes
        return float(mean_iou(self.confusions(out).sum(axis=0).reshape(1, k, k))[0])

    def measure(self, out) -> Scored:
        per = self.confusions(out)
        k = self.task.num_classes
        boot = mean_iou((self.weights @ per).reshape(-1, k, k))
        return Scored(float(mean_iou(per.sum(axis=0).reshape(1, k, k))[0]), boot=boot)


def iou_per_class(cm: np.ndarray) -> list:
    """IoU of each class from a confusion matrix: TP / (TP + FP + FN); None where the union is empty."""
    cm = np.asarray(cm, np.float64)
    tp = np.diag(cm)
    union = cm.sum(axis=0) + cm.sum(axis=1) - tp
    return [None if u == 0 else float(t / u) for t, u in zip(tp, union)]


def mean_iou(cms: np.ndarray) -> np.ndarray:
    """Mean IoU of each confusion matrix in `cms` (M, k, k), over the classes whose union is not empty
    (Keras MeanIoU); 0 when every union is empty."""
    cms = np.asarray(cms, np.float64)
    tp = np.diagonal(cms, axis1=1, axis2=2)
    union = cms.sum(axis=1) + cms.sum(axis=2) - tp
    valid = union > 0
    iou = np.divide(tp, union, out=np.zeros_like(tp), where=valid)
    count = valid.sum(axis=1)
    return np.divide(iou.sum(axis=1), count, out=np.zeros(len(cms)), where=count > 0)


KIND = Segmentation()
# report.json's metrics.figures.segmentation; files written before it kept the two figures in `metrics` itself
figures.register("segmentation", SegmentationMetrics,
                 replaces={"mean_iou": "mean_iou", "iou_per_class": "iou_per_class"})
