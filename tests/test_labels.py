"""Labels read right (tests/label_fixtures.py): a model with k > 1 sigmoid units and multi-hot labels is
measured as multi-label (each label at >= 0.5, exact-match accuracy, Hamming loss, micro and macro F1,
per-label metrics, macro ROC AUC; no argmax, no confusion matrix), whole-number float labels of a softmax
classifier are read as class ids with a note, and labels that contradict the head are refused in one line.

Every number is checked against scikit-learn on what the written .tflite files output (plain LiteRT
signature runners, tests/independent.py), none of the tool's own code."""

import json
import re

import numpy as np
import pytest
from sklearn import metrics as skm

from conftest import has_word, one_error_line, run_recorded, measured_models
import label_fixtures as L

pytestmark = pytest.mark.slow

RUN = ("multilabel", "multilabel_collapse", "float_labels_softmax")
REFUSED = {"multihot_for_softmax": ("multi-hot", "multihot", "several labels", "more than one label"),
           "fractional_labels": ("whole number", "not class id", "not integer", "non-integer", "fraction",
                                 "class ids")}
VARIANTS = ("float", "drq", "fiq")
EXTRA = ("--formats", "json,md", "--latency-runs", "3")
THRESHOLD = 0.5
ALPHA = 0.05
EXACT = 1e-12


@pytest.fixture(scope="session")
def label_runs(demo_cache, tmp_path_factory, run_cli):
    """Each fixture in RUN run once: {name: (exit code, error, report folder, model path, data path)}."""
    out = tmp_path_factory.mktemp("labels_out")
    runs = {}
    for name in RUN:
        model, data = L.ensure(name, demo_cache)
        code, error = run_recorded(model, data, out, name, *EXTRA)
        runs[name] = (code, error, out / name, model, data)
    return runs


def _ok_run(label_runs, name):
    code, error, folder, model, data = label_runs[name]
    assert error is None, error
    assert code == 0, (code, (folder / "run.log").read_text()[-3000:] if (folder / "run.log").is_file() else "")
    return folder, json.loads((folder / "report.json").read_text()), model, data


def _variant(report, name):
    return next(v for v in report["variants"] if v["name"] == name)


def _measured(report):
    return measured_models(report)


def _outputs(folder, variant, x):
    """The one output of `variant`.tflite over `x`, fed by name to its signature runner: (N, k) float."""
    from independent import signature_input_order, signature_predict

    model = (folder / f"{variant}.tflite").read_bytes()
    (name,) = signature_input_order(model)
    (out,) = signature_predict(model, {name: x}).values()
    return np.asarray(out, np.float64).reshape(len(x), -1)


def _bits(scores):
    return (scores >= THRESHOLD).astype(np.int64)


def _mcnemar_p(reference_ok, variant_ok):
    """Exact McNemar two-sided p (scipy binomtest on the discordant counts), 1 with none."""
    from scipy.stats import binomtest

    b, c = int(np.sum(reference_ok & ~variant_ok)), int(np.sum(~reference_ok & variant_ok))
    return 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue), b, c


def _notices(report, kind, code):
    return [n for n in (report["findings"].get(kind) or []) if n.get("code") == code]



# --- multi-label ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ("multilabel", "multilabel_collapse"))
def test_a_sigmoid_head_with_multi_hot_labels_is_measured_as_multi_label(label_runs, name):
    folder, report, _, data_path = _ok_run(label_runs, name)
    y = np.load(data_path)["y"]
    assert report["model"]["task"] == "multilabel", report["model"]
    assert report["dataset"]["num_eval"] == len(y)
    assert [v["name"] for v in report["variants"]] == list(VARIANTS)
    assert all(v["status"] == "ok" for v in report["variants"]), \
        {v["name"]: (v["status"], v.get("error")) for v in report["variants"]}
    task_hints = _notices(report, "hints", "task")
    assert task_hints, report["findings"].get("hints")
    assert any(re.search(r"multi-?label", n["text"], re.I) for n in task_hints), task_hints
    assert not _notices(report, "warnings", "classes_missing"), report["findings"].get("warnings")


