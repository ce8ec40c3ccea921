"""The user's metric (`--metric FILE.py:FUNCTION`) called once per model, labels optional for it, and the search's
stand-in target reading what the task reads.

* Cost: a metric that counts its calls (each call writes its number of rows) is called on the whole evaluation set
  at most once per model measured (+2), never once per bootstrap resample; a metric that returns one number gets its
  interval and paired test from batch means (the same seeded blocks for every model), checked here against numpy /
  scipy on what the written .tflite files output under plain LiteRT (tests/independent.py).
* Labels: a data file with only x, x_calib and meta_* arrays, and a `y` of another shape than the output, both run;
  a `y` with another number of rows is one line naming it.
* The stand-in: a model whose single output is a large-range regression part (boxes, ~100s) concatenated with a small
  class-score part, its targets of the output's shape (a regression); FIQ's int8 output range, set by the boxes, wipes
  out the class scores. The output error in units of float's variance cannot see that; the search must choose on the
  user's metric, and no advice about x_calib may be given when x and x_calib come from one generator.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

import independent
import model_fixtures as M
from conftest import run_cli

VERSION = 2
FLAGS = ("--latency-runs", "0")

COUNTING = '''
import numpy as np
from pathlib import Path

CALLS = 0
LOG = Path(__file__).with_name("calls.txt")


def acc(y_true, y_pred):
    global CALLS
    CALLS += 1
    with open(LOG, "a") as f:
        f.write(f"{len(y_pred)}\\n")
    return float(np.mean(np.argmax(y_pred, axis=1) == y_true))
'''

WITHOUT_Y = '''
import numpy as np


def acc(y_true, y_pred, label):
    if y_true is not None:
        raise ValueError("expected no labels")
    return float(np.mean(np.argmax(y_pred, axis=1) == label))


def acc_from_rows(y_true, y_pred):
    if y_true.shape[1:] != (3, 1):
        raise ValueError(f"labels of shape {y_true.shape}")
    return float(np.mean(np.argmax(y_pred, axis=1) == y_true[:, 0, 0]))
'''

CLASS_PART = '''
import numpy as np


def cls_acc(y_true, y_pred):
    return float(np.mean(np.argmax(y_pred[:, 4:], axis=1) == np.argmax(y_true[:, 4:], axis=1)))
'''


def _measured(report: dict) -> list[dict]:
    """Every model report.json holds as measured: the variants, the recommended model, its alternatives, the rule's
    model, the variants' fixes and the repair ladder's models."""
    found = [v for v in report["variants"] if v["status"] == "ok"]
    rec = report.get("recommendation") or {}
    found += [rec["selective"]] if rec.get("selective") else []
    found += [a["model"] for a in rec.get("alternatives") or [] if a.get("model")]
    found += [(rec.get("rule") or {}).get("selective")] if (rec.get("rule") or {}).get("selective") else []
    found += [v["fix"]["model"] for v in report["variants"] if (v.get("fix") or {}).get("model")]
    found += [r["model"] for r in report.get("repairs") or [] if r.get("model")]
    return [v for v in found if v and v.get("status") == "ok"]


@pytest.fixture(scope="module")
def counted(mlp_files, tmp_path_factory):
    """The demo breast-cancer run with the counting metric: (report folder, report.json, rows of each call, data)."""
    folder = tmp_path_factory.mktemp("counted")
    metric = folder / "count.py"
    metric.write_text(COUNTING)
    model, data = mlp_files
    out = folder / "out"
    assert run_cli(model, data, out, "--metric", f"{metric}:acc", "--variants", "float,drq,fiq", "--formats", "json",
                   *FLAGS, name="bc") == 0
    rows = [int(line) for line in (folder / "calls.txt").read_text().split()]
    return out / "bc", json.loads((out / "bc" / "report.json").read_text()), rows, np.load(data)


def test_the_metric_is_called_on_the_whole_set_once_per_model(counted):
    folder, report, rows, data = counted
    n = len(data["x"])
    models = _measured(report)
    whole = sum(r == n for r in rows)
    assert len(models) >= 4  # float, drq, fiq, the recommended model at least
    assert whole <= len(models) + 2, (whole, len(models))
    assert len(rows) <= 4 * 21 * len(models)  # blocks and the search's parts: a few passes, never 200 per model
    assert all(r <= n for r in rows)
    log = (folder / "run.log").read_text()
    assert f"--metric acc: {len(rows)} calls ({whole} on every sample" in log  # the cost, stated in run.log


def test_a_scalar_metrics_interval_and_test_are_batch_means(counted):
    from reporter.measure.scoring import BLOCK_SEED

    folder, report, rows, data = counted
    x, y = data["x"], data["y"]
    main = {v["name"]: v["metrics"]["main"] for v in _measured(report)}
    blocks = main["fiq"]["blocks"]
    assert blocks and not main["fiq"]["per_sample"]
    split = np.array_split(np.random.default_rng(BLOCK_SEED).permutation(len(x)), blocks)

    def figures(name):
        pred = independent.outputs((folder / f"{name}.tflite").read_bytes(), x).argmax(axis=1)
        return float(np.mean(pred == y)), np.array([np.mean(pred[b] == y[b]) for b in split])

    flt_value, flt_blocks = figures("float")
    for name in ("fiq", "selective"):
        value, per_block = figures(name)
        got = main[name]
        half = stats.t.ppf(0.975, blocks - 1) * per_block.std(ddof=1) / np.sqrt(blocks)
        assert got["value"] == pytest.approx(value)
        assert (got["low"], got["high"]) == (pytest.approx(value - half), pytest.approx(value + half))
        paired = got["paired"]["float"]
        assert paired["delta"] == pytest.approx(value - flt_value)
        diff = per_block - flt_blocks
        expected = 1.0 if not diff.any() else stats.ttest_rel(per_block, flt_blocks).pvalue
        assert paired["p_value"] == pytest.approx(expected, rel=1e-6, abs=1e-12)
    assert main["fiq"]["paired"]["float"]["p_value"] < 0.05  # FIQ's collapse, beyond noise on 11 blocks


@pytest.fixture(scope="module")
def metric_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("metrics") / "labels_metric.py"
    path.write_text(WITHOUT_Y)
    return path


def _main_values(out: Path, name: str) -> dict:
    report = json.loads((out / name / "report.json").read_text())
    return {v["name"]: v["metrics"]["main"] for v in report["variants"] if v["status"] == "ok"}


def test_data_without_y_run_with_a_metric_reading_meta(mlp_files, metric_file, tmp_path):
    model, data = mlp_files
    arrays = np.load(data)
    path = tmp_path / "no_y.npz"
    np.savez(path, x=arrays["x"], x_calib=arrays["x_calib"], meta_label=arrays["y"])
    out = tmp_path / "out"
    assert run_cli(model, path, out, "--metric", f"{metric_file}:acc", "--variants", "float,fiq", "--formats", "json",
                   *FLAGS, name="m") == 0
    main = _main_values(out, "m")
    for name in ("float", "fiq"):
        assert main[name]["name"] == "acc"  # the user's metric, not a fallback: it got y_true None and the meta
        expected = independent.accuracy((out / "m" / f"{name}.tflite").read_bytes(), arrays["x"], arrays["y"])
        assert main[name]["value"] == pytest.approx(expected)


def test_y_of_another_shape_is_the_metrics_and_a_short_y_is_one_line(mlp_files, metric_file, tmp_path, capsys):
    model, data = mlp_files
    arrays = np.load(data)
    rows = np.stack([arrays["y"], 1 - arrays["y"], arrays["y"]], axis=1)[:, :, None].astype(np.float32)  # (n, 3, 1)
    path = tmp_path / "rows.npz"
    np.savez(path, x=arrays["x"], x_calib=arrays["x_calib"], y=rows)
    out = tmp_path / "out"
    assert run_cli(model, path, out, "--metric", f"{metric_file}:acc_from_rows", "--variants", "float,fiq",
                   "--formats", "json", *FLAGS, name="m") == 0
    main = _main_values(out, "m")
    expected = independent.accuracy((out / "m" / "fiq.tflite").read_bytes(), arrays["x"], arrays["y"])
    assert main["fiq"]["name"] == "acc_from_rows" and main["fiq"]["value"] == pytest.approx(expected)
    short = tmp_path / "short.npz"
    np.savez(short, x=arrays["x"], x_calib=arrays["x_calib"], y=rows[:-3])
    capsys.readouterr()
    code = run_cli(model, short, tmp_path / "out2", "--metric", f"{metric_file}:acc_from_rows", "--variants",
                   "float,fiq", *FLAGS, name="m")
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1 and "Traceback" not in err, err
    assert "short.npz" in lines[0] and f"'y' has {len(rows) - 3}" in lines[0], lines[0]


# --- the search's stand-in target ------------------------------------------------------------------------------
def _generate(n: int, seed: int):
    """(x, class ids, boxes): three classes of 6 features (a shifted feature each, Gaussian noise), and four box
    values in the hundreds read from the features. x and x_calib come from this one generator."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 3, n)
    x = 1.5 * np.eye(3, 6)[c] + rng.normal(0, 1.0, (n, 6))
    return x.astype(np.float32), c, (100.0 * (x[:, :4] + 1.0)).astype(np.float32)


