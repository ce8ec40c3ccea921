"""A float .tflite whose int8 models LiteRT Quantizer writes with offset buffers, for tests/test_micro_files.py.

LiteRT Quantizer 0.11 (`litert_quantizer/model_modifier.py`, `ModelModifier.modify_model`) writes a model's buffers
inline while the buffers of at least 1 KiB add up to less than 256 KiB (`packed_buffer_data.packed_size < 256 *
1024`); from there on it stores each such buffer after the flatbuffer (`Buffer.offset`/`size`), which TFLite Micro
does not read. This is the smallest convolution net on scikit-learn's digits (8x8 pixels / 16) past that line: its
int8 weights are ~267 KiB, 252 KiB of them one 3x3 convolution's 64 -> 448 channels:

    x [1, 8, 8, 1] -> Conv 16 relu -> Conv 64 relu -> max pool -> Conv 448 relu -> global average -> Dense 10 softmax

Seeded, trained two epochs (seconds), exported with a static batch of 1 (LiteRT Quantizer then leaves no float op)
and cached on disk like the other fixtures (`ensure`, a VERSION key): model.tflite and data.npz (x, y: the first 400
digits; x_calib: the rest).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
N_EVAL = 400
WIDE = 448  # the last convolution's channels: its 64 * 9 * 448 int8 weights take the model past 256 KiB


def build(folder: Path):
    import keras
    import tensorflow as tf
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 8, 8, 1)
    M.seed()
    inp = keras.Input((8, 8, 1), batch_size=1, name="x")
    h = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inp)
    h = keras.layers.Conv2D(64, 3, padding="same", activation="relu")(h)
    h = keras.layers.MaxPooling2D()(h)
    h = keras.layers.Conv2D(WIDE, 3, padding="same", activation="relu")(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    out = keras.layers.Dense(10, activation="softmax", name="digit")(h)
    model = M.train(keras.Model(inp, out, name="wide_digits"), x[N_EVAL:], y[N_EVAL:],
                    "sparse_categorical_crossentropy", 1e-3, 2)
    (folder / "model.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    np.savez(folder / "data.npz", x=x[:N_EVAL], y=y[:N_EVAL].astype(np.int64), x_calib=x[N_EVAL:])


def ensure(cache_root) -> tuple[Path, Path]:
    """The cached model.tflite and data.npz, built first if needed (once across processes)."""
    from reporter.pipeline.demo import cached

    final = Path(cache_root) / f"offset-buffers-v{VERSION}" / "wide_digits"
    cached(final, lambda tmp: (build(tmp), "ok\n")[1])
    return final / "model.tflite", final / "data.npz"
