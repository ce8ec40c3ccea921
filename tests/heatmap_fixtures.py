"""A MoveNet-style keypoint model for tests/test_metric_on_target.py: a heatmap output read by the user's metric
(`--metric pck.py:pck`), measured on every target's kernels.

Seeded, trained in seconds, cached on disk like the other fixtures (`ensure`, model_fixtures.ensure, a VERSION key)
as model.keras + data.npz (x, y for evaluation; x_calib, training inputs, no overlap) + pck.py, the metric.

* keypoints: synthetic (32, 32, 1) images, seeded Gaussian noise plus K = 3 Gaussian blobs at random positions
  (at least MIN_APART pixels apart), told apart by their width and brightness (BLOBS). Input `x` of a FIXED
  batch of 1 (`keras.Input((32, 32, 1), batch_size=1)`) -> Conv2D(16, 3, stride 2) -> Conv2D(24, 3, stride 2)
  -> Conv2D(24, 3) (relu) -> Reshape (64, 24) -> Dense(K, sigmoid) on that rank-3 tensor -> Reshape, output
  `heatmaps` (8, 8, K): one heatmap per keypoint on an 8x8 grid (stride 4). Trained (with the same layers on a
  free batch) on Gaussian heatmaps around each keypoint. Labels `y`: the keypoints, (n, K, 2) float32, (row,
  column) normalized to [0, 1) by the image's size. data_meta.npz: the same inputs with `y` the heatmaps
  themselves (n, 8, 8, K, the output's exact shape) and the keypoints as `meta_keypoints`, for pck_meta.py.
* pck.py: `pck(y_true, y_pred)` decodes each heatmap channel by its argmax cell (the cell's centre) and returns
  per-sample PCK@0.1: the share of the sample's K keypoints within PCK_RADIUS (0.1 of the image's size) of the
  truth, an array of n values. pck_meta.py: `pck(y_true, y_pred, keypoints)`, the same reading `meta_keypoints`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
SIZE, GRID, K = 32, 8, 3
BLOBS = ((1.0, 1.0), (1.6, 0.8), (2.2, 1.0))  # (width in pixels, brightness) of each keypoint's blob
MIN_APART = 8.0  # pixels between two keypoints of a sample
NOISE = 0.05
N_EVAL, N_TRAIN, N_CALIB = 300, 3000, 400
EPOCHS = 8
PCK_RADIUS = 0.1
INPUT, OUTPUT = "x", "heatmaps"

# The metric files written beside the data: the fixture's user metric, as a user would write it.
DECODE = f'''import numpy as np

GRID, K, RADIUS = {GRID}, {K}, {PCK_RADIUS}


def decode(y_pred):
    """(n, K, 2) keypoints (row, column in [0, 1)) at the centre of each heatmap channel's argmax cell."""
    cells = np.asarray(y_pred).reshape(len(y_pred), GRID * GRID, K).argmax(axis=1)
    return np.stack([(cells // GRID + 0.5) / GRID, (cells % GRID + 0.5) / GRID], axis=-1)


def per_sample(keypoints, y_pred):
    distance = np.linalg.norm(decode(y_pred) - np.asarray(keypoints).reshape(-1, K, 2), axis=-1)
    return (distance <= RADIUS).mean(axis=1)
'''
PCK = DECODE + '''

def pck(y_true, y_pred):
    """Per-sample PCK@0.1: the share of each sample's keypoints found within 0.1 of the image's size."""
    return per_sample(y_true, y_pred)
'''
PCK_META = DECODE + '''

def pck(y_true, y_pred, keypoints):
    """Per-sample PCK@0.1 against the keypoints passed as meta_keypoints (y_true: the target heatmaps)."""
    return per_sample(keypoints, y_pred)
'''


def images(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """(images (n, 32, 32, 1) float32, keypoints (n, K, 2) float32 normalized (row, column))."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32) + 0.5
    x = rng.normal(0.0, NOISE, (n, SIZE, SIZE)).astype(np.float32)
    keypoints = np.zeros((n, K, 2), np.float32)
    for i in range(n):
        points: list = []
        while len(points) < K:
            p = rng.uniform(3, SIZE - 3, 2)
            if all(np.hypot(*(p - q)) > MIN_APART for q in points):
                points.append(p)
        for k, ((py, px), (width, bright)) in enumerate(zip(points, BLOBS)):
            x[i] += bright * np.exp(-((yy - py) ** 2 + (xx - px) ** 2) / (2 * width ** 2))
            keypoints[i, k] = (py / SIZE, px / SIZE)
    return x[..., None], keypoints


def heatmaps(keypoints: np.ndarray) -> np.ndarray:
    """(n, GRID, GRID, K) Gaussian heatmaps around each keypoint (the training targets)."""
    centres = (np.arange(GRID) + 0.5) / GRID
    d = ((centres[None, :, None, None] - keypoints[:, None, None, :, 0]) ** 2
         + (centres[None, None, :, None] - keypoints[:, None, None, :, 1]) ** 2)
    return np.exp(-d / (2 * (0.6 / GRID) ** 2)).astype(np.float32)


def build_keypoints(folder: Path):
    import keras

    x, keypoints = images(N_EVAL + N_TRAIN, np.random.default_rng(M.SEED))
    x_te, x_tr, k_te, k_tr = x[:N_EVAL], x[N_EVAL:], keypoints[:N_EVAL], keypoints[N_EVAL:]
    M.seed()
    layers = [keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu", name="conv_1"),
              keras.layers.Conv2D(24, 3, strides=2, padding="same", activation="relu", name="conv_2"),
              keras.layers.Conv2D(24, 3, padding="same", activation="relu", name="conv_3"),
              keras.layers.Reshape((GRID * GRID, 24), name="cells"),
              keras.layers.Dense(K, activation="sigmoid", name="keypoint_scores"),  # Dense on a rank-3 tensor
              keras.layers.Reshape((GRID, GRID, K), name=OUTPUT)]

    def apply(h):
        for layer in layers:
            h = layer(h)
        return h

    free = keras.Input((SIZE, SIZE, 1), name=INPUT)
    M.train(keras.Model(free, apply(free)), x_tr, heatmaps(k_tr), "binary_crossentropy", 3e-3, EPOCHS)
    one = keras.Input((SIZE, SIZE, 1), batch_size=1, name=INPUT)  # the shipped model: a fixed batch of 1
    model = keras.Model(one, apply(one), name="keypoints")
    M.save(folder, model, x_te, k_te, x_tr[:N_CALIB])
    np.savez(folder / "data_meta.npz", x=x_te, y=heatmaps(k_te), meta_keypoints=k_te, x_calib=x_tr[:N_CALIB])
    (folder / "pck.py").write_text(PCK, encoding="utf-8")
    (folder / "pck_meta.py").write_text(PCK_META, encoding="utf-8")


def ensure(cache_root) -> tuple[Path, Path]:
    """The cached model.keras and data.npz of the keypoint fixture (pck.py beside them), built first if needed."""
    return M.ensure(cache_root, f"heatmap-v{VERSION}", "keypoints", build_keypoints)


def pck(keypoints: np.ndarray, heatmap_rows: np.ndarray) -> np.ndarray:
    """The fixture's PCK@0.1 per sample, computed here (independently of the metric file run by quant-report):
    each channel's argmax cell centre against the keypoints."""
    rows = np.asarray(heatmap_rows, np.float64).reshape(len(heatmap_rows), GRID, GRID, K)
    found = np.zeros((len(rows), K, 2))
    for i in range(len(rows)):
        for k in range(K):
            r, c = np.unravel_index(np.argmax(rows[i, :, :, k]), (GRID, GRID))
            found[i, k] = ((r + 0.5) / GRID, (c + 0.5) / GRID)
    return (np.sqrt(((found - keypoints) ** 2).sum(-1)) <= PCK_RADIUS).mean(axis=1)
