"""The conformance checks a plug-in passes, shipped with the package as scikit-learn ships `check_estimator`.

    from reporter.testing import check_kind, check_target

    def test_my_kind():
        check_kind(MyKind())            # AssertionError naming the method and what is wrong with its answer

    def test_my_targets():
        check_target(my_npu_targets)    # a family module (TARGETS, HELP), or one Target

`check_kind` runs a task kind's protocol (reporter.measure.kinds.base.Kind) on small synthetic outputs and labels
(`cases()`: class scores, one sigmoid unit, sigmoid labels, dense class scores, float targets, a mask, and each
registered kind's own `examples`; or the `case` given for a kind of another shape): it must recognise its own case
with a reason and refuse another kind's with one line naming the labels; its predictions, agreement, correctness,
metrics and main metric must be well-formed (one per sample, finite, agreement in 0..1, a model agreeing with
itself); its metrics, figures included, must round-trip through report.json's reader within their bounds, and the
report must be able to read its record back as this kind and show its figures and words. `check_target` asks a
target the protocol's questions (reporter.core.targets.base.Target) on synthetic tensor-type counts and models to
price. Neither proves a figure right: that is your test's, against an independent computation (numpy, scikit-learn,
pycocotools on a LiteRT run of the written .tflite), as tests/test_task_kinds.py does for the built-in kinds.

Imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from dataclasses import dataclass
from types import ModuleType
from typing import Optional, Union

import numpy as np

from reporter.core import tasks
from reporter.measure.kinds.base import EXAMPLE_SOURCE, Example
from reporter.plugins import register_builtins

register_builtins()  # the built-in kinds, targets and figures records the checks read

N = 40  # samples of each synthetic case
SOURCE = EXAMPLE_SOURCE  # the data a refusal must name


Case = Example  # a kind's synthetic output and labels (reporter.measure.kinds.base.Example), as check_kind takes it


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _twin(rng, out: np.ndarray, scale: float = 0.05, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """A second model's outputs: `out` moved a little (as quantization moves it), kept in [low, high]."""
    return np.clip(out + rng.normal(scale=scale, size=out.shape), low, high).astype(np.float32)


def cases(seed: int = 0) -> list[Case]:
    """The synthetic cases `check_kind` tries a kind on, each of N samples (a fixed seed: the same arrays every
    call)."""
    rng = np.random.default_rng(seed)
    found = []
    y = rng.integers(0, 4, N)
    out = _softmax(rng.normal(size=(N, 4)) + 2 * np.eye(4)[y]).astype(np.float32)
    found.append(Case("class scores", (4,), "SOFTMAX", y, out, _softmax(np.log(out + 1e-6) + rng.normal(
        scale=0.3, size=out.shape)).astype(np.float32)))
    y = rng.integers(0, 2, N)
    out = np.clip(0.3 * y + rng.uniform(size=N) * 0.7, 0, 1)[:, None].astype(np.float32)
    found.append(Case("one sigmoid unit", (1,), "LOGISTIC", y, out, _twin(rng, out)))
    y = rng.integers(0, 2, (N, 3))
    out = np.clip(0.4 * y + rng.uniform(size=(N, 3)) * 0.6, 0, 1).astype(np.float32)
    found.append(Case("sigmoid labels", (3,), "LOGISTIC", y, out, _twin(rng, out)))
    y = rng.integers(0, 3, (N, 4, 4))
    out = _softmax(rng.normal(size=(N, 4, 4, 3)) + 1.5 * np.eye(3)[y]).astype(np.float32)
    found.append(Case("dense class scores", (4, 4, 3), "SOFTMAX", y, out, _softmax(np.log(out + 1e-6) + rng.normal(
        scale=0.3, size=out.shape)).astype(np.float32)))
    y = rng.normal(size=(N, 2)).astype(np.float32)
    out = (y + rng.normal(scale=0.1, size=y.shape)).astype(np.float32)
    found.append(Case("float targets", (2,), "", y, out, _twin(rng, out, 0.05, -np.inf, np.inf)))
    y = (rng.uniform(size=(N, 4, 4, 1)) > 0.5).astype(np.float32)
    out = np.clip(0.5 * y + rng.uniform(size=y.shape) * 0.5, 0, 1).astype(np.float32)
    found.append(Case("mask", (4, 4, 1), "LOGISTIC", y, out, _twin(rng, out)))
    for kind in tasks.kinds():  # the kinds of other shapes bring their own (Kind.examples: a detector's, keypoints)
        found += kind.examples(rng, N)
    return found


