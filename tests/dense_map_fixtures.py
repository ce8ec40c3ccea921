"""A dense two-class map with 1 % positives and an unlabelled linear head, for tests/test_dense_imbalanced.py: a
small face-detector-like model (a class map over a grid of cells, and a box head beside it).

Seeded, trained in seconds, cached on disk like the other fixtures (`ensure`, model_fixtures.ensure, a VERSION key)
as model.keras + data.npz: x (evaluation), x_calib (the training inputs; no overlap) and y_facemap only.

* face_map: input `x` (24, 24, 1) float32, seeded Gaussian noise (NOISE) with, in about a third of the images, one
  FACE x FACE square (the "face") and in every image a few 2x2 squares as light (distractors: a face is told by its
  size). The image is a grid of 6 x 6 cells of 4 x 4 pixels: a cell is positive (class 1) where a face's centre
  falls, so about 1 % of the cells are positive. Conv2D 8 -> max pool -> Conv2D 16 -> max pool -> Conv2D 16, then
  two outputs: `facemap` (6, 6, 2), a 1x1 Conv2D with softmax over the last axis, labelled `y_facemap` (n, 6, 6)
  class ids, its faces weighted POSITIVE_WEIGHT times in training (float finds faces somewhat more often than they
  occur: it predicts background for about 97.8 % of the cells, the labels hold it for 99.0 %); and `boxes`
  (6, 6, 4), a linear 1x1 Conv2D trained on each cell's pixel mean, max, standard deviation and the mean of its 3x3
  cells around (a varying regression output), with NO labels in data.npz. Beside it, data_boxes.npz: the same data
  with those targets as `y_boxes`, both outputs labelled.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
SIZE, CELL, GRID = 24, 4, 6
FACE = 3  # a face's side in pixels
FACE_CHANCE = 0.36  # images with one face: 0.36 of 36 cells' share, about 1 % of cells positive
DISTRACTORS = 3  # at most this many dim 2x2 squares per image
NOISE = 0.35
FACE_LIGHT, DISTRACTOR_LIGHT = 0.5, 0.5  # a face is told from a distractor by its size only
N_TOTAL, N_EVAL = 2400, 600
EPOCHS = 12
POSITIVE_WEIGHT = 10.0
INPUT, FACEMAP, BOXES = "x", "facemap", "boxes"


def images(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """(x (n, 24, 24, 1) float32, y (n, 6, 6) int64 class ids: 1 where a face's centre falls in the cell)."""
    x = rng.normal(0.0, NOISE, size=(n, SIZE, SIZE)).astype(np.float32)
    y = np.zeros((n, GRID, GRID), np.int64)
    for i in range(n):
        for _ in range(rng.integers(0, DISTRACTORS + 1)):
            r, c = rng.integers(0, SIZE - 1, size=2)
            x[i, r:r + 2, c:c + 2] += DISTRACTOR_LIGHT
        if rng.random() < FACE_CHANCE:
            r, c = rng.integers(0, SIZE - FACE + 1, size=2)
            x[i, r:r + FACE, c:c + FACE] += FACE_LIGHT
            y[i, (r + FACE // 2) // CELL, (c + FACE // 2) // CELL] = 1
    return x[..., None], y


def box_targets(x: np.ndarray) -> np.ndarray:
    """(n, 6, 6, 4) float32: each cell's pixel mean, max and standard deviation, and the mean of the 3x3 cells
    around it (edges padded): what the linear head is trained on."""
    cells = x[..., 0].reshape(len(x), GRID, CELL, GRID, CELL).transpose(0, 1, 3, 2, 4).reshape(len(x), GRID, GRID, -1)
    mean, top, std = cells.mean(-1), cells.max(-1), cells.std(-1)
    padded = np.pad(mean, ((0, 0), (1, 1), (1, 1)), mode="edge")
    around = sum(padded[:, i:i + GRID, j:j + GRID] for i in range(3) for j in range(3)) / 9.0
    return np.stack([mean, top, std, around], axis=-1).astype(np.float32)


def build_face_map(folder: Path):
    import keras

    rng = np.random.default_rng(M.SEED)
    x, y = images(N_TOTAL, rng)
    boxes = box_targets(x)
    x_te, x_tr, y_te, y_tr, b_tr = x[:N_EVAL], x[N_EVAL:], y[:N_EVAL], y[N_EVAL:], boxes[N_EVAL:]
    M.seed()
    inp = keras.Input((SIZE, SIZE, 1), name=INPUT)
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv_1")(inp)
    h = keras.layers.MaxPooling2D(2, name="pool_1")(h)
    h = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv_2")(h)
    h = keras.layers.MaxPooling2D(2, name="pool_2")(h)
    h = keras.layers.Conv2D(16, 3, padding="same", activation="relu", name="conv_3")(h)
    facemap = keras.layers.Conv2D(2, 1, activation="softmax", name=FACEMAP)(h)
    box = keras.layers.Conv2D(4, 1, name=BOXES)(h)
    model = keras.Model(inp, [facemap, box], name="face_map")
    model.compile(keras.optimizers.Adam(1e-2), loss=["sparse_categorical_crossentropy", "mse"])
    # faces weigh POSITIVE_WEIGHT times a background cell: float finds faces a little more often than they occur
    weights = [np.where(y_tr == 1, POSITIVE_WEIGHT, 1.0).astype(np.float32), np.ones(y_tr.shape, np.float32)]
    model.fit(x_tr, [y_tr, b_tr], sample_weight=weights, epochs=EPOCHS, batch_size=M.BATCH_SIZE, verbose=0)
    path = folder / "model.keras"
    model.save(path)
    np.savez(folder / "data.npz", x=x_te, x_calib=x_tr, y_facemap=y_te)
    np.savez(folder / "data_boxes.npz", x=x_te, x_calib=x_tr, y_facemap=y_te, y_boxes=boxes[:N_EVAL])


def ensure(cache_root) -> tuple[Path, Path]:
    """The cached model.keras and data.npz of the face-map fixture, built first if needed."""
    return M.ensure(cache_root, f"dense-map-v{VERSION}", "face_map", build_face_map)


def data_file(cache_root, name: str) -> Path:
    """data_boxes.npz beside the fixture's model (built first if needed): data.npz with the box head's targets
    `y_boxes` too, so that both outputs are labelled."""
    model, _ = ensure(cache_root)
    return model.parent / name
