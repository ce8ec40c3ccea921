"""Issue 47, point 4: a user's metric returns real numbers only, and one that never varies decides nothing.

* A metric returning the string "0.5" is refused like any other type that is not a number (one line naming
  the metric); the run goes on and reads the task's own metric (accuracy) instead, and says so.
* int, float, numpy scalars (and a 0-d numpy array) are numbers.
* A metric that gives every model, float included, the same value although their outputs differ is warned
  about and not used: the decision reads accuracy, checked here against accuracy computed with numpy from
  plain LiteRT runs of the written .tflite files (tests/independent.py).

The metric module sits beside the data (`--metric MODULE:FUNCTION` finds it there), as a user keeps it.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

import independent

METRICS = textwrap.dedent('''
    import numpy as np

    def as_text(y_true, y_pred):
        return "0.5"

    def constant(y_true, y_pred):
        return np.float64(0.5)

    def accuracy32(y_true, y_pred):
        return np.float32(np.mean(np.argmax(y_pred, axis=1) == y_true))
''')
VARIANTS = "float,drq,fiq"


def _run(mlp_files, tmp_path, capfd, run_cli, function: str):
    """(exit code, the terminal's stderr, the report folder, report.json) of a run with q47_metrics:`function`,
    the module beside a copy of the data."""
    model, data = mlp_files
    beside = tmp_path / "data"
    beside.mkdir()
    shutil.copy(data, beside / "data.npz")
    (beside / "q47_metrics.py").write_text(METRICS)
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(model, beside / "data.npz", out, "--variants", VARIANTS, "--formats", "json,md",
                   "--latency-runs", "0", "--metric", f"q47_metrics:{function}", name=function, quiet=False)
    err = capfd.readouterr().err
    folder = out / function
    return code, err, folder, json.loads((folder / "report.json").read_text())


def _truth(folder: Path, data: Path, names) -> dict[str, np.ndarray]:
    """Each model's right/wrong per sample, from its written .tflite run by plain LiteRT."""
    arrays = np.load(data)
    return {name: independent.predictions((folder / f"{name}.tflite").read_bytes(), arrays["x"]) == arrays["y"]
            for name in names}


def _fell_back(report: dict, err: str, function: str, said: str):
    lines = [line for line in err.splitlines() if "--metric" in line]
    assert len(lines) == 1, err[-3000:]
    assert f"q47_metrics:{function}" in lines[0] and said in lines[0] and "accuracy instead" in lines[0], lines
    assert "Traceback" not in err
    for v in report["variants"]:
        if v["status"] == "ok" and v["metrics"]:
            assert v["metrics"]["main"] is None, (v["name"], v["metrics"]["main"])  # accuracy is the main metric
            assert v["metrics"]["accuracy"] is not None


@pytest.mark.slow
def test_a_metric_returning_a_string_is_refused_and_the_run_reads_accuracy(mlp_files, tmp_path, capfd, run_cli):
    code, err, folder, report = _run(mlp_files, tmp_path, capfd, run_cli, "as_text")
    assert code == 0, (code, err[-3000:])
    _fell_back(report, err, "as_text", "returned str '0.5', not a number")
    errors = [(v.get("measurement_errors") or {}).get("user_metric") for v in report["variants"]]
    assert any(e and "as_text" in e and "not a number" in e for e in errors), errors
    truth = _truth(folder, tmp_path / "data" / "data.npz", ("float", "fiq"))
    for v in report["variants"]:
        if v["name"] in truth:
            assert v["metrics"]["accuracy"] == pytest.approx(float(np.mean(truth[v["name"]])), abs=1e-12)
    summary = (folder / "summary.md").read_text()
    assert "reads accuracy instead" in summary and "0.5 against" not in summary


@pytest.mark.slow
def test_a_constant_metric_is_warned_about_and_the_decision_reads_accuracy(mlp_files, tmp_path, capfd, run_cli):
    from scipy.stats import binomtest

    code, err, folder, report = _run(mlp_files, tmp_path, capfd, run_cli, "constant")
    assert code == 0, (code, err[-3000:])
    _fell_back(report, err, "constant", "same value (0.5")
    assert "same value" in (folder / "run.log").read_text()
    decided = {v["name"]: v for v in report["findings"]["variants"]}
    truth = _truth(folder, tmp_path / "data" / "data.npz", [n for n in ("float", "drq", "fiq", "selective")
                                                            if n in decided and decided[n]["ok"]])
    assert {"float", "drq", "fiq"} <= set(truth), sorted(decided)
    assert len({round(float(np.mean(t)), 12) for t in truth.values()}) > 1  # accuracy tells them apart
    for name, right in truth.items():
        row = decided[name]
        assert row["accuracy"] == pytest.approx(float(np.mean(right)), abs=1e-12), name
        assert row["score_name"] in ("", "accuracy") and row["score_share"], row
        if name == "float":
            continue
        delta = float(np.mean(right) - np.mean(truth["float"]))
        assert row["vs_float"]["delta"] == pytest.approx(delta, abs=1e-12), name
        gained, lost = int(np.sum(right & ~truth["float"])), int(np.sum(~right & truth["float"]))
        p = 1.0 if gained + lost == 0 else binomtest(gained, gained + lost, 0.5).pvalue
        assert row["vs_float"]["p_value"] == pytest.approx(p, rel=1e-6, abs=1e-12), name
    headline = " ".join(report["findings"]["headline"])
    assert "0.5 against" not in headline and "%" in headline, headline
    summary = (folder / "summary.md").read_text()
    assert "q47_metrics:constant" in summary and "same value" in summary


@pytest.mark.slow
def test_a_numpy_scalar_metric_is_used(mlp_files, tmp_path, capfd, run_cli):
    code, err, folder, report = _run(mlp_files, tmp_path, capfd, run_cli, "accuracy32")
    assert code == 0, (code, err[-3000:])
    assert not [line for line in err.splitlines() if "--metric" in line], err[-3000:]
    truth = _truth(folder, tmp_path / "data" / "data.npz", ("float", "fiq"))
    for v in report["variants"]:
        if v["name"] in truth:
            main = v["metrics"]["main"]
            assert main["name"] == "accuracy32"
            assert main["value"] == pytest.approx(float(np.mean(truth[v["name"]])), abs=1e-6)


# --- without a run ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("result", [0.5, 1, np.float32(0.5), np.float64(0.25), np.int64(1), np.array(0.5),
                                    {"a": np.float16(0.5)}, np.full(4, 0.5, np.float32)])
