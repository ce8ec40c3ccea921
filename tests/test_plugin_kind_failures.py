"""A task kind of one's own (reporter.measure.kinds.register) whose code fails is contained and named, as a failing
--metric is: one line on the terminal naming the kind and the file its class is defined in (this file), the same in
run.log and in the report's notes; the run completes and writes every format, and the models the kind could not
measure record their metrics as null with that reason. What the kind returns is checked where it enters the tool
(reporter.measure.task.Task): a number must be a finite real, as --metric's are (reporter.measure.task.real).

The kinds are classifiers (the built-in classification kind) that override only their metrics(); a working one is
checked against numpy on plain LiteRT runs of the written .tflite files (tests/independent.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import independent
from reporter.measure.kinds.classification import Classification
from reporter.measure.scoring import Score, Scored
from reporter.model.report import ClassMetrics, Metrics

HERE = str(Path(__file__).resolve())  # the module file the kinds' classes are defined in: what their failures name


class NanAccuracy(Classification):
    name = "nan_accuracy"

    def metrics(self, task, y, out, float_out):
        return dataclasses.replace(super().metrics(task, y, out, float_out), accuracy=float("nan"))


class TextAccuracy(Classification):
    name = "text_accuracy"

    def metrics(self, task, y, out, float_out):
        return dataclasses.replace(super().metrics(task, y, out, float_out), accuracy="0.9")


class RaisingMetrics(Classification):
    name = "raising_metrics"

    def metrics(self, task, y, out, float_out):
        raise RuntimeError("my metrics broke")


class OwnAccuracy(Classification):
    """A kind that works: its accuracy computed by its own code, a numpy scalar."""

    name = "own_accuracy"

    def metrics(self, task, y, out, float_out):
        found = super().metrics(task, y, out, float_out)
        return dataclasses.replace(found, accuracy=np.float64(np.mean(task.classes(out) == y)))


def _run(kind, mlp_files, tmp_path, capfd):
    """(the terminal's stderr, the report folder, report.json) of an API run of the demo MLP read as `kind`,
    registered for the run only."""
    import reporter
    from reporter.measure import kinds

    model, data = mlp_files
    kinds.register(kind)
    try:
        capfd.readouterr()
        report = reporter.run(model, data, out=tmp_path / "out", name=kind.name, task=kind.name,
                              variants="float,fiq", latency_runs=0, formats="json,md")
        err = capfd.readouterr().err
    finally:
        kinds.unregister(kind.name)
    folder = tmp_path / "out" / kind.name
    assert Path(report.folder) == folder
    return err, folder, json.loads((folder / "report.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("kind, said", [
    (NanAccuracy(), "its metrics() returned nan as accuracy"),
    (TextAccuracy(), "its metrics() returned str '0.9' as accuracy, not a number"),
    (RaisingMetrics(), "its metrics() raised RuntimeError: my metrics broke"),
], ids=["nan", "string", "raises"])
def test_a_failing_kind_is_named_in_one_line_and_its_models_are_not_measured(kind, said, mlp_files, tmp_path, capfd):
    err, folder, report = _run(kind, mlp_files, tmp_path, capfd)
    named = f"kind {kind.name} from {HERE}: {said}"
    lines = [line for line in err.splitlines() if f"kind {kind.name} from" in line]
    assert len(lines) == 1 and named in lines[0] and "for float" in lines[0], err[-3000:]
    assert "Traceback" not in err
    assert named in (folder / "run.log").read_text()
    assert (folder / "summary.md").is_file()
    assert named in (folder / "summary.md").read_text()  # a note in the report
    for v in report["variants"]:
        assert v["status"] == "ok" and v["size_bytes"] > 0, v["name"]  # the models stand, measured but for metrics
        assert v["metrics"] is None, (v["name"], v["metrics"])
        assert named in v["measurement_errors"]["metrics"], v["measurement_errors"]
    assert {v["name"] for v in report["variants"]} >= {"float", "fiq"}


@pytest.mark.slow
def test_a_working_kind_of_ones_own_gives_the_figures_numpy_does(mlp_files, tmp_path, capfd):
    err, folder, report = _run(OwnAccuracy(), mlp_files, tmp_path, capfd)
    assert "kind own_accuracy" not in err, err[-3000:]
    data = np.load(mlp_files[1])
    right = {name: independent.predictions((folder / f"{name}.tflite").read_bytes(), data["x"]) == data["y"]
             for name in ("float", "fiq")}
    measured = {v["name"]: v for v in report["variants"]}
    for name, ok in right.items():
        assert not measured[name]["measurement_errors"], measured[name]["measurement_errors"]
        assert measured[name]["metrics"]["accuracy"] == pytest.approx(float(np.mean(ok)), abs=1e-12), name
    paired = measured["fiq"]["metrics"]["paired"]["float"]  # McNemar's discordant counts against float
    assert paired == {"reference_only": int(np.sum(right["float"] & ~right["fiq"])),
                      "variant_only": int(np.sum(~right["float"] & right["fiq"]))}


class NanAgreement(Classification):
    """Measures like the classifier, but its agreement with float (what the search's selection score averages) is
    NaN: the search stops, the variants measured stand."""

    name = "nan_agreement"

    def agreement(self, task, out, ref):
        return np.full(len(out), np.nan)


@pytest.mark.slow
def test_a_kind_failing_in_the_search_stops_the_search_only(mlp_files, tmp_path, capfd):
    err, folder, report = _run(NanAgreement(), mlp_files, tmp_path, capfd)
    named = f"kind nan_agreement from {HERE}: its agreement() returned nan for sample 0"
    lines = [line for line in err.splitlines() if "kind nan_agreement from" in line]
    assert len(lines) == 1 and "the search stopped" in lines[0] and named in lines[0], err[-3000:]
    assert "Traceback" not in err and named in (folder / "run.log").read_text()
    assert report["recommendation"] is None and (folder / "summary.md").is_file()
    data = np.load(mlp_files[1])
    for v in report["variants"]:
        right = independent.predictions((folder / f"{v['name']}.tflite").read_bytes(), data["x"]) == data["y"]
        assert v["metrics"]["accuracy"] == pytest.approx(float(np.mean(right)), abs=1e-12), v["name"]


# --- without a run: what a plug-in kind returns is checked where it enters the tool ------------------------------
def _task(kind):
    from reporter.measure.task import Task

    return Task(kind, 3)


Y = np.array([0, 1, 2, 1])
OUT = np.eye(3)[[0, 1, 2, 2]].astype(np.float32)


def _metrics_returning(found):
    return type("Returns", (Classification,), {"name": "returns", "metrics": lambda self, task, y, out, f: found})()


@pytest.mark.parametrize("found, said", [
    (Metrics(accuracy=float("inf")), "returned inf as accuracy"),
    (Metrics(accuracy=0.5, per_class=[ClassMetrics(0, "high", 0.5, 0.5, 3)]),
     "returned str 'high' as per_class[0].precision, not a number"),
    (Metrics(accuracy=0.5, user={"mine": float("nan")}), "returned nan as user['mine']"),
    (Metrics(accuracy=0.5, confusion_matrix=[[1, 2], [3, "4"]]), "returned str '4' as confusion_matrix[1][1]"),
    ({"accuracy": 0.5}, "returned dict, not Metrics"),
])
def test_a_kinds_metrics_must_hold_finite_numbers(found, said):
    from reporter.measure.task import KindError

    kind = _metrics_returning(found)
    with pytest.raises(KindError) as caught:
        _task(kind).metrics(Y, OUT, None)
    message = str(caught.value)
    assert message.startswith(f"kind returns from {HERE}: its metrics() ") and said in message, message
    assert "\n" not in message


def test_a_kind_calling_sys_exit_is_its_failure_not_the_end_of_the_run():
    from reporter.measure.task import KindError

    class Exits(Classification):
        name = "exits"

        def correct(self, task, out, y):
            raise SystemExit(3)

    with pytest.raises(KindError, match=r"kind exits from .*: its correct\(\) called sys.exit\(3\)"):
        _task(Exits()).correct(OUT, Y)


def test_per_sample_answers_must_be_one_finite_number_per_sample():
    from reporter.measure.task import KindError

    class Short(Classification):
        name = "short"

        def correct(self, task, out, y):
            return np.ones(len(out) - 1, bool)

        def agreement(self, task, out, ref):
            return np.array([1.0, np.nan, 1.0, 1.0])

    task = _task(Short())
    with pytest.raises(KindError, match=r"its correct\(\) returned 3 rows for 4 samples"):
        task.correct(OUT, Y)
    with pytest.raises(KindError, match=r"its agreement\(\) returned nan for sample 1"):
        task.agreement(OUT, OUT)


def test_a_kinds_own_main_metric_is_checked_too():
    from reporter.measure.task import KindError

    class NanScore(Score):
        bootstrapped = True

        def measure(self, out):
            return Scored(float("nan"), boot=np.zeros(3))

        def value(self, out):
            return np.float32("nan")

    class OwnScore(Classification):
        name = "own_score"

        def score(self, task, y):
            return NanScore(task, y, "my score")

    score = _task(OwnScore()).score(Y)
    assert score.name == "my score" and score.bootstrapped  # the score's own, but for its values
    with pytest.raises(KindError, match=r"kind own_score from .*: its score\(\)\.measure\(\) returned nan as its value"):
        score.measure(OUT)
    with pytest.raises(KindError, match=r"its score\(\)\.value\(\) returned nan"):
        score.value(OUT)


def test_only_plugin_kinds_are_checked_and_what_passes_is_kept_as_returned():
    """The built-in kinds are called as they are (their conformance test proves them, and their failures keep their
    own words: tests/test_measurement_failures.py); a plug-in's answers that pass are handed on unchanged."""
    from reporter.measure.kinds.classification import KIND
    from reporter.measure.task import plugin

    assert not plugin(KIND) and plugin(OwnAccuracy())
    found = Metrics(accuracy=np.float32(0.5), per_class=[ClassMetrics(0, 0.5, 0.5, 0.5, 3)], user={"mine": 2.0},
                    confusion_matrix=[[1, 2], [3, 4]])
    assert _task(_metrics_returning(found)).metrics(Y, OUT, None) is found


def test_a_kinds_score_failing_as_the_run_starts_is_one_line_naming_it():
    from reporter.core.errors import InputError
    from reporter.inputs import metric

    class NoScore(Classification):
        name = "no_score"

        def score(self, task, y):
            raise KeyError("labels")

    with pytest.raises(InputError) as caught:
        metric.task_score(_task(NoScore()), Y)
    assert str(caught.value) == f"kind no_score from {HERE}: its score() raised KeyError: 'labels'"
