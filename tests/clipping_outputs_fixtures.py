"""A model with three outputs whose int8 ranges clip float's values differently (issue 46), for
tests/test_clipping_words_per_output.py; seeded, trained in seconds on scikit-learn data and cached on disk like the other
fixtures (tests/model_fixtures.py `ensure`).

* three_scales: six features from scikit-learn's `make_regression` (seeded): the first three with two targets
  of their own (`big`, `tiny`), the last three with one (`ordinary`); each target standardized. One float input
  `x` -> shared Dense 32-32 (ReLU) -> three linear Dense(1) heads, in this Keras order: `ordinary` (as is),
  `big` (its head's kernel and bias then multiplied by 1000: values in the thousands) and `tiny` (multiplied by
  0.001). Float targets `y_<name>` of the same scales. The calibration inputs `x_calib` are every sample with
  its first three features shrunk to 0.4 of their values: `big`'s and `tiny`'s int8 output ranges hold only part
  of what the evaluation data make them output, and clip different shares, while `ordinary`'s range holds all
  of its values (it does not clip, and is the primary output).
  model.keras, data.npz (labels by Keras output name), model.tflite (the float conversion, no optimization)
  and data_tflite.npz (the same arrays, labels by the .tflite's signature output keys) in one folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
HEADS = ("ordinary", "big", "tiny")  # the Keras output order (signature keys output_0, output_1, output_2)
SCALES = {"ordinary": 1.0, "big": 1000.0, "tiny": 0.001}
TARGET = {"ordinary": 2, "big": 0, "tiny": 1}  # which make_regression target each head learns
CALIB_SHRINK = 0.4  # x_calib: every sample, its first three features (big's and tiny's) times this


def _data():
    from sklearn.datasets import make_regression

    xa, ta = make_regression(n_samples=1000, n_features=3, n_targets=2, noise=1.0, random_state=M.SEED)
    xb, tb = make_regression(n_samples=1000, n_features=3, n_targets=1, noise=1.0, random_state=M.SEED + 1)
    x, t = np.concatenate([xa, xb], axis=1), np.concatenate([ta, tb[:, None]], axis=1)
    x = ((x - x.mean(axis=0)) / x.std(axis=0)).astype(np.float32)
    z = ((t - t.mean(axis=0)) / t.std(axis=0)).astype(np.float32)
    return x, z


def _build(folder: Path):
    import keras
    import tensorflow as tf

    x, z = _data()
    idx_tr, idx_te = M.split(np.arange(len(x)), np.arange(len(x)), stratify=False)[:2]
    M.seed()
    inp = keras.Input((x.shape[1],), name="x")
    h = keras.layers.Dense(32, activation="relu")(inp)
    h = keras.layers.Dense(32, activation="relu")(h)
    outs = [keras.layers.Dense(1, name=name)(h) for name in HEADS]
    model = keras.Model(inp, outs, name="three_scales")
    model.compile(keras.optimizers.Adam(1e-2), loss="mse")
    model.fit(x[idx_tr], [z[idx_tr, TARGET[n]][:, None] for n in HEADS], epochs=60, batch_size=M.BATCH_SIZE,
              verbose=0)
    for name in HEADS:  # the heads' own scales: float's outputs are exactly the trained ones times SCALES
        kernel, bias = model.get_layer(name).get_weights()
        model.get_layer(name).set_weights([kernel * SCALES[name], bias * SCALES[name]])
    model.save(folder / "model.keras")
    (folder / "model.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    targets = {n: (z[idx_te, TARGET[n]] * SCALES[n]).astype(np.float32)[:, None] for n in HEADS}
    arrays = {"x": x[idx_te], "x_calib": x * np.array([CALIB_SHRINK] * 3 + [1.0] * 3, np.float32)}
    np.savez(folder / "data.npz", **arrays, **{f"y_{n}": t for n, t in targets.items()})
    np.savez(folder / "data_tflite.npz", **arrays, **{f"y_output_{i}": targets[n] for i, n in enumerate(HEADS)})


def ensure(cache_root) -> Path:
    """The fixture's folder (model.keras, data.npz, model.tflite, data_tflite.npz), built first if needed."""
    model, _ = M.ensure(cache_root, f"issue46-outputs-v{VERSION}", "three_scales", _build)
    return model.parent
