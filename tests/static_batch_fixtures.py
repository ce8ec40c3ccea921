"""A model whose batch is fixed at 1, for tests/test_static_batch.py (a Keras Dense on a rank-3 tensor is a Tensordot:
converted with batch None it becomes GATHER + REDUCE_PROD + RESHAPE, which TFLite Micro has no kernel for).

Seeded, trained in seconds, cached on disk like the other fixtures (`ensure`, model_fixtures.ensure, a VERSION key) as
model.keras + data.npz: x, y (evaluation) and x_calib (the training inputs; no overlap).

* batch1_tensordot: synthetic 16x16 one-channel images of three classes (a bright horizontal bar, a vertical bar, a
  diagonal, each at a seeded place, plus Gaussian noise
  NOISE): input `x` with `batch_size=1` (1, 16, 16, 1) float32 -> Conv2D(4, 3,
  stride 2, same, relu) -> Reshape (64, 4) -> Dense(8, relu) on the rank-3 tensor -> Flatten -> Dense(3, softmax).
  Trained as a dynamic-batch twin (Keras fits batches of 32), its weights then copied into the batch-1 model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 2
SIZE = 16
CLASSES = 3
N_TRAIN, N_EVAL = 360, 60
EPOCHS = 8
NOISE = 0.6  # float accuracy about 80 %: some samples wrong, so per-sample results can differ


def images(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """(x (n, 16, 16, 1) float32, y (n,) int64): a bar of class y at a seeded place, plus Gaussian noise."""
    y = rng.integers(0, CLASSES, n)
    x = rng.normal(0.0, NOISE, size=(n, SIZE, SIZE)).astype(np.float32)
    for i, (c, p) in enumerate(zip(y, rng.integers(2, SIZE - 2, n))):
        if c == 0:
            x[i, p, :] += 1.0
        elif c == 1:
            x[i, :, p] += 1.0
        else:
            x[i, np.arange(SIZE), np.arange(SIZE)] += 1.0
    return x[..., None], y.astype(np.int64)


def build_model(batch_size):
    """The seeded model, its input's batch fixed to `batch_size` (None: dynamic)."""
    import keras

    inp = keras.Input((SIZE, SIZE, 1), batch_size=batch_size, name="x")
    h = keras.layers.Conv2D(4, 3, strides=2, padding="same", activation="relu", name="conv")(inp)
    h = keras.layers.Reshape((64, 4), name="tokens")(h)
    h = keras.layers.Dense(8, activation="relu", name="per_token")(h)  # rank 3: a Tensordot
    out = keras.layers.Dense(CLASSES, activation="softmax", name="classes")(keras.layers.Flatten()(h))
    return keras.Model(inp, out, name="batch1_tensordot")


def build_batch1(folder: Path):
    rng = np.random.default_rng(M.SEED)
    x, y = images(N_TRAIN + N_EVAL, rng)
    M.seed()
    twin = build_model(None)
    M.train(twin, x[N_EVAL:], y[N_EVAL:], "sparse_categorical_crossentropy", 1e-2, EPOCHS)
    model = build_model(1)
    model.set_weights(twin.get_weights())
    M.save(folder, model, x[:N_EVAL], y[:N_EVAL], x[N_EVAL:])


def ensure(cache_root) -> tuple[Path, Path]:
    """The cached model.keras and data.npz of the batch-1 fixture, built first if needed."""
    return M.ensure(cache_root, f"static-batch-v{VERSION}", "batch1_tensordot", build_batch1)