# --- check_kind -------------------------------------------------------------------------------------------------
def check_kind(kind, case: Optional[Case] = None) -> None:
    """Runs the task-kind protocol on `kind` (an instance of a reporter.measure.kinds.base.Kind subclass) and raises
    AssertionError naming the method and what is wrong with its answer. `case`: the output and labels of your
    kind's own (default: it must recognise at least one of `cases()` and refuse another). A kind not registered yet
    is registered for the check and taken out after; one whose name another kind holds is refused."""
    from reporter.core import tasks
    from reporter.measure.kinds.base import Kind

    _declared(kind, Kind)
    registered = kind.name in {k.name for k in tasks.kinds()}
    if registered:  # the kind itself, or another instance of its class (its module registered one)
        _require(type(tasks.of(kind.name)) is type(kind), kind, "name",
                 f"another kind ({type(tasks.of(kind.name)).__name__}) is registered under this name")
    else:
        tasks.register(kind)
    try:
        _recorded(kind)
        accepted = _readings(kind, [case] if case is not None else cases(), given=case is not None)
        for found, reading in accepted:
            _answers(kind, found, reading)
    finally:
        if not registered:
            tasks.unregister(kind.name)


def _fail(kind, method: str, problem: str) -> AssertionError:
    return AssertionError(f"kind {getattr(kind, 'name', '?')!s}: {method}: {problem}")


def _require(ok: bool, kind, method: str, problem: str) -> None:
    if not ok:
        raise _fail(kind, method, problem)


def _text(kind, attribute: str, empty: bool = False) -> None:
    value = getattr(kind, attribute, None)
    _require(isinstance(value, str) and (empty or bool(value.strip())) and "\n" not in value, kind, attribute,
             f"must be one line of text{'' if empty else ', not empty'}, not {value!r}")


def _declared(kind, base: type) -> None:
    """What the kind declares for the report's records and words (reporter.core.tasks.TaskKind)."""
    from reporter.core.tasks import Record

    _require(isinstance(kind, base), kind, "class", f"{type(kind).__name__} is not a reporter.measure.kinds.base."
                                                    "Kind (subclass Kind, or a built-in kind)")
    _text(kind, "name")
    _require(kind.name == kind.name.strip() and " " not in kind.name and "=" not in kind.name, kind, "name",
             f"{kind.name!r}: --task names it (KIND or OUTPUT=KIND): no spaces, no '='")
    for attribute in ("words", "accuracy_label", "share_metric", "unit", "counted_as", "per_class_title",
                      "per_class_columns"):
        _text(kind, attribute)
    _text(kind, "main_metric", empty=True)
    if kind.main_metric:
        _text(kind, "paired_test")
    record = kind.record
    _require(isinstance(record, Record) and isinstance(record.task, str) and bool(record.task), kind, "record",
             f"must be a reporter.core.tasks.Record naming the kind in report.json, not {record!r}")
    for flag in ("named", "has_classes", "top_class", "sample_correct", "class_count_compared"):
        _require(isinstance(getattr(kind, flag, None), bool), kind, flag, "must be True or False")


