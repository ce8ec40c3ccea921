"""Float .tflite files as the field ships them, for tests/test_shipped_tflite.py.

One tiny Keras conv model (scikit-learn's 8x8 digits, 10 classes, seconds to train) converted to a float
.tflite by the public TF converter, then written four ways, cached under `cache_root/shipped-tflite-vN/`:

* plain.tflite: as converted (a signature, float32 weights): the reference.
* nosig.tflite: the same with its SignatureDef removed (as MediaPipe's bundled models ship).
* fp16.tflite: converted with supported_types=[tf.float16]: float16 constants behind DEQUANTIZE ops.
* oldops.tflite: plain.tflite with every operator code in the old field only (builtin_code 0,
  deprecated_builtin_code holding the op), as files from old converters have.

data.npz holds x, y (evaluation) and x_calib (the training inputs).

`ensure_anchors`: a MediaPipe-like score head, one value per anchor (output (6, 1) per sample), shipped
without a signature, with labels shaped (n, 6, 1): anchors.tflite + data.npz.
The rewrites use tensorflow.lite.tools.flatbuffer_utils directly, none of quant-report's code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
FILES = ("plain", "nosig", "fp16", "oldops")


def _build(folder: Path):
    import keras
    import tensorflow as tf
    from sklearn.datasets import load_digits
    from tensorflow.lite.tools import flatbuffer_utils as fb

    M.seed()
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 8, 8, 1)
    x_tr, x_te, y_tr, y_te = M.split(x, y.astype(np.int64))
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(8, 3, activation="relu"),
                              keras.layers.Flatten(), keras.layers.Dense(10, activation="softmax")])
    M.train(model, x_tr, y_tr, "sparse_categorical_crossentropy", 1e-2, epochs=15)
    plain = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    half = tf.lite.TFLiteConverter.from_keras_model(model)
    half.optimizations = [tf.lite.Optimize.DEFAULT]
    half.target_spec.supported_types = [tf.float16]
    (folder / "plain.tflite").write_bytes(plain)
    (folder / "fp16.tflite").write_bytes(half.convert())
    obj = fb.convert_bytearray_to_object(bytearray(plain))
    obj.signatureDefs = None
    (folder / "nosig.tflite").write_bytes(bytes(fb.convert_object_to_bytearray(obj)))
    obj = fb.convert_bytearray_to_object(bytearray(plain))
    for code in obj.operatorCodes:
        code.deprecatedBuiltinCode, code.builtinCode = max(code.builtinCode, code.deprecatedBuiltinCode), 0
    (folder / "oldops.tflite").write_bytes(bytes(fb.convert_object_to_bytearray(obj)))
    np.savez(folder / "data.npz", x=x_te, y=y_te, x_calib=x_tr)


def ensure(cache_root) -> Path:
    """The folder holding the four .tflite files and data.npz, built first if needed (once across processes)."""
    from reporter.pipeline.demo import cached

    final = Path(cache_root) / f"shipped-tflite-v{VERSION}" / "digits_conv"
    cached(final, lambda tmp: (_build(tmp), "ok\n")[1])
    return final


def _build_anchors(folder: Path):
    import keras
    import tensorflow as tf
    from sklearn.datasets import load_digits
    from tensorflow.lite.tools import flatbuffer_utils as fb

    M.seed()
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 8, 8, 1)
    scores = np.stack([(y % k == 0) for k in (2, 3, 4, 5, 7, 9)], axis=1).astype(np.float32)[..., None]
    x_tr, x_te, y_tr, y_te = M.split(x, scores, stratify=False)
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(8, 3, activation="relu"),
                              keras.layers.Flatten(), keras.layers.Dense(6, activation="sigmoid"),
                              keras.layers.Reshape((6, 1))])
    M.train(model, x_tr, y_tr, "binary_crossentropy", 1e-2, epochs=15)
    obj = fb.convert_bytearray_to_object(bytearray(tf.lite.TFLiteConverter.from_keras_model(model).convert()))
    obj.signatureDefs = None
    (folder / "anchors.tflite").write_bytes(bytes(fb.convert_object_to_bytearray(obj)))
    np.savez(folder / "data.npz", x=x_te, y=y_te, x_calib=x_tr)


def ensure_anchors(cache_root) -> Path:
    """The folder holding anchors.tflite and its data.npz, built first if needed."""
    from reporter.pipeline.demo import cached

    final = Path(cache_root) / f"shipped-tflite-v{VERSION}" / "anchors"
    cached(final, lambda tmp: (_build_anchors(tmp), "ok\n")[1])
    return final
