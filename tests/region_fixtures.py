"""Models on which full-integer quantization collapses because a wide range runs along a CHAIN of tensors, for
the search's "region" and "group" moves. Keeping one tensor's producer and consumers in float (a "tensor" move)
does not fix them: every wide tensor of the chain must stay float with its producer and consumers.

Each is seeded, trained in seconds on data that ships with scikit-learn, and cached on disk like the others
(`ensure`), with evaluation data (x, y) and training inputs as x_calib (no overlap). The float model computes
the same function before and after the change that makes the range wide (checked when it is built).

* outlier_transformer: digits as 8 tokens (the image rows) of 8 features; a Dense embedding to 24 channels, one
  MultiHeadAttention block with a residual add, a ReLU MLP with a residual add, a final LayerNormalization,
  GlobalAveragePooling1D (TFLite MEAN) and a softmax Dense. After training, OFFSET is added to every channel
  of the embedding (its bias): the residual stream carries a massive constant activation, as large language
  models' residual streams do. The query, key, value and MLP input Dense layers have OFFSET times their
  weights' column sums taken from their biases, and the final layer norm subtracts the channel mean, so the
  float model is unchanged. Quantized, the residual stream has a scale of ~4 (range ~1,000) and the signal
  (~1) is lost. Wide tensors: the embedding's bias add, both residual adds, the q/k/v/MLP matmuls before their
  bias adds (~3,600-5,300: the converter splits Dense on a sequence into a matmul and an add) with their
  reshapes, and the final layer norm's mean and products (~13,800) before its last add cancels them.
  OFFSET is 1,000 and not more: at about 2,000 the LiteRT runtime aborts (SIGABRT) in the int8 SQUARED_DIFFERENCE
  of LiteRT Quantizer's model of it (the tool's alternatives), at 3,000 already in the TF converter's FIQ model.
* wide_chain_cnn: digits 8x8x1, a ReLU Conv2D with 16 channels, a squeeze-excite block (GlobalAveragePooling2D,
  Dense ReLU 4, Dense sigmoid 16, Multiply), a second ReLU Conv2D, GlobalAveragePooling2D and a softmax Dense.
  After training the most active channel of the first convolution is scaled by SCALE (ReLU is positive-
  homogeneous) and the squeeze-excite's first Dense and the second convolution take 1/SCALE of it: the float
  model is unchanged. The channel's range (~2,600) runs along the convolution's output, the squeeze (MEAN,
  ~1,000) and the excitation (MUL, ~2,600); keeping any one of them float with its producer and consumers
  leaves another quantized with the wide scale.

`python tests/region_fixtures.py [CACHE]` builds both (or reads them from the cache) and prints, with the
public TF converter and the plain LiteRT interpreter only: float and FIQ accuracy, the accuracy with the chain
kept in float, and the best accuracy any single tensor move reaches.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
FIXTURES = ("outlier_transformer", "wide_chain_cnn")
OFFSET = 1000.0  # added to every channel of the transformer's residual stream
SCALE = 500.0  # the CNN's first-convolution channel is scaled by this
WIDE = 500.0  # a quantized tensor whose range (scale x 255) is at least this is "wide" (the others are < 60)
CALIBRATION = 100  # the tool's default --calibration-samples


def _digits():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return x / 16.0, y


def _unchanged(model, x, build_change, what: str):
    """Applies `build_change(model)` and checks that the float model still predicts the same classes."""
    before = model.predict(x, verbose=0)
    build_change(model)
    after = model.predict(x, verbose=0)
    changed = int(np.sum(before.argmax(axis=1) != after.argmax(axis=1)))
    assert changed == 0 and np.abs(before - after).max() < 0.02, (what, changed, np.abs(before - after).max())
    return model


def _transformer(width=24, heads=2, key_dim=8, hidden=48):
    import keras

    M.seed()
    inp = keras.Input((8, 8))
    h = keras.layers.Dense(width, name="embed")(inp)
    a = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=key_dim, name="attention")(h, h)
    h = keras.layers.Add(name="residual_1")([h, a])
    m = keras.layers.Dense(hidden, activation="relu", name="mlp_in")(h)
    m = keras.layers.Dense(width, name="mlp_out")(m)
    h = keras.layers.Add(name="residual_2")([h, m])
    h = keras.layers.LayerNormalization(name="final_norm")(h)
    h = keras.layers.GlobalAveragePooling1D(name="pool")(h)
    out = keras.layers.Dense(10, activation="softmax", name="head")(h)
    return keras.Model(inp, out, name="outlier_transformer")


def _offset_residual_stream(model, offset=OFFSET):
    """OFFSET on every channel of the embedding; the layers reading the residual stream take it out of their
    biases (W^T (x + c 1) + b - c W^T 1 = W^T x + b) and the final layer norm removes the channel mean."""

    def change(model):
        embed = model.get_layer("embed")
        w, b = embed.get_weights()
        embed.set_weights([w, b + offset])
        attention = model.get_layer("attention")
        readers = [attention._query_dense, attention._key_dense, attention._value_dense, model.get_layer("mlp_in")]
        for layer in readers:
            kernel, bias = layer.get_weights()  # kernel (width, ...), bias (...)
            layer.set_weights([kernel, bias - offset * kernel.sum(axis=0)])

    return change


def build_outlier_transformer(folder: Path):
    x, y = _digits()
    x_tr, x_te, y_tr, y_te = M.split(x.reshape(-1, 8, 8).astype(np.float32), y.astype(np.int64))
    model = M.train(_transformer(), x_tr, y_tr, "sparse_categorical_crossentropy", 3e-3, 30)
    model = _unchanged(model, x_te, _offset_residual_stream(model), "outlier_transformer")
    return M.save(folder, model, x_te, y_te, x_tr)


def _se_cnn(channels=16, squeeze=4):
    import keras

    M.seed()
    inp = keras.Input((8, 8, 1))
    c = keras.layers.Conv2D(channels, 3, padding="same", activation="relu", name="conv1")(inp)
    s = keras.layers.GlobalAveragePooling2D(name="squeeze")(c)
    s = keras.layers.Dense(squeeze, activation="relu", name="se_reduce")(s)
    s = keras.layers.Dense(channels, activation="sigmoid", name="se_expand")(s)
    s = keras.layers.Reshape((1, 1, channels), name="se_reshape")(s)
    h = keras.layers.Multiply(name="excite")([c, s])
    h = keras.layers.Conv2D(channels, 3, padding="same", activation="relu", name="conv2")(h)
    h = keras.layers.GlobalAveragePooling2D(name="pool")(h)
    out = keras.layers.Dense(10, activation="softmax", name="head")(h)
    return keras.Model(inp, out, name="wide_chain_cnn")


def _scale_channel(x_train, scale=SCALE):
    """The most active channel of conv1 times `scale`; the squeeze-excite's first Dense and conv2 read it
    divided by `scale` (ReLU, the mean and the multiplication by the gate are positive-homogeneous)."""
    import keras

    def change(model):
        conv1 = model.get_layer("conv1")
        features = keras.Model(model.input, conv1.output).predict(x_train, verbose=0)
        k = int(np.argmax(features.mean(axis=(0, 1, 2))))
        w, b = conv1.get_weights()
        w, b = w.copy(), b.copy()
        w[..., k] *= scale
        b[k] *= scale
        conv1.set_weights([w, b])
        reduce = model.get_layer("se_reduce")
        w, b = reduce.get_weights()
        w = w.copy()
        w[k, :] /= scale
        reduce.set_weights([w, b])
        conv2 = model.get_layer("conv2")
        w, b = conv2.get_weights()
        w = w.copy()
        w[:, :, k, :] /= scale
        conv2.set_weights([w, b])

    return change


def build_wide_chain_cnn(folder: Path):
    x, y = _digits()
    x_tr, x_te, y_tr, y_te = M.split(x.reshape(-1, 8, 8, 1).astype(np.float32), y.astype(np.int64))
    model = M.train(_se_cnn(), x_tr, y_tr, "sparse_categorical_crossentropy", 1e-2, 20)
    model = _unchanged(model, x_te, _scale_channel(x_tr), "wide_chain_cnn")
    return M.save(folder, model, x_te, y_te, x_tr)


BUILDERS = {
    "outlier_transformer": build_outlier_transformer,
    "wide_chain_cnn": build_wide_chain_cnn,
}


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model and data of fixture `name`, built first if needed (once across processes)."""
    return M.ensure(cache_root, f"regions-v{VERSION}", name, BUILDERS[name])


