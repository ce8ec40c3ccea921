"""A quantization-aware model (issue 46): a SavedModel whose graph holds fake-quant nodes
(tf.quantization.fake_quant_*, what tfmot's QAT layers insert; tfmot itself does not install beside this
TensorFlow). The report must say the model is quantization-aware, name "float" as the fake-quant graph and the
Optimize.DEFAULT conversion as the QAT int8 model, and give a converter failure's cause line, never a bare exception
name. Checked against the written files read with LiteRT here."""

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_recorded

pytestmark = pytest.mark.slow


def _build(folder: Path):
    import tensorflow as tf
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x, y = (x / 16.0).astype(np.float32), y.astype(np.int64)
    tf.keras.utils.set_random_seed(0)
    m = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(10)])
    m.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    m.fit(x[:1200], y[:1200], epochs=20, verbose=0)
    m.save(folder / "base.keras")  # the float model the fake-quant one is made from: its post-training quantization
    (w1, b1), (w2, b2) = m.layers[0].get_weights(), m.layers[1].get_weights()

    class FakeQuant(tf.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.b1, self.w2, self.b2 = (tf.Variable(v) for v in (w1, b1, w2, b2))

        @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32, name="x")])
        def __call__(self, inp):
            fq = tf.quantization.fake_quant_with_min_max_args
            wq = tf.quantization.fake_quant_with_min_max_vars
            h = fq(inp, min=0.0, max=1.0)
            h = tf.nn.relu(tf.matmul(h, wq(self.w1, tf.reduce_min(self.w1), tf.reduce_max(self.w1),
                                           narrow_range=True)) + self.b1)
            h = fq(h, min=0.0, max=8.0)
            logits = tf.matmul(h, wq(self.w2, tf.reduce_min(self.w2), tf.reduce_max(self.w2), narrow_range=True))
            return {"probs": tf.nn.softmax(logits + self.b2)}

    module = FakeQuant()
    tf.saved_model.save(module, str(folder / "fq_model"), signatures={"serving_default": module.__call__})
    np.savez(folder / "fq_data.npz", x=x[1200:], y=y[1200:], x_calib=x[:300])


@pytest.fixture(scope="module")
def qat_run(demo_cache, tmp_path_factory):
    from reporter.pipeline import demo

    folder = demo.cache_dir().parent / "qat-fakequant-v2"
    if not (folder / "complete").exists():
        folder.mkdir(parents=True, exist_ok=True)
        _build(folder)
        (folder / "complete").write_text("ok\n")
    out = tmp_path_factory.mktemp("qat")
    code, error = run_recorded(folder / "fq_model", folder / "fq_data.npz", out, "qat", "--formats", "json",
                               "--latency-runs", "2", "--base-model", str(folder / "base.keras"))
    report = out / "qat" / "report.json"
    return {"code": code, "error": error, "folder": out / "qat",
            "report": json.loads(report.read_text()) if report.exists() else None}


def _pairs(model: bytes) -> int:
    """QUANTIZE ops whose output a DEQUANTIZE reads, counted from LiteRT's op details."""
    from ai_edge_litert.interpreter import Interpreter

    ops = Interpreter(model_content=model)._get_ops_details()
    quantized = {op["outputs"][0] for op in ops if op["op_name"] == "QUANTIZE"}
    return sum(1 for op in ops if op["op_name"] == "DEQUANTIZE" and op["inputs"][0] in quantized)


def test_a_quantization_aware_model_is_named_as_such(qat_run):
    assert qat_run["code"] == 0, qat_run["error"]
    report, folder = qat_run["report"], qat_run["folder"]
    pairs = _pairs((folder / "float.tflite").read_bytes())
    assert pairs > 0 and report["model"]["fake_quant_pairs"] == pairs
    hint = next(h for h in report["findings"]["hints"] if h["code"] == "quantization_aware")
    assert f"{pairs} fake-quant" in hint["text"] and "fake-quant graph" in hint["text"]
    labels = {o["name"]: o["label"] for o in report["findings"]["decision"]["options"]}
    assert labels["float"].startswith("Float (the fake-quant graph)")
    assert labels["drq"].startswith("QAT int8")
    # The QAT int8 model (Optimize.DEFAULT) computes in int8 where the fake-quant nodes are: read from the file.
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=(folder / "drq.tflite").read_bytes())
    details = {t["index"]: t for t in it.get_tensor_details()}
    fc = [op for op in it._get_ops_details() if op["op_name"] == "FULLY_CONNECTED"]
    assert any(details[op["inputs"][0]]["dtype"].__name__ == details[op["inputs"][1]]["dtype"].__name__ == "int8"
               for op in fc)


def test_a_converter_failure_gives_its_cause_not_a_bare_exception_name(qat_run):
    report = qat_run["report"]
    errors = [report.get("debugger_error") or ""] + [v.get("error") or "" for v in report["variants"]]
    for error in filter(None, errors):
        assert error.strip() not in ("RuntimeError", "ValueError", "ConverterError"), error


def test_qat_and_post_training_quantization_of_the_base_are_compared_on_the_same_data(qat_run):
    """--base-model: the base float model and its post-training FIQ are measured beside the QAT models; each figure
    the report gives equals a LiteRT run of the written file here, and the hint compares them."""
    from ai_edge_litert.interpreter import Interpreter

    report, folder = qat_run["report"], qat_run["folder"]
    by_name = {v["name"]: v for v in report["variants"]}
    assert by_name["base_fiq"]["status"] == "ok" and by_name["base_float"]["status"] == "ok"
    x, y = _data(qat_run)
    for name in ("base_fiq", "base_float", "drq"):
        runner = Interpreter(model_content=(folder / f"{name}.tflite").read_bytes()).get_signature_runner()
        key = next(iter(runner.get_input_details()))
        out = next(iter(runner(**{key: x}).values()))
        assert by_name[name]["metrics"]["accuracy"] == pytest.approx(float(np.mean(out.argmax(1) == y)), abs=1e-9)
    hint = next(h for h in report["findings"]["hints"] if h["code"] == "quantization_aware")
    assert "post-training FIQ of the base model" in hint["text"] and "on the same data" in hint["text"]
    labels = {o["name"]: o["label"] for o in report["findings"]["decision"]["options"]}
    assert labels["base_fiq"] == "Post-training FIQ of the base model"


def _data(qat_run):
    from reporter.pipeline import demo

    data = np.load(demo.cache_dir().parent / "qat-fakequant-v2" / "fq_data.npz")
    return data["x"].astype(np.float32), data["y"]
