"""Models for the integer-only repair rungs (reporter.convert.rungs), one per failure kind, cached on disk like the demo.

* input_offset: the demo's breast_cancer_mlp (raw features behind a Keras Normalization): the input's int8 scale
  leaves most features with one or two codes; running the normalization on the host recovers float.
* squeeze_excite: a digits CNN with a squeeze-excite block (a Reshape of the gate: Keras exports SHAPE -> STRIDED_SLICE
  -> PACK -> RESHAPE on a dynamic batch), so LiteRT Quantizer's static int8 leaves DEQUANTIZE -> SHAPE in float.
* range_decides: tests/collapse_fixtures.py's rule_worse (a breast-cancer MLP with one hidden unit rescaled by 1000):
  the range method decides whether int8 keeps float's predictions.
* conv_outlier: the demo's digits_cnn with one channel of its first convolution's output made 1000 times larger (that
  channel's weights and bias; ReLU and max pooling pass the factor) and read 1000 times smaller by the second
  convolution (its weights for that input channel), so float is unchanged; int8's scale for that tensor is set by
  the one channel and the others round to a code or two. SmoothQuant's scaling between the two convolutions (cross-
  layer equalization of the one channel) repairs it.
* bias_wins: a linear classifier on readings near an operating point (256 features of mean 8 and spread 0.25, as
  sensors around a set point) plus a constant feature whose weight is large and offset in the bias, so float is
  unchanged. The large weight sets the weights' int8 scale; rounding the small weights to it shifts every logit
  by sum_j (Q(w_j) - w_j) * 8, the same for every sample: the loss is a bias, and bias correction removes it.
* depthwise_outlier: a MobileNet-style digits CNN (conv stem -> ReLU -> depthwise -> pointwise -> depthwise ->
  pointwise, each with batch norm and ReLU6, -> global pooling -> dense) with one stem channel x1024 (its batch norm's
  gamma and beta; ReLU passes the factor) and that channel of the depthwise kernel /1024 (powers of two: float is
  bit-identical). int8's scale for the stem's
  output is set by the one channel; cross-layer equalization into the depthwise weights repairs it.

Each gives (float .tflite bytes, Keras model path, data): evaluation x, y; calibration and selection samples split from
the training inputs (x_calib), so neither overlaps the evaluation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
SELECTION = 0.3  # the share of the training inputs kept for choosing (the rest calibrates)


@dataclass
class Fixture:
    name: str
    keras_path: Path
    float_model: bytes
    x: np.ndarray
    y: np.ndarray
    x_calib: np.ndarray
    x_select: np.ndarray


def build_squeeze_excite(folder: Path):
    import keras
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = M.split((x / 16.0).reshape(-1, 8, 8, 1).astype(np.float32), y.astype(np.int64))
    M.seed()
    inp = keras.Input((8, 8, 1))
    h = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inp)
    s = keras.layers.GlobalAveragePooling2D()(h)
    s = keras.layers.Dense(4, activation="relu")(s)
    s = keras.layers.Dense(16, activation="sigmoid")(s)
    h = keras.layers.Multiply()([h, keras.layers.Reshape((1, 1, 16))(s)])
    h = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(h)
    out = keras.layers.Dense(10, activation="softmax")(keras.layers.GlobalAveragePooling2D()(h))
    model = M.train(keras.Model(inp, out), x_tr, y_tr, "sparse_categorical_crossentropy", 1e-2, 30)
    return M.save(folder, model, x_te, y_te, x_tr)


def build_bias_wins(folder: Path):
    """Weights set, not trained: the teacher's weights scaled to the readings' spread, float's accuracy set by the
    labels' noise."""
    import keras

    rng = np.random.default_rng(M.SEED)
    features, classes, mean, spread = 256, 4, 8.0, 0.25
    z = rng.normal(size=(2400, features)).astype(np.float32)
    x = np.concatenate([np.clip(mean + spread * z, 0, 2 * mean), np.full((len(z), 1), mean)], axis=1)
    teacher = rng.normal(size=(features, classes)).astype(np.float32)
    y = (z @ teacher + 4.0 * rng.normal(size=(len(z), classes))).argmax(axis=1).astype(np.int64)
    kernel = np.concatenate([0.1 / spread * teacher, np.full((1, classes), 15 * 0.1 / spread)]).astype(np.float32)
    bias = (-mean * kernel.sum(axis=0)).astype(np.float32)  # the constant feature's and the readings' mean, offset
    model = keras.Sequential([keras.Input((features + 1,)), keras.layers.Dense(classes, activation="softmax")])
    model.layers[0].set_weights([kernel, bias])
    return M.save(folder, model, x[:1000].astype(np.float32), y[:1000], x[1000:].astype(np.float32))


