"""An output's reading follows the graph, and its figures never break a format: a sigmoid at every frame reshaped flat
is a mask (the op making it is found behind the RESHAPE); every registered kind can be named with --task; a multi-label
output with many labels is judged per label (micro-F1, bootstrapped over samples), never by exact match; --task
without an output name on a model with several is a usage error naming them; a layer whose error is inf is shown as
such in every format and read back from report.json; the 16x8 rung says in one line that LiteRT cannot build a model.

End-to-end runs of tests/frame_fixtures.py's per-frame sigmoid model (three outputs, each Dense(8, sigmoid) per frame
then Reshape to 256 values), every figure checked against numpy or scikit-learn on plain LiteRT outputs of the
written .tflite files (tests/independent.py); the inf figures on tests/fixtures/report.json (no TensorFlow)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import f1_score

import frame_fixtures as F
from conftest import run_cli, run_recorded

FIXTURE = Path(__file__).parent / "fixtures" / "report.json"
EXTRA = ("--latency-runs", "0", "--format", "md,json")


def _outputs(folder: Path, variant: str, x: np.ndarray, report: dict) -> dict:
    """{output name: (n, 256)} of the written <variant>.tflite, plain LiteRT fed by name."""
    from independent import signature_predict

    found = signature_predict((folder / f"{variant}.tflite").read_bytes(), {"x": x})
    return {o["name"]: found[o["key"]] for o in report["model"]["outputs"]}


def _mask_iou(out: np.ndarray, y: np.ndarray) -> float:
    """Pooled IoU over every value of every sample: output >= 0.5 against target >= 0.5."""
    pred, truth = np.asarray(out) >= 0.5, np.asarray(y) >= 0.5
    return float((pred & truth).sum() / (pred | truth).sum())


@pytest.fixture(scope="module")
def frames(demo_cache):
    model, data = F.ensure(demo_cache)
    return model, data, np.load(data)


@pytest.fixture(scope="module")
def runs(frames, tmp_path_factory):
    """The fixture run as it reads (no --task), and with --task onsets=multilabel: {name: (code, error, folder)}."""
    model, data, _ = frames
    found = {}
    for name, flags in (("plain", ("--variants", "float,drq,fiq")),
                        ("multilabel", ("--variants", "float,fiq", "--task", "onsets=multilabel"))):
        out = tmp_path_factory.mktemp(f"frames_{name}")
        code, error = run_recorded(model, data, out, name, *EXTRA, *flags)
        found[name] = (code, error, out / name)
    return found


# --- the op making an output, found through shape-only ops ---------------------------------------------------
@pytest.mark.slow
def test_a_sigmoid_reshaped_flat_is_made_by_the_sigmoid_with_its_own_shape(runs):
    from ai_edge_litert.interpreter import Interpreter

    from reporter.measure import structure

    code, error, folder = runs["plain"]
    assert error is None and code == 0, (code, error)
    model = (folder / "float.tflite").read_bytes()
    outputs = Interpreter(model_content=model).get_signature_runner().get_output_details()
    made_by = structure.producers(model)
    for key, d in outputs.items():
        assert made_by[d["index"]] == "LOGISTIC", (key, made_by[d["index"]])
        assert made_by[d["index"]].shape[1:] == (F.FRAMES, F.PITCHES)


def test_a_join_of_sigmoids_is_a_sigmoid_and_a_linear_reshape_stays_linear():
    """CONCATENATION of two sigmoids, then RESHAPE: LOGISTIC; a Dense reshaped: FULLY_CONNECTED, the reading's
    linear output (regression, never a mask)."""
    import tensorflow as tf

    from reporter.measure import graph

    inp = tf.keras.Input((4, 3))
    a = tf.keras.layers.Dense(2, activation="sigmoid")(inp)
    b = tf.keras.layers.Dense(2, activation="sigmoid")(inp)
    joined = tf.keras.layers.Reshape((16,))(tf.keras.layers.Concatenate()([a, b]))
    linear = tf.keras.layers.Reshape((8,))(tf.keras.layers.Dense(2)(inp))
    model = tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(inp, [joined, linear])).convert()
    from ai_edge_litert.interpreter import Interpreter

    details = Interpreter(model_content=model).get_signature_runner().get_output_details()
    found = graph.made_by(model)
    kinds = sorted(str(found[d["index"]]) for d in details.values())
    assert kinds == ["FULLY_CONNECTED", "LOGISTIC"], kinds


# --- a per-frame sigmoid is read as masks, and DRQ judged like float ------------------------------------------
@pytest.mark.slow
def test_per_frame_sigmoid_outputs_are_masks_and_drq_is_judged_by_mask_iou_like_float(runs, frames):
    _, _, data = frames
    code, error, folder = runs["plain"]
    assert error is None and code == 0, (code, error)
    report = json.loads((folder / "report.json").read_text())
    model = report["model"]
    assert model["main_metric"] == "mask IoU", model["task_reason"]
    assert [(o["name"], o["task"]) for o in model["outputs"]] == [(n, "mask") for n in F.OUTPUTS]
    assert "made by a sigmoid at every position of (32, 8), reshaped to (256,)" in model["task_reason"]
    variants = {v["name"]: v for v in report["variants"] if v["status"] == "ok"}
    assert {"float", "drq", "fiq"} <= set(variants)
    y = data["y_onsets"]
    for name, v in variants.items():
        out = _outputs(folder, name, data["x"], report)["onsets"]
        assert v["metrics"]["main"]["name"] == "mask IoU"
        assert v["metrics"]["main"]["value"] == pytest.approx(_mask_iou(out, y), abs=1e-9), name
        mae = float(np.abs(out.astype(np.float64) - y).mean())
        assert v["target_error"]["mae"] == pytest.approx(mae, rel=1e-4), name  # against the targets, float too
    drq = variants["drq"]["metrics"]["main"]
    assert "float" in drq["paired"] and drq["low"] <= drq["value"] <= drq["high"]
    summary = (folder / "summary.md").read_text()
    assert "| Variant | Mask IoU |" in summary and "linear (no softmax or sigmoid)" not in summary


# --- every kind can be named ------------------------------------------------------------------------------------
def test_every_registered_kind_can_be_named_with_task_mask_included():
    from reporter.cli import build_parser
    from reporter.core import tasks
    from reporter.inputs.task_reading import LabelSource, read_task
    from reporter.measure.signature import Port

    registered = [k.name for k in tasks.kinds()]
    assert "mask" in registered and list(tasks.names()) == registered
    args = build_parser().parse_args(["run", "m.keras", "--data", "d.npz", "--task", "mask", "--task", "onsets=mask"])
    assert list(args.task) == ["mask", "onsets=mask"]
    y = (np.random.default_rng(0).uniform(size=(4, 256)) > 0.8).astype(np.float32)
    port = Port("onsets", "output_0", 0, (-1, 256), "float32", allocated=(1, 256))
    reading = read_task(LabelSource(y, False, "d.npz", "y_onsets"), port, "FULLY_CONNECTED", forced="mask")
    assert reading.task.kind.name == "mask" and reading.reason.startswith("as --task mask says")
    assert (reading.y == y).all()


# --- many labels: per label, micro-F1 -------------------------------------------------------------------------
def test_micro_f1_of_many_labels_matches_scikit_learn_and_resamples_whole_samples():
    from reporter.core import tasks
    from reporter.measure.task import Task, label_codes

    rng = np.random.default_rng(1)
    bits = (rng.uniform(size=(60, 100)) > 0.9).astype(np.uint8)
    out = np.clip(bits + rng.normal(scale=0.4, size=bits.shape), 0, 1)
    task = Task(tasks.of("multilabel"), 100, 0.5)
    score = task.score(label_codes(bits))
    scored = score.measure(out)
    assert score.name == "micro-F1" and score.bootstrapped
    assert scored.value == pytest.approx(f1_score(bits, out >= 0.5, average="micro"), abs=1e-12)
    assert task.correct(out, label_codes(bits)) is None  # no sample is right or wrong as a whole
    # one resample's figure is micro-F1 over its samples, drawn whole (with repeats)
    draw = np.repeat(np.arange(60), score.weights[0])
    assert scored.boot[0] == pytest.approx(f1_score(bits[draw], out[draw] >= 0.5, average="micro"), abs=1e-12)
    # few labels keep exact match (every label right), paired by McNemar
    few = Task(tasks.of("multilabel"), 3, 0.5).score(label_codes(bits[:, :3]))
    assert few.name == "exact-match accuracy" and not few.bootstrapped


@pytest.mark.slow
def test_a_many_label_output_is_judged_by_micro_f1_on_the_litert_outputs(runs, frames):
    _, _, data = frames
    code, error, folder = runs["multilabel"]
    assert error is None and code == 0, (code, error)
    report = json.loads((folder / "report.json").read_text())
    assert report["model"]["main_metric"] == "micro-F1" and report["model"]["num_classes"] == 256
    y = data["y_onsets"].astype(int)
    variants = {v["name"]: v for v in report["variants"] if v["status"] == "ok"}
    for name, v in variants.items():
        out = _outputs(folder, name, data["x"], report)["onsets"]
        main = v["metrics"]["main"]
        assert main["name"] == "micro-F1"
        assert main["value"] == pytest.approx(f1_score(y, (out >= 0.5).astype(int), average="micro"), abs=1e-9)
        assert main["low"] <= main["value"] <= main["high"]
    assert "float" in variants["fiq"]["metrics"]["main"]["paired"]
    heads = {(h["output"], h["variant"]): h for h in report["findings"]["heads"]}
    assert heads[("onsets", "fiq")]["measure"] == "micro-F1"  # the output of several judged per label too


# --- --task without an output name on several outputs ----------------------------------------------------------
@pytest.mark.slow
def test_task_without_an_output_name_on_several_outputs_is_a_usage_error_naming_them(frames, tmp_path, capfd):
    model, data, _ = frames
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(model, data, out, *EXTRA, "--variants", "float,fiq", "--task", "multilabel", name="m")
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith("quant-report: error: --task multilabel:"), err
    assert "onsets, frames, offsets" in lines[0] and "--task onsets=multilabel" in lines[0], lines[0]
    assert not out.exists() or not any(out.rglob("*"))


# --- a layer whose error is inf ------------------------------------------------------------------------------
def _with_inf_layer(tmp_path: Path) -> Path:
    """tests/fixtures/report.json with layer 1's MSE and RMSE/scale (the rule flags it) not finite, as a run writes
    them (null), its findings dropped so that `render` decides them again from the layers."""
    data = json.loads(FIXTURE.read_text())
    data["layers"][1].update(mean_squared_error=None, rmse_over_scale=None)
    data.pop("findings")
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    return path


def test_a_non_finite_layer_error_is_written_null_and_read_back_as_inf(tmp_path):
    from reporter.pipeline.conclude import report_from_json

    report = report_from_json(_with_inf_layer(tmp_path).read_text())
    assert report.layers[1].rmse_over_scale == math.inf and report.layers[1].mean_squared_error == math.inf
    text = report.to_json()
    assert json.loads(text)["layers"][1]["rmse_over_scale"] is None  # standard JSON: no Infinity
    again = report_from_json(text)
    assert again.layers[1].rmse_over_scale == math.inf
    # a required figure that cannot overflow is still refused when null
    data = json.loads(text)
    data["layers"][1]["scale"] = None
    with pytest.raises(ValueError, match=r"layers\[1\]\.scale"):
        report_from_json(json.dumps(data))


def test_the_layer_chart_draws_an_inf_layer_at_the_top_edge_with_a_note(tmp_path):
    from reporter.pipeline.conclude import report_from_json
    from reporter.render import plots

    report = report_from_json(_with_inf_layer(tmp_path).read_text())
    plan = plots.layer_rmse_plan(report)
    assert plan.nonfinite == (1,) and all(math.isfinite(v) for v in plan.ylim)
    assert plan.heights[1] == plan.ylim[1]  # cut at the top edge
    finite = [v for i, v in enumerate(plan.values) if i != 1]
    assert plan.ylim[1] >= max(finite)
    layer = report.layers[1]
    assert plan.note == f"Not finite: layer {layer.index} {layer.op_name} (inf, drawn to the top edge)"
    assert plots.layer_rmse(report).startswith("data:image/png;base64,")


def test_html_and_pdf_are_written_when_a_layers_error_is_inf(tmp_path):
    import pypdf

    from reporter.cli import main

    path = _with_inf_layer(tmp_path)
    for fmt in ("html", "pdf", "md", "json"):
        assert main(["render", str(path), "--format", fmt, "--out", str(tmp_path / f"out.{fmt}")]) == 0, fmt
    html = (tmp_path / "out.html").read_text()
    assert "<td>inf</td>" in html.replace(" ", "") or ">inf<" in html
    assert len(pypdf.PdfReader(str(tmp_path / "out.pdf")).pages) >= 1
    # the findings decided from the inf layer, saved and read back (null), render again
    assert main(["render", str(tmp_path / "out.json"), "--format", "html", "--out", str(tmp_path / "again.html")]) == 0
    assert "RMSE/scale inf is above the rule" in (tmp_path / "again.html").read_text()


def test_a_run_renders_every_format_from_a_report_holding_inf_in_memory(tmp_path):
    """What a run renders (the report in memory, inf as measured), not a file read back."""
    import dataclasses

    import pypdf

    from reporter.pipeline.conclude import report_from_json
    from reporter.render import formats

    report = report_from_json(FIXTURE.read_text())
    layers = list(report.layers)
    layers[2] = dataclasses.replace(layers[2], rmse_over_scale=math.inf, mean_squared_error=math.inf)
    report = dataclasses.replace(report, layers=layers)
    pdf = tmp_path / "r.pdf"
    pdf.write_bytes(formats.render(report, "pdf"))
    assert len(pypdf.PdfReader(str(pdf)).pages) >= 1
    html = formats.render(report, "html")
    assert b"<img" in html and b">inf<" in html.replace(b" ", b"")


# --- the 16x8 rung's refusal ---------------------------------------------------------------------------------
LITERT_REFUSAL = ("tensorflow/lite/kernels/conv.cc:361 Conv im2col elements (3400151040) exceed the 32-bit integer"
                  " limit.Node number 5 (CONV_2D) failed to prepare.\n")


class _Data:
    """A workspace whose run builds the 16x8 variant with `build`."""

    measured = frozenset()

    def __init__(self, build):
        self.build_variant = build


def test_the_16x8_rung_says_in_one_line_that_litert_cannot_build_the_model():
    from reporter.convert.rungs import int16x8

    def refused(name):
        raise RuntimeError(LITERT_REFUSAL)

    found = int16x8.RUNG.build(b"", _Data(refused))
    assert found.model is None
    assert found.error == ("16x8: LiteRT cannot build this model: Conv im2col elements (3400151040) exceed the 32-bit"
                           " integer limit; CONV_2D failed to prepare"), found.error


def test_the_16x8_rung_checks_that_litert_prepares_what_it_built():
    """A built model LiteRT cannot prepare (here: bytes that are no model) is refused the same way, not measured."""
    from reporter.convert.rungs import int16x8

    found = int16x8.RUNG.build(b"", _Data(lambda name: b"not a flatbuffer"))
    assert found.model is None and "\n" not in found.error
    assert found.error.startswith("16x8: LiteRT cannot build this model: "), found.error
