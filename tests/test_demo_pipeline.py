"""End to end on the demo: every number in report.json against an independent computation."""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics as skm

from conftest import DEMO_MODELS, load_report

pytestmark = pytest.mark.slow  # the whole demo, trained (once) and reported


def _predict_one_by_one(tflite_path, x):
    """The seed notebook's way: one sample per invoke, with the plain interpreter API."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(tflite_path))
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    preds = []
    for i in range(len(x)):
        sample = x[i : i + 1]
        if inp["dtype"] == np.int8:
            scale, zero = inp["quantization"]
            sample = np.clip(np.round(sample / scale + zero), -128, 127).astype(np.int8)
        it.reset_all_variables()
        it.set_tensor(inp["index"], sample)
        it.invoke()
        preds.append(int(np.argmax(it.get_tensor(out["index"])[0])))
    return np.array(preds)


def _data(report):
    from reporter.pipeline import demo

    return np.load(demo.ensure_model(report.model.name)[1])


@pytest.mark.parametrize("name", DEMO_MODELS)
def test_metrics_match_sklearn_on_independent_predictions(demo_reports, name):
    report = load_report(demo_reports / name)
    data = _data(report)
    y = data["y"]
    measured = [v for v in report.variants if v.ok]
    if report.recommendation and report.recommendation.selective:
        measured.append(report.recommendation.selective)
    assert {v.name for v in measured} >= {"float", "drq", "fiq"}
    float_preds = _predict_one_by_one(demo_reports / name / "float.tflite", data["x"])
    for v in measured:
        preds = _predict_one_by_one(demo_reports / name / f"{v.name}.tflite", data["x"])
        m = v.metrics
        assert m.accuracy == pytest.approx(skm.accuracy_score(y, preds))
        assert m.precision == pytest.approx(skm.precision_score(y, preds, average="macro", zero_division=0))
        assert m.recall == pytest.approx(skm.recall_score(y, preds, average="macro", zero_division=0))
        assert m.f1 == pytest.approx(skm.f1_score(y, preds, average="macro", zero_division=0))
        assert m.balanced_accuracy == pytest.approx(skm.balanced_accuracy_score(y, preds))
        assert m.cohen_kappa == pytest.approx(skm.cohen_kappa_score(y, preds))
        assert m.agreement_with_float == pytest.approx(np.mean(preds == float_preds))
        assert m.confusion_matrix == skm.confusion_matrix(y, preds, labels=range(report.model.num_classes)).tolist()
        per_class_f1 = skm.f1_score(y, preds, average=None, labels=range(report.model.num_classes), zero_division=0)
        assert [c.f1 for c in m.per_class] == pytest.approx(per_class_f1.tolist())
        assert v.size_bytes == (demo_reports / name / f"{v.name}.tflite").stat().st_size
        assert 0 < v.latency_ms.median <= v.latency_ms.p90


@pytest.mark.parametrize("name", DEMO_MODELS)
def test_tensor_counts_match_the_interpreter(demo_reports, name):
    from ai_edge_litert.interpreter import Interpreter

    report = load_report(demo_reports / name)
    for v in report.variants:
        it = Interpreter(model_path=str(demo_reports / name / f"{v.name}.tflite"))
        dtypes = [np.dtype(d["dtype"]).name for d in it.get_tensor_details()]
        assert v.tensor_types["total"] == sum(v.tensor_types[k] for k in ("int8", "int16", "int32", "float32", "other"))
        # The interpreter lists the main subgraph; the report counts all subgraphs, so at least as many.
        for key in ("int8", "int16", "int32", "float32"):
            assert v.tensor_types[key] >= dtypes.count(key), (v.name, key)
        if name != "digits_lstm":
            assert v.tensor_types["total"] == len(dtypes)
        text = (demo_reports / name / f"analyzer_{v.name}.txt").read_text()
        assert "Subgraph#0" in text
        assert v.ops, v.name
        for op in v.ops:
            assert op in text


@pytest.mark.parametrize("name", DEMO_MODELS)
def test_the_ops_read_from_the_file_are_the_interpreters(demo_reports, name):
    """graph.op_details reads the ops from the flatbuffer in place (the search reads them for every candidate): for
    every model the demo wrote (float, DRQ, FIQ, the searched and the LiteRT Quantizer ones, an LSTM among them) they
    are the ops LiteRT's interpreter lists, in its order, with its inputs and outputs."""
    from ai_edge_litert.interpreter import Interpreter

    from reporter.measure import graph

    files = sorted((demo_reports / name).glob("*.tflite"))
    assert len(files) >= 3
    for path in files:
        theirs = [{"index": op["index"], "op_name": op["op_name"], "inputs": [int(i) for i in op["inputs"]],
                   "outputs": [int(i) for i in op["outputs"]]}
                  for op in Interpreter(model_path=str(path))._get_ops_details()]
        assert graph.op_details(path.read_bytes()) == theirs, path.name


