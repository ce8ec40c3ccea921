"""A sigmoid-mask model for tests/test_mask_outputs.py (issue 46: float targets of an output's exact shape are
regression against the targets whatever the output's last op, and a sigmoid mask is also measured by mask IoU).

Seeded, trained in seconds, cached on disk like the other fixtures (`ensure`, model_fixtures.ensure, a VERSION
key) as model.keras + data.npz: x, y (evaluation) and x_calib (the training inputs; no overlap).

* sigmoid_mask: scikit-learn's digits (8x8 pixels / 16) upsampled to 16x16 (each pixel repeated 2x2), plus
  seeded Gaussian noise (NOISE): input `x` (16, 16, 1) float32 -> Conv2D(8, 3, same, relu) -> Conv2D(8, 3, same,
  relu) -> Conv2D(1, 1, sigmoid), output `mask` (16, 16, 1). Targets y: the clean upsampled pixels above
  THRESHOLD, float32 0/1 of the output's exact shape (n, 16, 16, 1). Beside data.npz: data_soft.npz, the same
  inputs with the clean pixels themselves as targets (float32 in [0, 1], the same shape), and data_wrong.npz,
  the inputs with masks of another shape (n, 8, 8, 1: the digits before upsampling), which fit no output.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
SIZE = 16
THRESHOLD = 0.5  # a pixel (in [0, 1]) is in the mask above this
NOISE = 0.15
N_EVAL = 300
EPOCHS = 12
INPUT, OUTPUT = "x", "mask"


def digits() -> tuple[np.ndarray, np.ndarray]:
    """(clean (n, 8, 8) in [0, 1], noisy inputs (n, 16, 16, 1) float32), seeded."""
    from sklearn.datasets import load_digits

    clean = (load_digits().images / 16.0).astype(np.float32)
    big = clean.repeat(2, axis=1).repeat(2, axis=2)[..., None]
    rng = np.random.default_rng(M.SEED)
    noisy = (big + rng.normal(0.0, NOISE, size=big.shape)).astype(np.float32)
    return clean, noisy


def build_sigmoid_mask(folder: Path):
    import keras

    clean, x = digits()
    big = clean.repeat(2, axis=1).repeat(2, axis=2)[..., None]
    y = (big > THRESHOLD).astype(np.float32)
    x_te, x_tr, y_te, y_tr = x[:N_EVAL], x[N_EVAL:], y[:N_EVAL], y[N_EVAL:]
    M.seed()
    inp = keras.Input((SIZE, SIZE, 1), name=INPUT)
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv_1")(inp)
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv_2")(h)
    out = keras.layers.Conv2D(1, 1, activation="sigmoid", name=OUTPUT)(h)
    model = keras.Model(inp, out, name="sigmoid_mask")
    M.train(model, x_tr, y_tr, "binary_crossentropy", 1e-2, EPOCHS)
    M.save(folder, model, x_te, y_te, x_tr)
    np.savez(folder / "data_soft.npz", x=x_te, y=big[:N_EVAL].astype(np.float32), x_calib=x_tr)
    np.savez(folder / "data_wrong.npz", x=x_te, y=(clean[:N_EVAL, ..., None] > THRESHOLD).astype(np.float32),
             x_calib=x_tr)


def ensure(cache_root) -> tuple[Path, Path]:
    """The cached model.keras and data.npz of the sigmoid-mask fixture, built first if needed."""
    return M.ensure(cache_root, f"mask-v{VERSION}", "sigmoid_mask", build_sigmoid_mask)


def data_file(cache_root, name: str) -> Path:
    """data_soft.npz or data_wrong.npz beside the fixture's model (built first if needed)."""
    model, _ = ensure(cache_root)
    return model.parent / name
