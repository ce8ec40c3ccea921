"""Models for dense (per-pixel) outputs and a user's own metric, for tests/test_dense_and_metric.py.

Each is seeded, trained in seconds, and cached on disk like the other fixtures (`ensure`,
model_fixtures.ensure) as model.keras + data.npz: x, y (evaluation) and x_calib (the training inputs; no
overlap with the evaluation data).

* segmentation: a fully-convolutional Keras model, input (16, 16, 1) float32 -> Conv2D(8, 3, same, relu)
  -> Conv2D(8, 3, same, relu) -> Conv2D(3, 1) -> Softmax over the last axis: per-pixel scores (16, 16, 3)
  of CLASSES = background 0, a bright square 1, a dim disc 2. Synthetic, seeded images (N_TRAIN for
  x_calib, N_EVAL for evaluation): Gaussian noise (NOISE) on a dark background, a square at BRIGHT and a
  disc at DIM, each present in most images (the disc drawn last where they overlap). Labels y (n, 16, 16)
  int64 class ids. Float pixel accuracy is above 90 %.
* segmentation_onehot: the segmentation fixture's model file and inputs (copied, so the very same model),
  labels saved as one-hot rows (n, 16, 16, 3) int64.
* segmentation_collapse: the segmentation fixture's images and labels with a second input channel, a
  nuisance of huge magnitude (NUISANCE: a level per image plus per-pixel noise, independent of the labels):
  input (16, 16, 2) float32 -> Normalization (per channel, the training inputs' mean and variance) ->
  Conv2D(8, 3, same, relu) -> Conv2D(8, 3, same, relu) -> Conv2D(3, 1) -> Softmax: per-pixel scores
  (16, 16, 3), labels y (n, 16, 16) int64. Float's mean IoU is high; full-integer quantization collapses
  (the int8 input, spanning 0 to ~4,000, cannot resolve the shapes' 0-1 values next to the nuisance; the
  failure mode of collapse_fixtures' wine_offset), and keeping the normalization in float fixes it.
* top2: digits (8x8 pixels / 16, flattened to 64 floats) -> Dense 32-16 -> 10-way softmax named
  "scores", class ids (n,) int64; beside model.keras and data.npz, user_metrics.py (USER_METRICS): `top2`
  (share of samples whose label is among the two highest scores, ties broken as
  sklearn.metrics.top_k_accuracy_score breaks them), `boom` (raises RuntimeError("metric exploded")) and
  `loss` (mean cross-entropy of the scores, lower is better). `metric_module` gives its path.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
FIXTURES = ("segmentation", "segmentation_onehot", "segmentation_collapse", "top2")
CLASSES = ("background", "square", "disc")
SIZE = 16
N_TRAIN, N_EVAL = 600, 200
BRIGHT, DIM, NOISE = 1.0, 0.5, 0.12
SEG_EPOCHS = 15
NUISANCE = (1000.0, 4000.0, 50.0)  # segmentation_collapse's channel 1: level per image in [low, high), pixel noise
TOP2_OUTPUT = "scores"  # the top2 model's output layer

USER_METRICS = '''"""A user's metrics for quant-report's --metric PATH:NAME (tests/seg_fixtures.py writes this file)."""

import numpy as np


def top2(y_true, y_pred) -> float:
    """Share of samples whose label id is among the two highest scores. y_true: class ids (n,), y_pred: raw
    scores (n, k). Ties are broken as sklearn.metrics.top_k_accuracy_score breaks them (a stable sort,
    reversed: of equal scores, the higher class id ranks first)."""
    y_true = np.asarray(y_true).astype(np.int64).reshape(-1)
    y_pred = np.asarray(y_pred, np.float64).reshape(len(y_true), -1)
    best = np.argsort(y_pred, axis=1, kind="mergesort")[:, ::-1][:, :2]
    return float(np.mean(np.any(best == y_true[:, None], axis=1)))


def boom(y_true, y_pred):
    raise RuntimeError("metric exploded")


def loss(y_true, y_pred) -> float:
    """Mean cross-entropy of the scores (probabilities) at the true class, clipped at 1e-7: lower is better."""
    y_true = np.asarray(y_true).astype(np.int64).reshape(-1)
    y_pred = np.asarray(y_pred, np.float64).reshape(len(y_true), -1)
    p = np.clip(y_pred[np.arange(len(y_true)), y_true], 1e-7, 1.0)
    return float(-np.mean(np.log(p)))
'''


def shapes(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(x (n, 16, 16, 1) float32, y (n, 16, 16) int64): noisy images with a bright square (class 1) and a
    dim disc (class 2) on a dark background (class 0)."""
    rows, cols = np.mgrid[0:SIZE, 0:SIZE]
    x = np.zeros((n, SIZE, SIZE), np.float32)
    y = np.zeros((n, SIZE, SIZE), np.int64)
    for i in range(n):
        if rng.random() < 0.85:
            side = int(rng.integers(3, 8))
            r0, c0 = rng.integers(0, SIZE - side + 1, size=2)
            square = (rows >= r0) & (rows < r0 + side) & (cols >= c0) & (cols < c0 + side)
            x[i][square], y[i][square] = BRIGHT, 1
        if rng.random() < 0.85:
            radius = float(rng.uniform(2.0, 4.0))
            cr, cc = rng.uniform(radius, SIZE - 1 - radius, size=2)
            disc = (rows - cr) ** 2 + (cols - cc) ** 2 <= radius ** 2
            x[i][disc], y[i][disc] = DIM, 2
    x += rng.normal(0.0, NOISE, size=x.shape).astype(np.float32)
    return x[..., None], y


