"""Issue 47, point 2: a model that builds but cannot run names the likely cause. Inputs of 1e37 drive a hidden
tensor past float32 (tanh brings it back: the float model's answers stay finite); calibration then writes an
infinite scale into FIQ, which LiteRT cannot run. The variant says "built, but it could not run ... the inputs
reach 4e+37, the likely cause", not "could not be built"."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def extreme(tmp_path_factory):
    import keras

    folder = tmp_path_factory.mktemp("extreme")
    rng = np.random.default_rng(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(3, activation="softmax")])
    hidden, head = model.layers
    hidden.set_weights([rng.normal(0, 100, (4, 8)).astype(np.float32), np.zeros(8, np.float32)])
    head.set_weights([rng.normal(0, 1, (8, 3)).astype(np.float32), np.zeros(3, np.float32)])
    x = (rng.normal(size=(300, 4)) * 1e37).astype(np.float32)
    y = model.predict(x[:200], verbose=0).argmax(1)
    path, data = folder / "extreme.keras", folder / "extreme.npz"
    model.save(path)
    np.savez(data, x=x[:200], y=y, x_calib=x[200:])
    return path, data, x


def test_a_model_built_but_not_runnable_names_extreme_inputs(extreme, tmp_path):
    import tensorflow as tf

    from reporter import api

    path, data, x = extreme
    report = api.run(str(path), str(data), out=tmp_path, variants=["float", "fiq"], latency_runs=0,
                     formats=["json"])
    float_, fiq = report.variant("float"), report.variant("fiq")
    assert float_.ok  # the float model runs: its answers are finite
    assert fiq.status == "failed"
    top = float(np.max(np.abs(np.load(data)["x"])))  # the evaluation inputs, read back from the file
    assert fiq.error.startswith("built, but it could not run: tensor "), fiq.error
    assert fiq.error.endswith(f"; the inputs reach {top:.0e}, the likely cause"), fiq.error
    # independently: the written FIQ file holds a scale that is not a finite float32, read through LiteRT
    details = tf.lite.Interpreter(model_path=str(report.folder / "fiq.tflite")).get_tensor_details()
    scales = np.concatenate([np.asarray(d["quantization_parameters"]["scales"], np.float64) for d in details])
    assert not np.all(np.isfinite(scales.astype(np.float32))), scales