def _recorded(kind) -> None:
    """report.json's `model.task` (and `binary_sigmoid`) reads back as this kind, or as an earlier kind recorded
    alike (a mask as a regression)."""
    from reporter.core import tasks

    record = kind.record
    try:
        back = tasks.recorded(record.task, record.binary_sigmoid, kind.has_classes)
    except KeyError as exc:
        raise _fail(kind, "record", f"report.json's model.task {record.task!r} does not read back: {exc}") from None
    _require(back.record == record and back.has_classes == kind.has_classes, kind, "record",
             f"report.json's model.task {record.task!r} reads back as {back.name}, another kind")
    if type(back) is not type(kind):  # recorded as another kind is: only the built-in mask is (as a regression)
        _require(not _plugin(kind), kind, "record", f"recorded as {back.name} is, which the report reads back")


def _plugin(kind) -> bool:
    from reporter.measure.task import plugin

    return plugin(kind)


def _readings(kind, tried: list, given: bool) -> list:
    """(case, reading) of each case the kind recognises; each refusal checked (an InputError in one line naming the
    labels)."""
    from reporter.core.errors import InputError
    from reporter.measure.kinds.base import TaskReading

    accepted, refused = [], []
    for case in tried:
        try:
            labels = case.labels()
        except InputError:  # label arrays no registered kind can join for this output: no case for any kind
            continue
        if labels is None:
            continue
        try:
            reading = kind.recognise(labels, case.port_of(), 0.5, case.made_by)
        except InputError as exc:
            text = str(exc)
            _require("\n" not in text and SOURCE in text, kind, "recognise()",
                     f"refusing {case.name} must be one line naming the labels' file ({SOURCE}), not {text!r}")
            _require(given is False, kind, "recognise()", f"refuses the case it was given: {text}")
            refused.append(case.name)
            continue
        except Exception as exc:  # noqa: BLE001 - a kind must refuse with an InputError saying why
            raise _fail(kind, "recognise()", f"raised {type(exc).__name__} ({exc}) on {case.name}: refuse with"
                                             " reporter.core.errors.InputError(labels.source, why)") from exc
        _require(isinstance(reading, TaskReading), kind, "recognise()",
                 f"must return a TaskReading, not {type(reading).__name__}")
        _require(reading.task.kind is kind, kind, "recognise()",
                 f"its reading's task names kind {getattr(reading.task.kind, 'name', '?')}, not itself")
        _require(isinstance(reading.reason, str) and bool(reading.reason.strip()) and "\n" not in reading.reason,
                 kind, "recognise()", "its reading must say why (reason: one line, after 'as --task KIND says: ')")
        _require(len(reading.y) == N, kind, "recognise()", f"kept {len(reading.y)} rows of labels for {N} samples")
        accepted.append((case, reading))
    _require(bool(accepted), kind, "recognise()",
             f"recognises none of check_kind's synthetic outputs ({', '.join(c.name for c in tried)}): give it your"
             " kind's own, check_kind(kind, case=reporter.testing.Case(...))")
    _require(given or bool(refused), kind, "recognise()",
             "refuses none of the other kinds' synthetic outputs: refuse what is not yours with an InputError")
    return accepted


def _checked(kind, method: str, call, where: str):
    """A kind's answer, its failures as AssertionError naming the method and the case (a plug-in's answers are
    checked by reporter.measure.task.Task as a run checks them: a KindError)."""
    from reporter.measure.task import KindError

    try:
        return call()
    except KindError as exc:
        raise _fail(kind, method, f"{where}: {exc.problem}") from None
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the kind's code raises, said with the method's name
        raise _fail(kind, method, f"{where}: raised {type(exc).__name__}: {exc}") from exc


