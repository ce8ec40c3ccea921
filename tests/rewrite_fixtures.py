"""A model for rung (d) of the integer-only repairs, rewrites exact in float (reporter.convert.rungs.smoothquant).

* outlier_layernorm_transformer: digits as 8 tokens (the image rows) of 8 features; a Dense embedding to WIDTH
  channels, BLOCKS pre-norm blocks (LayerNormalization -> MultiHeadAttention -> residual add, LayerNormalization ->
  ReLU MLP -> residual add), a final LayerNormalization, mean pooling (TFLite MEAN) and a softmax Dense. Keras 3's
  LayerNormalization exports the mean subtracted as x * g + NEG(mean) * g, a NEG the int8 recipes leave in float.
  After training, one channel of the final LayerNormalization's output (the most active one) is made SCALE times
  larger (its gamma and beta) and the head reads it SCALE times smaller (its kernel row), so the float model computes
  the same function (checked when it is built). Quantized to int8, that tensor's scale is set by the one channel: the
  others round to a code or two, and the head's per-channel weight scale rounds the channel's own tiny weights to 0.

Cached on disk like the other fixtures (model_fixtures.ensure) as model.keras + data.npz: x, y (evaluation) and
x_calib (the training inputs; no overlap). `ensure` gives the float .tflite too (the public TF converter), and
calibration and selection samples split from the training inputs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
FAMILY = f"rewrite-v{VERSION}"
NAME = "outlier_layernorm_transformer"
WIDTH, HEADS, KEY_DIM, HIDDEN, BLOCKS = 16, 2, 8, 32, 2
SCALE = 1000.0
CALIBRATION = 100  # calibration samples (the tool's default --calibration-samples)
SELECTION = 200  # selection samples, after the calibration ones


@dataclass
class Fixture:
    keras_path: Path
    float_model: bytes
    x: np.ndarray
    y: np.ndarray
    x_calib: np.ndarray
    x_select: np.ndarray
    channel: int  # the outlier channel


def _transformer():
    import keras

    M.seed()
    inp = keras.Input((8, 8))
    h = keras.layers.Dense(WIDTH, name="embed")(inp)
    for b in range(BLOCKS):
        n = keras.layers.LayerNormalization(name=f"norm_a{b}")(h)
        a = keras.layers.MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, name=f"attention_{b}")(n, n)
        h = keras.layers.Add(name=f"residual_a{b}")([h, a])
        n = keras.layers.LayerNormalization(name=f"norm_m{b}")(h)
        m = keras.layers.Dense(HIDDEN, activation="relu", name=f"mlp_in_{b}")(n)
        m = keras.layers.Dense(WIDTH, name=f"mlp_out_{b}")(m)
        h = keras.layers.Add(name=f"residual_m{b}")([h, m])
    h = keras.layers.LayerNormalization(name="final_norm")(h)
    h = keras.layers.GlobalAveragePooling1D(name="pool")(h)
    out = keras.layers.Dense(10, activation="softmax", name="head")(h)
    return keras.Model(inp, out, name=NAME)


def outlier_channel(model, x_train) -> int:
    """The most active channel of the final LayerNormalization's output (mean |value| over the training inputs)."""
    import keras

    pooled = keras.Model(model.input, model.get_layer("pool").output).predict(x_train, verbose=0)
    return int(np.argmax(np.abs(pooled).mean(axis=0)))


def _scale_channel(model, k: int, scale: float = SCALE):
    norm, head = model.get_layer("final_norm"), model.get_layer("head")
    gamma, beta = [w.copy() for w in norm.get_weights()]
    gamma[k] *= scale
    beta[k] *= scale
    norm.set_weights([gamma, beta])
    kernel, bias = [w.copy() for w in head.get_weights()]
    kernel[k] /= scale
    head.set_weights([kernel, bias])


def build(folder: Path):
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).reshape(-1, 8, 8).astype(np.float32)
    x_tr, x_te, y_tr, y_te = M.split(x, y.astype(np.int64))
    model = M.train(_transformer(), x_tr, y_tr, "sparse_categorical_crossentropy", 3e-3, 40)
    before = model.predict(x_te, verbose=0)
    k = outlier_channel(model, x_tr)
    _scale_channel(model, k)
    after = model.predict(x_te, verbose=0)
    changed = int(np.sum(before.argmax(-1) != after.argmax(-1)))
    assert changed == 0 and np.abs(before - after).max() < 0.02, (NAME, changed, np.abs(before - after).max())
    (folder / "channel.txt").parent.mkdir(parents=True, exist_ok=True)
    (folder / "channel.txt").write_text(f"{k}\n")
    return M.save(folder, model, x_te, y_te, x_tr)


def float_tflite(keras_path: Path) -> bytes:
    """The float .tflite of the Keras model (the public TF converter, dynamic batch), converted once beside it."""
    path = keras_path.parent / "float.tflite"
    if not path.exists():
        import keras
        import tensorflow as tf

        model = keras.models.load_model(keras_path)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
        tmp.replace(path)
    return path.read_bytes()


def ensure(cache_root) -> Fixture:
    """The cached fixture, trained first if needed (once across processes)."""
    keras_path, data_path = M.ensure(cache_root, FAMILY, NAME, build)
    data = np.load(data_path)
    x_train = data["x_calib"].astype(np.float32)
    channel = int((keras_path.parent / "channel.txt").read_text())
    return Fixture(keras_path, float_tflite(keras_path), data["x"].astype(np.float32), data["y"],
                   x_train[:CALIBRATION], x_train[CALIBRATION:CALIBRATION + SELECTION], channel)
