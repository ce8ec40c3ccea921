"""Models whose labels need reading right, for tests/test_labels.py: multi-label (sigmoid) heads with
multi-hot labels, a softmax classifier whose class ids are saved as floats, and labels that contradict the
head (to be refused).

Each is seeded, trained in seconds on data that ships with scikit-learn, and cached on disk like the other
fixtures (`ensure`, model_fixtures.ensure) as model.keras + data.npz: x, y (evaluation) and x_calib (the
training inputs; no overlap with the evaluation data).

* multilabel: digits (8x8 pixels / 16, flattened to 64 floats) -> Dense 32-16 -> 4 sigmoid units, labels
  multi-hot rows (n, 4) of int64 0/1: LABELS = [is_even, is_above_4, is_prime, is_multiple_of_4]. Most
  digits carry several labels (8: even, above 4, multiple of 4), digit 1 none; is_multiple_of_4 (0, 4, 8)
  always comes with is_even, an earlier label, so an argmax over the units never picks it. Full-integer
  quantization stays close to float.
* multilabel_collapse: breast cancer's 30 raw features (values up to ~4,000) through a Normalization ->
  Dense 32-16 -> 4 sigmoid units, labels multi-hot rows (n, 4) of int64 0/1: COLLAPSE_LABELS =
  [malignant, large (mean area above the training split's median), rough (mean texture above it),
  concave (mean concave points above it)]. Full-integer quantization collapses (the int8 input cannot
  resolve the small features next to the areas); keeping the normalization's SUB/MUL in float fixes it.
* float_labels_softmax: breast cancer's raw features through a Normalization -> Dense 32-16 -> 2-way
  softmax (the demo's breast_cancer_mlp, at this module's split), labels saved as float32 0.0 / 1.0.
  FIQ collapses to about the majority class; the normalization in float fixes it.
* multihot_for_softmax: the float_labels_softmax model with labels as (n, 2) int64 rows, the one-hot rows
  of the true classes with every MULTIHOT_EVERY-th row [1, 1]: multi-hot labels for a softmax output.
* fractional_labels: the float_labels_softmax model with float32 labels 0.3 / 0.7 (smoothed classes): not
  class ids, for a softmax output.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
FIXTURES = ("multilabel", "multilabel_collapse", "float_labels_softmax", "multihot_for_softmax",
            "fractional_labels")
LABELS = ("is_even", "is_above_4", "is_prime", "is_multiple_of_4")
COLLAPSE_LABELS = ("malignant", "large", "rough", "concave")
MULTIHOT_EVERY = 5  # multihot_for_softmax: every 5th label row is [1, 1]
FRACTIONAL = (0.3, 0.7)  # fractional_labels: class 0 -> 0.3, class 1 -> 0.7


def digit_labels(digits) -> np.ndarray:
    """(n, 4) int64 0/1: LABELS of each digit."""
    d = np.asarray(digits, np.int64)
    return np.stack([d % 2 == 0, d > 4, np.isin(d, (2, 3, 5, 7)), d % 4 == 0], axis=1).astype(np.int64)


def build_multilabel(folder: Path):
    from sklearn.datasets import load_digits

    x, digits = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    x_tr, x_te, d_tr, d_te = M.split(x, digits.astype(np.int64))
    model = M.mlp(64, (32, 16), len(LABELS), "sigmoid", name="multilabel")
    M.train(model, x_tr, digit_labels(d_tr).astype(np.float32), "binary_crossentropy", 1e-2, epochs=30)
    return M.save(folder, model, x_te, digit_labels(d_te), x_tr)


def _breast_cancer():
    """(x, idx_tr, idx_te, y_tr, y_te): breast cancer's raw float32 features and model_fixtures' split."""
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    x = x.astype(np.float32)
    idx_tr, idx_te, y_tr, y_te = M.split(np.arange(len(y)), y.astype(np.int64))
    return x, idx_tr, idx_te, y_tr, y_te


def collapse_labels(x, malignant, reference) -> np.ndarray:
    """(n, 4) int64 0/1: COLLAPSE_LABELS, the feature thresholds at the medians of `reference` (training
    inputs). Breast cancer's columns: 1 mean texture, 3 mean area, 7 mean concave points."""
    med = np.median(reference, axis=0)
    return np.stack([malignant, x[:, 3] > med[3], x[:, 1] > med[1], x[:, 7] > med[7]], axis=1).astype(np.int64)


def build_multilabel_collapse(folder: Path):
    x, idx_tr, idx_te, y_tr, y_te = _breast_cancer()
    x_tr, x_te = x[idx_tr], x[idx_te]
    l_tr = collapse_labels(x_tr, y_tr == 0, x_tr)
    l_te = collapse_labels(x_te, y_te == 0, x_tr)
    model = M.mlp(30, (32, 16), len(COLLAPSE_LABELS), "sigmoid", normalize_with=x_tr, name="multilabel_collapse")
    M.train(model, x_tr, l_tr.astype(np.float32), "binary_crossentropy", 1e-2, epochs=30)
    return M.save(folder, model, x_te, l_te, x_tr)


def _softmax_model(folder: Path, labels):
    """The breast-cancer softmax MLP, trained on the true classes, saved with `labels(y_te)` as y."""
    x, idx_tr, idx_te, y_tr, y_te = _breast_cancer()
    model = M.mlp(30, (32, 16), 2, "softmax", normalize_with=x[idx_tr], name="float_labels_softmax")
    M.train(model, x[idx_tr], y_tr, "sparse_categorical_crossentropy", 1e-2, epochs=20)
    return M.save(folder, model, x[idx_te], labels(y_te), x[idx_tr])


def build_float_labels_softmax(folder: Path):
    return _softmax_model(folder, lambda y: y.astype(np.float32))


def multihot_rows(y) -> np.ndarray:
    rows = np.eye(2, dtype=np.int64)[y]
    rows[::MULTIHOT_EVERY] = 1
    return rows


def build_multihot_for_softmax(folder: Path):
    return _softmax_model(folder, multihot_rows)


def build_fractional_labels(folder: Path):
    return _softmax_model(folder, lambda y: np.where(y == 1, FRACTIONAL[1], FRACTIONAL[0]).astype(np.float32))


BUILDERS = {
    "multilabel": build_multilabel,
    "multilabel_collapse": build_multilabel_collapse,
    "float_labels_softmax": build_float_labels_softmax,
    "multihot_for_softmax": build_multihot_for_softmax,
    "fractional_labels": build_fractional_labels,
}


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model.keras and data.npz of fixture `name`, built first if needed (once across processes)."""
    return M.ensure(cache_root, f"labels-v{VERSION}", name, BUILDERS[name])