def _answers(kind, case: Case, reading) -> None:
    task, y = reading.task, reading.y
    out, other = case.out, case.other
    where = f"on {case.name}"
    found = _checked(kind, "predict()", lambda: np.asarray(task.classes(out)), where)
    _require(len(found) == N and found.ndim in (1, 2), kind, "predict()",
             f"{where}: must give one value per sample (N,) or per position (N, positions), not shape {found.shape}")
    found = _checked(kind, "decode()", lambda: np.asarray(task.decode(y)), where)
    _require(len(found) == N, kind, "decode()", f"{where}: gave {len(found)} rows for {N} samples")
    for name, a, b in (("another model", other, out), ("itself", out, out)):
        agree = _checked(kind, "agreement()", lambda: np.asarray(task.agreement(a, b), np.float64), where)
        _require(agree.shape == (N,), kind, "agreement()", f"{where}: must be (N,), not shape {agree.shape}")
        _require(bool(np.all(np.isfinite(agree)) and np.all((agree >= 0) & (agree <= 1))), kind, "agreement()",
                 f"{where}: each sample's agreement with {name} must be in 0..1")
    _require(bool(np.allclose(agree, 1.0)), kind, "agreement()", f"{where}: a model must agree with itself (1.0)")
    right = _checked(kind, "correct()", lambda: task.correct(out, y), where)
    if kind.sample_correct:
        right = np.asarray(right) if right is not None else None
        _require(right is not None and right.shape == (N,) and right.dtype == bool, kind, "correct()",
                 f"{where}: with sample_correct, (N,) bool, which samples are right (McNemar pairs them)")
    else:
        _require(right is None, kind, "correct()", f"{where}: None without sample_correct (bootstrapped)")
    metrics = _checked(kind, "metrics()", lambda: task.metrics(y, other, out), where)
    if metrics is not None:
        _metrics_round_trip(kind, metrics, where)
    _score(kind, reading, case, right)


def _numbers(value, path: str = "metrics"):
    """(path, value) of every number in stored data that is not finite, or not a number where one is expected."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            yield path, value
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _numbers(item, f"{path}[{i}]")


def _metrics_round_trip(kind, metrics, where: str) -> None:
    """Finite numbers, figures declared with rows to show them, and report.json's reader giving the same back."""
    from reporter.core.records import as_stored
    from reporter.model.decode import decode
    from reporter.model.figures import records
    from reporter.model.report import Metrics
    from reporter.render.kinds import rows

    _require(isinstance(metrics, Metrics), kind, "metrics()", f"{where}: must return reporter.model.report.Metrics"
                                                            f" or None, not {type(metrics).__name__}")
    stored = as_stored(metrics)
    bad = next(_numbers(stored), None)
    _require(bad is None, kind, "metrics()", f"{where}: {bad and bad[0]} is {bad and bad[1]!r}, not a finite number")
    for name, record in metrics.figures.items():
        _require(name in records(), kind, "metrics()", f"{where}: its figures {name!r} are not declared: declare"
                                                       " them with reporter.model.figures.register(NAME, Record)")
        _require(dataclasses.is_dataclass(record) and isinstance(record, records()[name]), kind, "metrics()",
                 f"{where}: figures[{name!r}] must be the record declared for them, {records()[name].__name__}")
        _require(rows.of(name) is not None, kind, "metrics()",
                 f"{where}: its figures {name!r} have no rows to show them: reporter.render.kinds.rows.register")
    try:
        text = json.dumps(stored, allow_nan=False)
        back = decode(Metrics, json.loads(text), "metrics")
    except Exception as exc:  # noqa: BLE001 - the reader's one line: which field, which bound
        raise _fail(kind, "metrics()", f"{where}: report.json's reader refuses them: {exc}") from None
    _require(as_stored(back) == stored, kind, "metrics()", f"{where}: report.json's reader reads back other figures")


