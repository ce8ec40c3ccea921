"""Files TFLite Micro reads right (issue 52): LiteRT Quantizer stores a large model's weights after the flatbuffer
(offset buffers), which TFLite Micro does not read; every model measured and shipped for `--target micro` is written
with its buffers inline, and when TFLite Micro disagrees with LiteRT's reference kernels the check names the cause.

Each figure is checked against tools run here, independently of quant-report's code: TFLite Micro's own interpreter
(`tflite_micro.runtime`) on the file the report ships, LiteRT's reference kernels (`ai_edge_litert`), LiteRT
Quantizer's own API, and the files read with TensorFlow's `flatbuffer_utils`."""

import json

import numpy as np
import pytest

import offset_buffer_fixtures as F
import regression_fixtures as R
from conftest import run_recorded
from independent import litert_raw, micro_raw, outputs, quantize

pytestmark = pytest.mark.slow  # a small CNN trained (seconds, cached), converted and run through TFLite Micro


# --- independent readers -----------------------------------------------------------------------------------------
def _file(model: bytes):
    """The file as flatbuffer objects, as stored (flatbuffer_utils' read_model_from_bytearray would move the
    buffers stored after the flatbuffer inline)."""
    from tensorflow.lite.tools import flatbuffer_utils

    return flatbuffer_utils.convert_bytearray_to_object(bytearray(model))


def _offset_buffers(model: bytes) -> int:
    """Buffers the file stores after the flatbuffer (Buffer.offset > 1: LiteRT Quantizer writes 1 as a placeholder)."""
    return sum(1 for b in _file(model).buffers if (b.offset or 0) > 1)


def _same_share(model: bytes, x: np.ndarray) -> float:
    """The share of output values TFLite Micro's interpreter and LiteRT's reference kernels give alike."""
    micro, _, _ = micro_raw(model, x)
    return float(np.mean(micro == litert_raw(model, x, reference=True).astype(micro.dtype)))


def _micro_accuracy(model: bytes, x: np.ndarray, y: np.ndarray) -> float:
    raw, _, _ = micro_raw(model, x)
    return float(np.mean(raw.argmax(axis=1) == y))


# --- fixtures ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wide(demo_cache):
    """(model.tflite bytes, evaluation x, y, calibration x) of the fixture."""
    model, data = F.ensure(demo_cache)
    d = np.load(data)
    return model.read_bytes(), d["x"], d["y"], d["x_calib"], model, data


@pytest.fixture(scope="module")
def litert_fiq(wide):
    """LiteRT Quantizer's static int8 model of the fixture, as its own API writes it."""
    from litert_quantizer import quantizer, recipe

    float_model, _, _, x_calib, _, _ = wide
    q = quantizer.Quantizer(float_model, recipe.static_wi8_ai8())
    calibration = q.calibrate({"serving_default": [{"x": x_calib[i:i + 1]} for i in range(100)]})
    return bytes(q.quantize(calibration).quantized_model)


@pytest.fixture(scope="module")
def wide_micro(wide, tmp_path_factory):
    _, _, _, _, model, data = wide
    out = tmp_path_factory.mktemp("wide_micro")
    code, error = run_recorded(model, data, out, "wide", "--target", "micro", "--formats", "json,md",
                               "--latency-runs", "2")
    assert error is None and code == 0, (code, error)
    folder = out / "wide"
    return folder, json.loads((folder / "report.json").read_text())


@pytest.fixture(scope="module")
def forecaster_micro(demo_cache, tmp_path_factory):
    model, data = R.ensure("forecaster", demo_cache)
    out = tmp_path_factory.mktemp("forecaster_micro")
    code, error = run_recorded(model, data, out, "fore", "--target", "micro", "--formats", "json,md",
                               "--latency-runs", "2")
    assert error is None and code == 0, (code, error)
    folder = out / "fore"
    return folder, json.loads((folder / "report.json").read_text()), np.load(data)


# --- 1. the fixture: LiteRT Quantizer writes offset buffers, and TFLite Micro misreads them ---------------------
def test_litert_quantizer_stores_the_fixtures_weights_after_the_flatbuffer_and_tflite_micro_misreads_them(
        wide, litert_fiq):
    _, x, _, _, _, _ = wide
    assert _offset_buffers(litert_fiq) >= 1
    assert _same_share(litert_fiq, x[:64]) < 0.5  # garbage: the bug the fixture exists for


