"""Reading an output's task (classification, binary, multi-label, segmentation, regression) from its labels.

The task follows from the output's shape, the op that makes it and its labels, or is the one the user named
with --task, checked against them. Every contradiction is an InputError naming the labels and the output.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.core.errors import InputError
from reporter.measure.measurer import HeadSpec
from reporter.measure.signature import Port, Signature
from reporter.measure.task import BINARY_THRESHOLD, Task, binary_sigmoid_labels, label_codes
from reporter.run.labels import Head
from reporter.run.settings import RunSettings


@dataclass(frozen=True)
class LabelSource:
    """An output's labels as the data give them, and how a message names them."""

    y: np.ndarray
    are_classes: bool  # class ids (or rows of them), not float targets
    source: str  # the data the labels come from
    what: str  # the array: "y" or "y_<output name>"


@dataclass(frozen=True)
class TaskReading:
    """What an output's labels say: the labels as the measurements compare them, the task, and why."""

    y: np.ndarray
    task: Task
    reason: str
    note: str = ""  # how the labels were read when not as given


def read_task(labels: LabelSource, port: Port, made_by: str, threshold: float = BINARY_THRESHOLD,
              forced: Optional[str] = None) -> TaskReading:
    """The task of an output from its shape, the op that makes it (`made_by`: SOFTMAX, LOGISTIC, ...) and its
    `labels`, or the task the user named (`forced`, one of TASK_KINDS), checked against them:
    * class scores at every position (output (N, ..., k)) with a label per position (class ids, or one-hot
      along the last axis): dense classes (segmentation), measured by pixel accuracy and mean IoU;
    * k sigmoid units (LOGISTIC) with rows of 0/1 labels: multi-label, each label at >= `threshold`, no argmax;
    * one-hot rows or class ids for k class scores: classification; 0/1 ids for one unit: a binary sigmoid;
    * whole-number float labels for a classifier: class ids, with a note;
    * labels that contradict the output (multi-hot rows or fractions for a softmax) are an error naming it;
    * other float targets: the output is compared with float (regression)."""
    name, y, source, what = port.name, labels.y, labels.source, labels.what
    if forced is not None:
        return _forced_task(forced, labels, port, threshold)
    dense = _dense_labels(labels, port)
    if dense is not None:
        return dense
    if y.ndim > 2:
        raise InputError(source, f"'{what}' has shape {y.shape} but output {name} has shape"
                                 f" {_shape(port)}: expected one label per sample, or one per position")
    return _read_flat(labels, port, made_by, threshold)


def _read_flat(labels: LabelSource, port: Port, made_by: str, threshold: float) -> TaskReading:
    y, labels_are_classes, source, what = labels.y, labels.are_classes, labels.source, labels.what
    size, name = port.size, port.name
    softmax = made_by == "SOFTMAX"
    if y.ndim == 2:
        rows = np.asarray(y)
        binary_values = bool(np.isin(rows, (0, 1)).all())
        one_hot = binary_values and bool((rows.sum(axis=1) == 1).all())
        if made_by == "LOGISTIC" and size == rows.shape[1] > 1 and binary_values:
            return _multilabel(rows, size, threshold, "sigmoid units")
        if binary_values and not one_hot and size > 1:
            raise InputError(source, f"'{what}' holds multi-hot rows (several labels per sample) but output {name} is"
                                     f" {'a softmax' if softmax else 'not a sigmoid per label'}: one label per sample"
                                     " (or --task multilabel)")
        if not binary_values:
            raise InputError(source, f"'{what}' holds rows of shape {rows.shape} that are not one-hot for output"
                                     f" {name} of shape {_shape(port)}")
        y = rows.argmax(axis=1).astype(np.int64)  # one-hot rows: class ids
        reason = f"{size} class scores and one-hot labels: the top score is the class"
        return TaskReading(y, Task(_classes(y, size, source, what)), reason)
    note = ""
    if not labels_are_classes:
        whole = bool(np.all(np.isfinite(y)) and np.all(y == np.round(y)))
        fits = whole and y.size and y.min() >= 0 and (y.max() < size if size > 1 else y.max() <= 1)
        if fits and (size > 1 or made_by == "LOGISTIC"):
            y, labels_are_classes = y.astype(np.int64), True
            note = (f"'{what}' holds whole numbers stored as floats; output {name} is a classifier, so they were read"
                    " as class ids")
        elif softmax and size > 1:
            raise InputError(source, f"'{what}' holds values that are not class ids (e.g. {_example(y)}) but output"
                                     f" {name} is a softmax classifier: labels must be whole numbers 0..{size - 1}")
    if binary_sigmoid_labels(size, y, labels_are_classes):
        return TaskReading(y, Task(2, binary_sigmoid=True, threshold=threshold),
                           f"one output unit and 0/1 labels: class 1 where it is at least {threshold:g}", note)
    if size <= 1 or not labels_are_classes:
        why = "float targets" if not labels_are_classes else "one output unit and labels other than 0/1"
        return TaskReading(y, Task(None), f"{why}: each variant's output is compared with float's", note)
    return TaskReading(y, Task(_classes(y, size, source, what)),
                       f"{size} class scores and class-id labels: the top score is the class", note)


