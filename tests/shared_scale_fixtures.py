"""A YOLO-v5-like head whose one output concatenates pixel boxes with sigmoid scores (issue 65's shared scale), for
tests/test_shared_scale.py; seeded, trained in seconds on synthetic data and cached like the other fixtures
(tests/model_fixtures.py `ensure`).

* pixel_head: twelve standard-normal features (numpy, seeded) -> Dense 32 (ReLU) -> three heads, each reshaped to
  ANCHORS rows: boxes (Dense 4 per anchor, sigmoid, times BOX_SCALE = 300: pixels), objectness (Dense 1 per anchor,
  sigmoid) and class scores (Dense CLASSES per anchor, sigmoid), joined by one Concatenate on the last axis into
  one output (n, ANCHORS, 5 + CLASSES), as YOLOv5's raw output [1, N, 5+nc] holds them. The targets `y` are the
  values of a random teacher of the same form (boxes 300 * sigmoid, scores sigmoid of linear maps of the features):
  a plain regression the tool reads today. Boxes span about 0..300, scores 0..1: one int8 scale for both.
* normalized_head: the same with boxes in 0..1 (BOX_SCALE 1): the parts' ranges are alike, one scale fits them.

Each folder holds model.keras, model.tflite (its float conversion), data.npz (x: 400 evaluation samples, y,
x_calib: 800 others) and metric.py, whose `score_error` is each sample's mean absolute error of the scores
(objectness and classes) against `y`, lower better (`--metric metric.py:score_error --metric-mode min`): what a
detector's mAP reads of them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 2
FEATURES, ANCHORS, CLASSES = 12, 8, 2
WIDTH = 5 + CLASSES  # boxes (4), objectness, classes: one anchor's values in the output
BOXES = slice(0, 4)
SCORES = slice(4, WIDTH)
BOX_SCALE = {"pixel_head": 300.0, "normalized_head": 1.0}
EVAL, CALIB = 400, 800

METRIC = '''"""Each sample's mean absolute error of the scores (objectness and classes: the last {scores} of
each anchor's {width} values) against the targets."""
import numpy as np


def score_error(y_true, y_pred):
    t = np.asarray(y_true, np.float64).reshape(len(y_true), -1, {width})[..., {start}:]
    p = np.asarray(y_pred, np.float64).reshape(len(y_pred), -1, {width})[..., {start}:]
    return np.abs(t - p).reshape(len(t), -1).mean(axis=1)
'''


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def data(box_scale: float):
    """(x, y): seeded features and the teacher's outputs (n, ANCHORS, WIDTH)."""
    rng = np.random.default_rng(M.SEED)
    n = EVAL + CALIB
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    w_box = rng.normal(size=(FEATURES, ANCHORS * 4)) / np.sqrt(FEATURES)
    w_score = rng.normal(size=(FEATURES, ANCHORS * (1 + CLASSES))) * 1.5 / np.sqrt(FEATURES)
    boxes = (box_scale * _sigmoid(x @ w_box)).reshape(n, ANCHORS, 4)
    scores = _sigmoid(x @ w_score).reshape(n, ANCHORS, 1 + CLASSES)
    return x, np.concatenate([boxes, scores], axis=-1).astype(np.float32)


def _build(name: str, folder: Path):
    import keras
    import tensorflow as tf

    box_scale = BOX_SCALE[name]
    x, y = data(box_scale)
    M.seed()
    inp = keras.Input((FEATURES,), name="x")
    h = keras.layers.Dense(32, activation="relu", name="hidden")(inp)
    boxes = keras.layers.Dense(ANCHORS * 4, activation="sigmoid", name="box_logits")(h)
    boxes = keras.layers.Reshape((ANCHORS, 4))(keras.layers.Rescaling(box_scale, name="boxes")(boxes))
    objectness = keras.layers.Reshape((ANCHORS, 1))(keras.layers.Dense(ANCHORS, activation="sigmoid",
                                                                       name="objectness")(h))
    classes = keras.layers.Reshape((ANCHORS, CLASSES))(keras.layers.Dense(ANCHORS * CLASSES, activation="sigmoid",
                                                                          name="classes")(h))
    out = keras.layers.Concatenate(axis=-1, name="head")([boxes, objectness, classes])
    model = keras.Model(inp, out, name=name)
    weight = tf.constant([1.0 / box_scale] * 4 + [1.0] * (1 + CLASSES))

    def loss(y_true, y_pred):  # every value on the scale of a score: the boxes' pixels do not drown the scores
        return tf.reduce_mean(tf.square((y_true - y_pred) * weight))

    model.compile(keras.optimizers.Adam(1e-2), loss=loss)
    model.fit(x[EVAL:], y[EVAL:], epochs=30, batch_size=M.BATCH_SIZE, verbose=0)
    model.save(folder / "model.keras")
    (folder / "model.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    np.savez(folder / "data.npz", x=x[:EVAL], y=y[:EVAL], x_calib=x[EVAL:])
    (folder / "metric.py").write_text(METRIC.format(scores=WIDTH - SCORES.start, width=WIDTH, start=SCORES.start))


def ensure(cache_root, name: str = "pixel_head") -> Path:
    """The fixture's folder (model.keras, model.tflite, data.npz, metric.py), built first if needed."""
    model, _ = M.ensure(cache_root, f"shared-scale-v{VERSION}", name, lambda folder: _build(name, folder))
    return model.parent
