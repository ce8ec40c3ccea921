"""The multi-label kind: one sigmoid unit per label. Up to judgement.MANY_LABELS labels per sample: exact-match accuracy
(every label right), paired by McNemar. More: judged per label, by micro-F1 over every label of every sample, its
interval and paired test a bootstrap over whole samples (exact match is then near 0 for any model, float included).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import numpy as np

from reporter.core import judgement as jd
from reporter.core import variants
from reporter.core.errors import InputError
from reporter.measure import metrics as qmetrics
from reporter.measure.kinds import reading
from reporter.measure.kinds.base import Kind, LabelSource, TaskReading
from reporter.measure.scoring import BOOTSTRAP_DENSE, Score, Scored, resample_weights
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
    plain_points = False  # "4.3 points of exact-match accuracy": not a classifier's accuracy
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

    def agreement(self, task: Task, out: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """Many labels: the share of each sample's labels on which `out` predicts what `ref` does (not all or none)."""
        if not per_label(task):
            return super().agreement(task, out, ref)
        return (bits(task, out) == bits(task, ref)).mean(axis=1)

    def correct(self, task: Task, out: np.ndarray, y: np.ndarray) -> Optional[np.ndarray]:
        """Many labels: None, no sample is right or wrong as a whole (micro-F1 is paired by a bootstrap)."""
        return None if per_label(task) else super().correct(task, out, y)

    def score(self, task: Task, y: np.ndarray) -> Score:
        return MicroF1(task, y) if per_label(task) else super().score(task, y)

    def predict(self, task: Task, out: np.ndarray) -> np.ndarray:
        return label_codes(bits(task, out))

    def scores(self, task: Task, out: np.ndarray) -> np.ndarray:
        return columns(out).astype(np.float64)

    def decode(self, task: Task, y: np.ndarray) -> np.ndarray:
        """The (N, labels) 0/1 rows behind `label_codes`."""
        raw = np.ascontiguousarray(y).view(np.uint8).reshape(len(y), -1)
        return np.unpackbits(raw, axis=1)[:, : task.num_classes]

    def metrics(self, task: Task, y: np.ndarray, out: np.ndarray, float_out: Optional[np.ndarray]):
        """Many labels: with micro-F1 as `main`, paired with float's output (what one output of several is judged by;
        the run's primary output gets it paired with every reference by reporter.measure.measurer)."""
        float_bits = None if float_out is None else bits(task, float_out)
        found = qmetrics.multilabel(task.decode(y), bits(task, out), float_bits, task.scores(out))
        if not per_label(task):
            return found
        score = MicroF1(task, y)
        mine = score.measure(out)
        paired = {} if float_out is None or float_out is out else \
            {variants.FLOAT: score.compare(mine, score.measure(float_out))}
        return dataclasses.replace(found, main=score.main(mine, paired))


def per_label(task: Task) -> bool:
    """The output has more labels per sample than judgement.MANY_LABELS: it is judged per label (micro-F1)."""
    return (task.num_classes or 0) > jd.MANY_LABELS


MICRO_F1 = "micro-F1"  # the main metric of a multi-label output with many labels


class MicroF1(Score):
    """Micro-F1 over every label of every sample, 2·TP / (2·TP + FP + FN) (scikit-learn's f1_score(average="micro")),
    bootstrapped over whole samples: each resample sums the samples' counts, never single labels."""

    bootstrapped = True

    def __init__(self, task: Task, y: np.ndarray):
        super().__init__(task, y, MICRO_F1)
        self.truth = KIND.decode(task, y).astype(bool)
        self.weights = _weights(len(y))

    def counts(self, out) -> np.ndarray:
        """(n, 2): each sample's 2·TP and 2·TP + FP + FN (a NaN output predicts no label)."""
        predicted = bits(self.task, out).astype(bool)
        tp = (predicted & self.truth).sum(axis=1)
        return np.stack([2 * tp, predicted.sum(axis=1) + self.truth.sum(axis=1)], axis=1).astype(np.int64)

    def value(self, out) -> float:
        return float(_f1(self.counts(out).sum(axis=0))[0])

    def measure(self, out) -> Scored:
        per = self.counts(out)
        return Scored(float(_f1(per.sum(axis=0))[0]), boot=_f1(self.weights @ per))


@functools.lru_cache(maxsize=4)
def _weights(n: int) -> np.ndarray:
    """The seeded bootstrap resamples of `n` samples (the same for every model and output), made once per size."""
    return resample_weights(n, BOOTSTRAP_DENSE)


def _f1(counts: np.ndarray) -> np.ndarray:
    """Micro-F1 of each row of summed counts (M, 2) from `MicroF1.counts`; 0 where no label is true or predicted
    (scikit-learn's zero_division=0)."""
    counts = np.asarray(counts, np.float64).reshape(-1, 2)
    return np.divide(counts[:, 0], counts[:, 1], out=np.zeros(len(counts)), where=counts[:, 1] > 0)


def bits(task: Task, out: np.ndarray) -> np.ndarray:
    """(N, labels) 0/1, each label where its output is at least the threshold (a NaN output: absent)."""
    return (columns(out) >= task.threshold).astype(np.uint8)


KIND = Multilabel()