def _multilabel(rows, size, threshold, what: str) -> TaskReading:
    return TaskReading(label_codes(np.asarray(rows).astype(np.uint8)), Task(size, multilabel=True, threshold=threshold),
                       f"{size} {what} and rows of 0/1 labels: each label is predicted where its unit is at least"
                       f" {threshold:g}, and a sample is right when all its labels are")


def _shape(port: Port) -> tuple:
    return tuple(port.allocated or port.shape)[1:]


def _dense_labels(labels: LabelSource, port: Port, required: bool = False) -> Optional[TaskReading]:
    """Class scores at every position (output (N, *positions, k), k > 1) and a label for each position: class
    ids (N, *positions), or one-hot (N, *positions, k). None when the output or the labels are not of that
    kind (an error instead when `required`)."""
    source, what = labels.source, labels.what
    shape = _shape(port)
    positions, k = shape[:-1], (shape[-1] if shape else 1)
    if len(shape) < 2 or k < 2:
        if required:
            raise InputError(source, f"--task segmentation: output {port.name} has shape {shape}; a dense output has"
                                     " class scores at every position, e.g. (height, width, classes)")
        return None
    y = np.asarray(labels.y)
    fits = lambda dims: len(dims) == len(positions) and all(p <= 0 or d == p for d, p in zip(dims, positions))  # noqa: E731
    if fits(y.shape[1:]):
        ids = y
    elif y.ndim == len(shape) + 1 and y.shape[-1] == k and fits(y.shape[1:-1]) and np.isin(y, (0, 1)).all() \
            and (y.sum(axis=-1) == 1).all():
        ids = y.argmax(axis=-1)
    else:
        if required:
            raise InputError(source, f"--task segmentation: '{what}' has shape {y.shape} but output {port.name} has"
                                     f" shape {shape}: expected class ids {('n',) + tuple(positions)} or one-hot"
                                     f" {('n',) + tuple(shape)}")
        return None
    whole = np.issubdtype(ids.dtype, np.integer) or bool(np.all(np.isfinite(ids)) and np.all(ids == np.round(ids)))
    if not whole:
        raise InputError(source, f"'{what}' holds values that are not class ids (e.g. {_example(ids)}) but output"
                                 f" {port.name} has class scores at every position")
    ids = ids.reshape(len(ids), -1).astype(np.int64)
    _classes(ids, k, source, what)
    where = "pixel" if len(positions) >= 2 else "position"
    return TaskReading(ids, Task(k, dense=True),
                       f"{k} class scores at every {where} and a label per {where}: the top score is the {where}'s"
                       " class; measured by pixel accuracy and mean IoU over the classes present")