# --- independent figures: the public TF converter and the plain LiteRT interpreter only ------------------------

def layers_of(tflite: bytes) -> tuple[dict, dict]:
    """({layer name: (op type, input tensor names, range)}, {tensor name: [consuming layer names]}) of a quantized
    .tflite. A layer is an op with an int8 output other than QUANTIZE/DEQUANTIZE, named by its output tensor as
    the QuantizationDebugger names it; its range is the output's scale x 255. A consumer reached through a float
    op (DEQUANTIZE, NEG, QUANTIZE inserted by the converter) counts as a consumer of the tensor."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=tflite)
    tensors = it.get_tensor_details()
    ops = it._get_ops_details()
    layers, consumers_of = {}, {}
    readers = {}
    for op in ops:
        for i in op["inputs"]:
            if i >= 0:
                readers.setdefault(tensors[i]["name"], []).append(op)
    for op in ops:
        out = [tensors[i] for i in op["outputs"] if i >= 0]
        if op["op_name"] in ("QUANTIZE", "DEQUANTIZE") or not out or out[0]["dtype"] != np.int8:
            continue
        scale = out[0]["quantization"][0]
        layers[out[0]["name"]] = (op["op_name"], [tensors[i]["name"] for i in op["inputs"] if i >= 0], scale * 255)

    def layer_consumers(name, seen=()):
        found = []
        for op in readers.get(name, []):
            out = [tensors[i]["name"] for i in op["outputs"] if i >= 0]
            if out and out[0] in layers:
                found.append(out[0])
            elif out and out[0] not in seen:  # a float op in between: follow it
                found += layer_consumers(out[0], (*seen, out[0]))
        return found

    for name in layers:
        consumers_of[name] = sorted(set(layer_consumers(name)))
    return layers, consumers_of


def chain(tflite: bytes, wide: float = WIDE) -> tuple[list, list]:
    """(the wide layers, the chain's layers: every wide layer and every layer consuming one), in model order."""
    layers, consumers = layers_of(tflite)
    wide_layers = [name for name, (_, _, r) in layers.items() if r >= wide]
    nodes = set(wide_layers)
    for name in wide_layers:
        nodes |= set(consumers[name])
    return wide_layers, [name for name in layers if name in nodes]


def figures(name: str, cache_root, single_moves: bool = True) -> dict:
    """Float, FIQ, chain-in-float and best single-tensor-move accuracy on the evaluation data, with the public
    converter (100 calibration samples, as the tool by default) and the plain LiteRT interpreter."""
    import keras
    import tensorflow as tf

    from independent import accuracy, public_selective

    model_path, data_path = ensure(name, cache_root)
    data = np.load(data_path)
    x, y, x_calib = data["x"], data["y"], data["x_calib"][:CALIBRATION]
    model = keras.saving.load_model(str(model_path), compile=False)
    fiq = public_selective(model_path, x_calib, [])
    layers, consumers = layers_of(fiq)
    wide_layers, nodes = chain(fiq)
    out = {
        "float": accuracy(tf.lite.TFLiteConverter.from_keras_model(model).convert(), x, y),
        "fiq": accuracy(fiq, x, y),
        "wide": {n: round(layers[n][2], 1) for n in wide_layers},
        "chain": nodes,
        "chain_in_float": accuracy(public_selective(model_path, x_calib, nodes), x, y),
    }
    if single_moves:
        out["single_tensor_moves"] = {
            n: accuracy(public_selective(model_path, x_calib, [n, *consumers[n]]), x, y) for n in wide_layers}
    return out


def main(argv=None):
    """Prints the figures of both fixtures; the cache is argv[0], else the tests' (QUANT_REPORT_CACHE or
    ~/.cache/quant-report)."""
    from reporter.pipeline.demo import cache_dir

    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0]) if argv else cache_dir().parent
    for name in FIXTURES:
        f = figures(name, root)
        print(f"== {name} ==")
        print(f"float {f['float']:.4f}  FIQ {f['fiq']:.4f}  chain in float ({len(f['chain'])} layers)"
              f" {f['chain_in_float']:.4f}")
        print("wide tensors (range):")
        for n, r in f["wide"].items():
            print(f"  {r:>10}  {n}")
        print("best single tensor move:", max(f["single_tensor_moves"].values()))
        for n, acc in f["single_tensor_moves"].items():
            print(f"  {acc:.4f}  {n} + consumers")


if __name__ == "__main__":
    main()
