"""A float .tflite is measured, quantized and reported without importing TensorFlow (2.5 s of every run; issue 67): the
graph module reads and writes models with LiteRT's flatbuffer_utils, the Analyzer's text comes from LiteRT's copy of
its C++ analyzer and the timing floor's one-ADD model is written without a converter. Each is checked against what
TensorFlow's own functions make of the same model."""

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reporter.measure import graph, graph_edits, structure

ROOT = Path(__file__).resolve().parents[1]

GUARD = """
import os, sys
class Guard:
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" and "tensorflow" not in sys.modules:
            open(sys.argv[1], "w").write("tensorflow imported")
        return None
sys.meta_path.insert(0, Guard())
from reporter import cli
code = cli.main(sys.argv[2:])
sys.stdout.flush(); sys.stderr.flush()
os._exit(code)
"""


@pytest.fixture(scope="module")
def models(mlp_files):
    """The demo MLP as TensorFlow's converter writes it: float, DRQ and FIQ."""
    import keras
    import tensorflow as tf

    model = keras.saving.load_model(mlp_files[0], compile=False)
    x = np.load(mlp_files[1])["x_calib"][:40].astype(np.float32)
    made = {}
    for name in ("float", "drq", "fiq"):
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        if name != "float":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if name == "fiq":
            converter.representative_dataset = lambda: ([x[i:i + 1]] for i in range(len(x)))
        made[name] = converter.convert()
    return made


def test_a_model_is_read_and_written_as_tensorflows_flatbuffer_utils_does(models):
    from tensorflow.lite.tools import flatbuffer_utils as theirs

    for name, model in models.items():
        ours = graph.write_model(graph.read_model(model), drop_orphans=False)
        assert ours == bytes(theirs.convert_object_to_bytearray(theirs.convert_bytearray_to_object(bytearray(model)))), name


def test_the_analyzer_text_is_what_tensorflows_analyzer_prints(models):
    import tensorflow as tf

    for name, model in models.items():
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            tf.lite.experimental.Analyzer.analyze(model_content=model)
        assert structure.analyzer_text(model) == printed.getvalue(), name
        assert "Op#0" in printed.getvalue()


def test_the_timing_floors_model_adds_one():
    """The empty invoke timed for the latency floor (judgement.timing_floor): one ADD of 1.0 on a float [1, 1]."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=graph_edits.one_add_model())
    it.allocate_tensors()
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    assert list(inp["shape"]) == [1, 1] and inp["dtype"] == np.float32
    x = np.array([[2.75]], np.float32)
    it.set_tensor(inp["index"], x)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(out["index"]), x + 1.0)
    assert structure.ops(graph_edits.one_add_model()) == {"ADD": 1}


def test_a_float_tflite_run_imports_no_tensorflow(models, mlp_files, tmp_path):
    """`quant-report run model.tflite` writes its report without importing TensorFlow in its process (the float
    .tflite is quantized by LiteRT Quantizer, measured by LiteRT)."""
    model = tmp_path / "mlp.tflite"
    model.write_bytes(models["float"])
    marker = tmp_path / "imported.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", GUARD, str(marker), "run", str(model), "--data", str(mlp_files[1]),
                           "--out", str(tmp_path / "out"), "--name", "m", "--quiet", "--formats", "json,md",
                           "--latency-runs", "3"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists(), "the run imported TensorFlow"
    folder = tmp_path / "out" / "m"
    assert (folder / "report.json").exists() and (folder / "summary.md").exists()
    assert (folder / "analyzer_fiq.txt").read_text().startswith("=== TFLite ModelAnalyzer ===")