@pytest.mark.parametrize("name", ("multilabel", "multilabel_collapse"))
def test_multi_label_metrics_are_scikit_learns_on_the_written_models(label_runs, name):
    """Exact-match accuracy, Hamming loss, macro and micro F1, macro precision and recall, per-label
    precision/recall/F1/support and macro ROC AUC of every measured variant equal scikit-learn's on that
    variant's .tflite outputs thresholded at 0.5; no confusion matrix."""
    folder, report, _, data_path = _ok_run(label_runs, name)
    data = np.load(data_path)
    x, y = data["x"], data["y"].astype(np.int64)
    k = y.shape[1]
    float_pred = _bits(_outputs(folder, "float", x))
    measured = _measured(report)
    assert {"float", "drq", "fiq"} <= set(measured), sorted(measured)
    for variant, result in measured.items():
        scores = _outputs(folder, variant, x)
        assert scores.shape == y.shape, (variant, scores.shape, y.shape)
        pred = _bits(scores)
        m = result.get("metrics")
        assert m, (variant, result.get("status"), result.get("error"))
        expected = {
            "accuracy": skm.accuracy_score(y, pred),
            "hamming_loss": skm.hamming_loss(y, pred),
            "micro_f1": skm.f1_score(y, pred, average="micro", zero_division=0),
            "f1": skm.f1_score(y, pred, average="macro", zero_division=0),
            "precision": skm.precision_score(y, pred, average="macro", zero_division=0),
            "recall": skm.recall_score(y, pred, average="macro", zero_division=0),
            "roc_auc": skm.roc_auc_score(y, scores, average="macro"),
            "agreement_with_float": float(np.mean(np.all(pred == float_pred, axis=1))),
        }
        got = {key: m.get(key) for key in expected}
        assert all(v is not None for v in got.values()), (variant, got)
        assert got == pytest.approx(expected, abs=EXACT), (variant, got, expected)
        assert m["confusion_matrix"] == [], (variant, m["confusion_matrix"])
        p, r, f, s = skm.precision_recall_fscore_support(y, pred, average=None, zero_division=0)
        per = m["per_class"]
        assert len(per) == k, (variant, per)
        for j, entry in enumerate(per):
            assert entry["support"] == int(y[:, j].sum()) == int(s[j]), (variant, j, entry)
            assert [entry["precision"], entry["recall"], entry["f1"]] == pytest.approx([p[j], r[j], f[j]], abs=EXACT), \
                (variant, j, entry)


@pytest.mark.parametrize("name", ("multilabel", "multilabel_collapse"))
def test_multi_label_verdicts_follow_mcnemar_on_exact_match_correctness(label_runs, name):
    """Each variant's discordant counts against float are those of exact-match correctness, and its
    verdict is "same" unless they differ beyond noise (McNemar p < 0.05), then "worse" or "better" by
    their direction: never a verdict from a metric that does not fit multi-label outputs."""
    folder, report, _, data_path = _ok_run(label_runs, name)
    data = np.load(data_path)
    x, y = data["x"], data["y"].astype(np.int64)
    float_ok = np.all(_bits(_outputs(folder, "float", x)) == y, axis=1)
    verdicts = {v["name"]: v for v in report["findings"]["variants"]}
    for variant in ("drq", "fiq"):
        ok = np.all(_bits(_outputs(folder, variant, x)) == y, axis=1)
        p, float_only, variant_only = _mcnemar_p(float_ok, ok)
        paired = (_variant(report, variant)["metrics"].get("paired") or {}).get("float")
        assert paired == {"reference_only": float_only, "variant_only": variant_only}, (variant, paired)
        expected = "same" if p >= ALPHA else ("worse" if variant_only < float_only else "better")
        assert verdicts[variant]["direction"] == expected, (variant, p, float_only, variant_only, verdicts[variant])


def test_multilabel_fiq_stays_close_to_float(label_runs):
    """The multilabel fixture quantizes well: FIQ's exact-match correctness does not differ from float's
    beyond noise (independently), and its verdict is "same"."""
    folder, report, _, data_path = _ok_run(label_runs, "multilabel")
    data = np.load(data_path)
    x, y = data["x"], data["y"].astype(np.int64)
    float_ok = np.all(_bits(_outputs(folder, "float", x)) == y, axis=1)
    fiq_ok = np.all(_bits(_outputs(folder, "fiq", x)) == y, axis=1)
    p, _, _ = _mcnemar_p(float_ok, fiq_ok)
    assert p >= ALPHA, (float_ok.mean(), fiq_ok.mean(), p)  # the fixture's premise
    assert next(v for v in report["findings"]["variants"] if v["name"] == "fiq")["direction"] == "same"


