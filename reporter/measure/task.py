"""The runtime task of an output: its kind (reporter.measure.kinds), its number of classes and its threshold.

The one place that turns raw outputs into predicted classes and class scores: the pipeline, the metrics and the
search all call `Task`, which asks its kind, so that every accuracy in a report counts the same way. A plug-in
kind's code (a kind registered from outside quant-report) is called there behind the wall, and what it returns is
checked as it enters the tool: one that raises, or returns a number that is not a finite real, is a `KindError`
naming the kind and its file, and the measurement it was for is not measured. `real` is that check of a number,
the one the user's --metric passes too. The helpers below are the readings the kinds share (argmax, one sigmoid
unit, label sets as one value).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import numbers
import types
import typing
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import numpy as np

from reporter.core.errors import InputError, one_line
from reporter.core.tasks import TaskKind
from reporter.core.wall import wall
from reporter.model.report import Metrics

from reporter.core.judgement import BINARY_THRESHOLD  # noqa: E402,F401 - one sigmoid unit: class 1 from this
# The class predicted by an output that holds NaN or inf (a row, or a dense position): no class, so that it
# is never right and never agrees with a finite prediction (the model "produced NaN or inf" on that sample).
NO_CLASS = -1
# A mask's targets (0/1, or values in [0, 1]): a value is in the true mask where its target is at least this.
MASK_TARGET = 0.5


@dataclass(frozen=True)
class Task:
    """An output read as `kind` (a reporter.measure.kinds.base.Kind, registered in reporter.core.tasks) with
    `num_classes` classes (labels for multi-label; None for a kind without classes) and `threshold` for sigmoid
    outputs and masks. Every behaviour is the kind's."""

    kind: TaskKind
    num_classes: Optional[int] = None
    threshold: float = BINARY_THRESHOLD  # sigmoid outputs: class 1 (or the label) where the output is at least this

    @property
    def classification(self) -> bool:
        """The output counts classes (its predictions are class ids, or label sets)."""
        return self.num_classes is not None

    @classmethod
    def of(cls, kind: TaskKind, size: int, shape: tuple, threshold: float = BINARY_THRESHOLD) -> "Task":
        """The task `kind` names for an output of `size` values and `shape` (without the batch), read without
        labels: its classes as the kind counts them from the output."""
        return cls(kind, kind.classes_of(size, shape), threshold)

    def classes(self, out: np.ndarray) -> np.ndarray:
        """One comparable value per sample (dense: per position), so that `classes(out) == y` is correctness and
        agreement with float everywhere; an output holding NaN or inf predicts no class (NO_CLASS)."""
        return self._call("predict", _rows(out), out)

    def scores(self, out: np.ndarray) -> np.ndarray:
        """Scores per class or label (N, classes), for top-5 accuracy and ROC AUC."""
        return self._call("scores", _rows(out), out)

    def decode(self, y: np.ndarray) -> np.ndarray:
        """The labels `y` (as the reading keeps them) as the metrics read them."""
        return self._call("decode", _rows(y), y)

    def agreement(self, out: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """(N,) each sample's agreement of `out` with a reference output `ref` (float's), in 0..1: what the search's
        selection score averages on samples without labels."""
        return self._call("agreement", _per_sample(out), out, ref)

    def correct(self, out: np.ndarray, y: np.ndarray) -> Optional[np.ndarray]:
        """(N,) bool, which samples are right: what the paired test reads; None when a sample is not right or wrong
        as a whole (the kind's main metric is then paired by a bootstrap over samples)."""
        return self._call("correct", _per_sample(out, optional=True), out, y)

    def metrics(self, y: np.ndarray, out: np.ndarray, float_out: Optional[np.ndarray]):
        """The kind's quality metrics of `out` against `y` (reporter.model.report.Metrics), None for a kind
        measured by its output error."""
        return self._call("metrics", _metrics_problem, y, out, float_out)

    def score(self, y: np.ndarray):
        """The kind's own main metric on labels `y` (reporter.measure.scoring.Score), None for none; a plug-in's
        with every value it gives checked."""
        found = self._call("score", _score_problem, y)
        return _CheckedScore(self.kind, found) if found is not None and plugin(self.kind) else found

    def _call(self, method: str, problem: Callable[[Any], str], *args):
        """The kind's `method` on this task and `args`: a plug-in's through `guarded` (what it returns checked by
        `problem`), a built-in kind's as it is (its conformance test proves it)."""
        fn = getattr(self.kind, method)
        if not plugin(self.kind):
            return fn(self, *args)
        return guarded(self.kind, f"{method}()", lambda: fn(self, *args), problem)

    def as_head(self) -> "Task":
        """The task one output of several is measured as (a mask's: a regression, reporter.measure.kinds.mask)."""
        return replace(self, kind=self.kind.head)


def label_codes(bits: np.ndarray) -> np.ndarray:
    """Each row of 0/1 labels as one value (its packed bytes), so that rows compare with `==`."""
    packed = np.packbits(np.asarray(bits, np.uint8), axis=1)
    return np.ascontiguousarray(packed).view(np.dtype((np.void, packed.shape[1]))).ravel()


def columns(out: np.ndarray) -> np.ndarray:
    out = np.asarray(out)
    return out.reshape(len(out), -1)


def top_class(out: np.ndarray) -> np.ndarray:
    """Class ids (int64) from class scores (N, k): the top score; NO_CLASS for a row holding NaN or inf (argmax
    would pick the NaN's column, a class by accident)."""
    out = columns(out)
    return _no_class_where_nonfinite(out, out.argmax(axis=1).astype(np.int64))


def sigmoid_class(out: np.ndarray, threshold: float = BINARY_THRESHOLD) -> np.ndarray:
    """Class ids (int64) from one sigmoid unit (N, 1) or (N,): 1 where the output is at least `threshold`;
    NO_CLASS for a NaN or inf output."""
    out = columns(out)
    return _no_class_where_nonfinite(out, (out[:, 0] >= threshold).astype(np.int64))


def _no_class_where_nonfinite(out: np.ndarray, found: np.ndarray) -> np.ndarray:
    found[~np.isfinite(out).all(axis=1)] = NO_CLASS
    return found


def nonfinite_rows(out) -> np.ndarray:
    """(N,) bool: the samples whose output (one array, or a dict of outputs by name) holds NaN or inf."""
    arrays = list(out.values()) if isinstance(out, dict) else [out]
    bad = None
    for a in arrays:
        a = np.asarray(a)
        rows = ~np.isfinite(a.reshape(len(a), -1)).all(axis=1) if a.dtype.kind in "fc" else np.zeros(len(a), bool)
        bad = rows if bad is None else bad | rows
    return bad if bad is not None else np.zeros(0, bool)


def class_scores(out: np.ndarray) -> np.ndarray:
    """Scores per class (N, num_classes): the outputs."""
    return columns(out).astype(np.float64)


def sigmoid_scores(out: np.ndarray) -> np.ndarray:
    """Scores per class (N, 2) of one sigmoid unit p: (1 - p, p)."""
    out = class_scores(out)
    return np.column_stack([1.0 - out[:, 0], out[:, 0]])


# --- a plug-in kind's code, contained and checked ----------------------------------------------------------------
class KindError(RuntimeError):
    """A plug-in task kind's own code raised, or returned what the tool cannot use: one line, "kind NAME from FILE:
    its metrics() returned nan as accuracy". The measurement it was called for is not measured; the run goes on."""

    def __init__(self, kind: TaskKind, problem: str):
        self.where, self.problem = named(kind), problem
        super().__init__(f"{self.where}: {problem}")


def plugin(kind: TaskKind) -> bool:
    """A kind whose class is defined outside quant-report (registered by the user with kinds.register)."""
    return not type(kind).__module__.startswith("reporter.")


def named(kind: TaskKind) -> str:
    """"kind NAME from FILE", FILE being the module file its class is defined in, as its failures name it."""
    try:
        where = inspect.getsourcefile(type(kind)) or inspect.getfile(type(kind))
    except (TypeError, OSError):  # a class defined at the interactive prompt has no file
        where = f"module {type(kind).__module__}"
    return f"kind {kind.name} from {where}"


def guarded(kind: TaskKind, what: str, call: Callable[[], Any], problem: Callable[[Any], str]):
    """What `call()`, code of the plug-in `kind` (`what`: "metrics()"), returns, once `problem` finds nothing wrong
    with it. It runs behind the wall, as the user's --metric does (a sys.exit in it is its failure, not the end of
    the run); a KindError naming the kind when it raises or returns what the tool cannot use. Like --metric's, it
    runs in this process without a time limit."""
    try:
        with wall(kind.name, f"its {what}", "a task kind's code must return or raise an exception"):
            found = call()
    except KindError:  # raised by the kind's code calling Task again (its metrics() read task.classes): said there
        raise
    except InputError as exc:  # the wall's: it called sys.exit (or raised the tool's own error)
        raise KindError(kind, exc.problem) from None
    except Exception as exc:  # noqa: BLE001 - a plug-in's code may raise anything; its measurement is not measured
        raise KindError(kind, f"its {what} raised {one_line(exc)}") from exc
    wrong = problem(found)
    if wrong:
        raise KindError(kind, f"its {what} returned {wrong}")
    return found


def real(value) -> float:
    """`value`, returned by the user's code (a --metric function, a plug-in task kind), as a float: a finite real
    number (an int, a float, a numpy scalar or a 0-d array of one; a bool counts as 0 or 1, as a per-sample
    right/wrong), never a string: "0.5" is refused like any other type. A NotANumber (a ValueError) otherwise, whose
    text says what was returned ("str '0.5', not a number ...", "nan"), for the caller to name the code."""
    number = isinstance(value, (numbers.Real, np.bool_))
    if not number and isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf":
        number, value = True, value.item()
    if not number:
        shown = f" {value!r}" if isinstance(value, (str, bytes)) and len(value) <= 40 else ""
        raise NotANumber(f"{type(value).__name__}{shown}", ", not a number (an int, a float or a numpy scalar)")
    found = float(value)
    if not np.isfinite(found):
        raise NotANumber(f"{found}")
    return found


class NotANumber(ValueError):
    """What `real` refused: the value as shown ("str '0.5'", "nan") and why, if more is to be said."""

    def __init__(self, shown: str, why: str = ""):
        self.shown, self.why = shown, why
        super().__init__(f"{shown}{why}")


class _CheckedScore:
    """A plug-in kind's main metric (its reporter.measure.scoring.Score): the values it gives are checked as they
    enter the tool and its failures name the kind; everything else is the score's own."""

    def __init__(self, kind: TaskKind, score):
        self.__dict__.update(_kind=kind, _score=score)

    def __getattr__(self, name: str):
        try:
            score = self.__dict__["_score"]
        except KeyError:  # not set up yet (a copy being made): no attribute
            raise AttributeError(name) from None
        return getattr(score, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._score, name, value)

    def measure(self, out):
        return guarded(self._kind, "score().measure()", lambda: self._score.measure(out), _scored_problem)

    def value(self, out) -> float:
        return real(guarded(self._kind, "score().value()", lambda: self._score.value(out), _number_problem))


def _number_problem(found) -> str:
    try:
        real(found)
    except ValueError as exc:
        return str(exc)
    return ""


def _scored_problem(found) -> str:
    """What is wrong with a main metric's measurement (reporter.measure.scoring.Scored): its value, and the
    resamples or per-sample values beside it, must be finite reals."""
    if not hasattr(found, "value"):
        return f"{type(found).__name__}, not a Scored (reporter.measure.scoring)"
    try:
        real(found.value)
    except NotANumber as exc:
        return f"{exc.shown} as its value{exc.why}"
    for part in ("boot", "per_sample"):
        values = getattr(found, part, None)
        if values is not None and not _finite_numbers(values):
            return f"{part} holding values that are not finite real numbers"
    return ""


def _score_problem(found) -> str:
    if found is None or all(callable(getattr(found, m, None)) for m in ("measure", "value", "compare", "main")):
        return ""
    return f"{type(found).__name__}, not a Score (reporter.measure.scoring) or None"


def _rows(given) -> Callable[[Any], str]:
    """What is wrong with an array that must hold one row per row of `given` (one per sample)."""
    def problem(found) -> str:
        if isinstance(found, (str, bytes)) or not hasattr(found, "__len__"):
            return f"{type(found).__name__}, not an array of one row per sample"
        return "" if len(found) == len(given) else f"{len(found)} rows for {len(given)} samples"
    return problem


def _per_sample(given, optional: bool = False) -> Callable[[Any], str]:
    """What is wrong with one finite number (or bool) per sample of `given` (None too, when `optional`)."""
    rows = _rows(given)

    def problem(found) -> str:
        if found is None and optional:
            return ""
        wrong = rows(found)
        if wrong:
            return wrong
        a = np.asarray(found)
        if a.ndim != 1 or a.dtype.kind not in "biuf":
            return f"{type(found).__name__} of {a.dtype} {a.shape}, not one number per sample"
        bad = np.flatnonzero(~np.isfinite(a)) if a.dtype.kind == "f" else ()
        return f"{a[bad[0]]} for sample {bad[0]}" if len(bad) else ""
    return problem


def _finite_numbers(values) -> bool:
    """An array (or nested lists) of real numbers, every one finite: checked at once (a confusion matrix of 1,000
    classes is a million)."""
    try:
        a = np.asarray(values)
    except ValueError:  # ragged
        return False
    return a.dtype.kind in "biu" or (a.dtype.kind == "f" and bool(np.isfinite(a).all()))


def _metrics_problem(found) -> str:
    """What is wrong with a kind's metrics: None, or a Metrics record whose every number is a finite real."""
    if found is None:
        return ""
    if not isinstance(found, Metrics):
        return f"{type(found).__name__}, not Metrics (reporter.model.report) or None"
    return _field_problem(found, Metrics, "")


@functools.lru_cache(maxsize=None)
def _hints(record: type) -> dict:
    return typing.get_type_hints(record)


def _field_problem(value, hint, where: str, bound=None) -> str:
    """What is wrong with `value` as `where` of a record, whose type hint `hint` declares it: a number (float, int)
    that is not a finite real or lies beyond the field's `bound`, a list, dict or record that is not one; "" when
    nothing is (None is no value)."""
    if value is None:
        return ""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in (int, float):
        try:
            real(value)
        except NotANumber as exc:
            return f"{exc.shown} as {where}{exc.why}"
        return _beyond(bound, value, where)
    if origin in (list, dict) and not isinstance(value, origin):
        return f"{type(value).__name__} as {where}, not a {origin.__name__}"
    if origin is list:
        if _finite_numbers(value):
            return _beyond(bound, value, where)
        return next((p for i, item in enumerate(value)
                     if (p := _field_problem(item, args[0], f"{where}[{i}]", bound))), "")
    if origin is dict:
        return next((p for k, item in value.items()
                     if (p := _field_problem(item, args[1], f"{where}[{k!r}]", bound))), "")
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            return f"{type(value).__name__} as {where}, not {hint.__name__}"
        hints = _hints(hint)
        return next((p for f in dataclasses.fields(hint)
                     if (p := _field_problem(getattr(value, f.name), hints[f.name], f"{where}.{f.name}".lstrip("."),
                                             f.metadata.get("bound")))), "")
    return ""


def _beyond(bound, values, where: str) -> str:
    """"1.5 as accuracy, which must be a share from 0 to 1" for the first of `values` (finite numbers) beyond the
    bound of its record's field (reporter.model.bounds: a report.json holding it would not be read back); "" when
    none is, or the field has no fixed bound."""
    if not all(hasattr(bound, a) for a in ("low", "high", "whole", "must_be")):  # none, or chosen by another field
        return ""
    a = np.asarray(values, np.float64).ravel()
    bad = (a < bound.low) | (a > bound.high) | (bool(bound.whole) & (a != np.round(a)))
    return f"{a[bad][0]:g} as {where}, which must be {bound.must_be}" if bad.any() else ""