@pytest.mark.parametrize("name", DEMO_MODELS)
def test_layer_table_is_the_debugger_csv_with_derived_columns(demo_reports, name):
    report = load_report(demo_reports / name)
    frame = pd.read_csv(demo_reports / name / "layer_stats.csv")
    assert len(frame) == len(report.layers) > 0
    for row, layer in zip(frame.itertuples(), report.layers):
        assert layer.tensor_name == row.tensor_name
        assert layer.range == pytest.approx(255 * row.scale)
        assert layer.rmse_over_scale == pytest.approx(math.sqrt(row.mean_squared_error) / row.scale)
        assert layer.suspect == (layer.rmse_over_scale > report.recommendation.threshold)
        if layer.propagated_rmse_over_scale is not None:
            assert layer.propagated_rmse_over_scale == pytest.approx(
                math.sqrt(row.propagated_mean_squared_error) / row.scale)
    for column in ("op_name", "tensor_idx", "num_elements", "stddev", "mean_error", "max_abs_error",
                   "mean_squared_error", "scale", "zero_point", "tensor_name", "range", "rmse_over_scale"):
        assert column in frame.columns


def test_digits_cnn_quantizes_well(demo_reports):
    report = load_report(demo_reports / "digits_cnn")
    acc = {v.name: v.metrics.accuracy for v in report.variants}
    assert acc["float"] > 0.9
    assert abs(acc["fiq"] - acc["float"]) <= 0.02
    assert report.variant("fiq").size_bytes < report.variant("float").size_bytes / 2
    assert report.variant("fiq").tensor_types["int8"] > report.variant("float").tensor_types["int8"]


def test_breast_cancer_fiq_fails_and_the_search_recovers_the_whole_gap(demo_reports, mlp_files):
    from independent import check_recommendation

    folder = demo_reports / "breast_cancer_mlp"
    report = load_report(folder)
    f, fiq = report.variant("float").metrics.accuracy, report.variant("fiq").metrics.accuracy
    assert f > 0.9 and f - fiq > 0.2  # FIQ collapses
    rec = report.recommendation
    assert rec.method == "search" and rec.quantizer == "calibrate-once"
    check_recommendation(report, folder, mlp_files[0], mlp_files[1])
    assert report.model.source == "<demo cache>/demo-v1/breast_cancer_mlp/breast_cancer_mlp.keras"
    # The normalization's SUB (the wide-range tensor) and MUL must stay float together.
    ops = {layer.op_name for layer in report.layers if layer.tensor_name in rec.denylisted_nodes}
    assert ops == {"SUB", "MUL"}
    assert rec.gap.status == "recovered" and rec.gap.fiq_drop == pytest.approx(f - fiq)
    # The search chose on x_calib, not on the evaluation samples, and says so.
    sd = rec.search.selection_data
    assert sd.source == "x_calib" and not sd.overlaps_evaluation
    assert rec.search.target_met and rec.search.evaluations <= rec.search.budget
    assert sum(s.chosen for s in rec.search.steps) >= 1 and any(s.pareto for s in rec.search.steps if s.chosen)
    # The rule is measured beside it: it keeps only the MUL and recovers less.
    rule = rec.rule
    assert [layer.op_name for layer in report.layers if layer.tensor_name in rule.denylisted_nodes] == ["MUL"]
    assert rule.accuracy_gap_recovered < rec.selective.accuracy_gap_recovered
    assert (folder / "rule.tflite").is_file()
    assert rec.size_cost_bytes == rec.selective.size_bytes - report.variant("fiq").size_bytes
    for node in rec.denylisted_nodes:
        assert repr(node) in rec.code
    assert "100 %" in rec.summary and "rmse/scale rule" in rec.summary


