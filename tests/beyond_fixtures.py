"""Models of more than 50 ops whose full-integer fix is larger than a tenth of the ops, for the search's look beyond
its compact sets (reporter.search.engine.look_beyond): before it calls FIQ's loss spread across the network it must
measure the debugger's chains of wide-range ops as units and regions along the graph's order.

Each is seeded, trained in seconds on data from scikit-learn or drawn here, and cached on disk like the other fixtures
(model_fixtures.ensure) as model.keras + data.npz: x, y (evaluation) and x_calib (the training inputs; no overlap).
The float model computes the same function before and after the change that makes quantization fail (checked when it
is built).

* outlier_chain_transformer: digits as 8 tokens (the image rows) of 8 features; a Dense embedding to WIDTH channels,
  BLOCKS blocks of MultiHeadAttention + residual add and a ReLU MLP + residual add (no layer norm), mean pooling
  (TFLite MEAN) and a softmax Dense. After training, one channel of the residual stream (the most active one) is
  scaled by SCALE: every layer that writes the stream (the embedding, each attention output and MLP output Dense) writes
  that channel SCALE times larger, and every layer that reads it (query, key, value, MLP input, the head) reads it
  SCALE times smaller, so the float model is unchanged. Quantized, the stream's scale is set by that one channel and
  the other channels' signal is lost. The wide ops form one chain through the residual adds; with their consumers it is
  far more than a tenth of the ops, and no compact set fixes it.
* prefix_segmenter: the 16x16 shapes of seg_fixtures (background, bright square, dim disc) with a second input
  channel, a per-image nuisance level drawn in [-NUISANCE, NUISANCE]. STACK 1x1 convolutions (2 to 2 channels) each
  rotate the two channels by ANGLE, then a 1x1 convolution projects the rotated pair back onto the image channel: in
  float the stack is exact (the image comes out untouched; its weights are fixed, not trained). Quantized, each
  rotated tensor spans the nuisance's range and rounds the image away a little more at each op, so only keeping the
  whole stack (the first STACK + 1 ops) in float wins the error back. Then a trained residual segmenter on the image:
  a 3x3 stem, RES_BLOCKS residual blocks (3x3 conv + add), 1x1 logits and a per-pixel softmax. After training its
  activations are scaled by POST_SCALE (stem weights and every bias; the logits read them POST_SCALE times smaller):
  the stack's ranges are then not ten times the median range, so no chain of wide-range ops stands for the stack, and
  only a region along the graph's order (a prefix of about a third of the ops) is the fix.

* mask_prefix_segmenter: the prefix segmenter with one sigmoid unit per pixel (the foreground mask, float 0/1 targets
  of the output's shape: a regression against the targets, also read as mask IoU) and a longer stack of gentler
  rotations (MASK_STACK by MASK_ANGLE): each rotated tensor quantized adds a little rounding noise to the image, so the
  longer the prefix kept in float the smaller the error, and only the whole stack wins it all back. A search that keeps
  a part of the stack (the shortest prefix that wins back half of the way, then fewer) ships a worse set than one it
  measured.

`python tests/beyond_fixtures.py [CACHE]` builds both (or reads them from the cache) and prints, with the public TF
converter and the plain LiteRT interpreter only: the number of quantized ops, float and FIQ accuracy, and the
accuracy with the fix (the chain, or the stack) kept in float.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
FIXTURES = ("outlier_chain_transformer", "prefix_segmenter", "mask_prefix_segmenter")
CALIBRATION = 100  # the tool's default --calibration-samples

WIDTH, HEADS, KEY_DIM, HIDDEN, BLOCKS = 16, 2, 8, 32, 3
SCALE = 1000.0  # the transformer's outlier channel

STACK = 16  # rotations in the segmenter's prefix
ANGLE = 0.7  # radians per rotation
NUISANCE = 40.0
RES_BLOCKS = 16
POST_SCALE = 30.0
MASK_STACK = 24  # the mask segmenter's longer stack of gentler rotations
MASK_ANGLE = 0.3


# --- outlier_chain_transformer ----------------------------------------------------------------------------------
def _transformer():
    import keras

    M.seed()
    inp = keras.Input((8, 8))
    h = keras.layers.Dense(WIDTH, name="embed")(inp)
    for b in range(BLOCKS):
        a = keras.layers.MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, name=f"attention_{b}")(h, h)
        h = keras.layers.Add(name=f"residual_a{b}")([h, a])
        m = keras.layers.Dense(HIDDEN, activation="relu", name=f"mlp_in_{b}")(h)
        m = keras.layers.Dense(WIDTH, name=f"mlp_out_{b}")(m)
        h = keras.layers.Add(name=f"residual_m{b}")([h, m])
    h = keras.layers.GlobalAveragePooling1D(name="pool")(h)
    out = keras.layers.Dense(10, activation="softmax", name="head")(h)
    return keras.Model(inp, out, name="outlier_chain_transformer")


def _scale_stream_channel(x_train, scale=SCALE):
    """The most active channel of the residual stream (at the pooling) times `scale`: writers write it `scale` times
    larger, readers read it `scale` times smaller (every op between is linear in the stream: adds and mean pooling)."""
    import keras

    def change(model):
        pooled = keras.Model(model.input, model.get_layer("pool").output).predict(x_train, verbose=0)
        k = int(np.argmax(np.abs(pooled).mean(axis=0)))

        def write(layer):  # kernel (..., WIDTH), bias (WIDTH,)
            kernel, bias = [w.copy() for w in layer.get_weights()]
            kernel[..., k] *= scale
            bias[..., k] *= scale
            layer.set_weights([kernel, bias])

        def read(layer):  # kernel (WIDTH, ...)
            kernel, bias = [w.copy() for w in layer.get_weights()]
            kernel[k] /= scale
            layer.set_weights([kernel, bias])

        write(model.get_layer("embed"))
        for b in range(BLOCKS):
            attention = model.get_layer(f"attention_{b}")
            for dense in (attention._query_dense, attention._key_dense, attention._value_dense):
                read(dense)
            write(attention._output_dense)
            read(model.get_layer(f"mlp_in_{b}"))
            write(model.get_layer(f"mlp_out_{b}"))
        read(model.get_layer("head"))

    return change


def build_outlier_chain_transformer(folder: Path):
    from sklearn.datasets import load_digits

    from region_fixtures import _unchanged

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).reshape(-1, 8, 8).astype(np.float32)
    x_tr, x_te, y_tr, y_te = M.split(x, y.astype(np.int64))
    model = M.train(_transformer(), x_tr, y_tr, "sparse_categorical_crossentropy", 3e-3, 30)
    model = _unchanged(model, x_te, _scale_stream_channel(x_tr), "outlier_chain_transformer")
    return M.save(folder, model, x_te, y_te, x_tr)


# --- prefix_segmenter -------------------------------------------------------------------------------------------
def _rotation(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]], np.float32)


def _segmenter(mask: bool = False, stack: int = STACK, angle: float = ANGLE):
    """The seeded model; the stack and the projection are fixed (not trainable): an exact identity on the image.
    `mask`: one sigmoid unit per pixel (the foreground) instead of a per-pixel softmax over the classes."""
    import keras

    M.seed()
    inp = keras.Input((16, 16, 2))
    h = inp
    for i in range(stack):
        h = keras.layers.Conv2D(2, 1, use_bias=False, trainable=False, name=f"rotate_{i}")(h)
    h = keras.layers.Conv2D(1, 1, use_bias=False, trainable=False, name="project")(h)
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="stem")(h)
    for i in range(RES_BLOCKS):
        r = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name=f"block_{i}")(h)
        h = keras.layers.Add(name=f"residual_{i}")([h, r])
    if mask:
        out = keras.layers.Conv2D(1, 1, activation="sigmoid", name="logits")(h)
    else:
        h = keras.layers.Conv2D(3, 1, name="logits")(h)
        out = keras.layers.Softmax(axis=-1, name="pixel_scores")(h)
    model = keras.Model(inp, out, name="mask_prefix_segmenter" if mask else "prefix_segmenter")
    total = np.eye(2, dtype=np.float32)
    for i in range(stack):
        r = _rotation(angle)  # y = x @ kernel: a row vector of (image, nuisance) times the kernel
        model.get_layer(f"rotate_{i}").set_weights([r.reshape(1, 1, 2, 2)])
        total = total @ r
    back = np.linalg.inv(total)[:, :1]  # (2, 1): the image channel out of the rotated pair
    model.get_layer("project").set_weights([back.reshape(1, 1, 2, 1).astype(np.float32)])
    return model


def _scale_post(scale=POST_SCALE):
    """The segmenter's activations `scale` times larger (ReLU and adds are positive-homogeneous): stem kernel and
    every bias times `scale`, the logits' kernel divided by it."""

    def change(model):
        stem = model.get_layer("stem")
        kernel, bias = stem.get_weights()
        stem.set_weights([kernel * scale, bias * scale])
        for i in range(RES_BLOCKS):
            block = model.get_layer(f"block_{i}")
            kernel, bias = block.get_weights()
            block.set_weights([kernel, bias * scale])
        logits = model.get_layer("logits")
        kernel, bias = logits.get_weights()
        logits.set_weights([kernel / scale, bias])

    return change


