"""Every scheme gets its per-layer error; a dynamic-range loss is blamed on the layer whose weights cause it,
and keeping that layer in float is built, measured and shown to win the loss back (the DRQ fixture:
tests/drq_fixtures.py). Numbers are checked against models built here with LiteRT Quantizer's own API."""

import csv
import io
import json
import re

import numpy as np
import pytest

import drq_fixtures as F

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def drq_run(demo_cache, tmp_path_factory, run_cli):
    model_path, data_path = F.ensure("drq_dead_feature", demo_cache)
    out = tmp_path_factory.mktemp("drq_out")
    code = run_cli(model_path, data_path, out, "--variants", "float,drq,fiq,wo8", "--formats", "json,md,html",
                   name="drq", latency_runs=3)
    assert code == 0
    folder = out / "drq"
    return folder, json.loads((folder / "report.json").read_text()), data_path


def _variant(report, name):
    return next(v for v in report["variants"] if v["name"] == name)


def test_a_drq_loss_is_blamed_on_the_layer_whose_weights_cause_it(drq_run):
    folder, report, _ = drq_run
    drq = _variant(report, "drq")
    errors = drq["layer_errors"]
    assert errors["error"] is None and errors["layers"]
    assert re.search(F.op_regex(F.CULPRIT_LAYER), errors["culprit"] + ";")
    culprit = next(e for e in errors["layers"] if e["tensor_name"] == errors["culprit"])
    assert culprit["op_name"] == "FULLY_CONNECTED"
    # The error starts there: its inputs are the model's (exact), its output is mostly noise.
    assert culprit["error_starts_here"] and culprit["snr_db"] < 10
    assert culprit["weight_snr_db"] is not None  # its weights are int8 in DRQ
    # The CSV beside the report holds every compared layer, the blamed one marked.
    rows = list(csv.DictReader(io.StringIO((folder / "layer_errors_drq.csv").read_text())))
    assert len(rows) == len(errors["layers"]) and [r["blamed"] for r in rows].count("1") == 1


def test_keeping_the_blamed_layer_in_float_is_built_measured_and_wins_the_loss_back(drq_run):
    from litert_quantizer import quantizer, recipe

    from reporter.measure import evaluate

    folder, report, data_path = drq_run
    data = np.load(data_path)
    drq = _variant(report, "drq")
    flt = _variant(report, "float")
    fix = drq["fix"]
    assert fix["error"] is None and len(fix["layers"]) == 1
    assert re.search(F.op_regex(F.CULPRIT_LAYER), fix["layers"][0] + ";")
    # The same model built here: LiteRT Quantizer's DRQ recipe and one no_quantize entry for that layer.
    entries = recipe.dynamic_wi8_afp32() + [{"regex": F.op_regex(F.CULPRIT_LAYER), "operation": "*",
                                             "algorithm_key": "no_quantize"}]
    mine = bytes(quantizer.Quantizer((folder / "float.tflite").read_bytes(), entries)
                 .quantize(enable_progress_report=False).quantized_model)
    assert (folder / "drq_fix.tflite").read_bytes() == mine
    accuracy = float(np.mean(np.argmax(evaluate.predict(mine, data["x"]), axis=1) == data["y"]))
    assert fix["model"]["metrics"]["accuracy"] == pytest.approx(accuracy)
    assert fix["model"]["converter"] == "LiteRT Quantizer"
    assert drq["metrics"]["accuracy"] < flt["metrics"]["accuracy"] - 0.10
    assert accuracy >= flt["metrics"]["accuracy"] - 0.01

    found = next(v for v in report["findings"]["variants"] if v["name"] == "drq")
    assert found["blame"]["fix_status"] == "fixed" and F.CULPRIT_LAYER in found["blame"]["layer"]
    headline = " ".join(report["findings"]["headline"])
    assert "DRQ's loss is caused by" in headline and F.CULPRIT_LAYER in headline and "fixed" in headline
    assert F.CULPRIT_LAYER in (folder / "summary.md").read_text()
    html = (folder / "report.html").read_text()
    assert 'id="scheme-errors-drq"' in html and "BLAMED" in html


def test_every_quantized_variant_has_per_layer_error_and_model_explorer_overlays(drq_run):
    from ai_edge_litert.interpreter import Interpreter

    folder, report, _ = drq_run
    for name in ("drq", "fiq", "wo8"):
        v = _variant(report, name)
        assert v["layer_errors"]["layers"], name
        assert v["overlays"], name
        tensors = {d["name"] for d in Interpreter(model_content=(folder / f"{name}.tflite").read_bytes())
                   .get_tensor_details()}
        for file_name in v["overlays"]:
            data = json.loads((folder / file_name).read_text())
            keys = {k for graph in data.values() for k in graph["results"]}
            assert keys and keys <= tensors, (name, file_name)
    fiq_overlays = _variant(report, "fiq")["overlays"]
    assert {"explorer_fiq_snr_db.json", "explorer_fiq_rmse_over_scale.json"} <= set(fiq_overlays)
    assert "model-explorer fiq.tflite --node_data_paths=" in (folder / "report.html").read_text()
