"""A model whose per-tensor int8 loses because channels of its layers have very different weight ranges (Nagel et
al.'s case for cross-layer equalization), cached on disk like the demo (~/.cache/quant-report/per-tensor-v1).

* digits_spread: a digits CNN (convolution -> ReLU -> depthwise convolution -> ReLU -> max pooling -> dense) with the
  convolution's two strongest output channels scaled by 1/128 (their weights and bias; ReLU passes the factor) and
  the depthwise convolution's weights for those channels by 128 (powers of two: the same float function). Per
  channel, each output channel of either layer has its own weight scale; per tensor, the two channels of the
  convolution round to a code or none, and the depthwise convolution's fourteen others too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
FAMILY = f"per-tensor-v{VERSION}"
SCALE = 128.0
SCALED = 2  # of the convolution's 16 output channels


def build_digits_spread(folder: Path):
    import keras
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = M.split((x / 16.0).reshape(-1, 8, 8, 1).astype(np.float32), y.astype(np.int64))
    M.seed()
    layers = keras.layers
    inp = keras.Input((8, 8, 1))
    h = layers.Conv2D(16, 3, padding="same", activation="relu", name="conv")(inp)
    h = layers.DepthwiseConv2D(3, padding="same", activation="relu", name="depthwise")(h)
    out = layers.Dense(10, activation="softmax")(layers.Flatten()(layers.MaxPooling2D(2)(h)))
    model = M.train(keras.Model(inp, out), x_tr, y_tr, "sparse_categorical_crossentropy", 3e-3, 40)
    before = model.predict(x_te, verbose=0)
    conv, depthwise = model.get_layer("conv"), model.get_layer("depthwise")
    kernel, bias = conv.get_weights()  # (kh, kw, 1, 16)
    channels = np.argsort(-np.abs(kernel).reshape(-1, kernel.shape[-1]).max(axis=0))[:SCALED]  # the strongest
    kernel[..., channels] /= SCALE
    bias[channels] /= SCALE
    conv.set_weights([kernel, bias])
    kernel, bias = depthwise.get_weights()  # (kh, kw, channels, multiplier)
    kernel[:, :, channels, :] *= SCALE
    depthwise.set_weights([kernel, bias])
    after = model.predict(x_te, verbose=0)
    assert np.allclose(before, after, atol=1e-6)  # powers of two: the same float function
    return M.save(folder, model, x_te, y_te, x_tr)


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """(model.keras, data.npz) of fixture `name`."""
    builders = {"digits_spread": build_digits_spread}
    return M.ensure(cache_root, FAMILY, name, builders[name])
