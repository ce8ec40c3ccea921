"""Reading an output's task kind from its shape, the op making it and its labels, or checking the one --task names.

The kind follows from the output and its labels (`read_task`), or is the one the user named with --task, which
that kind's `recognise` checks against them. Every contradiction is an InputError naming the labels and the
output. The readings several kinds share (flat labels, targets of the output's shape, labels per position) are
here; the kind a reading gives is asked of the registry (reporter.core.tasks) by name.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from reporter.core import judgement as jd
from reporter.core import tasks
from reporter.core.errors import InputError
from reporter.measure.kinds.base import (LabelSource, TaskReading, check_classes, choices, example, linear, shape,
                                         values_per_sample)
from reporter.measure.signature import Port
from reporter.measure.task import BINARY_THRESHOLD, Task, label_codes


def read_task(labels: LabelSource, port: Port, made_by: str, threshold: float = BINARY_THRESHOLD,
              forced: Optional[str] = None) -> TaskReading:
    """The task of an output from its shape, the op that makes it (`made_by`: SOFTMAX, LOGISTIC, ...) and its
    `labels`, or the task the user named (`forced`, a registered kind's name), checked against them; first each
    registered kind that knows its own output and labels (`Kind.detect`), then:
    * class scores at every position (output (N, ..., k)) with a label per position (class ids, or one-hot
      along the last axis): dense classes (segmentation), measured by pixel accuracy and mean IoU;
    * k sigmoid units (LOGISTIC) with rows of 0/1 labels: multi-label, each label at >= `threshold`, no argmax;
    * one-hot rows or class ids for k class scores: classification; 0/1 ids for one unit: a binary sigmoid;
    * whole-number float labels for a classifier: class ids, with a note;
    * labels that contradict the output (multi-hot rows or fractions for a softmax) are an error naming it;
    * targets of the output's shape for a linear output (float, or 0/1 rows that are not one-hot), or float
      targets for sigmoid units: regression, measured against the targets (MAE, RMSE, R²) and against float;
    * targets with the values of a spatial output's shape (more than one axis: a mask, landmarks, a heatmap),
      whatever op makes it: regression; for sigmoid or softmax values and targets 0/1 or in [0, 1], a mask, also
      measured by mask IoU (the values at least `threshold` against the targets at least MASK_TARGET);
    * the same for a sigmoid or softmax at every position (its own output has two axes or more, frames x pitches)
      that shape-only ops flatten into the output (`made_by` is found through them, reporter.measure.graph):
      flat targets of its size are a mask, never k independent labels nor a linear regression;
    * one label per sample for a linear output of more than two values that is only 0/1 or not whole, and
      rows or arrays of another shape than the output's, are an error naming the output, what fits it, what
      the labels are and the --task choices;
    * other float targets (one output unit): the output is compared with float (regression)."""
    name, y, source, what = port.name, labels.y, labels.source, labels.what
    if forced is not None:
        found = tasks.of(forced).recognise(labels, port, threshold, made_by)
        return dataclasses.replace(found, reason=f"as --task {forced} says: {found.reason}")
    for kind in tasks.kinds():  # a kind that knows its own output and labels (class scores at every position ...)
        found = kind.detect(labels, port, threshold, made_by)
        if found is not None:
            return found
    if y.ndim > 2 or (y.ndim == 2 and per_position(made_by) and values_per_sample(y) == port.size):
        if values_per_sample(y) == port.size:
            return _targets_of_its_shape(labels, port, made_by, threshold)
        raise InputError(source, f"'{what}' has shape {y.shape} ({values_per_sample(y)} values per sample) but"
                                 f" output {name} has shape {shape(port)}: expected {_expected(port)}{choices()}")
    return read_flat(labels, port, made_by, threshold)


def _targets_of_its_shape(labels: LabelSource, port: Port, made_by: str, threshold: float) -> TaskReading:
    """Targets with as many values per sample as the output (its shape, or the same values in another shape):
    regression whatever op makes the output (a linear output, sigmoid or softmax values, a heatmap). Sigmoid or
    softmax values with targets 0/1 or in [0, 1] are a mask, also judged by mask IoU at `threshold`."""
    y, what = np.asarray(labels.y), labels.what
    if linear(made_by):
        return regression(y, port, what)
    op = "a sigmoid" if made_by == "LOGISTIC" else "a softmax"
    if not (y.size and np.all(np.isfinite(y)) and y.min() >= 0 and y.max() <= 1):
        return regression(y, port, what, why=f"is made by {op} and its targets are not all in [0, 1]")
    return tasks.of("mask").recognise(labels, port, threshold, made_by)


def per_position(made_by: str) -> bool:
    """The op making an output is a sigmoid or softmax whose own output has two axes or more of more than one value
    (positions x units: frames x pitches, height x width), whatever shape-only ops then made of it."""
    dims = tuple(getattr(made_by, "shape", ()))[1:]
    return not linear(made_by) and sum(1 for d in dims if d > 1 or d < 0) >= 2


def _expected(port: Port) -> str:
    """What labels fit a spatial output, in a refusal: targets of its shape, and where the last axis may hold class
    scores (more than one value at every position) class ids or one-hot labels too."""
    dims_of = shape(port)
    dims = lambda d: "(n, " + ", ".join(str(v) for v in d) + ")"  # noqa: E731
    targets = f"targets of its shape {dims(dims_of)} ({port.size} values per sample)"
    if len(dims_of) >= 2 and dims_of[-1] > 1:
        return f"{targets}, class ids {dims(dims_of[:-1])} or one-hot labels {dims(dims_of)}"
    return targets


def regression(y: np.ndarray, port: Port, what: str, note: str = "",
               why: str = "is linear (no softmax or sigmoid)") -> TaskReading:
    """Targets of the output's shape for a linear output: regression, measured against them and against float."""
    return TaskReading(np.asarray(y, np.float32), Task(tasks.of("regression")),
                       f"output {port.name} {why} and '{what}' holds targets of its shape {shape(port)}: regression,"
                       " each variant's output measured against the targets (MAE, RMSE, R²) and against float's", note)


def read_flat(labels: LabelSource, port: Port, made_by: str, threshold: float) -> TaskReading:
    """One label, or one row of labels, per sample for a flat output."""
    y, labels_are_classes, source, what = labels.y, labels.are_classes, labels.source, labels.what
    size, name = port.size, port.name
    softmax = made_by == "SOFTMAX"
    if y.ndim == 2:
        rows = np.asarray(y)
        binary_values = bool(np.isin(rows, (0, 1)).all())
        one_hot = binary_values and bool((rows.sum(axis=1) == 1).all())
        if made_by == "LOGISTIC" and size == rows.shape[1] > 1 and binary_values:
            return label_sets(rows, size, threshold, "sigmoid units")
        if rows.shape[1] != size:
            raise InputError(source, f"'{what}' holds rows of shape {rows.shape} that do not fit output {name} of"
                                     f" shape {shape(port)}: expected {size} values per sample{choices()}")
        if made_by == "LOGISTIC" and not binary_values:  # sigmoid units (a [0, 1] reconstruction), float targets
            return regression(rows, port, what, why="is made by sigmoid units and its targets are not 0/1")
        if linear(made_by) and not one_hot:  # float or multi-hot targets of a linear output's width
            note = (f"'{what}' holds 0/1 rows that are not one-hot; output {name} is linear (no sigmoid), so they were"
                    " read as targets (regression); for labels say --task multilabel") if binary_values else ""
            return regression(rows, port, what, note)
        if binary_values and not one_hot and size > 1:
            raise InputError(source, f"'{what}' holds multi-hot rows (several labels per sample) but output {name} is"
                                     f" {'a softmax' if softmax else 'not a sigmoid per label'}: one label per sample"
                                     " (or --task multilabel)")
        if not binary_values:
            raise InputError(source, f"'{what}' holds rows of shape {rows.shape} that are not one-hot for output"
                                     f" {name} ({made_by or 'its op'}) of shape {shape(port)}{choices()}")
        y = rows.argmax(axis=1).astype(np.int64)  # one-hot rows: class ids
        reason = f"{size} class scores and one-hot labels: the top score is the class"
        return TaskReading(y, Task(tasks.of("classification"), check_classes(y, size, source, what)), reason)
    note = ""
    _refuse_flat_for_wide_linear(labels, port, made_by)
    if not labels_are_classes:
        whole = bool(np.all(np.isfinite(y)) and np.all(y == np.round(y)))
        fits = whole and y.size and y.min() >= 0 and (y.max() < size if size > 1 else y.max() <= 1)
        if fits and (size > 1 or made_by == "LOGISTIC"):
            y, labels_are_classes = y.astype(np.int64), True
            note = (f"'{what}' holds whole numbers stored as floats; output {name} is a classifier, so they were read"
                    " as class ids")
        elif softmax and size > 1:
            raise InputError(source, f"'{what}' holds values that are not class ids (e.g. {example(y)}) but output"
                                     f" {name} is a softmax classifier: labels must be whole numbers 0..{size - 1}")
    if _one_sigmoid_unit_labels(size, y, labels_are_classes):
        return TaskReading(y, Task(tasks.of("binary"), 2, threshold),
                           f"one output unit and 0/1 labels: class 1 where it is at least {threshold:g}", note)
    if size <= 1 or not labels_are_classes:
        why = "float targets" if not labels_are_classes else "one output unit and labels other than 0/1"
        return TaskReading(y, Task(tasks.of("regression")), f"{why}: each variant's output is compared with float's",
                           note)
    return TaskReading(y, Task(tasks.of("classification"), check_classes(y, size, source, what)),
                       f"{size} class scores and class-id labels: the top score is the class", note)


def _one_sigmoid_unit_labels(num_outputs: int, y: np.ndarray, labels_are_classes: bool) -> bool:
    """One output unit and integer labels that are all 0 or 1: the usual Keras binary head."""
    if num_outputs != 1 or not labels_are_classes or len(y) == 0:
        return False
    return bool(np.isin(np.unique(y), (0, 1)).all())


def _refuse_flat_for_wide_linear(labels: LabelSource, port: Port, made_by: str) -> None:
    """One label per sample for a linear output of more than two values cannot be read without a word from the
    user when the labels are only 0/1 (as class ids they would name 2 of its classes: an anomaly flag against a
    reconstruction, say) or are not whole numbers (no task gives one float to many values)."""
    y, size = np.asarray(labels.y), port.size
    if size <= 2 or not linear(made_by) or not y.size:
        return
    flags = bool(np.isin(y, (0, 1)).all())
    whole = bool(np.all(np.isfinite(y)) and np.all(y == np.round(y)))
    if flags or not whole:
        kind = "0/1 labels" if flags else "float values"
        raise InputError(labels.source, f"'{labels.what}' holds {kind}, one per sample, but output {port.name} is"
                                        f" {size} linear values of shape {shape(port)} (no softmax): give targets"
                                        f" of that shape for regression, or class ids with --task classification"
                                        f"{choices()}")


def label_sets(rows, size, threshold, what: str) -> TaskReading:
    """Rows of 0/1 labels for `size` sigmoid units: multi-label, the rows kept as one code each."""
    judged = (f"judged per label by micro-F1 over every label of every sample (more than {jd.MANY_LABELS} labels:"
              " a sample with all of them right is rare for any model)") if size > jd.MANY_LABELS else \
        "a sample is right when all its labels are"
    return TaskReading(label_codes(np.asarray(rows).astype(np.uint8)), Task(tasks.of("multilabel"), size, threshold),
                       f"{size} {what} and rows of 0/1 labels: each label is predicted where its unit is at least"
                       f" {threshold:g}, and {judged}")


def dense_labels(labels: LabelSource, port: Port, kind: tasks.TaskKind,
                 required: bool = False) -> Optional[TaskReading]:
    """Class scores at every position (output (N, *positions, k), k > 1) and a label for each position: class
    ids (N, *positions), or one-hot (N, *positions, k), read as `kind`. None when the output or the labels are
    not of that kind (an error instead when `required`)."""
    source, what = labels.source, labels.what
    dims = shape(port)
    positions, k = dims[:-1], (dims[-1] if dims else 1)
    if len(dims) < 2 or k < 2:
        if required:
            raise InputError(source, f"--task {kind.name}: output {port.name} has shape {dims}; a dense output has"
                                     " class scores at every position, e.g. (height, width, classes)")
        return None
    y = np.asarray(labels.y)
    fits = lambda d: len(d) == len(positions) and all(p <= 0 or a == p for a, p in zip(d, positions))  # noqa: E731
    if fits(y.shape[1:]):
        ids = y
    elif y.ndim == len(dims) + 1 and y.shape[-1] == k and fits(y.shape[1:-1]) and np.isin(y, (0, 1)).all() \
            and (y.sum(axis=-1) == 1).all():
        ids = y.argmax(axis=-1)
    else:
        if required:
            raise InputError(source, f"--task {kind.name}: '{what}' has shape {y.shape} but output {port.name} has"
                                     f" shape {dims}: expected class ids {('n',) + tuple(positions)} or one-hot"
                                     f" {('n',) + tuple(dims)}")
        return None
    whole = np.issubdtype(ids.dtype, np.integer) or bool(np.all(np.isfinite(ids)) and np.all(ids == np.round(ids)))
    if not whole:
        raise InputError(source, f"'{what}' holds values that are not class ids (e.g. {example(ids)}) but output"
                                 f" {port.name} has class scores at every position")
    ids = ids.reshape(len(ids), -1).astype(np.int64)
    check_classes(ids, k, source, what)
    where = "pixel" if len(positions) >= 2 else "position"
    return TaskReading(ids, Task(kind, k),
                       f"{k} class scores at every {where} and a label per {where}: the top score is the {where}'s"
                       " class; measured by pixel accuracy and mean IoU over the classes present")