def _build_boxes_and_scores(folder: Path):
    import keras

    M.seed()
    x, c, boxes = _generate(2000, 0)
    inp = keras.Input((6,))
    hidden = keras.layers.Dense(32, activation="relu")(inp)
    box = keras.layers.Dense(4, name="boxes")(hidden)
    scores = keras.layers.Dense(3, activation="softmax", name="scores")(hidden)
    training = keras.Model(inp, [box, scores])
    training.compile(keras.optimizers.Adam(1e-2), ["mse", "sparse_categorical_crossentropy"], loss_weights=[1e-4, 1])
    training.fit(x, [boxes, c], epochs=30, batch_size=M.BATCH_SIZE, verbose=0)
    model = keras.Model(inp, keras.layers.Concatenate()([box, scores]), name="boxes_and_scores")
    model.save(folder / "model.keras")
    x_eval, c_eval, boxes_eval = _generate(300, 1)
    x_calib, _, _ = _generate(500, 2)
    y = np.concatenate([boxes_eval, np.eye(3, dtype=np.float32)[c_eval]], axis=1)  # targets of the output's shape
    np.savez(folder / "data.npz", x=x_eval, y=y, x_calib=x_calib)


@pytest.fixture(scope="module")
def boxes_run(demo_cache, tmp_path_factory):
    model, data = M.ensure(demo_cache, f"metric-cost-v{VERSION}", "boxes_and_scores", _build_boxes_and_scores)
    folder = tmp_path_factory.mktemp("boxes")
    metric = folder / "cls.py"
    metric.write_text(CLASS_PART)
    out = folder / "out"
    assert run_cli(model, data, out, "--metric", f"{metric}:cls_acc", "--variants", "float,fiq", "--formats",
                   "json,md", *FLAGS, name="boxes") == 0
    return out / "boxes", json.loads((out / "boxes" / "report.json").read_text()), np.load(data)


