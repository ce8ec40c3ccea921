"""MoveNet-style keypoint models, and an independent PCK@0.1 / OKS, for tests/test_keypoints.py.

Seeded, trained in seconds, cached on disk like the other fixtures (`ensure`, model_fixtures.ensure, a VERSION key)
as model.keras + data.npz: x, y_keypoints (evaluation), x_calib (training inputs, none in x).

* images: synthetic (32, 32, 3) RGB images, seeded Gaussian noise plus K = 5 coloured Gaussian blobs (COLOURS),
  at least MIN_APART pixels apart; keypoint k is blob k's centre. About HIDDEN of the keypoints are not drawn and
  labelled not labelled (visibility 0). Labels `y_keypoints` (n, K, 3) float32: y, x normalized by the image's
  size, and the visibility (2: drawn, 0: not labelled).
* heatmaps: input `x` of a FIXED batch of 1 -> Conv2D(16, 3, stride 2) -> Conv2D(32, 3) -> Conv2D(32, 3) (relu)
  -> Conv2D(K, 1) logits -> sigmoid, output `heatmaps` [1, 16, 16, K]: one heatmap per keypoint on a 16x16 grid
  (stride 2). Trained (the same layers on a free batch) on Gaussian heatmaps around the drawn keypoints.
* coordinates: the heatmap model's trained layers up to the logits, then a soft-argmax: Reshape (256, K) ->
  Permute (K, 256) -> Softmax over the cells -> Dense(2) whose fixed weights are the cells' centres, output
  `keypoints` [1, K, 2] (y, x normalized); fine-tuned on the drawn keypoints' coordinates.

The reference below (`outputs`, `figures`) is written out without quant-report's code: each written .tflite run by
plain LiteRT one image per invoke, the keypoints decoded and PCK@0.1 / OKS computed with loops over images, as the
keypoint kind's docstring defines them.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
SIZE, GRID, K = 32, 16, 5
COLOURS = ((1.0, 0.15, 0.15), (0.15, 1.0, 0.15), (0.15, 0.15, 1.0), (1.0, 1.0, 0.15), (0.15, 1.0, 1.0))
WIDTH = 1.3  # a blob's Gaussian width, pixels
MIN_APART = 6.0  # pixels between two keypoints of an image
HIDDEN = 0.1  # share of keypoints not drawn (visibility 0)
NOISE = 0.08
N_EVAL, N_TRAIN, N_CALIB = 300, 3000, 400
EPOCHS, COORD_EPOCHS = 8, 3
INPUT = "x"
FIXTURES = ("heatmaps", "coordinates")


def images(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """(images (n, 32, 32, 3) float32, y_keypoints (n, K, 3) float32: y, x normalized, visibility 0 or 2)."""
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32) + 0.5
    x = rng.normal(0.0, NOISE, (n, SIZE, SIZE, 3)).astype(np.float32)
    keypoints = np.zeros((n, K, 3), np.float32)
    for i in range(n):
        points: list = []
        while len(points) < K:
            p = rng.uniform(2, SIZE - 2, 2)
            if all(np.hypot(*(p - q)) > MIN_APART for q in points):
                points.append(p)
        shown = rng.uniform(size=K) >= HIDDEN
        for k, ((py, px), colour) in enumerate(zip(points, COLOURS)):
            if shown[k]:
                blob = np.exp(-((yy - py) ** 2 + (xx - px) ** 2) / (2 * WIDTH ** 2))
                x[i] += blob[..., None] * np.asarray(colour, np.float32)
            keypoints[i, k] = (py / SIZE, px / SIZE, 2.0 if shown[k] else 0.0)
    return x, keypoints


def heatmaps(keypoints: np.ndarray) -> np.ndarray:
    """(n, GRID, GRID, K) Gaussian heatmaps around each drawn keypoint, 0 for the others (the training targets)."""
    centres = (np.arange(GRID) + 0.5) / GRID
    d = ((centres[None, :, None, None] - keypoints[:, None, None, :, 0]) ** 2
         + (centres[None, None, :, None] - keypoints[:, None, None, :, 1]) ** 2)
    return (np.exp(-d / (2 * (0.7 / GRID) ** 2)) * (keypoints[:, None, None, :, 2] > 0)).astype(np.float32)


def _data():
    x, keypoints = images(N_EVAL + N_TRAIN, np.random.default_rng(M.SEED))
    return x[:N_EVAL], x[N_EVAL:], keypoints[:N_EVAL], keypoints[N_EVAL:]


def _trunk():
    import keras

    return [keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu", name="conv_1"),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv_2"),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv_3"),
            keras.layers.Conv2D(K, 1, name="logits")]


def _apply(layers, h):
    for layer in layers:
        h = layer(h)
    return h


def build_heatmaps(folder: Path):
    import keras

    x_te, x_tr, k_te, k_tr = _data()
    M.seed()
    trunk, sigmoid = _trunk(), keras.layers.Activation("sigmoid", name="heatmaps")
    free = keras.Input((SIZE, SIZE, 3), name=INPUT)
    M.train(keras.Model(free, sigmoid(_apply(trunk, free))), x_tr, heatmaps(k_tr), "binary_crossentropy", 3e-3,
            EPOCHS)
    one = keras.Input((SIZE, SIZE, 3), batch_size=1, name=INPUT)  # the shipped model: a fixed batch of 1
    _save(folder, keras.Model(one, sigmoid(_apply(trunk, one)), name="heatmap_keypoints"), x_te, k_te, x_tr)


def build_coordinates(folder: Path, cache_root):
    import keras

    heat, _ = ensure("heatmaps", cache_root)
    trained = keras.models.load_model(heat)
    x_te, x_tr, k_te, k_tr = _data()
    M.seed()
    trunk = _trunk()
    centres = (np.arange(GRID) + 0.5) / GRID
    cells = np.stack(np.meshgrid(centres, centres, indexing="ij"), axis=-1).reshape(GRID * GRID, 2)
    head = [keras.layers.Reshape((GRID * GRID, K), name="cells"), keras.layers.Permute((2, 1), name="per_keypoint"),
            keras.layers.Softmax(axis=-1, name="soft_argmax"),
            keras.layers.Dense(2, use_bias=False, trainable=False, name="keypoints")]

    def model(inp, name):
        return keras.Model(inp, _apply(head, _apply(trunk, inp)), name=name)

    free = model(keras.Input((SIZE, SIZE, 3), name=INPUT), "coordinates_free")
    for layer in trunk:
        layer.set_weights(trained.get_layer(layer.name).get_weights())
    head[-1].set_weights([cells.astype(np.float32)])
    # the hidden keypoints' target: the image's centre, where a flat softmax puts them
    target = np.where(k_tr[..., 2:] > 0, k_tr[..., :2], 0.5).astype(np.float32)
    M.train(free, x_tr, target, "mse", 1e-3, COORD_EPOCHS)
    shipped = model(keras.Input((SIZE, SIZE, 3), batch_size=1, name=INPUT), "coordinate_keypoints")
    _save(folder, shipped, x_te, k_te, x_tr)


def _save(folder: Path, model, x_te, k_te, x_tr):
    model.save(folder / "model.keras")
    np.savez(folder / "data.npz", x=x_te, y_keypoints=k_te, x_calib=x_tr[:N_CALIB])


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model.keras and data.npz of fixture `name` (FIXTURES), built first if needed."""
    build = build_heatmaps if name == "heatmaps" else (lambda folder: build_coordinates(folder, cache_root))
    return M.ensure(cache_root, f"keypoints-v{VERSION}", name, build)


