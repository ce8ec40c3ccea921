"""Models whose outputs are vectors of float targets, for tests/test_vector_regression.py: none needs a
--task flag, since the output's op (linear, no softmax or sigmoid) and targets of its shape say regression.

Each is seeded, trained in seconds, and cached on disk like the other fixtures (`ensure`, a VERSION key).

* autoencoder: digits (8x8 pixels / 16, the first 32 pixels) -> Dense 12 relu -> Dense 32 linear, output
  `reconstruction`; `y` = `x` (400 evaluation samples). Beside data.npz: data_flags.npz, the same inputs with
  one 0/1 label per sample (the digit is 0: an "anomaly" flag), which cannot be a 32-value output's task;
  data_binary.npz, the inputs with `y` the pixels thresholded to 0/1 (multi-hot rows for a linear output: read
  as reconstruction targets).
* forecaster: a seeded noisy sum of two sines; x = 24 past values, y = the next 6 (Dense 32 relu -> Dense 6).
* detector: digits (64 floats) -> shared Dense 32 relu -> outputs `digit` (10-way softmax, `y_digit`) and
  `box` (4 linear units, `y_box`: the ink's top, left, bottom, right rows/columns / 8).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
FIXTURES = ("autoencoder", "forecaster", "detector")
N_EVAL = 400
PIXELS = 32
HISTORY, HORIZON = 24, 6


def _digits():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype(np.float32), y.astype(np.int64)


def build_autoencoder(folder: Path):
    import keras

    x, digit = _digits()
    x = x[:, :PIXELS]
    x_tr, x_te, d_te = x[N_EVAL:], x[:N_EVAL], digit[:N_EVAL]
    M.seed()
    inp = keras.Input((PIXELS,), name="x")
    h = keras.layers.Dense(12, activation="relu")(inp)
    out = keras.layers.Dense(PIXELS, name="reconstruction")(h)
    model = M.train(keras.Model(inp, out, name="autoencoder"), x_tr, x_tr, "mse", 1e-2, 40)
    M.save(folder, model, x_te, x_te, x_tr)
    np.savez(folder / "data_flags.npz", x=x_te, y=(d_te == 0).astype(np.int64), x_calib=x_tr)
    np.savez(folder / "data_binary.npz", x=x_te, y=(x_te >= 0.5).astype(np.int64), x_calib=x_tr)


def build_forecaster(folder: Path):
    import keras

    rng = np.random.default_rng(7)
    t = np.arange(3000, dtype=np.float64)
    series = np.sin(t / 9.0) + 0.5 * np.sin(t / 23.0) + 0.1 * rng.standard_normal(len(t))
    starts = np.arange(0, len(t) - HISTORY - HORIZON, 3)
    x = np.stack([series[s:s + HISTORY] for s in starts]).astype(np.float32)
    y = np.stack([series[s + HISTORY:s + HISTORY + HORIZON] for s in starts]).astype(np.float32)
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    M.seed()
    inp = keras.Input((HISTORY,), name="x")
    h = keras.layers.Dense(32, activation="relu")(inp)
    out = keras.layers.Dense(HORIZON, name="forecast")(h)
    model = M.train(keras.Model(inp, out, name="forecaster"), x[N_EVAL:], y[N_EVAL:], "mse", 1e-2, 30)
    M.save(folder, model, x[:N_EVAL], y[:N_EVAL], x[N_EVAL:])


def _boxes(x: np.ndarray) -> np.ndarray:
    """The ink's bounding box of each 8x8 digit (pixels above 0.25): top, left, bottom, right, / 8."""
    ink = x.reshape(-1, 8, 8) > 0.25
    rows, cols = ink.any(axis=2), ink.any(axis=1)
    first = lambda a: a.argmax(axis=1)  # noqa: E731
    last = lambda a: 7 - a[:, ::-1].argmax(axis=1)  # noqa: E731
    return (np.stack([first(rows), first(cols), last(rows), last(cols)], axis=1) / 8.0).astype(np.float32)


def build_detector(folder: Path):
    import keras

    x, digit = _digits()
    box = _boxes(x)
    M.seed()
    inp = keras.Input((64,), name="x")
    h = keras.layers.Dense(32, activation="relu")(inp)
    out_digit = keras.layers.Dense(10, activation="softmax", name="digit")(h)
    out_box = keras.layers.Dense(4, name="box")(h)
    model = keras.Model(inp, [out_digit, out_box], name="detector")
    model.compile(keras.optimizers.Adam(5e-3), ["sparse_categorical_crossentropy", "mse"], loss_weights=[1.0, 20.0])
    model.fit(x[N_EVAL:], [digit[N_EVAL:], box[N_EVAL:]], epochs=40, batch_size=M.BATCH_SIZE, verbose=0)
    model.save(folder / "model.keras")
    np.savez(folder / "data.npz", x=x[:N_EVAL], x_calib=x[N_EVAL:], y_digit=digit[:N_EVAL], y_box=box[:N_EVAL])


BUILDERS = {"autoencoder": build_autoencoder, "forecaster": build_forecaster, "detector": build_detector}


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model.keras and data.npz of fixture `name`, built first if needed (once across processes)."""
    return M.ensure(cache_root, f"regression-v{VERSION}", name, BUILDERS[name])


def copy_of(name: str, cache_root, data_file: str, folder: Path) -> tuple[Path, Path]:
    """Fixture `name`'s model and one of its other data files, copied into `folder`."""
    model, data = ensure(name, cache_root)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(model, folder / "model.keras")
    shutil.copy(data.with_name(data_file), folder / "data.npz")
    return folder / "model.keras", folder / "data.npz"
