"""Reading an output's task (classification, binary, multi-label, segmentation, regression) from its labels.

The task follows from the output's shape, the op that makes it and its labels, or is the one the user named
with --task, checked against them. Every contradiction is an InputError naming the labels and the output.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.core import tasks
from reporter.core.errors import InputError
from reporter.measure.measurer import HeadSpec
from reporter.measure.signature import Port, Signature
from reporter.measure.task import BINARY_THRESHOLD, MASK_TARGET, TASK_KINDS, Task, binary_sigmoid_labels, label_codes
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
    * targets of the output's shape for a linear output (float, or 0/1 rows that are not one-hot), or float
      targets for sigmoid units: regression, measured against the targets (MAE, RMSE, R²) and against float;
    * targets with the values of a spatial output's shape (more than one axis: a mask, landmarks, a heatmap),
      whatever op makes it: regression; for sigmoid or softmax values and targets 0/1 or in [0, 1], a mask, also
      measured by mask IoU (the values at least `threshold` against the targets at least MASK_TARGET);
    * one label per sample for a linear output of more than two values that is only 0/1 or not whole, and
      rows or arrays of another shape than the output's, are an error naming the output, what fits it, what
      the labels are and the --task choices;
    * other float targets (one output unit): the output is compared with float (regression)."""
    name, y, source, what = port.name, labels.y, labels.source, labels.what
    if forced is not None:
        return _forced_task(forced, labels, port, threshold)
    dense = _dense_labels(labels, port)
    if dense is not None:
        return dense
    if y.ndim > 2:
        if _values_per_sample(y) == port.size:
            return _targets_of_its_shape(labels, port, made_by, threshold)
        raise InputError(source, f"'{what}' has shape {y.shape} ({_values_per_sample(y)} values per sample) but"
                                 f" output {name} has shape {_shape(port)}: expected {_expected(port)}{_CHOICES}")
    return _read_flat(labels, port, made_by, threshold)


def _targets_of_its_shape(labels: LabelSource, port: Port, made_by: str, threshold: float) -> TaskReading:
    """Targets with as many values per sample as the output (its shape, or the same values in another shape):
    regression whatever op makes the output (a linear output, sigmoid or softmax values, a heatmap). Sigmoid or
    softmax values with targets 0/1 or in [0, 1] are a mask, also judged by mask IoU at `threshold`."""
    y, what = np.asarray(labels.y), labels.what
    if _linear(made_by):
        return _regression(y, port, what)
    op = "a sigmoid" if made_by == "LOGISTIC" else "a softmax"
    if not (y.size and np.all(np.isfinite(y)) and y.min() >= 0 and y.max() <= 1):
        return _regression(y, port, what, why=f"is made by {op} and its targets are not all in [0, 1]")
    values = "0/1" if np.isin(y, (0, 1)).all() else "in [0, 1]"
    return TaskReading(y.astype(np.float32), Task(None, mask=True, threshold=threshold),
                       f"output {port.name} is made by {op} and '{what}' holds targets {values} of its shape"
                       f" {_shape(port)}: a mask, each variant's output measured against the targets (MAE, RMSE, R²)"
                       f" and against float's, and its mask (values at least {threshold:g}) against the targets'"
                       f" (at least {MASK_TARGET:g}) by mask IoU")


def _expected(port: Port) -> str:
    """What labels fit a spatial output, in a refusal: targets of its shape, and where the last axis may hold class
    scores (more than one value at every position) class ids or one-hot labels too."""
    shape = _shape(port)
    dims = lambda d: "(n, " + ", ".join(str(v) for v in d) + ")"  # noqa: E731
    targets = f"targets of its shape {dims(shape)} ({port.size} values per sample)"
    if len(shape) >= 2 and shape[-1] > 1:
        return f"{targets}, class ids {dims(shape[:-1])} or one-hot labels {dims(shape)}"
    return targets


# How every refusal of labels that cannot fit an output ends: the tasks the user may name instead.
_CHOICES = f" (or name the output's task: --task {'|'.join(TASK_KINDS)})"


def _linear(made_by: str) -> bool:
    """An output made by a linear op: neither class scores (SOFTMAX) nor sigmoid units (LOGISTIC)."""
    return made_by not in ("SOFTMAX", "LOGISTIC")


def _values_per_sample(y: np.ndarray) -> int:
    return int(np.prod(np.shape(y)[1:]))