# --- 2. every model measured for micro is written inline, and its figures are TFLite Micro's ---------------------
def test_every_model_checked_on_micro_has_its_buffers_inline_and_tflite_micros_own_figures(wide, wide_micro):
    _, x, y, _, _, _ = wide
    folder, report = wide_micro
    checked = [v for v in report["variants"] if (v.get("on_target") or {}).get("tools", {}).get("micro")]
    assert checked, [v["name"] for v in report["variants"]]
    for v in checked:
        model = (folder / f"{v['name']}.tflite").read_bytes()
        assert _offset_buffers(model) == 0, v["name"]
        assert all(-1 not in list(t.shapeSignature if t.shapeSignature is not None else t.shape)
                   for t in (_file(model).subgraphs[0].tensors[i] for i in _file(model).subgraphs[0].outputs))
        on = v["on_target"]
        assert on["metrics"]["accuracy"] == pytest.approx(_micro_accuracy(model, x, y), abs=1e-12), v["name"]
        n = on["tools"]["micro"]["reference_samples"]
        share = _same_share(model, x[:n])
        assert share >= 0.99, (v["name"], share)
        assert on["tools"]["micro"]["identical_share"] == pytest.approx(share, abs=1e-9), v["name"]


def test_the_shipped_model_is_tflite_micros_and_meets_the_target_where_the_offset_file_did_not(wide, wide_micro,
                                                                                                 litert_fiq):
    """The same model LiteRT Quantizer writes: with offsets TFLite Micro computes garbage, inline it ships."""
    _, x, y, _, _, _ = wide
    folder, report = wide_micro
    d = report["findings"]["decision"]
    assert d["variant"] and d["meets_target"], d["reason"]
    shipped = (folder / d["file"]).read_bytes()
    assert _offset_buffers(shipped) == 0
    micro = _micro_accuracy(shipped, x, y)
    assert f"{100 * micro:.1f} % on TFLite Micro" in report["findings"]["headline"][0]
    flt = next(v for v in report["variants"] if v["name"] == "float")["metrics"]["accuracy"]
    assert micro >= flt - 0.02 > _micro_accuracy(litert_fiq, x, y), (micro, flt)


# --- 3. the check names why TFLite Micro disagrees -------------------------------------------------------------
def test_fed_an_offset_file_the_micro_check_names_the_offset_buffers_as_the_cause(wide, litert_fiq):
    from reporter.measure import hardware
    from reporter.model.variant import OnTarget
    from reporter.render.words import decision as words

    _, x, _, _, _, _ = wide
    _, figures = hardware.micro_run(litert_fiq, x[:64], 64)
    stored_after = _offset_buffers(litert_fiq)
    assert figures.offset_buffers == stored_after
    assert figures.identical_share < 0.5 and figures.disagrees
    said = words.hardware(OnTarget("micro", "TFLite Micro", True, tools={"micro": figures}))
    assert f"does not read the {stored_after} weight buffer" in said and "(offset buffers)" in said, said
    assert "Error" not in said and "Exception" not in said


def test_written_inline_the_same_model_runs_on_tflite_micro_as_on_the_reference_kernels(wide, litert_fiq):
    from reporter.measure import graph, hardware

    _, x, _, _, _, _ = wide
    inline = graph.with_buffers_inline(litert_fiq)
    assert _offset_buffers(inline) == 0
    # the same bytes in each buffer: read from LiteRT Quantizer's offsets, and from the inline file's data
    offsets, inlined = _file(litert_fiq).buffers, _file(inline).buffers
    assert len(offsets) == len(inlined)
    for before, after in zip(offsets, inlined):
        data = litert_fiq[before.offset:before.offset + before.size] if (before.offset or 0) > 1 else \
            bytes(np.asarray(before.data if before.data is not None else [], np.uint8))
        assert bytes(np.asarray(after.data if after.data is not None else [], np.uint8)) == data
    np.testing.assert_array_equal(litert_raw(inline, x, reference=True), litert_raw(litert_fiq, x, reference=True))
    assert _same_share(inline, x[:64]) >= 0.99
    _, figures = hardware.micro_run(inline, x[:64], 64)
    assert not figures.disagrees and figures.offset_buffers == 0
    from reporter.measure import micro_causes
    from reporter.render.tools.micro import cause as micro_cause

    assert micro_cause(figures) == ""
    # where TFLite Micro agrees op by op, no op's kernel is blamed
    from ai_edge_litert.interpreter import Interpreter

    (inp,) = Interpreter(model_content=inline).get_input_details()
    assert micro_causes.found(inline, [quantize(x[:8], *inp["quantization"])], hardware.micro_raw) == {}


