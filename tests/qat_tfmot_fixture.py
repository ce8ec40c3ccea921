"""A real quantization-aware model: a small tf_keras CNN (conv -> ReLU -> max-pool -> dense) on scikit-learn's 8x8
digits, wrapped by tfmot's quantize_model and fine-tuned, saved as a SavedModel beside its float base. Built in a
process of its own (`python tests/qat_tfmot_fixture.py FOLDER`): importing tfmot sets TF_USE_LEGACY_KERAS, which
would turn tf.keras into tf_keras for every later test of the session."""

import sys
from pathlib import Path

import numpy as np

MODULES = ("tensorflow_model_optimization", "tf_keras", "tree")  # tfmot 0.8.1 and what it needs (CI: --no-deps)
VERSION = "qat-tfmot-v1"


def build(folder: Path):
    import tf_keras as keras
    import tensorflow_model_optimization as tfmot
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x, y = (x / 16.0).astype(np.float32).reshape(-1, 8, 8, 1), y.astype(np.int64)
    keras.utils.set_random_seed(0)
    base = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(8, 3, padding="same"), keras.layers.ReLU(),
                             keras.layers.MaxPooling2D(2), keras.layers.Flatten(), keras.layers.Dense(10)])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    base.compile("adam", loss)
    base.fit(x[:1200], y[:1200], epochs=30, verbose=0)
    base.save(str(folder / "base"))  # a SavedModel folder: the float model QAT starts from
    qat = tfmot.quantization.keras.quantize_model(base)
    qat.compile("adam", loss)
    qat.fit(x[:1200], y[:1200], epochs=3, verbose=0)  # fine-tuned briefly, as tfmot's guide does
    qat.save(str(folder / "qat"))
    np.savez(folder / "data.npz", x=x[1200:], y=y[1200:], x_calib=x[:300])


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    build(target)
    (target / "complete").write_text("ok\n")
