"""The shared-scale diagnosis and its repair rung (issue 65), on a YOLO-v5-like head whose one output concatenates
pixel boxes (0..300) with sigmoid scores (0..1) (tests/shared_scale_fixtures.py), run for an integer-only target
with a metric on the scores, so that the repair ladder climbs; and on the same head with boxes in 0..1, whose parts
one scale fits.

Every figure is recomputed here from the written files: the output's scale and zero point read with
tf.lite.Interpreter (the int8 I/O model's output details; FIQ's int8 tensor behind its DEQUANTIZE), float's outputs
and the rung's and FIQ's run with plain LiteRT, the parts cut from float's output by the fixture's own layout, the
share rounded to 0 counted with numpy."""

import json
import re

import numpy as np
import pytest

from conftest import load_report, run_recorded
import shared_scale_fixtures as F

pytestmark = pytest.mark.slow

PARTS = {"boxes": F.BOXES, "objectness": slice(4, 5), "classes": slice(5, F.WIDTH)}  # the fixture's layout
RUNG = "split_output_scale"


def _flags(folder, *extra):
    return ("--variants", "float,fiq", "--formats", "json,md", "--latency-runs", "0",
            "--metric", f"{folder / 'metric.py'}:score_error", "--metric-mode", "min", *extra)


@pytest.fixture(scope="module")
def runs(demo_cache, tmp_path_factory):
    """{name: (exit code, error, report folder, fixture folder)}: the pixel head for --target int8, the normalized
    head with no target."""
    out = tmp_path_factory.mktemp("shared_scale")
    found = {}
    for name, extra in (("pixel_head", ("--target", "int8")), ("normalized_head", ())):
        folder = F.ensure(demo_cache, name)
        code, error = run_recorded(folder / "model.keras", folder / "data.npz", out, name, *_flags(folder, *extra))
        found[name] = (code, error, out / name, folder)
    return found


def _ok(runs, name):
    code, error, folder, fixture = runs[name]
    assert error is None, error
    assert code == 0, (folder / "run.log").read_text()[-3000:] if (folder / "run.log").is_file() else code
    return folder, json.loads((folder / "report.json").read_text()), fixture


def _signature_outputs(model: bytes, x: np.ndarray, batch: int = 256) -> np.ndarray:
    """Output output_0 of a .tflite, fed by name with plain LiteRT; int8 I/O quantized and dequantized here."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_content=model).get_signature_runner()
    (name, inp), = runner.get_input_details().items()
    out = runner.get_output_details()["output_0"]
    rows = []
    for start in range(0, len(x), batch):
        chunk = x[start:start + batch].astype(np.float32)
        scale, zero = inp["quantization"]
        if scale:
            chunk = np.clip(np.round(chunk / scale) + zero, -128, 127).astype(np.int8)
        got = runner(**{name: chunk})["output_0"]
        scale, zero = out["quantization"]
        rows.append((got.astype(np.float32) - zero) * scale if scale else got)
    return np.concatenate(rows).reshape(len(x), F.ANCHORS, F.WIDTH)


def _output_grid(model: bytes):
    """(scale, zero point) of the integer tensor output_0 comes from: the output's own quantization when the output
    is int8 (get_output_details), else that of the DEQUANTIZE's input making it."""
    import tensorflow as tf

    it = tf.lite.Interpreter(model_content=model)
    (out,) = it.get_output_details()
    if np.dtype(out["dtype"]) == np.int8:
        return out["quantization"]
    (op,) = [op for op in it._get_ops_details() if out["index"] in op["outputs"]]
    assert op["op_name"] == "DEQUANTIZE", op["op_name"]
    tensor = next(t for t in it.get_tensor_details() if t["index"] == op["inputs"][0])
    assert np.dtype(tensor["dtype"]) == np.int8
    return tensor["quantization"]


def _rounded_to_zero(values: np.ndarray, scale: float) -> float:
    values = np.asarray(values, np.float64).reshape(-1)
    nonzero = values[values != 0]
    return float(np.mean(np.round(nonzero / scale) == 0))


def test_the_report_names_the_parts_sharing_the_scale_and_what_each_loses_to_zero(runs):
    folder, report, fixture = _ok(runs, "pixel_head")
    x = np.load(fixture / "data.npz")["x"]
    flt = _signature_outputs((folder / "float.tflite").read_bytes(), x)
    spans = {part: float(flt[..., cut].max() - flt[..., cut].min()) for part, cut in PARTS.items()}
    ratio = max(spans.values()) / min(spans.values())
    assert ratio > 100  # the fixture is what it says: pixels beside scores
    by_name = {v["name"]: v for v in report["variants"]}
    shares = {}
    for name in ("fiq", "int8_io"):  # FIQ (float I/O) and the int8 target's int8 I/O model share the scale
        scale, zero = _output_grid((folder / f"{name}.tflite").read_bytes())
        record = by_name[name]["shared_scales"]["output_0"]
        assert record["scale"] == pytest.approx(scale, rel=1e-6) and record["zero_point"] == zero
        parts = {next(p for p in PARTS if p in r["name"]): r for r in record["parts"]}
        assert set(parts) == set(PARTS)
        for part, cut in PARTS.items():
            assert parts[part]["values"] == F.ANCHORS * (cut.stop - cut.start)
            expected = _rounded_to_zero(flt[..., cut], scale)
            assert parts[part]["zero_share"] == pytest.approx(expected, abs=2e-3), (name, part)
            assert parts[part]["low"] == pytest.approx(flt[..., cut].min(), rel=1e-4, abs=1e-6)
            assert parts[part]["high"] == pytest.approx(flt[..., cut].max(), rel=1e-4)
        shares[name] = {part: _rounded_to_zero(flt[..., cut], scale) for part, cut in PARTS.items()}
    assert shares["fiq"]["boxes"] < 0.01 and min(shares["fiq"]["objectness"], shares["fiq"]["classes"]) > 0.3

    (warning,) = [w for w in report["findings"]["warnings"] if w["code"] == "shared_scale"]
    text = warning["text"]
    assert warning["output"] == "output_0" and text.startswith("FIQ's int8 output output_0 is a CONCATENATION of 3")
    said = re.search(r"differ ([.0-9]+)x", text)
    assert said and float(said.group(1)) == pytest.approx(ratio, rel=1e-3), text
    assert re.search(r"scale \(([.0-9]+), zero point (-?\d+)\)", text).groups() == (
        f"{_output_grid((folder / 'fiq.tflite').read_bytes())[0]:.4g}", str(_output_grid(
            (folder / "fiq.tflite").read_bytes())[1]))
    for part in PARTS:  # each part named, with its own share rounded to 0
        quoted = re.search(rf"{part}_1/\w+ \((?:\w+: )?\d+ values per sample, [-.0-9e]+ to [-.0-9e]+\)"
                           rf"(?: rounds)? ([.0-9]+) %", text)
        assert quoted, (part, text)
        assert float(quoted.group(1)) / 100 == pytest.approx(shares["fiq"][part], abs=6e-4), (part, text)
    assert "Int8 I/O shares it too" in text
    assert text[:80] in (folder / "summary.md").read_text()
    reread = [n.text for n in load_report(folder).findings.warnings if n.code == "shared_scale"]
    assert reread == [text]  # report.json re-reads to the same words, without TensorFlow


