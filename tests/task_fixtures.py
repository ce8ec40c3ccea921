"""Small models for the kinds of task users have beyond softmax classifiers, for tests/test_tasks.py.

Each is seeded, trained in a few seconds on data that ships with scikit-learn, and cached on disk
(`ensure`, like tests/collapse_fixtures.py) as model.keras + data.npz in the format
reporter.run.inputs.load_data reads: x, y (evaluation) and x_calib (the training inputs, no overlap).

* binary_sigmoid: breast cancer, one sigmoid output unit, 0/1 labels. The raw features are normalized
  inside the model (like the demo's breast_cancer_mlp), so FIQ collapses to about the majority class
  (a drop near 33 points, below 50): the search, the selective and the rule model all run on it.
* regression: diabetes, one linear output unit, float targets.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

VERSION = 2
FIXTURES = ("binary_sigmoid", "regression")


def _seed():
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    tf.config.experimental.enable_op_determinism()


def _split(x, y, stratify):
    from sklearn.model_selection import train_test_split

    return train_test_split(x, y, test_size=0.3, random_state=0, stratify=y if stratify else None)


def build_binary_sigmoid(folder: Path):
    import keras
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    x_tr, x_te, y_tr, y_te = _split(x.astype(np.float32), y.astype(np.int64), stratify=True)
    x64 = x_tr.astype(np.float64)  # float32 sums over values in the thousands drift
    _seed()
    model = keras.Sequential([
        keras.Input((x.shape[1],)),
        keras.layers.Normalization(mean=x64.mean(axis=0), variance=x64.var(axis=0)),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(1, activation="sigmoid"),
    ], name="binary_sigmoid")
    model.compile(keras.optimizers.Adam(1e-2), "binary_crossentropy")
    model.fit(x_tr, y_tr.astype(np.float32), epochs=20, batch_size=32, verbose=0)
    return _save(folder, model, x_te, y_te, x_tr)


def build_regression(folder: Path):
    import keras
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    x = (x / x.std(axis=0)).astype(np.float32)  # the features ship centred, with a tiny spread
    x_tr, x_te, y_tr, y_te = _split(x, y.astype(np.float32), stratify=False)
    _seed()
    model = keras.Sequential([
        keras.Input((x.shape[1],)),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(1),
    ], name="regression")
    model.compile(keras.optimizers.Adam(5e-2), "mse")
    model.fit(x_tr, y_tr, epochs=30, batch_size=32, verbose=0)
    return _save(folder, model, x_te, y_te, x_tr)


BUILDERS = {"binary_sigmoid": build_binary_sigmoid, "regression": build_regression}


def _save(folder: Path, model, x_eval, y_eval, x_calib):
    path = folder / "model.keras"
    model.save(path)
    data = folder / "data.npz"
    np.savez(data, x=x_eval.astype(np.float32), y=y_eval, x_calib=x_calib.astype(np.float32))
    return path, data


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model and data of fixture `name`, built first if needed (once across processes)."""
    from reporter.run.demo import cached

    final = Path(cache_root) / f"tasks-v{VERSION}" / name
    cached(final, lambda tmp: (BUILDERS[name](tmp), "ok\n")[1])
    return final / "model.keras", final / "data.npz"
