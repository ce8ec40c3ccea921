"""Per-tensor full-integer quantization (issue 36, part): a variant with one scale per weight tensor (what many NPUs
and microcontrollers need), built by TensorFlow's converter beside the per-channel FIQ and measured like it."""

import numpy as np
import pytest

from conftest import load_report

pytestmark = pytest.mark.slow


def _weight_scales(tflite: bytes) -> list[int]:
    """How many scales each int8 weight tensor (a constant of rank 2 or more) carries, read from the flatbuffer."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    obj = flatbuffer_utils.convert_bytearray_to_object(bytearray(tflite))
    counts = []
    for sg in obj.subgraphs:
        for t in sg.tensors:
            data = obj.buffers[t.buffer].data if t.buffer < len(obj.buffers) else None
            if t.type == schema.TensorType.INT8 and data is not None and len(data) and len(t.shape) >= 2:
                counts.append(len(t.quantization.scale))
    return counts


def test_per_tensor_fiq_has_one_scale_per_weight_tensor_and_is_measured(tmp_path, run_cli):
    from independent import accuracy
    from reporter.pipeline import demo

    model, data = demo.ensure_model("digits_cnn")
    out = tmp_path / "out"
    assert run_cli(model, data, out, "--variants", "float,fiq,fiq_per_tensor", "--formats", "json", "--name", "cnn",
                   latency_runs=3) == 0
    folder = out / "cnn"
    report = load_report(folder)
    tensor, channel = (folder / "fiq_per_tensor.tflite").read_bytes(), (folder / "fiq.tflite").read_bytes()
    assert _weight_scales(tensor) and set(_weight_scales(tensor)) == {1}
    assert max(_weight_scales(channel)) > 1  # FIQ is per channel: the two differ
    arrays = np.load(data)
    v = report.variant("fiq_per_tensor")
    assert v.ok and v.metrics.accuracy == pytest.approx(accuracy(tensor, arrays["x"], arrays["y"]), abs=1e-9)
    assert v.size_bytes == len(tensor) < report.variant("fiq").size_bytes  # one scale, not one per channel