def test_the_search_chooses_on_the_metric_where_the_output_variance_is_blind(boxes_run):
    folder, report, data = boxes_run
    x, c = data["x"], data["y"][:, 4:].argmax(axis=1)
    main = {v["name"]: v["metrics"]["main"] for v in _measured(report)}

    def cls_acc(name):
        out = independent.outputs((folder / f"{name}.tflite").read_bytes(), x)
        return float(np.mean(out[:, 4:].argmax(axis=1) == c))

    flt, fiq = cls_acc("float"), cls_acc("fiq")
    assert main["fiq"]["value"] == pytest.approx(fiq) and fiq < flt - 0.2  # the class part is lost in FIQ
    out_f = independent.outputs((folder / "float.tflite").read_bytes(), x)
    out_q = independent.outputs((folder / "fiq.tflite").read_bytes(), x)
    assert 1 - np.mean((out_q - out_f) ** 2) / np.var(out_f) > 0.99  # what the variance stand-in would have seen
    search = report["recommendation"]["search"]
    sel = search["selection_data"]
    assert "cls_acc" in sel["score"] and "variance" not in sel["score"] + search["target_text"]
    assert sel["source"] == "x" and sel["overlaps_evaluation"]  # labelled samples: the metric reads y
    assert search["steps"][0]["selection_score"] < search["target"]  # FIQ misses the stand-in: it sees the loss
    chosen = report["recommendation"]["selective"]
    assert chosen is not None and main["selective"]["value"] == pytest.approx(cls_acc("selective"))
    assert cls_acc("selective") > fiq + 0.2
    text = (folder / "summary.md").read_text() + json.dumps(report["findings"])
    assert "look like the evaluation data" not in text