# --- the independent reference --------------------------------------------------------------------------------
COCO_SIGMAS = [0.026, 0.025, 0.025, 0.035, 0.035, 0.079, 0.079, 0.072, 0.072, 0.062, 0.062, 0.107, 0.107, 0.087,
               0.087, 0.089, 0.089]  # pycocotools' cocoeval.py, divided by 10 as there


def outputs(tflite: bytes, x: np.ndarray) -> np.ndarray:
    """The model's one output per image, as plain LiteRT gives it one image per invoke, dequantized with the output
    tensor's own scale and zero point: (n, *output shape without the batch)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=tflite)
    it.allocate_tensors()
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    rows = []
    for i in range(len(x)):
        sample = x[i:i + 1]
        if np.issubdtype(inp["dtype"], np.integer):
            scale, zero = inp["quantization"]
            info = np.iinfo(inp["dtype"])
            sample = np.clip(np.round(sample / scale + zero), info.min, info.max)
        it.set_tensor(inp["index"], sample.astype(inp["dtype"]))
        it.invoke()
        value = it.get_tensor(out["index"])[0]
        if np.issubdtype(value.dtype, np.integer):
            scale, zero = out["quantization"]
            value = (value.astype(np.float64) - zero) * scale
        rows.append(np.asarray(value, np.float64))
    return np.stack(rows)


def decoded(output: np.ndarray) -> np.ndarray:
    """(n, K, 2) keypoints from outputs (n, H, W, K) (each heatmap's argmax cell's centre) or (n, K, 2|3)."""
    if output.ndim == 3:
        return output[..., :2]
    n, h, w, k = output.shape
    found = np.zeros((n, k, 2))
    for i in range(n):
        for j in range(k):
            r, c = np.unravel_index(np.argmax(output[i, :, :, j]), (h, w))
            found[i, j] = ((r + 0.5) / h, (c + 0.5) / w)
    return found


def figures(found: np.ndarray, y_keypoints: np.ndarray) -> dict:
    """PCK@0.1 (over every labelled keypoint), mean OKS (over images with one) and PCK@0.1 per keypoint of the
    keypoints `found` (n, K, 2) against `y_keypoints` (n, K, 2 or 3), looping over images."""
    k = y_keypoints.shape[1]
    sigma = COCO_SIGMAS if k == 17 else [0.05] * k
    right, labelled, oks = np.zeros(k), np.zeros(k), []
    for pred, truth in zip(found, y_keypoints):
        seen = [j for j in range(k) if truth.shape[1] == 2 or truth[j, 2] > 0]
        if not seen:
            continue
        ys, xs = [truth[j, 0] for j in seen], [truth[j, 1] for j in seen]
        h, w = max(ys) - min(ys), max(xs) - min(xs)
        if h * w > 0:
            diagonal, area = math.sqrt(h * h + w * w), h * w
        else:
            diagonal, area = math.sqrt(2.0), 1.0
        total = 0.0
        for j in seen:
            d2 = (pred[j, 0] - truth[j, 0]) ** 2 + (pred[j, 1] - truth[j, 1]) ** 2
            labelled[j] += 1
            right[j] += math.sqrt(d2) <= 0.1 * diagonal
            total += math.exp(-d2 / (2 * area * (2 * sigma[j]) ** 2))
        oks.append(total / len(seen))
    return {"pck": right.sum() / labelled.sum(), "oks": float(np.mean(oks)),
            "pck_per_keypoint": [r / c if c else None for r, c in zip(right, labelled)]}


def conformance(rng, n: int) -> tuple:
    """tests/test_task_kinds.py's row for the keypoint kind: (output shape, op, labels, outputs (n, values), K,
    PCK@0.1 computed here). Heatmaps (8, 8, 4) with a peak near each labelled keypoint (some far), labels (n, 4, 3)
    with some keypoints not labelled."""
    k, grid = 4, 8
    y = np.concatenate([rng.uniform(0, 1, (n, k, 2)), np.where(rng.uniform(size=(n, k, 1)) < 0.2, 0.0, 2.0)],
                       axis=-1).astype(np.float32)
    near = np.clip(y[..., :2] + rng.normal(scale=0.08, size=(n, k, 2)), 0, 0.999)
    cells = np.floor(near * grid).astype(int)
    out = rng.uniform(0, 0.5, (n, grid, grid, k))
    for i in range(n):
        for j in range(k):
            out[i, cells[i, j, 0], cells[i, j, 1], j] = 1.0
    return (grid, grid, k), "LOGISTIC", y, out.reshape(n, -1), k, figures(decoded(out), y)["pck"]