def test_real_numbers_and_numpy_scalars_are_accepted(result):
    from reporter.measure.scoring import UserScore

    score = UserScore("m", lambda t, p: result, np.zeros(4), 4)
    value = score.value(np.zeros((4, 2)))
    assert isinstance(value, float) and value == pytest.approx(float(np.mean(next(iter(result.values())))
                                                                     if isinstance(result, dict) else np.mean(result)))


@pytest.mark.parametrize("result, named", [("0.5", "str '0.5'"), (b"0.5", "bytes"), ({"auc": "0.9"}, "['auc']"),
                                           (["0.5"] * 4, "str '0.5'"), (np.array("0.5"), "ndarray"),
                                           (None, "NoneType"), (0.5 + 0j, "complex")])
def test_anything_but_a_real_number_is_refused_naming_the_metric(result, named):
    from reporter.measure.scoring import UserScore

    score = UserScore("my_metric", lambda t, p: result, np.zeros(4), 4)
    with pytest.raises(ValueError) as caught:
        score.value(np.zeros((4, 2)))
    message = str(caught.value)
    assert "\n" not in message and "my_metric" in message and named in message and "not a number" in message


class _Fallback:
    name = "accuracy"

    def measure(self, out):
        from reporter.measure.scoring import Scored

        return Scored(float(np.mean(np.argmax(out, axis=1) == 0)))


def _measurer(outputs: dict, values: dict, fallback=True, boot=None):
    from reporter.measure.measurer import Measurer
    from reporter.measure.scoring import Scored, UserScore

    user = UserScore("m", lambda t, p: 0.0, np.zeros(3), 3)
    return Measurer(Path("."), None, None, None, score=user, fallback=_Fallback() if fallback else None,
                    outputs=dict(outputs), scored={k: Scored(v, boot=boot) for k, v in values.items()})


def test_a_constant_metric_falls_back_when_the_tasks_own_metric_tells_the_models_apart():
    a, b = np.eye(3), np.tile([1.0, 0.0, 0.0], (3, 1))  # accuracy (class 0 right) 1/3 and 1
    m = _measurer({"float": a, "fiq": b}, {"float": 0.5, "fiq": 0.5})
    assert "same value (0.5, float included) although accuracy tells them apart" in m.score_error
    assert isinstance(m.score, _Fallback)
    assert m.scored["float"].value == pytest.approx(1 / 3) and m.scored["fiq"].value == pytest.approx(1.0)
    # outputs that differ but an accuracy that ties as well: a coarse metric, not a constant one
    tied = _measurer({"float": a, "fiq": np.eye(3)[::-1]}, {"float": 0.5, "fiq": 0.5})
    assert tied.score_error == "" and not isinstance(tied.score, _Fallback)
    same = _measurer({"float": a, "fiq": a.copy()}, {"float": 0.5, "fiq": 0.5})  # the same outputs
    assert same.score_error == "" and not isinstance(same.score, _Fallback)
    varies = _measurer({"float": a, "fiq": b}, {"float": 0.5, "fiq": 0.4})
    assert varies.score_error == "" and not isinstance(varies.score, _Fallback)


def test_without_a_task_metric_a_metric_the_same_on_every_resample_falls_back_to_none():
    a, b = np.eye(3), np.tile([1.0, 0.0, 0.0], (3, 1))
    m = _measurer({"float": a, "fiq": b}, {"float": 0.5, "fiq": 0.5}, fallback=False, boot=np.full(10, 0.5))
    assert "same on any of the samples" in m.score_error and m.score is None and not m.scored
    varying = _measurer({"float": a, "fiq": b}, {"float": 0.5, "fiq": 0.5}, fallback=False,
                        boot=np.linspace(0.4, 0.6, 10))
    assert varying.score_error == "" and varying.score is not None