def test_lstm_demo_has_fused_lstm_ops(demo_reports):
    report = load_report(demo_reports / "digits_lstm")
    assert report.model.format == "h5"
    assert report.variant("float").ops.get("UNIDIRECTIONAL_SEQUENCE_LSTM", 0) >= 1
    assert report.variant("fiq").metrics.accuracy > 0.85
    assert report.model.stateful is True  # fused LSTM state lives in variable tensors
    assert load_report(demo_reports / "digits_cnn").model.stateful is False


@pytest.mark.parametrize("name", DEMO_MODELS)
def test_output_folder_and_json_round_trip(demo_reports, name):
    from reporter.pipeline.conclude import report_from_json

    folder = demo_reports / name
    report = load_report(folder)
    expected = {"report.json", "layer_stats.csv", "run.log"}
    for v in report.variants + ([report.recommendation.selective] if report.recommendation.selective else []):
        expected |= {f"{v.name}.tflite", f"analyzer_{v.name}.txt"}
    assert expected <= {p.name for p in folder.iterdir()}
    assert not [p for p in demo_reports.iterdir() if p.name.startswith(".")]  # no staging leftovers
    text = (folder / "report.json").read_text()
    assert report_from_json(text).to_json() == text
    assert report.dataset.calibration_overlaps_eval is False
    assert report.dataset.num_calibration == 100
    assert {"convert", "evaluate", "debug"} <= set(report.timings_s)


def test_demo_is_cached_and_not_retrained(demo_reports, demo_cache, tmp_path, capfd):
    from reporter.cli import main

    model_file = next((demo_cache).glob("demo-v*/breast_cancer_mlp/*.keras"))
    before = model_file.stat().st_mtime_ns
    assert main(["demo", "--models", "breast_cancer_mlp", "--out", str(tmp_path), "--latency-runs", "3"]) == 0
    err = capfd.readouterr().err
    assert "training" not in err
    assert model_file.stat().st_mtime_ns == before
    # Same inputs, same report (apart from run time and latency).
    a, b = load_report(demo_reports / "breast_cancer_mlp"), load_report(tmp_path / "breast_cancer_mlp")
    assert len(a.variants) >= 3 and [v.metrics for v in a.variants] == [v.metrics for v in b.variants]
    assert a.layers and a.layers == b.layers


@pytest.mark.parametrize("name", DEMO_MODELS)
def test_demo_reports_tell_the_story_first_with_paired_tests(demo_reports, name):
    """Each variant's significance is the exact McNemar test on predictions made independently; the
    interval is Wilson's; the story leads every format."""
    import math

    from story import check_story

    report = load_report(demo_reports / name)
    check_story(report)
    data = _data(report)
    y = data["y"]
    ok_float = _predict_one_by_one(demo_reports / name / "float.tflite", data["x"]) == y
    for f in report.findings.variants:
        if f.name == "float" or not f.ok:
            continue
        ok = _predict_one_by_one(demo_reports / name / f"{f.name}.tflite", data["x"]) == y
        b, c = int(np.sum(ok_float & ~ok)), int(np.sum(~ok_float & ok))
        p = 1.0 if b + c == 0 else min(1.0, 2 * sum(math.comb(b + c, i) for i in range(min(b, c) + 1)) / 2 ** (b + c))
        assert f.vs_float.p_value == pytest.approx(p), f.name
        assert f.direction == ("same" if p >= 0.05 else ("worse" if b > c else "better")), f.name
        n, k = len(y), int(ok.sum())
        assert f.accuracy_low < k / n < f.accuracy_high
