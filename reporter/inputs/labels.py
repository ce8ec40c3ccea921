"""The labels: read from their arrays (class ids, rows, or float targets) and matched to the model's outputs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from reporter.core import tasks
from reporter.core.errors import InputError
from reporter.measure.signature import Port, Signature
from reporter.model.data import Dataset


def read_labels(spec, y_raw: np.ndarray, what: str = "y") -> tuple[np.ndarray, bool]:
    """Class ids from integer labels; rows (one-hot or multi-hot) as they are, for `read_task` to read against
    the output; float targets stay as they are. An axis of length 0 after the samples' (no label in a row) is a
    InputError naming the array."""
    if 0 in y_raw.shape[1:]:
        raise InputError(spec, f"'{what}' has shape {tuple(y_raw.shape)}: an axis of length 0, so it holds no label")
    if y_raw.ndim >= 3 or (y_raw.ndim == 2 and y_raw.shape[1] > 1):  # rows, or a label per position (dense)
        if np.issubdtype(y_raw.dtype, np.integer) or np.issubdtype(y_raw.dtype, np.bool_):
            return y_raw.astype(np.int64), True
        if np.issubdtype(y_raw.dtype, np.floating):
            return y_raw, y_raw.ndim == 2
        raise InputError(spec, f"'{what}' has unsupported type {y_raw.dtype}")
    if y_raw.ndim == 2:
        y_raw = y_raw[:, 0]
    if y_raw.ndim != 1:
        raise InputError(spec, f"'{what}' must be class ids or one-hot rows, got shape {y_raw.shape}")
    if np.issubdtype(y_raw.dtype, np.integer) or np.issubdtype(y_raw.dtype, np.bool_):
        return y_raw.astype(np.int64), True
    if np.issubdtype(y_raw.dtype, np.floating):
        return y_raw.astype(np.float32), False
    raise InputError(spec, f"'{what}' has unsupported type {y_raw.dtype}")


@dataclass(frozen=True)
class Head:
    """One output of a model with several outputs, with its labels when the data have them."""

    port: Port
    y: Optional[np.ndarray]
    labels_are_classes: bool
    primary: bool


def bind_labels(data: Dataset, signature: Signature, model_path, primary: Optional[str],
                metric: bool = False) -> tuple[Dataset, list[Head]]:
    """The labels matched to the model's outputs by name. One output: `y` (or `y_<its name>`), no heads.
    Several: `y_<output name>` for each labelled output (a head without labels is compared with float);
    the primary output (`primary`, else the first labelled) gives `data.y`. A label array that names no
    output is an error naming the outputs and the arrays found. With the user's metric (`metric`) labels are
    optional: without them (or with one `y` for several outputs, the metric's as given) `data.y` is None and
    every output is compared with float; the metric gets the labels as saved."""
    outputs = signature.outputs
    names = [p.name for p in outputs]
    found = ", ".join(f"y_{n}" if n else "y" for n in data.labels)
    if not data.labels and not metric:
        raise InputError(data.source, "no array 'y' or 'y_<output name>' (labels), and no --metric to score the"
                                      " outputs without them")
    if metric and (not data.labels or (len(outputs) > 1 and list(data.labels) == [""])):
        return _unlabelled(data, signature, model_path, primary)
    if len(outputs) == 1:
        joined = _joined_labels(data, outputs[0])
        if joined is not None:  # several label arrays for one output (a detector's y_boxes and y_classes)
            return dataclasses.replace(data, y=joined, labels_are_classes=False), []
        if primary is not None and primary != names[0]:
            raise InputError(model_path, f"--primary-output {primary}: the model has one output, {names[0]}")
        if len(data.labels) == 1 and next(iter(data.labels)) in ("", names[0]):
            y, classes = next(iter(data.labels.values()))
            return dataclasses.replace(data, y=y, labels_are_classes=classes), []
        raise InputError(data.source, f"the model {Path(model_path).name} has one output, {names[0]}; expected labels"
                                      f" y, found {found}")
    unknown = [n for n in data.labels if n not in names]
    if unknown:
        raise InputError(data.source, f"the model {Path(model_path).name} has {len(names)} outputs: {', '.join(names)};"
                                      f" expected label arrays y_<output name> (any may be left out), found {found}")
    if primary is not None and primary not in data.labels:
        what = "has no labels" if primary in names else f"is not an output (outputs: {', '.join(names)})"
        raise InputError(model_path, f"--primary-output {primary} {what}")
    lead = primary or next(n for n in names if n in data.labels)
    heads = [Head(p, *(data.labels[p.name] if p.name in data.labels else (None, False)), primary=p.name == lead)
             for p in outputs]
    y, classes = data.labels[lead]
    return dataclasses.replace(data, y=y, labels_are_classes=classes), heads


def _unlabelled(data: Dataset, signature: Signature, model_path, primary: Optional[str]) -> tuple[Dataset, list[Head]]:
    """No labels for any output (the user's metric scores them as it likes): `data.y` None, and for several outputs
    every head without labels, the primary one `primary` (else the first)."""
    outputs = signature.outputs
    names = [p.name for p in outputs]
    if primary is not None and primary not in names:
        raise InputError(model_path, f"--primary-output {primary} is not an output (outputs: {', '.join(names)})")
    data = dataclasses.replace(data, y=None, labels_are_classes=False)
    if len(outputs) == 1:
        return data, []
    lead = primary or names[0]
    return data, [Head(p, None, False, primary=p.name == lead) for p in outputs]


def _joined_labels(data: Dataset, port: Port) -> Optional[np.ndarray]:
    """The label arrays as one, when a task kind reads them so for `port` (the one port that stands for a detector's
    outputs); None otherwise."""
    return next((y for y in (kind.join_labels(data.labels, port, data.source) for kind in tasks.kinds())
                 if y is not None), None)