def _with_level(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """`x` (n, 16, 16, 1) with a second channel: one level per image, uniform in [-NUISANCE, NUISANCE]."""
    level = rng.uniform(-NUISANCE, NUISANCE, size=(len(x), 1, 1, 1)) * np.ones_like(x)
    return np.concatenate([x, level], axis=-1).astype(np.float32)


def _pixel_unchanged(model, x, change):
    """Applies `change(model)` and checks that the float model's per-pixel classes (or mask) stay the same."""
    before = model.predict(x, verbose=0)
    change(model)
    after = model.predict(x, verbose=0)
    classes = (lambda p: p[..., 0] > 0.5) if before.shape[-1] == 1 else (lambda p: p.argmax(-1))
    changed = float(np.mean(classes(before) != classes(after)))
    assert changed < 1e-3 and np.abs(before - after).max() < 0.05, (model.name, changed)
    return model


def build_prefix_segmenter(folder: Path):
    import seg_fixtures

    x_tr, y_tr, x_te, y_te = seg_fixtures.segmentation_data()
    rng = np.random.default_rng(M.SEED + 2)
    x_tr, x_te = _with_level(x_tr, rng), _with_level(x_te, rng)
    model = M.train(_segmenter(), x_tr, y_tr, "sparse_categorical_crossentropy", 3e-3, seg_fixtures.SEG_EPOCHS)
    model = _pixel_unchanged(model, x_te, _scale_post())
    return M.save(folder, model, x_te, y_te, x_tr)


def build_mask_prefix_segmenter(folder: Path):
    """The prefix segmenter with a sigmoid mask (foreground: the square or the disc) and a longer stack of gentler
    rotations (MASK_STACK by MASK_ANGLE): each rotated tensor quantized adds a little rounding noise to the image, so
    the longer the prefix kept in float the smaller the error, and the whole stack wins back the most. Targets: the
    mask, float32 0/1 of the output's shape (regression against the targets, and mask IoU)."""
    import seg_fixtures

    x_tr, y_tr, x_te, y_te = seg_fixtures.segmentation_data()
    rng = np.random.default_rng(M.SEED + 3)
    x_tr, x_te = _with_level(x_tr, rng), _with_level(x_te, rng)
    m_tr, m_te = ((y > 0).astype(np.float32)[..., None] for y in (y_tr, y_te))
    model = M.train(_segmenter(mask=True, stack=MASK_STACK, angle=MASK_ANGLE), x_tr, m_tr, "binary_crossentropy",
                    3e-3, seg_fixtures.SEG_EPOCHS)
    model = _pixel_unchanged(model, x_te, _scale_post())
    return M.save(folder, model, x_te, m_te, x_tr)


BUILDERS = {
    "outlier_chain_transformer": build_outlier_chain_transformer,
    "prefix_segmenter": build_prefix_segmenter,
    "mask_prefix_segmenter": build_mask_prefix_segmenter,
}


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model and data of fixture `name`, built first if needed (once across processes)."""
    return M.ensure(cache_root, f"beyond-v{VERSION}", name, BUILDERS[name])


# --- independent figures: the public TF converter and the plain LiteRT interpreter only --------------------------
def pixel_classes(tflite: bytes, x) -> np.ndarray:
    """Per-pixel classes (n, 16, 16) of a segmenter, one sample per invoke with the plain LiteRT interpreter."""
    from independent import outputs

    return outputs(tflite, x).reshape(len(x), 16, 16, -1).argmax(axis=-1)


def stack_ops(tflite: bytes) -> list[str]:
    """The segmenter's prefix: the quantized ops up to and including the projection, in the graph's order."""
    from region_fixtures import layers_of

    names = list(layers_of(tflite)[0])
    last = max(i for i, n in enumerate(names) if "project" in n)
    return names[: last + 1]


def figures(name: str, cache_root) -> dict:
    """Quantized ops, float and FIQ accuracy (pixel accuracy for the segmenter), and the accuracy with the fix in
    float: the wide ops and their consumers (the transformer), the stack (the segmenter)."""
    import keras
    import tensorflow as tf

    from independent import accuracy, public_selective
    from region_fixtures import chain, layers_of

    model_path, data_path = ensure(name, cache_root)
    data = np.load(data_path)
    x, y, x_calib = data["x"], data["y"], data["x_calib"][:CALIBRATION]
    flt = tf.lite.TFLiteConverter.from_keras_model(keras.saving.load_model(str(model_path), compile=False)).convert()
    fiq = public_selective(model_path, x_calib, [])
    fix = chain(fiq)[1] if name == "outlier_chain_transformer" else stack_ops(fiq)
    fixed = public_selective(model_path, x_calib, fix)
    if name == "prefix_segmenter":
        score = {k: float(np.mean(pixel_classes(m, x) == y)) for k, m in (("float", flt), ("fiq", fiq), ("fix", fixed))}
    else:
        score = {k: accuracy(m, x, y) for k, m in (("float", flt), ("fiq", fiq), ("fix", fixed))}
    return {"ops": len(layers_of(fiq)[0]), "fix_ops": len(fix), **score}


def main(argv=None):
    from reporter.pipeline.demo import cache_dir

    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0]) if argv else cache_dir().parent
    for name in FIXTURES:
        print(name, figures(name, root))


if __name__ == "__main__":
    main()
