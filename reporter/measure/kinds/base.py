"""The task-kind protocol's behaviour (`Kind`), what a reading of labels gives (`TaskReading`), and helpers.

A kind module subclasses `Kind`, sets what reporter.core.tasks.TaskKind declares (name, words, record, main
metric ...), implements `recognise`, `predict` and `metrics` where a classifier's defaults do not fit, and is
registered in one line (reporter.measure.kinds). The defaults below are a classifier's (class scores, the top
score is the class, accuracy paired by McNemar). A kind registered from outside quant-report is called through
reporter.measure.task.Task, which contains its failures and checks its answers (a number must be a finite real).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from reporter.core import tasks
from reporter.core.errors import InputError
from reporter.measure import metrics as qmetrics
from reporter.measure.scoring import Score
from reporter.measure.signature import Port
from reporter.measure.task import Task, class_scores, top_class


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


@dataclass(frozen=True)
class Joined:
    """Several outputs of a model read as one by a kind (a detector's four postprocess outputs): the one port that
    stands for them, and how a run's rows of those outputs (by tensor index) pack into one array per model."""

    port: Port
    pack: Callable[[dict], np.ndarray]


EXAMPLE_SOURCE = "synthetic.npz"  # the data an example's refusal names


@dataclass(frozen=True)
class Example:
    """A kind's synthetic output and its labels for the conformance checks (reporter.testing.check_kind, which calls
    it `Case`), as a run hands them to a kind: the output's `shape` (without the batch)
    and the op making it, the labels `y` as the data give them, and two models' raw outputs on the same samples
    (`out`: float's; `other`: a second model's, as a quantized one differs). `port`: the output as evaluation reads it
    (None: one output of `shape`). `arrays`: label arrays by name instead of `y` (`{"boxes": ..., "classes": ...}`
    for y_boxes and y_classes), joined into one as a run joins them (the first registered kind whose `join_labels`
    takes them)."""

    name: str
    shape: tuple
    made_by: str
    y: Optional[np.ndarray]
    out: np.ndarray
    other: np.ndarray
    port: Optional[object] = None
    labels_are_classes: Optional[bool] = None  # None: integer labels are classes
    arrays: Optional[dict] = None

    def port_of(self):
        from reporter.measure.signature import Port

        if self.port is not None:
            return self.port
        return Port("out", "output_0", 0, (-1, *self.shape), "float32", allocated=(1, *self.shape))

    def labels(self):
        """The labels as a run hands them to a kind (reporter.measure.kinds.base.LabelSource); None when no
        registered kind joins `arrays`."""
        from reporter.core import tasks

        y = self.y
        if self.arrays is not None:
            given = {name: (a, np.issubdtype(np.asarray(a).dtype, np.integer)) for name, a in self.arrays.items()}
            y = next((found for found in (k.join_labels(given, self.port_of(), EXAMPLE_SOURCE) for k in tasks.kinds())
                      if found is not None), None)
            if y is None:
                return None
        classes = np.issubdtype(y.dtype, np.integer) if self.labels_are_classes is None else self.labels_are_classes
        return LabelSource(y, bool(classes), EXAMPLE_SOURCE, "y")


class Kind(tasks.TaskKind):
    """One kind of output: how its labels are recognised, its outputs read and measured. Stateless: every method
    takes the `Task` (the kind, the classes, the threshold) it reads for."""

    # A sample is right or wrong as a whole: `correct` is per sample and the main metric is paired by McNemar.
    # False: positions or values are judged (mean IoU, mask IoU), paired by a bootstrap over whole samples.
    sample_correct: bool = True

    # --- recognising ------------------------------------------------------------------------------------
    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        """The output `port` (made by op `made_by`, "" when unknown) and its `labels` read as this kind: the
        labels as the measurements compare them, the task and why (after "as --task KIND says: "). An InputError
        saying why not, naming the labels and the output, when they are not of this kind."""
        raise NotImplementedError

    def detect(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> Optional[TaskReading]:
        """The reading of an output and its labels as this kind when --task names none and they can only be of this
        kind; None to leave them to the other kinds and to the shared reading (reporter.measure.kinds.reading)."""
        return None

    def classes_of(self, size: int, shape: tuple) -> Optional[int]:
        """The classes of an output of `size` values and `shape` (without the batch), read without labels."""
        return size

    def joins(self, model: bytes, signature) -> Optional[Joined]:
        """For a kind whose output is several outputs of the model (a detector's boxes, classes, scores and count):
        how they are read as one (reporter.measure.evaluate asks every kind); None, the default, for the others."""
        return None

    def join_labels(self, labels: dict, port: Port, source) -> Optional[np.ndarray]:
        """For the one port `joins` gave: the label arrays `labels` ({output name: (y, classes)}, e.g. y_boxes and
        y_classes) as one array, one row per sample (an InputError naming the array that does not fit); None, the
        default, for a port that is not this kind's."""
        return None

    def parts(self, model: bytes, out: np.ndarray) -> Optional[dict]:
        """For the outputs `joins` read as one: each of them, by signature key, as (what it is, the values of the
        packed output `out` that it holds, flat), for measurements of one output (its int8 range's clipping);
        None, the default, for a kind that reads one output."""
        return None

    def examples(self, rng: np.random.Generator, n: int) -> list[Example]:
        """Synthetic outputs and labels of this kind's own shape, `n` samples drawn from `rng`, for the conformance
        checks (reporter.testing.check_kind) when no shared case fits (a detector's packed outputs, heatmaps); []."""
        return []

    @property
    def head(self) -> "Kind":
        """The kind one output of a model with several outputs is measured as (itself, unless it says)."""
        return self

    # --- reading outputs --------------------------------------------------------------------------------
    def predict(self, task: Task, out: np.ndarray) -> np.ndarray:
        """One comparable value per sample (a class id, a label set as one code) or per position (N, positions);
        NO_CLASS where the output holds NaN or inf."""
        return top_class(out)

    def scores(self, task: Task, out: np.ndarray) -> np.ndarray:
        """Scores per class (N, classes), for top-5 accuracy and ROC AUC."""
        return class_scores(out)

    def decode(self, task: Task, y: np.ndarray) -> np.ndarray:
        """The labels as a reading keeps them, as the metrics read them."""
        return y

    def agreement(self, task: Task, out: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """(N,) each sample's agreement with the reference output `ref` (float's) in 0..1: the same prediction
        (bool), or for a prediction per position the share of positions that agree."""
        agree = np.asarray(self.predict(task, out) == self.predict(task, ref))
        return agree.mean(axis=1) if agree.ndim > 1 else agree

    def correct(self, task: Task, out: np.ndarray, y: np.ndarray) -> Optional[np.ndarray]:
        """(N,) bool, which samples are right (what McNemar's test pairs); None unless `sample_correct`."""
        return np.asarray(task.classes(out) == y) if self.sample_correct else None

    # --- measuring --------------------------------------------------------------------------------------
    def metrics(self, task: Task, y: np.ndarray, out: np.ndarray, float_out: Optional[np.ndarray]):
        """Quality metrics (reporter.model.report.Metrics) of `out` against `y`, with agreement with float's
        `float_out` (None: float not measured); None for a kind measured by its output error against float."""
        float_pred = None if float_out is None else task.classes(float_out)
        return qmetrics.classification(y, task.classes(out), task.num_classes, float_pred, task.scores(out))

    def score(self, task: Task, y: np.ndarray) -> Optional[Score]:
        """The main metric every verdict reads, on labels `y`: the share of samples right by default; None for a
        kind without one (`main_metric` "")."""
        return Score(task, y, self.main_metric) if self.main_metric else None


# --- helpers the kinds' readings share ------------------------------------------------------------------
def shape(port: Port) -> tuple:
    """The output's shape without the batch."""
    return tuple(port.allocated or port.shape)[1:]


def values_per_sample(y: np.ndarray) -> int:
    return int(np.prod(np.shape(y)[1:]))


def choices() -> str:
    """How every refusal of labels that cannot fit an output ends: the tasks the user may name instead."""
    return f" (or name the output's task: --task {'|'.join(tasks.names())})"


def linear(made_by: str) -> bool:
    """An output made by a linear op: neither class scores (SOFTMAX) nor sigmoid units (LOGISTIC)."""
    return made_by not in ("SOFTMAX", "LOGISTIC")


def check_classes(y: np.ndarray, size: int, source, what: str) -> int:
    """`size`, once the class ids `y` are all below it (an InputError naming the labels otherwise)."""
    if y.size and (y.min() < 0 or y.max() >= size):
        raise InputError(source, f"labels out of range: '{what}' holds {int(y.min())}..{int(y.max())} but the model"
                                 f" has {size} classes")
    return size


def check_normalized(values: np.ndarray, source, what: str, things: str, tolerance: float) -> None:
    """Labelled coordinates normalized to [0, 1] (within `tolerance`, a converted annotation's rounding): an
    InputError naming the labels `what` when they hold NaN or inf, look like pixels, or fall below 0."""
    if not np.all(np.isfinite(values)):
        raise InputError(source, f"'{what}' holds NaN or inf in labelled {things}")
    if values.max() > 1 + tolerance:
        raise InputError(source, f"'{what}': {things} look like pixels (max {values.max():.1f}): give them normalized"
                                 " to [0, 1] (divide by the image's height and width)")
    if values.min() < -tolerance:
        raise InputError(source, f"'{what}' holds coordinates below 0 (min {values.min():.4g}): give {things}"
                                 " normalized to [0, 1]")


def example(y: np.ndarray) -> str:
    """A value of `y` that is not a whole number (else its first), as a refusal shows it."""
    odd = y[np.isfinite(y) & (y != np.round(y))] if np.issubdtype(y.dtype, np.floating) else y[:1]
    return f"{(odd[0] if odd.size else y.flat[0]):g}"