def _score(kind, reading, case: Case, right) -> None:
    """The main metric: named as declared, a finite value agreeing with its own measurement, a paired test."""
    task, y, out, other, where = reading.task, reading.y, case.out, case.other, f"on {case.name}"
    score = _checked(kind, "score()", lambda: task.score(y), where)
    if not kind.main_metric:
        _require(score is None, kind, "score()", f"{where}: None for a kind without a main metric (main_metric '')")
        return
    _require(score is not None, kind, "score()", f"{where}: None, but main_metric is {kind.main_metric!r}")
    _require(score.name == kind.main_metric, kind, "score()",
             f"{where}: names {score.name!r}, not the declared main_metric {kind.main_metric!r}")
    measured = _checked(kind, "score().measure()", lambda: score.measure(out), where)
    value = _checked(kind, "score().value()", lambda: score.value(out), where)
    for what, v in (("score().measure()", measured.value), ("score().value()", value)):
        _require(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v)), kind, what,
                 f"{where}: must be a finite number, not {v!r}")
    _require(math.isclose(float(measured.value), float(value), rel_tol=1e-9, abs_tol=1e-12), kind, "score().value()",
             f"{where}: {value!r} differs from score().measure()'s {measured.value!r}")
    if score.share:
        _require(0.0 <= float(value) <= 1.0, kind, "score()", f"{where}: a share must be in 0..1, not {value!r}")
    if right is not None and not score.bootstrapped:  # McNemar pairs the samples right: the metric is their share
        _require(math.isclose(float(value), float(np.mean(right)), abs_tol=1e-12), kind, "score()",
                 f"{where}: {value!r} is not the share of samples correct() says are right ({np.mean(right)!r})")
    second = _checked(kind, "score().measure()", lambda: score.measure(other), where)
    delta, p = _checked(kind, "score().compare()", lambda: score.compare(second, measured), where)
    _require(math.isfinite(float(delta)) and 0.0 <= float(p) <= 1.0, kind, "score().compare()",
             f"{where}: must give a finite difference and a p-value in 0..1, not ({delta!r}, {p!r})")


# --- check_target -----------------------------------------------------------------------------------------------
# Tensor-type counts of models as reporter.measure.structure reads them ("other": float16 weights).
TENSOR_TYPES = {
    "float32": {"float32": 12, "int32": 2},
    "float16 weights": {"float32": 8, "other": 4, "int32": 2},
    "hybrid (DRQ)": {"float32": 8, "int8": 4, "int32": 2},
    "full int8": {"int8": 12, "int32": 4},
    "16x8": {"int16": 8, "int8": 4, "int64": 2, "int32": 2},
}
OPS = {"CONV_2D": 2, "FULLY_CONNECTED": 1, "SOFTMAX": 1}


@dataclass(frozen=True)
class _Priced:
    """A model meeting the accuracy target, as the decision prices it (reporter.model.findings.Option's fields)."""

    name: str
    size_bytes: int
    latency_ms: Optional[float]
    latency_p90_ms: Optional[float]
    npu_share: Optional[float] = None
    estimate_ms: Optional[float] = None


def check_target(target: Union[ModuleType, object]) -> None:
    """Asks a target (reporter.core.targets.base.Target), or each target of a family module (TARGETS and HELP, as
    reporter.core.targets.register takes it), the protocol's questions and raises AssertionError naming the target,
    the question and what is wrong with its answer."""
    from reporter.core.targets.base import Target

    if isinstance(target, ModuleType):
        found = getattr(target, "TARGETS", None)
        if not isinstance(found, tuple) or not found or not all(isinstance(t, Target) for t in found):
            raise AssertionError(f"family {target.__name__}: TARGETS must be a tuple of reporter.core.targets.Target")
        help_ = getattr(target, "HELP", None)
        if not isinstance(help_, str) or "\n" in help_ or not help_.strip():
            raise AssertionError(f"family {target.__name__}: HELP must be one line of text (--target's help)")
        if not any(t.name in help_ for t in found):
            raise AssertionError(f"family {target.__name__}: HELP names none of its targets (--target's help)")
        for t in found:
            check_target(t)
        return
    if not isinstance(target, Target):
        raise AssertionError(f"{target!r} is not a reporter.core.targets.Target (nor a family module)")
    _target(target)


