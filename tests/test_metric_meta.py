"""Issue 34, points 5-7: a metric that sees `meta_<name>` arrays and may score each sample, the batch index's
columns per main metric, and the p-value small print.

The fixture: an anomaly autoencoder on scikit-learn's digits (64 -> 8 -> 64, linear output), trained on the
digits 0-8 only; the evaluation set mixes held-out 0-8 digits with every 9, and `meta_anomaly` marks the 9s.
Its real figure is the ROC AUC of the reconstruction error against those labels; every number the report
shows is checked here against scikit-learn / scipy on the written .tflite files run by the plain LiteRT
interpreter (tests/independent.py).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

import model_fixtures as M
from conftest import load_report

VERSION = 1

AUC_METRIC = textwrap.dedent('''
    import numpy as np
    from sklearn.metrics import roc_auc_score

    def auc(y_true, y_pred, anomaly):
        error = ((np.asarray(y_true) - np.asarray(y_pred)) ** 2).mean(axis=1)
        return roc_auc_score(anomaly, error)

    def recon_mse(y_true, y_pred):
        return ((np.asarray(y_true) - np.asarray(y_pred)) ** 2).mean(axis=1)  # one value per sample

    def everything(y_true, y_pred, **meta):
        return float(len(meta))
''')


def build_anomaly(folder: Path):
    import keras
    from sklearn.datasets import load_digits

    x, digit = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    normal, odd = x[digit != 9], x[digit == 9]
    x_tr, x_te = M.split(normal, digit[digit != 9])[:2]
    M.seed()
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(64)], name="anomaly_ae")
    M.train(model, x_tr, x_tr, "mse", 1e-2, epochs=15)
    x_eval = np.concatenate([x_te[:300], odd[:100]])
    anomaly = np.r_[np.zeros(300, np.int64), np.ones(100, np.int64)]
    path = folder / "model.keras"
    model.save(path)
    data = folder / "data.npz"
    np.savez(data, x=x_eval, y=x_eval, x_calib=x_tr, meta_anomaly=anomaly)
    return path, data


@pytest.fixture(scope="module")
def anomaly(demo_cache):
    return M.ensure(demo_cache, f"metric-meta-v{VERSION}", "anomaly_ae", build_anomaly)


@pytest.fixture(scope="module")
def metric_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("metric") / "anomaly_metrics.py"
    path.write_text(AUC_METRIC)
    return path


def _variant_tflite(folder: Path, name: str) -> bytes:
    files = sorted(folder.glob(f"*{name}*.tflite"))
    assert files, f"no .tflite for {name} in {sorted(p.name for p in folder.iterdir())}"
    return files[0].read_bytes()


def _main(report, name):
    return report.variant(name).metrics.main


# --- point 5: meta arrays and per-sample metrics ----------------------------------------------------------

@pytest.mark.slow
def test_anomaly_auc_through_meta_matches_sklearn_on_the_written_tflite(anomaly, metric_file, tmp_path, run_cli):
    from sklearn.metrics import roc_auc_score

    import independent
    from reporter.core import variants

    model, data = anomaly
    code = run_cli(model, data, tmp_path, "--metric", f"{metric_file}:auc", "--task", "regression",
                   "--variants", "float,fiq", name="ae", latency_runs=0)
    assert code == 0, code  # every model reported (2 would be a usage error: nothing ran)
    report = load_report(tmp_path / "ae")
    arrays = np.load(data)
    for v in (variants.FLOAT, variants.FIQ):
        out = independent.outputs(_variant_tflite(tmp_path / "ae", v), arrays["x"])
        error = ((arrays["y"] - out) ** 2).mean(axis=1)
        expected = roc_auc_score(arrays["meta_anomaly"], error)
        assert _main(report, v).name == "auc"
        assert _main(report, v).value == pytest.approx(expected, abs=1e-6)
        assert 0.6 < expected < 1.0  # the 9s reconstruct worse: a detector above chance, not a constant


@pytest.mark.slow
def test_per_sample_metric_is_their_mean_with_an_exact_paired_test(anomaly, metric_file, tmp_path, run_cli):
    from scipy.stats import ttest_rel

    import independent
    from reporter.core import judgement as jd
    from reporter.core import statistics
    from reporter.core import variants

    model, data = anomaly
    code = run_cli(model, data, tmp_path, "--metric", f"{metric_file}:recon_mse", "--metric-mode", "min",
                   "--task", "regression", "--variants", "float,fiq", name="ae", latency_runs=0)
    assert code == 0, code  # every model reported (2 would be a usage error: nothing ran)
    report = load_report(tmp_path / "ae")
    arrays = np.load(data)
    per = {v: ((arrays["y"] - independent.outputs(_variant_tflite(tmp_path / "ae", v), arrays["x"])) ** 2).mean(axis=1)
           .astype(np.float64) for v in (variants.FLOAT, variants.FIQ)}
    fiq = _main(report, variants.FIQ)
    assert fiq.value == pytest.approx(per[variants.FIQ].mean(), rel=1e-5)
    assert not fiq.higher_is_better
    paired = fiq.paired[variants.FLOAT]
    expected_p = ttest_rel(per[variants.FIQ], per[variants.FLOAT]).pvalue
    assert paired.p_value == pytest.approx(expected_p, rel=1e-3, abs=1e-12)
    # oriented: positive is better, and a larger error is worse
    assert paired.delta == pytest.approx(per[variants.FLOAT].mean() - per[variants.FIQ].mean(), rel=1e-4)
    assert not statistics.is_resample_floor(paired.p_value)
    assert fiq.per_sample  # kept in report.json: the report names the paired t-test, never a bootstrap
    text = " ".join(p.read_text() for p in (tmp_path / "ae").glob("*.md")) + (tmp_path / "ae" / "report.html").read_text()
    assert "paired t-test" in text
    assert "loses" not in " ".join(report.findings.headline)


def test_only_declared_meta_arrays_are_passed():
    from reporter.measure.scoring import UserScore

    seen = {}

    def auc(y_true, y_pred, anomaly):
        seen["anomaly"] = anomaly
        return float(np.mean(anomaly))

    score = UserScore("auc", auc, np.zeros((4, 2)), 4)
    score.meta = {"anomaly": np.array([0, 1, 1, 1]), "site": np.arange(4)}
    assert score.value(np.zeros((4, 2))) == 0.75
    assert list(seen) == ["anomaly"] and not seen["anomaly"].flags.writeable

    def all_of_them(y_true, y_pred, **meta):
        return float(len(meta))

    kw = UserScore("n", all_of_them, np.zeros((4, 2)), 4)
    kw.meta = score.meta
    assert kw.value(np.zeros((4, 2))) == 2.0
    plain = UserScore("n", lambda t, p: 1.0, np.zeros((4, 2)), 4)
    plain.meta = score.meta
    assert plain.value(np.zeros((4, 2))) == 1.0  # a two-argument metric is called as before


def test_per_sample_metric_is_paired_without_resampling():
    from scipy.stats import ttest_rel

    from reporter.measure.scoring import UserScore

    calls = []

    def err(y_true, y_pred):
        calls.append(1)
        return np.abs(y_true - y_pred)[:, 0]

    rng = np.random.default_rng(0)
    y = rng.normal(size=(50, 1))
    a_out, b_out = y + rng.normal(0, 0.1, (50, 1)), y + rng.normal(0, 0.3, (50, 1))
    score = UserScore("err", err, y, 50, higher_is_better=False)
    a, b = score.measure(a_out), score.measure(b_out)
    assert len(calls) == 2  # one call per model: no 200 bootstrap calls
    delta, p = score.compare(b, a)
    ea, eb = np.abs(y - a_out)[:, 0], np.abs(y - b_out)[:, 0]
    assert delta == pytest.approx(ea.mean() - eb.mean())  # b is worse: negative
    assert delta < 0
    assert p == pytest.approx(ttest_rel(eb, ea).pvalue)
    low, high = score.interval(b)
    assert low < eb.mean() < high


def test_per_sample_metric_of_the_wrong_length_is_one_error():
    from reporter.measure.scoring import UserScore

    score = UserScore("err", lambda t, p: np.zeros(3), np.zeros((5, 1)), 5)
    with pytest.raises(ValueError, match=r"returned an array of shape \(3,\).*one value per sample \(5\)"):
        score.value(np.zeros((5, 1)))


def test_meta_arrays_are_read_from_npz_npy_and_a_data_function(tmp_path, monkeypatch):
    from reporter.core.errors import InputError
    from reporter.inputs.data_loading import load_data

    x, y = np.zeros((5, 3), np.float32), np.zeros(5, np.int64)
    np.savez(tmp_path / "d.npz", x=x, y=y, meta_anomaly=np.array([0, 1, 0, 1, 1]))
    assert load_data(str(tmp_path / "d.npz"), 10).meta["anomaly"].tolist() == [0, 1, 0, 1, 1]
    folder = tmp_path / "arrays"
    folder.mkdir()
    for k, v in (("x", x), ("y", y), ("meta_site", np.arange(5))):
        np.save(folder / f"{k}.npy", v)
    assert load_data(str(folder), 10).meta["site"].tolist() == [0, 1, 2, 3, 4]
    (tmp_path / "mydata.py").write_text(
        "import numpy as np\ndef load():\n    return {'x': np.zeros((5, 3), np.float32), 'y': np.zeros(5),"
        " 'meta': {'anomaly': np.ones(5)}}\n")
    monkeypatch.chdir(tmp_path)
    assert load_data("mydata:load", 10).meta["anomaly"].tolist() == [1.0] * 5
    np.savez(tmp_path / "short.npz", x=x, y=y, meta_anomaly=np.array([0, 1]))
    with pytest.raises(InputError, match=r"short.npz: 'x' has 5 samples but 'meta_anomaly' has 2"):
        load_data(str(tmp_path / "short.npz"), 10)


def test_a_metric_asking_for_a_missing_meta_array_is_one_line(tmp_path):
    from reporter.core.errors import InputError
    from reporter.inputs import metric

    path = tmp_path / "m.py"
    path.write_text(AUC_METRIC)
    name, fn = metric.load(f"{path}:auc")
    with pytest.raises(InputError, match=r"takes anomaly, but the data hold no array meta_anomaly \(meta arrays"
                                         r" found: meta_site\)"):
        metric.check_meta(f"{path}:auc", fn, {"site": np.zeros(3)})
    metric.check_meta(f"{path}:auc", fn, {"anomaly": np.zeros(3)})


# --- point 7: the p-value small print ---------------------------------------------------------------------

def test_p_values_show_the_digits_that_decide_significance():
    from reporter.core import formatting as fmt
    from reporter.core import judgement as jd
    from reporter.core import statistics

    assert jd.significant(0.0498) and fmt.p_text(0.0498) == "p = 0.0498"
    assert not jd.significant(0.0502) and fmt.p_text(0.0502) == "p = 0.0502"
    assert fmt.p_text(0.05) == "p = 0.05" and not jd.significant(0.05)
    assert fmt.p_text(0.62) == "p = 0.62" and fmt.p_text(0.013) == "p = 0.013"
    assert fmt.p_text(0.04996) == "p = 0.04996"
    assert fmt.p_text(0.0004) == "p < 0.001"
    for p in (0.0498, 0.0502, 0.04999, 0.05001, 0.049, 0.051):  # the shown number decides as p does
        shown = float(fmt.p_text(p).split("= ")[1])
        assert (shown < jd.ALPHA) == jd.significant(p)


def test_a_resampling_floor_reads_p_below_one_over_b_plus_one():
    from reporter.core import formatting as fmt
    from reporter.core import judgement as jd
    from reporter.core import statistics

    all_worse = -np.linspace(0.1, 1.0, statistics.BOOTSTRAP_USER)  # no resample on the far side of zero
    p = statistics.bootstrap_p(all_worse)
    assert p == pytest.approx(1 / 201) and jd.significant(p)
    assert fmt.p_text(p) == "p < 0.005"
    assert fmt.p_text(statistics.bootstrap_p(-np.ones(statistics.BOOTSTRAP_DENSE))) == "p < 0.001"
    some = np.r_[np.ones(5), -np.ones(statistics.BOOTSTRAP_USER - 5)]
    assert statistics.bootstrap_p(some) == pytest.approx(2 * 6 / 201) and fmt.p_text(statistics.bootstrap_p(some)) == "p = 0.06"


def test_gap_words_for_a_lower_is_better_metric_say_worse_by():
    from reporter.core import judgement as jd
    from reporter.core import statistics
    from reporter.render.words.recommendation import Scale, searched_words

    said = searched_words("gap", jd.LOSES, 0.2433, 0.0498, None, Scale("recon_mse", False, "paired t-test"))
    assert said == "FIQ is worse by 0.2433 of recon_mse (paired t-test p = 0.0498)"
    assert "loses" not in said
    acc = searched_words("gap", jd.LOSES, 0.043, 1 / 201, None, Scale("accuracy", True, "McNemar"))
    assert acc == "FIQ loses 4.3 points (McNemar p < 0.005)"


# --- point 6: the batch index, a column per main metric ---------------------------------------------------

def _row(name, metric, share, higher, values, drop):
    from reporter.batch.index import IndexRow

    is_acc = metric == "accuracy"  # a classifier's accuracy: the index's `accuracy` column (Report.metric_plain)
    return IndexRow(name=name, status="ok", folder=name, links={}, accuracy=values if is_acc else {},
                    size_bytes={"float": 1000, "fiq": 300}, latency_ms={}, accuracy_drop=drop if is_acc else None,
                    suspects=0, gap_recovered=None, gate=None, metric=metric, metric_share=share,
                    higher_is_better=higher, scores={metric: values}, metric_drop=drop, metric_plain=is_acc)


def test_index_groups_models_by_main_metric_and_keeps_json_names(tmp_path):
    from reporter.batch.index import Index, IndexView, write

    rows = [_row("digits", "accuracy", True, True, {"float": 0.95, "fiq": 0.93}, 0.02),
            _row("ae", "recon_mse", False, False, {"float": 0.0123, "fiq": 0.0150}, 0.0027),
            _row("det", "auc", False, True, {"float": 0.97, "fiq": 0.96}, 0.01)]
    index = Index(2, "2026-01-01T00:00:00+00:00", "x", "q.toml", None, 1.0, rows)
    groups = IndexView(index).groups
    assert [g["title"] for g in groups] == ["accuracy (higher is better, a share)", "recon_mse (lower is better)",
                                            "auc (higher is better)"]
    assert [[c["row"].name for c in g["rows"]] for g in groups] == [["digits"], ["ae"], ["det"]]
    assert groups[0]["drop_label"] == "FIQ vs float (points, + is better)"
    assert groups[1]["drop_label"] == "FIQ vs float (recon_mse, + is better)"
    assert groups[0]["rows"][0]["drop"] == "−2.0" and groups[1]["rows"][0]["drop"] == "−0.0027"
    assert groups[1]["labels"][0].endswith("recon_mse") and groups[2]["labels"][2].endswith("auc")
    write(index, tmp_path)
    data = json.loads((tmp_path / "index.json").read_text())
    by = {r["name"]: r for r in data["rows"]}
    assert by["ae"]["scores"] == {"recon_mse": {"float": 0.0123, "fiq": 0.0150}} and by["ae"]["accuracy"] == {}
    assert by["ae"]["accuracy_drop"] is None and by["ae"]["higher_is_better"] is False
    assert by["digits"]["accuracy"]["fiq"] == 0.93
    md = (tmp_path / "index.md").read_text()
    assert "### recon_mse (lower is better)" in md and "### auc (higher is better)" in md
    # each table's header names its own metric: the accuracy table holds no AUC column and the reverse
    tables = md.split("### ")[1:]
    assert "auc" not in tables[0] and "accuracy" not in tables[2].split("\n")[0:3][-1]
    html = (tmp_path / "index.html").read_text()
    assert html.count('<table') == 3 and "recon_mse (lower is better)" in html


def test_a_two_head_headline_speaks_of_each_heads_measure():
    import dataclasses

    from reporter.model.findings import HeadFinding
    from reporter.model.report import GapStatus, OutputError
    from reporter.pipeline import conclude
    from reporter.pipeline.conclude import report_from_json
    from reporter.render.words import headline

    base = report_from_json((Path(__file__).parent / "fixtures" / "report.json").read_text())
    model = dataclasses.replace(base.model, num_classes=None, task="regression")
    errs = {"float": None, "drq": OutputError(0.01, 0.2), "fiq": OutputError(4.0, 9.0)}
    new = [dataclasses.replace(v, metrics=None, output_error=errs.get(v.name)) for v in base.variants]
    rec = dataclasses.replace(base.recommendation, search=None, method="rule", selective=None, gap=GapStatus(
        "not_measurable", reason="the model's output is not class scores, so there is no accuracy"))
    r = dataclasses.replace(base, variants=new, model=model, recommendation=rec, findings=None)
    found = conclude.findings_of(r)
    heads = [HeadFinding("boxes", "fiq", "output MSE", 4.0, text="MSE 4"),
             HeadFinding("classes", "fiq", "accuracy", 0.9, text="90.0 % (−1.0 points, p = 0.31)")]
    found = dataclasses.replace(found, heads=heads)
    line = headline._gap_line(r, found, found.variant("fiq"), found.variant("float"))
    assert "accuracy is not measured" not in line
    assert "output boxes, output MSE: MSE 4" in line and "output classes, accuracy: 90.0 %" in line
