"""Two models shaped like the real ones issue 67 measured, as fixtures for the stage profile
(benchmarks/profile_stages.py): what a run costs when the input is long or the output has thousands of anchors.

* `audio`: a 1-D audio classifier with a long input, [1, 44000, 1] (a second of 44 kHz sound), through strided
  Conv1D layers, global average pooling and a softmax over 4 classes: synthetic tones (one base frequency per
  class, random phase and harmonics, noise), labels `y` are the class ids.
* `anchors`: a detector-like network (BlazeFace-like blocks) on 128x128 RGB images whose one output is [1, 2304, 6]
  (2048 anchors on a 32x32 grid, 2 per cell, and 256 on a 16x16 grid): 4 box values and 2 sigmoid scores per
  anchor, read as a plain regression (`y`: the anchor-relative box of the one bright square in the image, whether
  the anchor's centre lies inside it, and how near), so that `quant-report run` measures it with no special task.

Both train for a few seconds (seeded). `ensure(name, cache_root)` caches model.keras, model.tflite (the same, float)
and data.npz (x, y, x_calib) under `cache_root/speed-v{VERSION}/{name}/`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 3
NAMES = ("audio", "anchors")

# audio
SAMPLES_PER_CLIP, RATE, CLASSES = 44_000, 44_000, 4
BASE_HZ = (220.0, 440.0, 880.0, 1760.0)
N_TRAIN, N_EVAL, N_CALIB = 160, 80, 64

# anchors
SIZE, GRID_A, GRID_B, PER_CELL = 128, 32, 16, 2
ANCHORS = GRID_A * GRID_A * PER_CELL + GRID_B * GRID_B  # 2304
FIELDS = 6  # dy, dx, h, w, objectness, centre-inside


def tones(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """[n, SAMPLES_PER_CLIP, 1] clips and their class ids: the class's base tone with random phase, a random second
    harmonic and white noise."""
    y = rng.integers(0, CLASSES, n)
    t = np.arange(SAMPLES_PER_CLIP, dtype=np.float64) / RATE
    x = np.empty((n, SAMPLES_PER_CLIP, 1), np.float32)
    for k in range(n):
        f = BASE_HZ[y[k]] * rng.uniform(0.97, 1.03)
        wave = np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
        wave += rng.uniform(0, 0.5) * np.sin(4 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
        x[k, :, 0] = 0.5 * wave + rng.normal(0, 0.2, SAMPLES_PER_CLIP)
    return x, y.astype(np.int64)


def audio_model():
    import keras
    from keras import layers

    return keras.Sequential([
        keras.Input((SAMPLES_PER_CLIP, 1), name="audio"),
        layers.Conv1D(16, 32, strides=2, padding="same", activation="relu"),  # 22000 steps
        layers.Conv1D(32, 9, strides=2, padding="same", activation="relu"),
        layers.Conv1D(32, 9, strides=2, padding="same", activation="relu"),
        layers.Conv1D(64, 9, strides=4, padding="same", activation="relu"),
        layers.Conv1D(64, 9, strides=4, padding="same", activation="relu"),
        layers.GlobalAveragePooling1D(),
        layers.Dense(CLASSES, activation="softmax", name="classes"),
    ], name="audio")


def squares(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """[n, SIZE, SIZE, 3] dim noisy images each with one bright square, and the [n, ANCHORS, FIELDS] targets."""
    x = rng.uniform(0.0, 0.3, (n, SIZE, SIZE, 3)).astype(np.float32)
    boxes = np.empty((n, 4), np.float32)  # y0, x0, y1, x1 normalized
    for k in range(n):
        side = rng.integers(16, 56)
        y0, x0 = rng.integers(0, SIZE - side, 2)
        x[k, y0:y0 + side, x0:x0 + side] += rng.uniform(0.5, 0.7, 3).astype(np.float32)
        boxes[k] = np.array([y0, x0, y0 + side, x0 + side], np.float32) / SIZE
    centres = np.concatenate([np.repeat(_centres(GRID_A), PER_CELL, axis=0), _centres(GRID_B)])  # [A, 2] (y, x)
    y = np.zeros((n, ANCHORS, FIELDS), np.float32)
    y[..., 0] = (boxes[:, None, 0] + boxes[:, None, 2]) / 2 - centres[None, :, 0]
    y[..., 1] = (boxes[:, None, 1] + boxes[:, None, 3]) / 2 - centres[None, :, 1]
    y[..., 2] = (boxes[:, None, 2] - boxes[:, None, 0])
    y[..., 3] = (boxes[:, None, 3] - boxes[:, None, 1])
    inside = ((centres[None, :, 0] > boxes[:, None, 0]) & (centres[None, :, 0] < boxes[:, None, 2])
              & (centres[None, :, 1] > boxes[:, None, 1]) & (centres[None, :, 1] < boxes[:, None, 3]))
    y[..., 4] = inside
    y[..., 5] = inside * (1.0 - np.abs(y[..., 0]) - np.abs(y[..., 1])).clip(0, 1)
    return np.clip(x, 0, 1), y


def _centres(grid: int) -> np.ndarray:
    rows, cols = np.divmod(np.arange(grid * grid), grid)
    return np.stack([(rows + 0.5) / grid, (cols + 0.5) / grid], axis=1).astype(np.float32)


def anchors_model():
    import keras
    from keras import layers

    image = keras.Input((SIZE, SIZE, 3), name="image")

    def block(h, channels: int, stride: int = 1):  # BlazeFace's: depthwise 5x5 + pointwise, a residual add
        out = layers.Conv2D(channels, 1)(layers.DepthwiseConv2D(5, strides=stride, padding="same")(h))
        if stride > 1 or h.shape[-1] != channels:
            h = layers.Conv2D(channels, 1, strides=stride)(h)
        return layers.ReLU()(layers.Add()([out, h]))

    h = layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(image)  # 64x64
    h = block(block(h, 16), 24)
    h = block(block(block(h, 32, 2), 32), 48)  # 32x32
    g = block(block(block(h, 64, 2), 64), 64)  # 16x16

    def head(features, cells: int, per_cell: int, width: int, tag: str):
        out = layers.Conv2D(per_cell * width, 1, name=f"{tag}")(features)
        return layers.Reshape((cells * per_cell, width))(out)

    box = layers.Concatenate(axis=1)([head(h, GRID_A ** 2, PER_CELL, 4, "box_a"), head(g, GRID_B ** 2, 1, 4, "box_b")])
    logits = layers.Concatenate(axis=1)([head(h, GRID_A ** 2, PER_CELL, 2, "score_a"),
                                         head(g, GRID_B ** 2, 1, 2, "score_b")])
    scores = layers.Activation("sigmoid", name="scores")(logits)
    return keras.Model(image, layers.Concatenate(name="detections")([box, scores]), name="anchors")


def build(folder: Path, name: str):
    """Trains fixture `name` (seeded) and writes model.keras, the same model as a float model.tflite (what a user
    brings: a .tflite is quantized by LiteRT Quantizer, whose calibration runs in a side process meanwhile) and
    data.npz (x, y, x_calib)."""
    import tensorflow as tf

    M.seed()
    rng = np.random.default_rng(M.SEED)
    if name == "audio":
        x_tr, y_tr = tones(N_TRAIN, rng)
        x_ev, y_ev = tones(N_EVAL, rng)
        model = audio_model()
        M.train(model, x_tr, y_tr, "sparse_categorical_crossentropy", 3e-3, 6)
    elif name == "anchors":
        x_tr, y_tr = squares(400, rng)
        x_ev, y_ev = squares(N_EVAL, rng)
        model = anchors_model()
        M.train(model, x_tr, y_tr, "mse", 3e-3, 4)
    else:
        raise ValueError(f"no speed fixture {name!r}; there are {', '.join(NAMES)}")
    M.save(folder, model, x_ev, y_ev, x_tr[:N_CALIB])
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    (folder / "model.tflite").write_bytes(converter.convert())


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """(model.keras, data.npz) of fixture `name`, built first if needed (once across processes); model.tflite lies
    beside them. The arguments' order is collapse_fixtures.ensure's, which benchmarks/profile_stages.py calls."""
    return M.ensure(cache_root, f"speed-v{VERSION}", name, lambda folder: build(folder, name))