def test_x_calib_advice_only_when_the_data_were_measured_to_differ():
    from reporter.pipeline.conclude import findings_of, report_from_json
    from reporter.render.words.recommendation import sentence

    base = report_from_json((Path(__file__).parent / "fixtures" / "report.json").read_text())
    rec = base.recommendation
    said = {}
    for differs in (None, False, True):
        sel = dataclasses.replace(rec.search.selection_data, differs=differs)
        search = dataclasses.replace(rec.search, target_met=True, selection_data=sel)
        changed = dataclasses.replace(rec, selective=None, denylisted_nodes=[], alternatives=[], search=search,
                                      gap=dataclasses.replace(rec.gap, status="gap"))
        report = dataclasses.replace(base, recommendation=changed, findings=None)
        said[differs] = sentence(report, findings_of(report))
    assert "look like the evaluation data" in said[True]
    assert not any("look like the evaluation data" in said[k] for k in (None, False))
    assert "not measured to differ" in said[False]


def test_the_data_differ_only_by_a_measured_difference():
    from reporter.core import variants
    from reporter.search import engine, recommend
    from reporter.measure.task import Task
    from reporter.core import tasks

    rng = np.random.default_rng(0)
    task = Task(tasks.of("classification"), 3)
    flt = rng.normal(size=(400, 3))
    fiq = flt.copy()
    fiq[:8] = np.roll(fiq[:8], 1, axis=1)  # FIQ's top class changes on 8 evaluation samples (2 %), as on the selection samples
    sel = recommend.Selection(None, recommend.SelectionData("x_calib", 400, "agreement", False), None)
    m = SimpleNamespace(outputs={variants.FLOAT: flt, variants.FIQ: fiq}, heads=[], head_outputs={})
    agree = flt.argmax(1) == fiq.argmax(1)
    start = engine.Evaluation(frozenset(), float(agree.mean()), agree, 1)
    from reporter.findings.rule import Acceptance

    info = recommend.on_evaluation(m, recommend.Scoring(task, stand=recommend.AGREEMENT), start, sel, Acceptance(0.97),
                                   frozenset())
    assert info.fiq_on_evaluation == pytest.approx(agree.mean()) and info.differs is False
    fiq[8:80] = np.roll(fiq[8:80], 1, axis=1)  # the evaluation data show a loss the selection samples (start) do not
    info = recommend.on_evaluation(m, recommend.Scoring(task, stand=recommend.AGREEMENT), start, sel, Acceptance(0.97),
                                   frozenset())
    assert info.fiq_on_evaluation < 0.97 and info.differs is True