def build_conv_outlier(folder: Path, scale: float = 1000.0):
    import keras

    from reporter.pipeline import demo

    model_path, data_path = demo.ensure_model("digits_cnn", say=lambda *_: None)
    model = keras.models.load_model(model_path)
    first, second = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)][:2]
    data = np.load(data_path)
    before = model.predict(data["x"], verbose=0)
    kernel, bias = first.get_weights()
    channel = int(np.argmax(np.abs(kernel).reshape(-1, kernel.shape[-1]).max(axis=0)))  # the strongest, so it matters
    kernel[..., channel] *= scale
    bias[channel] *= scale
    first.set_weights([kernel, bias])
    kernel, bias = second.get_weights()
    kernel[:, :, channel, :] /= scale
    second.set_weights([kernel, bias])
    after = model.predict(data["x"], verbose=0)
    assert np.array_equal(before.argmax(-1), after.argmax(-1)) and np.abs(after - before).max() < 1e-4
    return M.save(folder, model, data["x"], data["y"], data["x_calib"])


def build_depthwise_outlier(folder: Path, scale: float = 1024.0):
    import keras
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    img = np.kron(x.reshape(-1, 8, 8) / 16.0, np.ones((2, 2)))[..., None]  # 16x16x1
    x_tr, x_te, y_tr, y_te = M.split(img.astype(np.float32), y.astype(np.int64))
    M.seed()
    layers = keras.layers

    def block(layer, activation, name=None):  # convolution, batch norm (folded into it by the converter), activation
        return lambda t: layers.Activation(activation)(layers.BatchNormalization(name=name)(layer(t)))

    inp = keras.Input((16, 16, 1))
    h = block(layers.Conv2D(16, 3, padding="same"), "relu", "stem_bn")(inp)  # ReLU: it passes a positive factor
    h = block(layers.DepthwiseConv2D(3, padding="same", name="depthwise"), "relu6")(h)
    h = block(layers.Conv2D(32, 1), "relu6")(h)
    h = block(layers.DepthwiseConv2D(3, strides=2, padding="same"), "relu6")(h)
    h = block(layers.Conv2D(64, 1), "relu6")(h)
    out = layers.Dense(10, activation="softmax")(layers.GlobalAveragePooling2D()(h))
    model = M.train(keras.Model(inp, out), x_tr, y_tr, "sparse_categorical_crossentropy", 2e-3, 40)
    before = model.predict(x_te, verbose=0)
    stem, depthwise = model.get_layer("stem_bn"), model.get_layer("depthwise")
    made = keras.Model(inp, stem.output).predict(x_tr, verbose=0)
    channel = int(np.argmax(np.maximum(made, 0).reshape(-1, made.shape[-1]).mean(axis=0)))  # the busiest: it matters
    gamma, beta, mean, variance = stem.get_weights()  # the stem's output channel, after batch norm, times `scale`
    gamma[channel] *= scale
    beta[channel] *= scale
    stem.set_weights([gamma, beta, mean, variance])
    kernel, bias = depthwise.get_weights()  # kernel (kh, kw, channels, multiplier)
    kernel[:, :, channel, :] /= scale
    depthwise.set_weights([kernel, bias])
    after = model.predict(x_te, verbose=0)
    assert np.array_equal(before, after)  # powers of two: the same float numbers
    return M.save(folder, model, x_te, y_te, x_tr)


def float_tflite(keras_path: Path, path: Path) -> bytes:
    """The float .tflite of a Keras model, converted once and kept at `path`."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        import keras
        import tensorflow as tf

        model = keras.models.load_model(keras_path)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
        tmp.replace(path)
    return path.read_bytes()


def _fixture(name: str, cache_root, keras_path: Path, data_path: Path) -> Fixture:
    data = np.load(data_path)
    x_calib = data["x_calib"].astype(np.float32)
    cut = len(x_calib) - int(round(SELECTION * len(x_calib)))
    model = float_tflite(keras_path, Path(cache_root) / f"repair-v{VERSION}" / f"{name}.tflite")
    return Fixture(name, keras_path, model, data["x"].astype(np.float32), data["y"], x_calib[:cut], x_calib[cut:])


def ensure(name: str, cache_root) -> Fixture:
    if name == "input_offset":
        from reporter.pipeline import demo

        return _fixture(name, cache_root, *demo.ensure_model("breast_cancer_mlp", say=lambda *_: None))
    if name == "range_decides":
        import collapse_fixtures

        return _fixture(name, cache_root, *collapse_fixtures.ensure("rule_worse", cache_root))
    builders = {"squeeze_excite": build_squeeze_excite, "bias_wins": build_bias_wins,
                "conv_outlier": build_conv_outlier, "depthwise_outlier": build_depthwise_outlier}
    return _fixture(name, cache_root, *M.ensure(cache_root, f"repair-v{VERSION}", name, builders[name]))
