"""Models on which dynamic-range quantization (DRQ) loses accuracy through ONE layer's weights, for tests of
what the tool says about DRQ and of keeping single layers in float with LiteRT Quantizer.

Seeded, trained in a few seconds on data that ships with scikit-learn, and cached on disk (`ensure`, like
tests/collapse_fixtures.py) as model.keras + data.npz: x, y (evaluation) and x_calib (the training
inputs, no overlap).

* drq_dead_feature: an MLP on the 8x8 digits (pixels / 16) with a 65th input, `is_padding`. The serving
  pipeline pads its batches to a fixed size with empty rows flagged is_padding = 1, and whoever built the
  model wired a kill switch: a hand-set weight of KILL_WEIGHT (-100) from is_padding into every unit of
  the first Dense (CULPRIT_LAYER), so a padded row drives every pre-activation far below zero and the
  ReLU silences the layer. No training or evaluation row is padding: the flag is 0 in all of x and
  x_calib, so the switch never fires, gets no gradient (it is still exactly KILL_WEIGHT after training)
  and the float model computes exactly what was trained.

  Quantizing the weights is what breaks it. Both TF's converter (DRQ, TF 2.21) and LiteRT Quantizer's
  `dynamic_wi8_afp32` quantize FULLY_CONNECTED weights symmetrically per output channel; every output
  channel (row of the TFLite [64, 65] weight) holds the -100, so every channel's scale is 100/127 ~ 0.79
  and most of the ordinary weights (median |w| ~ 0.14) round to 0. The inputs of that layer are the
  pixels in [0, 1] plus a zero column, exactly as without the switch, so the dynamic (run-time)
  quantization of the activations is not the cause: the same model with the switch set to 0 survives
  DRQ. The other layers (DENSE_MID 64x32, DENSE_OUT 32x10) have ordinary weights; TF's converter leaves
  DENSE_OUT (320 weights, under its 1,024-element threshold) in float, LiteRT quantizes it too.

  Measured when written (540 evaluation samples, one per invoke): float 97.4 %, TF DRQ 54.6 %, LiteRT DRQ
  54.4 %; LiteRT DRQ with CULPRIT_LAYER in float 97.4 %, with DENSE_MID or DENSE_OUT (or both) in float
  54.6 %. Full-integer quantization collapses the same way (its weights are per channel too): TF FIQ
  54.3 %, LiteRT static_wi8_ai8 54.3 %, and back to float's accuracy with CULPRIT_LAYER in float.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
FIXTURES = ("drq_dead_feature",)
KILL_WEIGHT = -100.0
CULPRIT_LAYER = "dense_pixels"  # the Keras layer whose weights DRQ breaks
DENSE_MID = "dense_mid"
DENSE_OUT = "dense_out"
LAYERS = (CULPRIT_LAYER, DENSE_MID, DENSE_OUT)
PAD_FEATURE = 64  # index of the is_padding input


def op_regex(layer: str) -> str:
    """A regex for the output tensor name of the FULLY_CONNECTED op of Keras layer `layer` in a float .tflite
    converted by TF (e.g. `drq_dead_feature_1/dense_pixels_1/MatMul;...;.../BiasAdd`): LiteRT Quantizer
    matches recipe regexes against an op's output tensor names (joined with ';')."""
    return rf"/{layer}(_\d+)?/MatMul"


def build_drq_dead_feature(folder: Path):
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = np.hstack([x / 16.0, np.zeros((len(x), 1))]).astype(np.float32)  # is_padding: no row is padding
    x_tr, x_te, y_tr, y_te = M.split(x, y.astype(np.int64))
    model = M.mlp(x.shape[1], (64, 32), 10, "softmax", names=LAYERS, name="drq_dead_feature")
    layer = model.get_layer(CULPRIT_LAYER)
    w, b = layer.get_weights()
    w[PAD_FEATURE, :] = KILL_WEIGHT  # the kill switch for padded rows, set before training
    layer.set_weights([w, b])
    M.train(model, x_tr, y_tr, "sparse_categorical_crossentropy", 3e-3, epochs=30)
    assert np.all(layer.get_weights()[0][PAD_FEATURE] == KILL_WEIGHT)  # a feature that never fires learns nothing
    return M.save(folder, model, x_te, y_te, x_tr)


BUILDERS = {"drq_dead_feature": build_drq_dead_feature}


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model and data of fixture `name`, built first if needed (once across processes)."""
    return M.ensure(cache_root, f"drq-v{VERSION}", name, BUILDERS[name])