# --- 4. a regression model's figure on the target is its error ----------------------------------------------------
def test_a_regression_models_figure_on_micro_is_its_output_error_not_a_percentage(forecaster_micro):
    folder, report, data = forecaster_micro
    x = data["x"]
    flt = outputs((folder / "float.tflite").read_bytes(), x)
    rows = {}
    for line in (folder / "summary.md").read_text().split("**On the target")[1].splitlines():
        cells = [c.strip().strip("*") for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[1].startswith("yes"):
            rows[cells[0]] = cells
    checked = [v for v in report["variants"] if (v.get("on_target") or {}).get("tools", {}).get("micro")]
    assert checked and len(rows) == len(checked), rows
    for v in checked:
        raw, scale, zero = micro_raw((folder / f"{v['name']}.tflite").read_bytes(), x)
        mse = float(np.mean(((raw.astype(np.float64) - zero) * scale - flt) ** 2))
        assert v["on_target"]["output_error"]["mse"] == pytest.approx(mse, rel=1e-3), v["name"]
        label = next(o["label"] for o in report["findings"]["decision"]["options"] if o["name"] == v["name"])
        on_target = rows[label][2]
        assert on_target.startswith("MSE "), on_target
        assert float(on_target.split()[1]) == pytest.approx(mse, rel=1e-3), on_target
        assert not on_target.split("(")[0].strip().endswith("%"), on_target


# --- 5. a refusal is said in the user's terms, TFLite Micro's own text kept in report.json ------------------------
def test_tflite_micros_refusal_is_said_by_the_op_without_its_source_files_or_node_numbers(wide):
    from litert_quantizer import quantizer, recipe

    from reporter.measure import hardware
    from reporter.render.words.decision import in_user_terms

    float_model, x, _, _, _, _ = wide
    drq = bytes(quantizer.Quantizer(float_model, recipe.dynamic_wi8_afp32()).quantize().quantized_model)
    with pytest.raises(RuntimeError) as refused:
        hardware.micro_run(drq, x[:2], 2)
    raw = str(refused.value)
    assert "Hybrid models are not supported" in raw and ".cc" in raw  # TFLite Micro's own words, kept as it said
    said = in_user_terms(raw)
    assert "hybrid models" in said and "TFLite Micro" in said, said
    assert not any(word in said for word in (".cc", "Node ", "number", "status", "Error", "Exception")), said


# --- 6. the report of the bug names its cause ------------------------------------------------------------
@pytest.fixture(scope="module")
def as_written_run(wide, tmp_path_factory):
    """`--target micro-as-written`: micro's own target with `inline_buffers` off, registered for the run (and only
    for it), so that TFLite Micro checks the files as LiteRT Quantizer writes them: the report the issue quotes."""
    import dataclasses
    import types

    from reporter.core import targets

    family = types.ModuleType("micro_as_written")
    family.HELP = "micro-as-written (TFLite Micro on the files as LiteRT Quantizer writes them)"
    family.TARGETS = (dataclasses.replace(targets.of("micro"), name="micro-as-written", inline_buffers=False),)
    _, _, _, _, model, data = wide
    out = tmp_path_factory.mktemp("as_written")
    targets.register(family)
    try:
        code, error = run_recorded(model, data, out, "wide", "--target", "micro-as-written", "--variants",
                                   "float,fiq", "--formats", "json,md", "--latency-runs", "0")
    finally:
        targets.unregister(family)
    assert error is None and code is not None, error
    folder = out / "wide"
    return folder, json.loads((folder / "report.json").read_text())


def test_where_tflite_micro_reads_the_offset_file_the_headline_names_the_offset_buffers(wide, as_written_run):
    _, x, _, _, _, _ = wide
    folder, report = as_written_run
    fiq = (folder / "fiq.tflite").read_bytes()
    stored_after = _offset_buffers(fiq)
    assert stored_after >= 1  # the file as LiteRT Quantizer wrote it
    (v,) = [v for v in report["variants"] if v["name"] == "fiq"]
    micro = v["on_target"]["tools"]["micro"]
    n = micro["reference_samples"]
    assert micro["identical_share"] < 0.5 and _same_share(fiq, x[:n]) < 0.5  # garbage, as TFLite Micro gives it here
    assert micro["offset_buffers"] == stored_after
    headline = report["findings"]["headline"][0]
    assert f"does not read the {stored_after} weight buffers the file stores after the model (offset buffers)" \
        in headline, headline
    assert not any(word in headline for word in ("Error", "Exception", ".cc", "Node ")), headline
