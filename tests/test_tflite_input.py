"""A float .tflite as input: every variant made by LiteRT Quantizer, the same report, and what is not
available said plainly."""

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def cnn_tflite(demo_cache, tmp_path_factory):
    """The demo's digits CNN converted to a float .tflite by TF's converter, and its FIQ by TF's path
    (same calibration samples as `run` uses) for comparison."""
    from reporter.convert import converter as conv
    from reporter.pipeline import demo
    from reporter.inputs import data_loading, model_loading
    from reporter.inputs.settings import RunSettings

    model_path, data_path = demo.ensure_model("digits_cnn")
    loaded = model_loading.load_model(model_path)
    data = data_loading.load_data(str(data_path), RunSettings(model_path, data_path, "").calibration_samples)
    try:
        float_model = conv.convert(loaded.make_converter, "float", data.x_calib)
        tf_fiq = conv.convert(loaded.make_converter, "fiq", data.x_calib)
    finally:
        loaded.make_converter.cleanup()
    path = tmp_path_factory.mktemp("tflite_in") / "digits_cnn_float.tflite"
    path.write_bytes(float_model)
    return path, data_path, tf_fiq, data


@pytest.fixture(scope="module")
def tflite_report(cnn_tflite, tmp_path_factory, run_cli):
    path, data_path, _, _ = cnn_tflite
    out = tmp_path_factory.mktemp("tflite_out")
    code = run_cli(path, data_path, out, "--variants", "float,drq,fiq,int16x8,wo8", "--formats", "json,md,html",
                   name="cnn_tflite", latency_runs=3)
    assert code == 0
    folder = out / "cnn_tflite"
    return folder, json.loads((folder / "report.json").read_text())


def _accuracy(model: bytes, data) -> float:
    from reporter.measure import evaluate

    return float(np.mean(np.argmax(evaluate.predict(model, data.x), axis=1) == data.y))


@pytest.mark.slow
def test_every_variant_of_a_float_tflite_is_made_by_litert_quantizer_and_measured(tflite_report, cnn_tflite):
    folder, report = tflite_report
    _, _, _, data = cnn_tflite
    variants = {v["name"]: v for v in report["variants"]}
    assert set(variants) == {"float", "drq", "fiq", "int16x8", "wo8"}
    assert all(v["status"] == "ok" for v in variants.values()), [v.get("error") for v in variants.values()]
    assert variants["float"]["converter"] == "given"
    assert {variants[n]["converter"] for n in ("drq", "fiq", "int16x8", "wo8")} == {"LiteRT Quantizer"}
    assert report["model"]["format"] == "tflite"
    # The float variant is the file as given, and each accuracy is what the written model scores.
    assert (folder / "float.tflite").read_bytes() == cnn_tflite[0].read_bytes()
    for name, v in variants.items():
        assert v["metrics"]["accuracy"] == pytest.approx(_accuracy((folder / f"{name}.tflite").read_bytes(), data))
    html = (folder / "report.html").read_text()
    assert "by LiteRT Quantizer" in html


@pytest.mark.slow
def test_litert_fiq_is_close_to_tf_fiq_of_the_same_model(tflite_report, cnn_tflite):
    """Same float model, same calibration samples, two quantizers: the accuracies differ by at most two
    points. They are not the same model: LiteRT Quantizer's static int8 recipe also quantizes the input
    and output (int8 I/O), where TF's FIQ keeps float I/O with QUANTIZE/DEQUANTIZE ops inside."""
    from reporter.measure import evaluate

    folder, report = tflite_report
    _, _, tf_fiq, data = cnn_tflite
    litert_fiq = (folder / "fiq.tflite").read_bytes()
    litert_acc = next(v for v in report["variants"] if v["name"] == "fiq")["metrics"]["accuracy"]
    tf_acc = _accuracy(tf_fiq, data)
    assert abs(litert_acc - tf_acc) <= 0.02, (litert_acc, tf_acc)
    from ai_edge_litert.interpreter import Interpreter

    assert Interpreter(model_content=litert_fiq).get_input_details()[0]["dtype"] == np.int8
    assert Interpreter(model_content=tf_fiq).get_input_details()[0]["dtype"] == np.float32
    shapes = [[(p.key, p.shape) for p in (*s.inputs, *s.outputs)] for s in map(evaluate.signature, (litert_fiq, tf_fiq))]
    assert shapes[0] == shapes[1]


@pytest.mark.slow
def test_variants_only_tf_can_make_are_refused_for_a_tflite_before_anything_runs(cnn_tflite, tmp_path, capsys,
                                                                                 run_cli):
    path, data_path, _, _ = cnn_tflite
    code = run_cli(path, data_path, tmp_path, "--variants", "float,f16", quiet=False)
    assert code == 2
    err = capsys.readouterr().err
    assert "f16" in err and str(path) in err and "LiteRT Quantizer makes" in err
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_an_already_quantized_tflite_is_refused_with_its_name(cnn_tflite, tmp_path, capsys, run_cli):
    _, data_path, tf_fiq, _ = cnn_tflite
    quantized = tmp_path / "model_int8.tflite"
    quantized.write_bytes(tf_fiq)
    code = run_cli(quantized, data_path, tmp_path / "out")
    assert code == 1
    err = capsys.readouterr().err
    assert "model_int8.tflite" in err and "already quantized" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_file_that_is_not_tflite_is_refused_before_tensorflow(tmp_path, capsys, mlp_files, run_cli):
    fake = tmp_path / "model.tflite"
    fake.write_bytes(b"not a flatbuffer at all")
    code = run_cli(fake, mlp_files[1], tmp_path / "out", quiet=False)
    assert code == 1
    assert "model.tflite" in capsys.readouterr().err
