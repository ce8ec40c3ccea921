"""Float .tflite files as the field ships them (issue 34, point 8): no signature, float16 weights behind
DEQUANTIZE, operator codes in the old field only. Each is made usable (reporter/inputs/tflite_prep.py), said so in
the report, and quantized; a run that builds no quantized variant exits 1. Every figure is checked against the
plain LiteRT interpreter on the given file and on the written models (tests/independent.py)."""

import json

import numpy as np
import pytest

import independent as I
import shipped_tflite_fixtures as S
from reporter.core.variants import DRQ, FIQ, FLOAT


@pytest.fixture(scope="module")
def shipped(demo_cache):
    folder = S.ensure(demo_cache)
    data = np.load(folder / "data.npz")
    return folder, data["x"], data["y"]


def _schema_model(data: bytes):
    from tensorflow.lite.tools import flatbuffer_utils as fb

    return fb.convert_bytearray_to_object(bytearray(data))


def _accuracy(tflite: bytes, x, y) -> float:
    """The plain LiteRT interpreter, one sample per invoke, an int8 input quantized and an int8 output
    dequantized by the tensors' own scale and zero point (LiteRT Quantizer's FIQ has int8 I/O)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=tflite)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    top = []
    for i in range(len(x)):
        sample = x[i : i + 1].astype(np.float32)
        if inp["dtype"] == np.int8:
            scale, zero = inp["quantization"]
            sample = np.clip(np.round(sample / scale) + zero, -128, 127).astype(np.int8)
        it.set_tensor(inp["index"], sample)
        it.invoke()
        raw = it.get_tensor(out["index"])[0].astype(np.float64)
        if out["dtype"] == np.int8:
            scale, zero = out["quantization"]
            raw = (raw - zero) * scale
        top.append(int(np.argmax(raw)))
    from sklearn.metrics import accuracy_score

    return float(accuracy_score(y, top))


def _inputs(x):
    rng = np.random.default_rng(0)
    return {"zeros": np.zeros_like(x[:5]), "random": rng.normal(size=x[:20].shape).astype(np.float32), "eval": x}


@pytest.mark.parametrize("name", ["nosig", "fp16", "oldops"])
def test_a_shipped_file_is_made_into_the_float_model_it_computes(shipped, name):
    from reporter.inputs import tflite_prep

    folder, x, _ = shipped
    given = (folder / f"{name}.tflite").read_bytes()
    prepared = tflite_prep.prepare(given)
    assert len(prepared.changes) == 1
    for kind, batch in _inputs(x).items():
        assert np.array_equal(I.outputs(prepared.data, batch), I.outputs(given, batch)), kind
    model = _schema_model(prepared.data)
    assert model.signatureDefs and model.signatureDefs[0].signatureKey == b"serving_default"
    from tensorflow.lite.python import schema_py_generated as schema

    types = {t.type for sg in model.subgraphs for t in sg.tensors}
    assert schema.TensorType.FLOAT16 not in types
    assert all(c.builtinCode == max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes)


def test_the_fp16_file_really_had_float16_constants_and_loses_its_dequantize_ops(shipped):
    from reporter.measure import structure
    from reporter.inputs import tflite_prep

    folder, _, _ = shipped
    given = (folder / "fp16.tflite").read_bytes()
    assert structure.quantized_tensors(given) > 0  # what was refused as "already quantized"
    prepared = tflite_prep.prepare(given)
    assert structure.quantized_tensors(prepared.data) == 0
    assert "DEQUANTIZE" in structure.ops(given) and "DEQUANTIZE" not in structure.ops(prepared.data)
    assert structure.ops(prepared.data) == structure.ops((folder / "plain.tflite").read_bytes())


def test_a_file_that_needs_nothing_is_used_byte_for_byte(shipped):
    from reporter.inputs import tflite_prep

    folder, _, _ = shipped
    given = (folder / "plain.tflite").read_bytes()
    prepared = tflite_prep.prepare(given)
    assert prepared.data == given and prepared.changes == []


def test_a_missing_signature_is_named_after_the_graphs_tensors(shipped):
    from reporter.inputs import tflite_prep

    folder, _, _ = shipped
    prepared = tflite_prep.prepare((folder / "nosig.tflite").read_bytes())
    sig = _schema_model(prepared.data).signatureDefs[0]
    plain = _schema_model((folder / "plain.tflite").read_bytes()).subgraphs[0]
    assert [m.tensorIndex for m in sig.inputs] == list(plain.inputs)
    assert [m.tensorIndex for m in sig.outputs] == list(plain.outputs)
    assert [m.name for m in sig.inputs] == [plain.tensors[i].name for i in plain.inputs]


@pytest.fixture(scope="module")
def reports(shipped, tmp_path_factory, run_cli):
    folder, _, _ = shipped
    out = tmp_path_factory.mktemp("shipped_out")
    found = {}
    for name in ("nosig", "fp16", "oldops"):
        code = run_cli(folder / f"{name}.tflite", folder / "data.npz", out, "--formats", "json,md", name=name,
                       latency_runs=2)
        found[name] = (code, out / name, json.loads((out / name / "report.json").read_text()))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", ["nosig", "fp16", "oldops"])
def test_a_shipped_file_is_quantized_and_measured_like_a_clean_one(reports, shipped, name):
    from reporter.measure import structure

    folder, x, y = shipped
    code, out, report = reports[name]
    assert code == 0
    variants = {v["name"]: v for v in report["variants"]}
    assert {FLOAT, DRQ, FIQ} <= set(variants)
    assert all(variants[v]["status"] == "ok" for v in (FLOAT, DRQ, FIQ)), [v.get("error") for v in variants.values()]
    # float is the given file's accuracy, by the plain interpreter on the file as shipped
    given = (folder / f"{name}.tflite").read_bytes()
    assert variants[FLOAT]["metrics"]["accuracy"] == pytest.approx(I.accuracy(given, x, y))
    # the float.tflite written (what the report's reproduction code quantizes) computes what the given file does
    # and needs nothing more: LiteRT Quantizer reads it as it is
    from reporter.inputs import tflite_prep

    written_float = (out / f"{FLOAT}.tflite").read_bytes()
    assert np.array_equal(I.outputs(written_float, x), I.outputs(given, x))
    assert tflite_prep.prepare(written_float).changes == []
    for v in (DRQ, FIQ):
        written = (out / f"{v}.tflite").read_bytes()
        assert variants[v]["metrics"]["accuracy"] == pytest.approx(_accuracy(written, x, y))
        assert structure.tensor_types(written)["int8"] > 0, v  # really quantized (old op codes quantized nothing)
    assert abs(variants[FIQ]["metrics"]["accuracy"] - variants[FLOAT]["metrics"]["accuracy"]) < 0.05
    assert len(report["model"]["input_changes"]) == 1
    assert "The .tflite file was changed so it can be quantized" in (out / "summary.md").read_text()


@pytest.mark.slow
def test_a_run_that_builds_no_quantized_variant_exits_1(shipped, tmp_path, run_cli, monkeypatch, capsys):
    """Before: DRQ and FIQ failed ("no signature") and the run exited 0 with no quantized variant."""
    from reporter.measure import graph_edits

    monkeypatch.setattr(graph_edits, "_add_signature", lambda model, key: ([], []))  # the signature left missing
    folder, _, _ = shipped
    code = run_cli(folder / "nosig.tflite", folder / "data.npz", tmp_path, "--variants", "float,drq,fiq",
                   "--formats", "json", name="nosig", latency_runs=0)
    report = json.loads((tmp_path / "nosig" / "report.json").read_text())
    statuses = {v["name"]: v["status"] for v in report["variants"]}
    assert statuses[DRQ] != "ok" and statuses[FIQ] != "ok", statuses
    assert code == 1
    assert "no quantized variant could be built" in capsys.readouterr().err


def test_blame_on_a_tflite_names_its_tensors_when_they_have_no_keras_scope():
    """A .tflite's tensor names often have no Keras scope ("conv2d_21"): the blame printed "keeping , ,  in
    float". The sentence names the tensors themselves."""
    from types import SimpleNamespace as NS

    from reporter.model.findings import BlameFinding
    from reporter.render.words import verdicts

    row = NS(tensor_name="conv2d_21", error_starts_here=True, snr_db=3.0, snr_drop_db=None)
    v = NS(name=FIQ, layer_errors=NS(layers=[row]), fix=NS(error="it failed", model=None))
    b = BlameFinding(tensor="conv2d_21", layer="", op="CONV_2D", snr_db=3.0, snr_drop_db=None, weight_snr_db=None,
                     fix_status="failed", fix_layers=["conv2d_21", "dense_3"])
    text = verdicts.blame(None, v, b)
    assert "blames conv2d_21 (CONV_2D" in text
    assert "keeping conv2d_21, dense_3 in float could not be built" in text


@pytest.mark.slow
def test_labels_with_a_trailing_unit_axis_fit_an_output_of_that_shape(demo_cache, tmp_path, run_cli):
    """A MediaPipe-like head, one score per anchor (output (6, 1) per sample), no signature, labels (n, 6, 1):
    accepted (it was called a shape mismatch) and measured; float's error against the labels is the given file's."""
    folder = S.ensure_anchors(demo_cache)
    data = np.load(folder / "data.npz")
    code = run_cli(folder / "anchors.tflite", folder / "data.npz", tmp_path, "--formats", "json", name="anchors",
                   latency_runs=0)
    assert code == 0
    report = json.loads((tmp_path / "anchors" / "report.json").read_text())
    variants = {v["name"]: v for v in report["variants"]}
    assert all(variants[v]["status"] == "ok" for v in (FLOAT, DRQ, FIQ))
    out = I.outputs((folder / "anchors.tflite").read_bytes(), data["x"])
    assert out.shape == (len(data["x"]), 6)
    target = data["y"].reshape(len(data["y"]), 6)
    assert variants[FLOAT]["target_error"]["mae"] == pytest.approx(float(np.mean(np.abs(out - target))), rel=1e-5)
    assert report["model"]["input_changes"]