def test_the_rung_quantizes_the_parts_apart_and_recovers_the_scores(runs):
    from ai_edge_litert.interpreter import Interpreter

    folder, report, fixture = _ok(runs, "pixel_head")
    data = np.load(fixture / "data.npz")
    x, y = data["x"], data["y"].reshape(-1, F.ANCHORS, F.WIDTH)
    (rung,) = [r for r in report["repairs"] if r["rung"] == RUNG]
    assert rung["model"] is not None and rung["model"]["status"] == "ok", rung
    path = folder / f"repair_{RUNG}.tflite"
    built = path.read_bytes()

    # the parts are dequantized, each with its own scale, into a float CONCATENATION making a float output
    it = Interpreter(model_content=built)
    tensors = {t["index"]: t for t in it.get_tensor_details()}
    ops = it._get_ops_details()
    makers = {o: op for op in ops for o in op["outputs"]}
    (join,) = [op for op in ops if op["op_name"] == "CONCATENATION"]
    assert np.dtype(tensors[join["outputs"][0]]["dtype"]) == np.float32
    scales = []
    for i in join["inputs"]:
        assert makers[i]["op_name"] == "DEQUANTIZE"
        scales.append(tensors[makers[i]["inputs"][0]]["quantization"][0])
    assert max(scales) / min(scales) > 100, scales

    flt = _signature_outputs((folder / "float.tflite").read_bytes(), x)
    fiq = _signature_outputs((folder / "fiq.tflite").read_bytes(), x)
    fixed = _signature_outputs(built, x, batch=1)  # a batch-1 model
    scores, boxes = F.SCORES, F.BOXES
    fiq_error = float(np.abs(fiq[..., scores] - flt[..., scores]).mean())
    fixed_error = float(np.abs(fixed[..., scores] - flt[..., scores]).mean())
    assert fixed_error <= 0.5 * fiq_error, (fixed_error, fiq_error)  # at least half of FIQ's error on the scores
    assert np.abs(fixed[..., boxes] - flt[..., boxes]).mean() <= 1.5 * np.abs(fiq[..., boxes] - flt[..., boxes]).mean()

    # measured like every candidate: its metric is the fixture's metric on this run of the file; it has float
    # tensors, so integer-only hardware does not run it, and the warning quotes what it measured
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("fixture_metric", fixture / "metric.py")
    metric = module_from_spec(spec)
    spec.loader.exec_module(metric)
    measured = float(np.mean(metric.score_error(y, fixed.reshape(len(x), -1))))
    assert rung["model"]["metrics"]["main"]["value"] == pytest.approx(measured, rel=1e-3)
    assert rung["status"] == "not_on_target"
    assert np.dtype(tensors[join["outputs"][0]]["dtype"]) == np.float32  # why: a float op
    (warning,) = [w for w in report["findings"]["warnings"] if w["code"] == "shared_scale"]
    quoted = re.search(r"rung split_output_scale \(.*?\) measured ([.0-9e-]+) on output_0 against FIQ's ([.0-9e-]+);"
                       r" it does not run on the target", warning["text"])
    assert quoted, warning["text"]
    fiq_metric = float(np.mean(metric.score_error(y, fiq.reshape(len(x), -1))))
    assert float(quoted.group(1)) == pytest.approx(measured, rel=1e-3)
    assert float(quoted.group(2)) == pytest.approx(fiq_metric, rel=1e-3)


def test_parts_one_scale_fits_get_no_shared_scale_words(runs):
    folder, report, fixture = _ok(runs, "normalized_head")
    x = np.load(fixture / "data.npz")["x"]
    flt = _signature_outputs((folder / "float.tflite").read_bytes(), x)
    spans = [float(flt[..., cut].max() - flt[..., cut].min()) for cut in PARTS.values()]
    assert max(spans) / min(spans) < 10  # the parts' ranges are alike: one scale fits them
    assert not [w for w in report["findings"]["warnings"] if w["code"] == "shared_scale"]
    summary = (folder / "summary.md").read_text()
    assert "CONCATENATION" not in summary and "share it too" not in summary
