"""A task kind of a user's own, as one module: a classifier judged by top-3 accuracy (tests/test_task_kinds.py).

A sample is right when its label is among the three highest scores; the share of samples right is the main
metric, so two models are paired sample by sample (McNemar). Registered in one line:
`reporter.measure.kinds.register(top3_kind.KIND)`."""

from __future__ import annotations

import dataclasses

import numpy as np

from reporter.core.errors import InputError
from reporter.measure.kinds.classification import Classification
from reporter.measure.task import columns

K = 3


class TopThree(Classification):
    """Class scores with class-id labels, as a classifier reads them; right when the label is in the top 3."""

    name = "top3"
    words = "a top-3 classifier"
    main_metric = "top-3 accuracy"
    accuracy_label = "Top-3 accuracy"
    share_metric = "top-3 accuracy"

    def recognise(self, labels, port, threshold, made_by=""):
        if port.size <= K:
            raise InputError(labels.source, f"--task {self.name}: output {port.name} has {port.size} class scores;"
                                            f" top-{K} accuracy needs more than {K}")
        return dataclasses.replace(super().recognise(labels, port, threshold, made_by),
                                   reason=f"a sample is right when its class is among the {K} highest scores")

    def correct(self, task, out, y):
        best = np.argsort(columns(out), axis=1, kind="stable")[:, ::-1][:, :K]
        return np.any(best == np.asarray(y)[:, None], axis=1) & np.isfinite(columns(out)).all(axis=1)

    def metrics(self, task, y, out, float_out):
        # The classifier's metrics, with `accuracy` the kind's own share (what the verdicts read beside McNemar).
        found = super().metrics(task, y, out, float_out)
        return dataclasses.replace(found, accuracy=float(np.mean(task.correct(out, y))))


KIND = TopThree()
