"""An output's task kind for a run: --task by output name, and each output of several read from its labels.

Reading a kind from an output and its labels is reporter.measure.kinds.reading's (`read_task`), each kind's own
check of labels the user named it for is its module's `recognise`.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from reporter.core import tasks
from reporter.core.errors import InputError, UsageError
from reporter.measure.kinds.base import LabelSource, TaskReading, shape
from reporter.measure.kinds.reading import read_task as read_kind
from reporter.measure.measurer import HeadSpec
from reporter.measure.signature import Port, Signature
from reporter.measure.task import BINARY_THRESHOLD, Task
from reporter.inputs.labels import Head
from reporter.inputs.settings import RunSettings

__all__ = ["LabelSource", "TaskReading", "forced_tasks", "head_spec", "read_task"]


def read_task(labels: LabelSource, port: Port, made_by: str, threshold: float = BINARY_THRESHOLD,
              forced: Optional[str] = None, metric: bool = False) -> TaskReading:
    """The output's task read from it and its labels (reporter.measure.kinds.reading.read_task). With the user's metric
    (`metric`) the labels are the metric's, as saved: missing, or of a shape that does not fit the output (keypoints
    for a heatmap), they are not read as the output's labels, and the output is compared with float (regression);
    labels the user named a --task for must fit it still."""
    if labels.y is None:
        if forced is not None and forced != "regression":
            raise InputError(labels.source, f"--task {forced}: output {port.name} has no labels ('{labels.what}')")
        return _against_float(port, f"output {port.name} has no labels ('{labels.what}' is not in the data)")
    try:
        return read_kind(labels, port, made_by, threshold, forced)
    except InputError:
        if not metric or forced is not None:
            raise
    y = np.asarray(labels.y)
    return _against_float(port, f"'{labels.what}' {tuple(y.shape[1:])} per sample does not fit output {port.name}"
                                f" {shape(port)}, so only your metric reads it")


def _against_float(port: Port, why: str) -> TaskReading:
    """An output the run compares with float only (regression against float's output), the user's metric scoring
    it: no labels of the output's."""
    return TaskReading(None, Task(tasks.of("regression")), f"{why}; each variant's output is compared with float's")


def forced_tasks(s: RunSettings, sig: Signature, model_path) -> dict[str, str]:
    """--task by output name: "KIND" alone names the primary output's (the only one's) task; "OUTPUT=KIND"
    must name an output. A --task the model's outputs contradict is a usage error (exit code 2) naming them."""
    given = s.tasks()
    names = [p.name for p in sig.outputs]
    unknown = [n for n in given if n and n not in names]
    if unknown:
        raise UsageError(f"--task {unknown[0]}={given[unknown[0]]}: {model_path} has no output {unknown[0]} (outputs:"
                         f" {', '.join(names)})")
    found = {n: k for n, k in given.items() if n}
    if "" in given:
        lead = s.primary_output or names[0]
        if len(names) > 1 and not s.primary_output:
            raise UsageError(f"--task {given['']}: {model_path} has {len(names)} outputs ({', '.join(names)}); name"
                             f" one: --task OUTPUT={given['']}, e.g. --task {names[0]}={given['']}")
        found.setdefault(lead, given[""])
    return found


def head_spec(head: Head, source: str, made_by: str, threshold: float, forced: Optional[str] = None,
              metric: bool = False) -> HeadSpec:
    """What an output of a model with several outputs means: from its labels (classes, binary sigmoid,
    regression), or without labels (or, with the user's metric, labels that do not fit it) from its width and the
    op that makes it (`made_by`): class scores, one sigmoid unit (LOGISTIC), or a value compared with float."""
    size, y = head.port.size, head.y
    if y is not None:
        reading = read_task(LabelSource(y, head.labels_are_classes, source, f"y_{head.port.name}"), head.port,
                            made_by, threshold, forced, metric)
        if reading.y is not None:
            return HeadSpec(head.port.name, head.port.key, reading.task.as_head(), reading.y, head.primary)
        y = None  # the metric's labels only: the output is read as one without labels
    if forced is not None:
        task = Task.of(tasks.of(forced), size, shape(head.port), threshold)
    elif size == 1 and made_by == "LOGISTIC":
        task = Task(tasks.of("binary"), 2, threshold)
    else:
        task = _unlabelled(head.port, made_by, threshold)
    return HeadSpec(head.port.name, head.port.key, task, y, head.primary)


def _unlabelled(port: Port, made_by: str, threshold: float) -> Task:
    """An output without labels, read from the op that makes it: a softmax holds class scores over its last axis
    (one class per sample, or per position of a spatial output: compared with float's class there), sigmoid units
    of a flat output are labels (one unit: binary); anything else (a linear box or landmark head, a sigmoid map) is
    a value compared with float's output as a regression (its error, R² against float). Never a classifier with as
    many classes as the output has values: a 27x27x4 box head is not 2,916 classes."""
    dims = shape(port)
    if made_by == "SOFTMAX" and dims and dims[-1] > 1:
        return Task.of(tasks.of("segmentation" if len(dims) > 1 else "classification"), port.size, dims)
    if made_by == "LOGISTIC" and port.size == 1:
        return Task(tasks.of("binary"), 2, threshold)
    if made_by == "LOGISTIC" and len(dims) == 1:
        return Task(tasks.of("multilabel"), port.size, threshold)
    return Task(tasks.of("regression"))
