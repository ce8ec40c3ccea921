"""A task kind of a user's own, as one module: a classifier judged by top-3 accuracy (tests/test_task_kinds.py).

A sample is right when its label is among the three highest scores; the share of samples right is the main
metric, so two models are paired sample by sample (McNemar). Registered in one line:
`reporter.measure.kinds.register(top3_kind.KIND)`."""

from __future__ import annotations

import dataclasses

import numpy as np

from reporter.core.errors import InputError
from reporter.measure.kinds import reading
from reporter.measure.kinds.base import Kind
from reporter.measure.task import Task, columns

K = 3


class TopThree(Kind):
    name = "top3"
    words = "a top-3 classifier"
    main_metric = "top-3 accuracy"
    accuracy_label = "Top-3 accuracy"
    share_metric = "top-3 accuracy"

    def recognise(self, labels, port, threshold, made_by=""):
        if port.size <= K:
            raise InputError(labels.source, f"--task {self.name}: output {port.name} has {port.size} class scores;"
                                            f" top-{K} accuracy needs more than {K}")
        found = reading.read_flat(labels, port, "SOFTMAX", threshold)
        if not found.task.classification:
            raise InputError(labels.source, f"--task {self.name}: '{labels.what}' does not hold class ids for output"
                                            f" {port.name}")
        return dataclasses.replace(found, task=Task(self, found.task.num_classes),
                                   reason=f"a sample is right when its class is among the {K} highest scores")

    def correct(self, task, out, y):
        best = np.argsort(columns(out), axis=1, kind="stable")[:, ::-1][:, :K]
        return np.any(best == np.asarray(y)[:, None], axis=1) & np.isfinite(columns(out)).all(axis=1)

    def metrics(self, task, y, out, float_out):
        # The classifier's metrics, with `accuracy` the kind's own share (what the verdicts read beside McNemar).
        found = super().metrics(task, y, out, float_out)
        return dataclasses.replace(found, accuracy=float(np.mean(task.correct(out, y))))


KIND = TopThree()