def _target_fail(target, question: str, problem: str) -> AssertionError:
    return AssertionError(f"target {target.name}: {question}: {problem}")


def _target(target) -> None:
    from reporter.core import targets
    from reporter.core.targets.base import Check
    from reporter.core.variants import ALL_VARIANTS

    def require(ok, question, problem):
        if not ok:
            raise _target_fail(target, question, problem)

    require(isinstance(target.name, str) and target.name and target.name == target.name.strip().lower()
            and " " not in target.name, "name", f"{target.name!r}: --target names it (lower case, no spaces)")
    require(isinstance(target.words, str) and target.words.startswith("on ") and "\n" not in target.words, "words",
            f"{target.words!r}: said in a sentence, starting 'on ' ('on a float16 NPU')")
    require(isinstance(target.hardware, str) and bool(target.hardware.strip()), "hardware", "must name the hardware")
    unknown = [v for v in target.adds if v not in ALL_VARIANTS]
    require(not unknown, "adds", f"variants no run builds: {', '.join(map(str, unknown))}")
    for name, types_ in TENSOR_TYPES.items():
        try:
            runs = target.runs(types_, OPS, types_)
            why = target.why_not(types_, OPS, types_)
        except Exception as exc:  # noqa: BLE001 - said as the question it failed
            raise _target_fail(target, "runs()", f"raised {type(exc).__name__} on a {name} model: {exc}") from exc
        require(isinstance(runs, bool), "runs()", f"must be True or False, not {runs!r} ({name})")
        require(isinstance(why, str) and "\n" not in why and (why == "") == runs, "why_not()",
                f"must be '' exactly when runs() is True, else one line saying why ({name}: runs {runs}, {why!r})")
    pool = [_Priced("fast", 200_000, 1.0, 1.02, 1.0, 2.0), _Priced("small", 100_000, 10.0, 10.2, 0.5, 1.0)]
    try:
        costs = target.costs(pool)
    except Exception as exc:  # noqa: BLE001
        raise _target_fail(target, "costs()", f"raised {type(exc).__name__}: {exc}") from exc
    require(isinstance(costs, dict) and set(costs) == {"fast", "small"}, "costs()",
            f"must price every model of the pool by name, not {costs!r}")
    require(all(isinstance(c, numbers.Real) and not isinstance(c, bool) and math.isfinite(c) and c >= 0
                for c in costs.values()), "costs()", f"costs are finite doublings, 0 or more, not {costs!r}")
    require(target.costs([]) == {}, "costs()", "an empty pool costs nothing ({})")
    if target.checked:
        require(isinstance(target.check, Check), "check", "must be a reporter.core.targets.Check (or None)")
        for field in ("kernels", "tool"):
            value = getattr(target.check, field)
            require(isinstance(value, str) and bool(value.strip()), f"check.{field}", "must name it")
        require(not target.check.key or bool(target.check.heading), "check.heading",
                "a tool with figures of its own (key) needs its column's heading")
    _on_target_round_trip(target, require)
    if target.name in targets.REGISTRY:
        require(targets.of(target.name) is target, "name", "another target is registered under this name")
        require(target.name in targets.TARGETS, "name", "not offered by --target")


def _on_target_round_trip(target, require) -> None:
    """A model checked there, recorded as report.json keeps it, reads back the same; its progress line is one line."""
    from reporter.core.records import as_stored
    from reporter.model.decode import decode
    from reporter.model.variant import OnTarget

    for on in (OnTarget(target.name, target.kernels, True),
               OnTarget(target.name, target.kernels, False, error=target.runs_not or "it does not run there")):
        text = json.dumps(as_stored(on), allow_nan=False)
        back = decode(OnTarget, json.loads(text), "on_target")
        require(back == on, "on-target record", "report.json's reader reads another record back")
        if target.checked:
            said = target.check.said(on)
            require(isinstance(said, str) and bool(said.strip()) and "\n" not in said, "check.said()",
                    f"must be one line, not {said!r}")