def test_multilabel_collapse_is_found_and_the_recommended_model_recovers_the_exact_match_gap(label_runs):
    """FIQ's exact-match accuracy collapses (independently, on fiq.tflite); the recommended model
    (selective.tflite) wins back >= 99 % of the gap, its reported accuracy is what it scores, and it is the
    model the public QuantizationDebugger builds from the same denylist."""
    from independent import public_selective, without_conversion_metadata

    folder, report, model_path, data_path = _ok_run(label_runs, "multilabel_collapse")
    rec = report["recommendation"]
    assert rec and rec["gap"]["status"] == "recovered", rec and rec["gap"]
    assert (folder / "selective.tflite").is_file(), sorted(p.name for p in folder.iterdir())
    data = np.load(data_path)
    x, y = data["x"], data["y"].astype(np.int64)
    acc = {v: float(np.mean(np.all(_bits(_outputs(folder, v, x)) == y, axis=1)))
           for v in ("float", "fiq", "selective")}
    gap = acc["float"] - acc["fiq"]
    assert gap >= 0.2, acc  # the fixture does collapse
    share = (acc["selective"] - acc["fiq"]) / gap
    assert share >= 0.99, (acc, rec["denylisted_nodes"])
    assert rec["selective"]["metrics"]["accuracy"] == pytest.approx(acc["selective"], abs=EXACT), \
        (acc, rec["selective"]["metrics"])
    fiq = next(v for v in report["findings"]["variants"] if v["name"] == "fiq")
    assert fiq["direction"] == "worse", fiq
    x_calib = data["x_calib"][: report["dataset"]["num_calibration"]]
    assert without_conversion_metadata(public_selective(model_path, x_calib, rec["denylisted_nodes"])) == \
        without_conversion_metadata((folder / "selective.tflite").read_bytes())


def test_the_summary_says_multi_label(label_runs):
    folder, _, _, _ = _ok_run(label_runs, "multilabel")
    summary = (folder / "summary.md").read_text()
    assert re.search(r"multi-?label", summary, re.I), summary[:3000]


# --- whole-number float labels of a softmax classifier ---------------------------------------------------

def test_float_class_ids_of_a_softmax_are_read_as_classes_with_a_note(label_runs):
    folder, report, _, data_path = _ok_run(label_runs, "float_labels_softmax")
    data = np.load(data_path)
    x, y = data["x"], data["y"]
    assert np.issubdtype(y.dtype, np.floating) and set(np.unique(y)) == {0.0, 1.0}  # the fixture's premise
    assert report["model"]["task"] == "classification", report["model"]
    assert report["model"]["num_classes"] == 2, report["model"]
    notes = _notices(report, "hints", "labels_as_classes")
    assert notes, report["findings"].get("hints")
    classes = y.astype(np.int64)
    for variant, result in _measured(report).items():
        pred = _outputs(folder, variant, x).argmax(axis=1)
        m = result.get("metrics")
        assert m, (variant, result.get("status"), result.get("error"))
        assert m["accuracy"] == pytest.approx(float(skm.accuracy_score(classes, pred)), abs=EXACT), variant
        assert [c["support"] for c in m["per_class"]] == np.bincount(classes, minlength=2).tolist(), (variant, m)


def test_float_class_ids_fiq_collapse_is_found_and_recovered(label_runs):
    folder, report, _, data_path = _ok_run(label_runs, "float_labels_softmax")
    data = np.load(data_path)
    x, y = data["x"], data["y"].astype(np.int64)
    acc = {v: float(np.mean(_outputs(folder, v, x).argmax(axis=1) == y)) for v in ("float", "fiq")}
    assert acc["float"] - acc["fiq"] >= 0.2, acc  # the fixture does collapse
    rec = report["recommendation"]
    assert rec and rec["gap"]["status"] == "recovered", rec and rec["gap"]
    fiq = next(v for v in report["findings"]["variants"] if v["name"] == "fiq")
    assert fiq["direction"] == "worse", fiq


# --- labels that contradict the head ---------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(REFUSED))
def test_labels_that_contradict_a_softmax_are_refused_in_one_line(demo_cache, tmp_path, capfd, run_cli, name):
    """Multi-hot rows, or float labels that are not whole numbers, for a softmax output: exit 1, one
    stderr line naming the data file, the labels, the softmax (or the output) and the problem; nothing
    written."""
    model, data = L.ensure(name, demo_cache)
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(model, data, out, *EXTRA, name=name)
    line = one_error_line(code, capfd.readouterr().err, out)
    assert data.name in line, line  # the data file
    assert re.search(r"\blabels?\b", line, re.I), line
    assert "softmax" in line.lower() or has_word(line, "output"), line
    assert any(word in line.lower() for word in REFUSED[name]), (REFUSED[name], line)


def test_a_multi_label_report_renders_in_every_format_without_a_confusion_matrix(label_runs):
    """HTML and PDF of a multi-label report: the exact-match row and per-label table, no confusion matrix
    (there is none for multi-label), and the PDF renders (it once failed on the empty matrix)."""
    from reporter.pipeline.conclude import load_report
    from reporter.render import formats as render

    folder = _ok_run(label_runs, "multilabel_collapse")[0]
    report = load_report(folder / "report.json")
    html = render.render(report, "html").decode()
    assert "Exact-match accuracy" in html and "Per label: precision" in html and 'id="confusion"' not in html
    assert "4 labels (multi-label)" in html
    pdf = render.render(report, "pdf")
    assert pdf.startswith(b"%PDF") and len(pdf) > 10_000
