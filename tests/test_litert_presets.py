"""LiteRT Quantizer's preset recipes as variants (issue 36, part): `--variants` takes the names the field writes
(`dynamic_wi4_afp32`, `weight_only_wi4_afp32`, `static_wi8_ai8`, ...), each built from the float model and measured
like every variant; int4 weights are counted in the tensor-type table; a model that quantized nothing says so."""

import collections
import dataclasses

import numpy as np
import pytest

from conftest import load_report

PRESETS = ("dynamic_wi4_afp32", "weight_only_wi4_afp32", "static_wi8_ai8")


def _types(tflite: bytes) -> collections.Counter:
    """Tensor types counted from the flatbuffer with TensorFlow's own schema, independently."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    names = {v: k.lower() for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    obj = flatbuffer_utils.convert_bytearray_to_object(bytearray(tflite))
    return collections.Counter(names[t.type] for sg in obj.subgraphs for t in sg.tensors)


@pytest.mark.slow
def test_int4_presets_are_variants_measured_like_every_other(tmp_path, mlp_files, run_cli):
    from independent import accuracy

    model, data = mlp_files
    out = tmp_path / "out"
    assert run_cli(model, data, out, "--variants", "float," + ",".join(PRESETS), "--formats", "json,html",
                   "--name", "mlp", latency_runs=3) == 0
    folder = out / "mlp"
    report = load_report(folder)
    arrays = np.load(data)
    x, y = arrays["x"], arrays["y"]
    flt = report.variant("float")
    for name in PRESETS:
        v = report.variant(name)
        assert v is not None and v.ok and v.converter == "LiteRT Quantizer", name
        tflite = (folder / f"{name}.tflite").read_bytes()
        counted = _types(tflite)
        assert v.tensor_types.get("int4", 0) == counted.get("int4", 0), name
        assert v.tensor_types["int8"] == counted.get("int8", 0) and v.tensor_types["total"] == sum(counted.values())
        assert v.metrics.accuracy == pytest.approx(accuracy(tflite, x, y), abs=1e-9), name
        assert v.size_bytes == len(tflite) < flt.size_bytes, name
    assert report.variant("dynamic_wi4_afp32").tensor_types["int4"] == 3  # the three Dense kernels
    html = (folder / "report.html").read_text()
    assert ">Int4<" in html  # its row in the tensor-type table, only because a model has int4 tensors
    # FIQ's own recipe built by LiteRT is an option of the comparison table like FIQ from TensorFlow's converter
    assert "static_wi8_ai8" in {t.name for t in report.findings.tradeoff}


def test_a_model_that_quantized_nothing_says_so(fixture_report):
    from reporter.pipeline import conclude

    flt = fixture_report.variant("float")
    same = dataclasses.replace(flt, name="dynamic_wi4b32_afp32", converter="LiteRT Quantizer")
    report = dataclasses.replace(fixture_report, variants=[*fixture_report.variants, same], findings=None)
    found = conclude.findings_of(report)
    line = found.variant("dynamic_wi4b32_afp32").verdict
    assert "quantized nothing: every tensor is still float32" in line
    assert "quantized nothing" not in found.variant("fiq").verdict


def test_the_calibration_equals_litert_quantizers_own(mlp_files):
    """The run looks each op's recipe up once instead of once per sample (issue 67); the statistics are LiteRT
    Quantizer's own `Quantizer.calibrate` on the same float model and samples, array for array."""
    import keras
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter
    from litert_quantizer import quantizer, recipe

    from reporter.convert import litert

    model, data = mlp_files
    float_model = tf.lite.TFLiteConverter.from_keras_model(keras.saving.load_model(model, compile=False)).convert()
    x = np.load(data)["x_calib"][:40].astype(np.float32)
    (signature, inputs), = Interpreter(model_content=float_model).get_signature_list().items()
    (name,) = inputs["inputs"]
    theirs = quantizer.Quantizer(float_model, recipe.static_wi8_ai8()).calibrate(
        {signature: [{name: x[i:i + 1]} for i in range(len(x))]})
    ours = litert.LiteRtQuantizer(float_model, x).calibration()
    assert sorted(ours) == sorted(theirs) and len(ours) >= 4  # the input and the three Dense layers at least
    for tensor, stats in theirs.items():
        assert sorted(ours[tensor]) == sorted(stats), tensor
        for key, value in stats.items():
            mine = np.asarray(ours[tensor][key])
            assert mine.dtype == np.asarray(value).dtype and np.array_equal(mine, value), (tensor, key)


def test_statistics_collected_in_the_contained_child_build_the_same_models(mlp_files):
    """A run without a side process has its contained child collect LiteRT Quantizer's statistics while it searches
    (issue 67): the int8 and 16x8 models built from them are byte for byte those built from statistics collected in
    this process, and when the child gives none they are collected here."""
    import keras
    import tensorflow as tf

    from reporter.convert import contained, litert

    model, data = mlp_files
    float_model = tf.lite.TFLiteConverter.from_keras_model(keras.saving.load_model(model, compile=False)).convert()
    x = np.load(data)["x_calib"][:40].astype(np.float32)
    child = contained.Child()
    try:
        pending = child.submit(contained.LITERT_CALIBRATION, litert.collect_calibration, float_model, x)
        collected, failed, here = (litert.LiteRtModels(float_model, x) for _ in range(3))
        asked = []
        collected.collect_from(lambda: asked.append(True) or pending())
        failed.collect_from(lambda: None)
        for scheme in ("fiq", "int16x8"):
            built = here.build(scheme)
            assert collected.build(scheme) == built and failed.build(scheme) == built, scheme
        assert asked == [True]  # the child's statistics, read once
    finally:
        child.close()