def _forced_task(kind: str, labels: LabelSource, port: Port, threshold: float) -> TaskReading:
    """The task the user named with --task, with the labels checked against it."""
    y, source, what = labels.y, labels.source, labels.what
    name, size = port.name, port.size
    said = f"as --task {kind} says"
    if kind == "regression":
        return TaskReading(np.asarray(y, np.float32), Task(None), f"{said}: each variant's output is compared with"
                                                                  " float's")
    if kind == "segmentation":
        found = _dense_labels(labels, port, required=True)
        return dataclasses.replace(found, reason=f"{said}: " + found.reason)
    if kind == "multilabel":
        rows = np.asarray(y).reshape(len(y), -1) if np.asarray(y).ndim >= 2 else None
        if rows is None or rows.shape[1] != size or not np.isin(rows, (0, 1)).all():
            shown = np.asarray(y).shape
            raise InputError(source, f"--task multilabel: output {name} has {size} units but '{what}' has shape"
                                     f" {shown}: expected rows of {size} 0/1 labels")
        found = _multilabel(rows, size, threshold, "units")
        return dataclasses.replace(found, reason=f"{said}: " + found.reason)
    if kind == "binary":
        y = np.asarray(y)
        if size != 1 or y.ndim != 1 or not np.isin(y, (0, 1)).all():
            raise InputError(source, f"--task binary: output {name} must have one unit and '{what}' labels 0/1"
                                     f" (it has {size} unit(s), labels of shape {y.shape})")
        return TaskReading(y.astype(np.int64), Task(2, binary_sigmoid=True, threshold=threshold),
                           f"{said}: class 1 where the output is at least {threshold:g}")
    # classification
    if size < 2:
        raise InputError(source, f"--task classification: output {name} has one unit; use --task binary")
    reading = _read_flat(dataclasses.replace(labels, y=np.asarray(y)), port, "SOFTMAX", threshold)
    if not reading.task.classification or reading.task.multilabel:
        raise InputError(source, f"--task classification: '{what}' does not hold class ids or one-hot rows for"
                                 f" output {name}")
    return dataclasses.replace(reading, reason=f"{said}: the top score is the class")


def _classes(y: np.ndarray, size: int, source, what: str) -> int:
    if y.size and (y.min() < 0 or y.max() >= size):
        raise InputError(source, f"labels out of range: '{what}' holds {int(y.min())}..{int(y.max())} but the model"
                                 f" has {size} classes")
    return size


def _example(y: np.ndarray) -> str:
    odd = y[np.isfinite(y) & (y != np.round(y))] if np.issubdtype(y.dtype, np.floating) else y[:1]
    return f"{(odd[0] if odd.size else y.flat[0]):g}"


def forced_tasks(s: RunSettings, sig: Signature, model_path) -> dict[str, str]:
    """--task by output name: "KIND" alone names the primary output's (the only one's) task; "OUTPUT=KIND"
    must name an output."""
    given = s.tasks()
    names = [p.name for p in sig.outputs]
    unknown = [n for n in given if n and n not in names]
    if unknown:
        raise InputError(model_path, f"--task {unknown[0]}=...: the model has no output {unknown[0]} (outputs:"
                                     f" {', '.join(names)})")
    found = {n: k for n, k in given.items() if n}
    if "" in given:
        lead = s.primary_output or names[0]
        if len(names) > 1 and not s.primary_output:
            raise InputError(model_path, f"--task {given['']}: the model has {len(names)} outputs"
                                         f" ({', '.join(names)}); say which, e.g. --task {names[0]}={given['']}")
        found.setdefault(lead, given[""])
    return found


def head_spec(head: Head, source: str, made_by: str, threshold: float, forced: Optional[str] = None) -> HeadSpec:
    """What an output of a model with several outputs means: from its labels (classes, binary sigmoid,
    regression), or without labels from its width and the op that makes it (`made_by`): class scores, one
    sigmoid unit (LOGISTIC), or a value compared with float."""
    size = head.port.size
    y = head.y
    if y is not None:
        reading = read_task(LabelSource(y, head.labels_are_classes, source, f"y_{head.port.name}"), head.port,
                            made_by, threshold, forced)
        task, y = reading.task, reading.y
    elif forced is not None:
        shape = tuple(head.port.allocated or head.port.shape)[1:]
        task = {"regression": Task(None), "binary": Task(2, binary_sigmoid=True, threshold=threshold),
                "multilabel": Task(size, multilabel=True, threshold=threshold), "classification": Task(size),
                "segmentation": Task(shape[-1] if shape else 1, dense=True)}[forced]
    elif size == 1 and made_by == "LOGISTIC":
        task = Task(2, binary_sigmoid=True, threshold=threshold)
    elif size > 1 and made_by == "LOGISTIC":
        task = Task(size, multilabel=True, threshold=threshold)
    else:
        task = Task(size if size > 1 else None)
    return HeadSpec(head.port.name, head.port.key, task, y, head.primary)
