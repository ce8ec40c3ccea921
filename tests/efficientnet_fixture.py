"""A deep model on which full-integer quantization loses a few points spread over many layers, with no
single collapse: the search's realistic case, unlike tests/collapse_fixtures.py.

* efficientnet_digits: a Keras EfficientNetB0 (weights=None: nothing is downloaded; its own stem
  rescales 0..255 inputs), trained briefly on scikit-learn's digits upscaled to 32x32x3 with pixels in
  0..255. Swish activations and squeeze-and-excitation gates through ~240 layers each add a little
  int8 error.

Seeded, cached on disk like the collapse fixtures (`ensure`, <cache>/efficientnet-v1/<name>/model.keras
+ data.npz with x, y for evaluation and the training inputs as x_calib; no overlap).

Run by hand to build it (timed) and check it with the public converter and the plain LiteRT interpreter:
    python tests/efficientnet_fixture.py [--cache DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # model_fixtures, run as a script too

import model_fixtures as M  # noqa: E402

VERSION = 1
FIXTURES = ("efficientnet_digits",)
EPOCHS = 3


def digits_rgb32():
    """(x_train, x_eval, y_train, y_eval): digits upscaled to 32x32x3, pixels 0..255 (float32)."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    img = np.kron(x.reshape(-1, 8, 8) / 16.0 * 255.0, np.ones((4, 4)))  # 32x32, as mobilenet_offset
    img = np.repeat(img[..., None], 3, axis=-1)
    return M.split(img.astype(np.float32), y.astype(np.int64))


def efficientnet():
    """The seeded EfficientNetB0, compiled but not trained."""
    import keras

    M.seed()
    model = keras.applications.EfficientNetB0(weights=None, input_shape=(32, 32, 3), classes=10)
    for layer in model.layers:  # brief training: let batch-norm statistics follow quickly
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = 0.9
    model.compile(keras.optimizers.Adam(2e-3), "sparse_categorical_crossentropy")
    return model


def build_efficientnet_digits(folder: Path):
    x_tr, x_te, y_tr, y_te = digits_rgb32()
    model = efficientnet()
    model.fit(x_tr, y_tr, epochs=EPOCHS, batch_size=M.BATCH_SIZE, verbose=0)
    return M.save(folder, model, x_te, y_te, x_tr)


BUILDERS = {"efficientnet_digits": build_efficientnet_digits}


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model and data of fixture `name`, built first if needed (once across processes)."""
    return M.ensure(cache_root, f"efficientnet-v{VERSION}", name, BUILDERS[name])


def check(model_path, data_path, calibration: int = 100) -> dict:
    """Float, full-integer (Optimize.DEFAULT + representative data: float I/O, as quant-report's fiq) and
    16x8 accuracy with the public TFLiteConverter and the plain LiteRT interpreter (tests/independent.py),
    sizes in bytes, and the TFLite op counts."""
    import keras
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    import independent

    data = np.load(data_path)
    x, y, x_calib = data["x"], data["y"], data["x_calib"][:calibration]
    model = keras.saving.load_model(str(model_path), compile=False)

    def rep():
        for i in range(len(x_calib)):
            yield [x_calib[i : i + 1]]

    def convert(variant):
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        if variant != "float":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.representative_dataset = rep
        if variant == "int16x8":
            converter.target_spec.supported_ops = [
                tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        return bytes(converter.convert())

    out = {"keras_accuracy": float(np.mean(model.predict(x, verbose=0).argmax(axis=1) == y)),
           "keras_layers": len(model.layers), "eval_samples": len(x), "calibration_samples": len(x_calib)}
    for variant in ("float", "fiq", "int16x8"):
        flat = convert(variant)
        ops = [op["op_name"] for op in Interpreter(model_content=flat)._get_ops_details()]
        out[variant] = {"accuracy": independent.accuracy(flat, x, y), "bytes": len(flat), "ops": len(ops),
                        "op_types": {name: ops.count(name) for name in sorted(set(ops))}}
    return out


def main(argv=None) -> int:
    import argparse
    import os
    import time

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path,
                        default=Path(os.environ.get("QUANT_REPORT_CACHE") or Path.home() / ".cache" / "quant-report"))
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    model, data = ensure("efficientnet_digits", args.cache)
    print(f"ensure: {time.perf_counter() - t0:.0f} s ({model.parent})")
    t0 = time.perf_counter()
    figures = check(model, data)
    print(f"check: {time.perf_counter() - t0:.0f} s; Keras accuracy {figures['keras_accuracy']:.4f},"
          f" {figures['keras_layers']} Keras layers, {figures['eval_samples']} evaluation samples,"
          f" {figures['calibration_samples']} calibration samples")
    for variant in ("float", "fiq", "int16x8"):
        f = figures[variant]
        print(f"  {variant:8s} accuracy {f['accuracy']:.4f}  {f['bytes'] / 1e6:6.2f} MB  {f['ops']} ops  {f['op_types']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
