"""Small models for the kinds of task users have beyond softmax classifiers, for tests/test_tasks.py.

Each is seeded, trained in a few seconds on data that ships with scikit-learn, and cached on disk
(`ensure`, like tests/collapse_fixtures.py) as model.keras + data.npz in the format
reporter.inputs.data_loading.load_data reads: x, y (evaluation) and x_calib (the training inputs, no overlap).

* binary_sigmoid: breast cancer, one sigmoid output unit, 0/1 labels. The raw features are normalized
  inside the model (like the demo's breast_cancer_mlp), so FIQ collapses to about the majority class
  (a drop near 33 points, below 50): the search, the selective and the rule model all run on it.
* regression: diabetes, one linear output unit, float targets.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 2
FIXTURES = ("binary_sigmoid", "regression")


def build_binary_sigmoid(folder: Path):
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    x_tr, x_te, y_tr, y_te = M.split(x.astype(np.float32), y.astype(np.int64))
    model = M.mlp(x.shape[1], (16,), 1, "sigmoid", normalize_with=x_tr, name="binary_sigmoid")
    M.train(model, x_tr, y_tr.astype(np.float32), "binary_crossentropy", 1e-2, epochs=20)
    return M.save(folder, model, x_te, y_te, x_tr)


def build_regression(folder: Path):
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    x = (x / x.std(axis=0)).astype(np.float32)  # the features ship centred, with a tiny spread
    x_tr, x_te, y_tr, y_te = M.split(x, y.astype(np.float32), stratify=False)
    model = M.mlp(x.shape[1], (16,), 1, name="regression")
    M.train(model, x_tr, y_tr, "mse", 5e-2, epochs=30)
    return M.save(folder, model, x_te, y_te, x_tr)


BUILDERS = {"binary_sigmoid": build_binary_sigmoid, "regression": build_regression}


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model and data of fixture `name`, built first if needed (once across processes)."""
    return M.ensure(cache_root, f"tasks-v{VERSION}", name, BUILDERS[name])