def _regression(y: np.ndarray, port: Port, what: str, note: str = "",
                why: str = "is linear (no softmax or sigmoid)") -> TaskReading:
    """Targets of the output's shape for a linear output: regression, measured against them and against float."""
    return TaskReading(np.asarray(y, np.float32), Task(None), f"output {port.name} {why} and '{what}' holds"
                                      f" targets of its shape {_shape(port)}: regression, each variant's output"
                                      " measured against the targets (MAE, RMSE, R²) and against float's", note)


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
        if rows.shape[1] != size:
            raise InputError(source, f"'{what}' holds rows of shape {rows.shape} that do not fit output {name} of"
                                     f" shape {_shape(port)}: expected {size} values per sample{_CHOICES}")
        if made_by == "LOGISTIC" and not binary_values:  # sigmoid units (a [0, 1] reconstruction), float targets
            return _regression(rows, port, what, why="is made by sigmoid units and its targets are not 0/1")
        if _linear(made_by) and not one_hot:  # float or multi-hot targets of a linear output's width
            note = (f"'{what}' holds 0/1 rows that are not one-hot; output {name} is linear (no sigmoid), so they were"
                    " read as targets (regression); for labels say --task multilabel") if binary_values else ""
            return _regression(rows, port, what, note)
        if binary_values and not one_hot and size > 1:
            raise InputError(source, f"'{what}' holds multi-hot rows (several labels per sample) but output {name} is"
                                     f" {'a softmax' if softmax else 'not a sigmoid per label'}: one label per sample"
                                     " (or --task multilabel)")
        if not binary_values:
            raise InputError(source, f"'{what}' holds rows of shape {rows.shape} that are not one-hot for output"
                                     f" {name} ({made_by or 'its op'}) of shape {_shape(port)}{_CHOICES}")
        y = rows.argmax(axis=1).astype(np.int64)  # one-hot rows: class ids
        reason = f"{size} class scores and one-hot labels: the top score is the class"
        return TaskReading(y, Task(_classes(y, size, source, what)), reason)
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


def _refuse_flat_for_wide_linear(labels: LabelSource, port: Port, made_by: str) -> None:
    """One label per sample for a linear output of more than two values cannot be read without a word from the
    user when the labels are only 0/1 (as class ids they would name 2 of its classes: an anomaly flag against a
    reconstruction, say) or are not whole numbers (no task gives one float to many values)."""
    y, size = np.asarray(labels.y), port.size
    if size <= 2 or not _linear(made_by) or not y.size:
        return
    flags = bool(np.isin(y, (0, 1)).all())
    whole = bool(np.all(np.isfinite(y)) and np.all(y == np.round(y)))
    if flags or not whole:
        kind = "0/1 labels" if flags else "float values"
        raise InputError(labels.source, f"'{labels.what}' holds {kind}, one per sample, but output {port.name} is"
                                        f" {size} linear values of shape {_shape(port)} (no softmax): give targets"
                                        f" of that shape for regression, or class ids with --task classification"
                                        f"{_CHOICES}")


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
    """The task the user named with --task, with the labels checked against it: read as its registry entry says
    (reporter.core.tasks: values, class scores at every position, a sigmoid per label, one sigmoid unit, classes)."""
    y, source, what = labels.y, labels.source, labels.what
    name, size = port.name, port.size
    said = f"as --task {kind} says"
    entry = tasks.of(kind)
    if not entry.classes:
        y = np.asarray(y)
        if y.ndim == 0 or _values_per_sample(y) != size:
            raise InputError(source, f"--task {kind}: '{what}' has shape {y.shape} but output {name} has shape"
                                     f" {_shape(port)}: targets must have {size} value(s) per sample"
                                     f" (n, {', '.join(str(d) for d in _shape(port)) or 1})")
        found = _regression(y, port, what)
        return dataclasses.replace(found, reason=f"{said}: each variant's output is measured against the targets"
                                                 " (MAE, RMSE, R²) and against float's")
    if entry.dense:
        found = _dense_labels(labels, port, required=True)
        return dataclasses.replace(found, reason=f"{said}: " + found.reason)
    if entry.multilabel:
        rows = np.asarray(y).reshape(len(y), -1) if np.asarray(y).ndim >= 2 else None
        if rows is None or rows.shape[1] != size or not np.isin(rows, (0, 1)).all():
            shown = np.asarray(y).shape
            raise InputError(source, f"--task {kind}: output {name} has {size} units but '{what}' has shape"
                                     f" {shown}: expected rows of {size} 0/1 labels")
        found = _multilabel(rows, size, threshold, "units")
        return dataclasses.replace(found, reason=f"{said}: " + found.reason)
    if entry.binary_sigmoid:
        y = np.asarray(y)
        if size != 1 or y.ndim != 1 or not np.isin(y, (0, 1)).all():
            raise InputError(source, f"--task {kind}: output {name} must have one unit and '{what}' labels 0/1"
                                     f" (it has {size} unit(s), labels of shape {y.shape})")
        return TaskReading(y.astype(np.int64), Task(2, binary_sigmoid=True, threshold=threshold),
                           f"{said}: class 1 where the output is at least {threshold:g}")
    # classification
    if size < 2:
        raise InputError(source, f"--task {kind}: output {name} has one unit; use --task binary")
    reading = _read_flat(dataclasses.replace(labels, y=np.asarray(y)), port, "SOFTMAX", threshold)
    if not reading.task.classification or reading.task.multilabel:
        raise InputError(source, f"--task {kind}: '{what}' does not hold class ids or one-hot rows for"
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
        # A mask head is measured as a regression (mask IoU is the primary output's main metric only) and
        # recorded under the name report.json gives a mask, as `model.task` is.
        task, y = dataclasses.replace(reading.task, mask=False), reading.y
    elif forced is not None:
        shape = tuple(head.port.allocated or head.port.shape)[1:]
        task = Task.of(tasks.of(forced), size, shape, threshold)
    elif size == 1 and made_by == "LOGISTIC":
        task = Task(2, binary_sigmoid=True, threshold=threshold)
    elif size > 1 and made_by == "LOGISTIC":
        task = Task(size, multilabel=True, threshold=threshold)
    else:
        task = Task(size if size > 1 else None)
    return HeadSpec(head.port.name, head.port.key, task, y, head.primary)