def segmentation_data():
    """(x_train, y_train, x_eval, y_eval), seeded."""
    rng = np.random.default_rng(M.SEED)
    x_tr, y_tr = shapes(N_TRAIN, rng)
    x_te, y_te = shapes(N_EVAL, rng)
    return x_tr, y_tr, x_te, y_te


def segmentation_model():
    """The seeded, untrained fully-convolutional model."""
    import keras

    M.seed()
    return keras.Sequential([keras.Input((SIZE, SIZE, 1)), *_segmentation_layers()], name="segmentation")


def _segmentation_layers() -> list:
    """Two 3x3 convolutions, 1x1 logits and a per-pixel softmax: the layers every segmentation fixture shares."""
    import keras

    return [
        keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv_1"),
        keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv_2"),
        keras.layers.Conv2D(len(CLASSES), 1, name="logits"),
        keras.layers.Softmax(axis=-1, name="pixel_scores"),
    ]


def build_segmentation(folder: Path, cache_root):
    x_tr, y_tr, x_te, y_te = segmentation_data()
    model = segmentation_model()
    M.train(model, x_tr, y_tr, "sparse_categorical_crossentropy", 1e-2, epochs=SEG_EPOCHS)
    return M.save(folder, model, x_te, y_te, x_tr)


def build_segmentation_onehot(folder: Path, cache_root):
    model, data = ensure("segmentation", cache_root)
    shutil.copyfile(model, folder / "model.keras")
    d = np.load(data)
    onehot = np.eye(len(CLASSES), dtype=np.int64)[d["y"]]
    np.savez(folder / "data.npz", x=d["x"], y=onehot, x_calib=d["x_calib"])
    return folder / "model.keras", folder / "data.npz"


def with_nuisance(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """`x` (n, 16, 16, 1) with a second channel: a level per image drawn uniformly in NUISANCE[:2] plus
    Gaussian per-pixel noise (NUISANCE[2]), independent of the labels. (n, 16, 16, 2) float32."""
    low, high, noise = NUISANCE
    level = rng.uniform(low, high, size=(len(x), 1, 1, 1))
    nuisance = level + rng.normal(0.0, noise, size=x.shape)
    return np.concatenate([x, nuisance], axis=-1).astype(np.float32)


def segmentation_collapse_model(x_train):
    """The seeded, untrained model: a per-channel Normalization of `x_train` (float64 statistics: float32
    sums over values in the thousands drift), then the segmentation model's layers."""
    import keras

    M.seed()
    x64 = np.asarray(x_train, np.float64)
    return keras.Sequential([
        keras.Input((SIZE, SIZE, 2)),
        keras.layers.Normalization(axis=-1, mean=x64.mean(axis=(0, 1, 2)), variance=x64.var(axis=(0, 1, 2)),
                                   name="normalize"),
        *_segmentation_layers(),
    ], name="segmentation_collapse")


def build_segmentation_collapse(folder: Path, cache_root):
    x_tr, y_tr, x_te, y_te = segmentation_data()
    rng = np.random.default_rng(M.SEED + 1)  # the shapes are the segmentation fixture's own
    x_tr, x_te = with_nuisance(x_tr, rng), with_nuisance(x_te, rng)
    model = segmentation_collapse_model(x_tr)
    M.train(model, x_tr, y_tr, "sparse_categorical_crossentropy", 1e-2, epochs=SEG_EPOCHS)
    return M.save(folder, model, x_te, y_te, x_tr)


def build_top2(folder: Path, cache_root):
    from sklearn.datasets import load_digits

    x, digits = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    x_tr, x_te, y_tr, y_te = M.split(x, digits.astype(np.int64))
    model = M.mlp(64, (32, 16), 10, "softmax", names=("hidden_1", "hidden_2", TOP2_OUTPUT), name="top2")
    M.train(model, x_tr, y_tr, "sparse_categorical_crossentropy", 1e-2, epochs=30)
    (folder / "user_metrics.py").write_text(USER_METRICS)
    return M.save(folder, model, x_te, y_te, x_tr)


BUILDERS = {
    "segmentation": build_segmentation,
    "segmentation_onehot": build_segmentation_onehot,
    "segmentation_collapse": build_segmentation_collapse,
    "top2": build_top2,
}


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model.keras and data.npz of fixture `name`, built first if needed (once across processes)."""
    return M.ensure(cache_root, f"dense-v{VERSION}", name, lambda folder: BUILDERS[name](folder, cache_root))


def metric_module(cache_root) -> Path:
    """user_metrics.py beside the top2 fixture's model (built first if needed)."""
    model, _ = ensure("top2", cache_root)
    return model.parent / "user_metrics.py"
