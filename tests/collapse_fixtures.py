"""Models on which full-integer quantization collapses, one per failure mode, for the search's tests.

Each is seeded, trained on data that ships with scikit-learn, and cached on disk like the demo
(`ensure`), with evaluation data (x, y) and training inputs as x_calib (no overlap).

* wine_offset: raw wine features (proline in the hundreds, hue near 1) normalized inside the model:
  the normalization's wide-range tensor wipes out the small features.
* outlier_channel: an MLP on digits where one hidden unit is rescaled by 1000 (and the next layer's
  weights by 1/1000: the float model is unchanged). The wide-range tensor between the first and the
  second Dense must stay float with both of them; either one alone does nothing.
* rule_worse: the same construction on the unbalanced breast-cancer data, with the rescaled unit the
  one that alone predicts worst. FIQ predicts the majority class; the rmse/scale rule keeps the
  consumer in float, which then listens to that one unit only: worse than FIQ.
* mobilenet_offset: a 150-layer MobileNetV2 behind a Normalization, on digits upscaled to 32x32x3 and
  shifted by +1000: the quantized input cannot resolve the pixels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 4
FIXTURES = ("wine_offset", "outlier_channel", "rule_worse", "mobilenet_offset")
SCALE = 1000.0


def _split(x, y):
    return M.split(x.astype(np.float32), y.astype(np.int64))


def _mlp(x_tr, y_tr, n_classes, hidden=(32, 16), normalize=False, epochs=60):
    model = M.mlp(x_tr.shape[1], hidden, n_classes, "softmax", normalize_with=x_tr if normalize else None)
    return M.train(model, x_tr, y_tr, "sparse_categorical_crossentropy", 1e-2 if not normalize else 1e-3, epochs)


def _rescale_unit(model, x, unit=None, worst_for=None):
    """Scales hidden unit `unit` of the first Dense by SCALE and the second Dense's weights from it by
    1/SCALE (ReLU is positive-homogeneous: the float model computes the same function)."""
    import keras

    dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    (w1, b1), (w2, b2) = dense[0].get_weights(), dense[1].get_weights()
    h = np.maximum(x @ w1 + b1, 0)
    if unit is None:
        active = np.where(h.mean(axis=0) > 0)[0]
        if worst_for is None:
            unit = int(active[np.argmax(h[:, active].mean(axis=0))])
        else:  # the unit that, alone, predicts worst through the rest of the model
            unit = int(min(active, key=lambda k: _alone_accuracy(dense, h, k, worst_for)))
    w1, b1, w2 = w1.copy(), b1.copy(), w2.copy()
    w1[:, unit] *= SCALE
    b1[unit] *= SCALE
    w2[unit, :] /= SCALE
    dense[0].set_weights([w1, b1])
    dense[1].set_weights([w2, b2])
    return model


def _alone_accuracy(dense, h, k, y):
    only = np.zeros_like(h)
    only[:, k] = h[:, k]
    out = only
    for i, layer in enumerate(dense[1:]):
        w, b = layer.get_weights()
        out = out @ w + b
        if i < len(dense) - 2:
            out = np.maximum(out, 0)
    return float(np.mean(out.argmax(axis=1) == y))


def build_wine_offset(folder: Path):
    from sklearn.datasets import load_wine

    x, y = load_wine(return_X_y=True)
    x_tr, x_te, y_tr, y_te = _split(x, y)
    model = _mlp(x_tr, y_tr, 3, normalize=True, epochs=80)
    return M.save(folder, model, x_te, y_te, x_tr)


def build_outlier_channel(folder: Path):
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, y_te = _split(x / 16.0, y)
    model = _rescale_unit(_mlp(x_tr, y_tr, 10, epochs=30), x_tr)
    return M.save(folder, model, x_te, y_te, x_tr)


def build_rule_worse(folder: Path):
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    x, y = load_breast_cancer(return_X_y=True)
    x = StandardScaler().fit_transform(x)  # features already scaled: the problem is the outlier unit
    x_tr, x_te, y_tr, y_te = _split(x, y)
    model = _rescale_unit(_mlp(x_tr, y_tr, 2, epochs=40), x_tr, worst_for=y_tr)
    return M.save(folder, model, x_te, y_te, x_tr)


def build_mobilenet_offset(folder: Path):
    import keras
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    img = np.kron(x.reshape(-1, 8, 8) / 16.0, np.ones((4, 4)))  # 32x32
    img = np.repeat(img[..., None], 3, axis=-1) + 1000.0  # an offset the model removes itself
    x_tr, x_te, y_tr, y_te = _split(img, y)
    M.seed()
    backbone = keras.applications.MobileNetV2(weights=None, alpha=0.35, input_shape=(32, 32, 3), classes=10)
    for layer in backbone.layers:  # brief training: let batch-norm statistics follow quickly
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = 0.9
    model = keras.Sequential([
        keras.Input((32, 32, 3)),
        # float64: float32 sums over 1.3 million values near 1,000 drift (mean 1012, variance 143)
        keras.layers.Normalization(mean=x_tr.astype(np.float64).mean(axis=(0, 1, 2)),
                                   variance=x_tr.astype(np.float64).var(axis=(0, 1, 2))),
        backbone,
    ])
    model.compile(keras.optimizers.Adam(2e-3), "sparse_categorical_crossentropy")
    model.fit(x_tr, y_tr, epochs=8, batch_size=M.BATCH_SIZE, verbose=0)
    return M.save(folder, model, x_te, y_te, x_tr)


BUILDERS = {
    "wine_offset": build_wine_offset,
    "outlier_channel": build_outlier_channel,
    "rule_worse": build_rule_worse,
    "mobilenet_offset": build_mobilenet_offset,
}


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model and data of fixture `name`, built first if needed (once across processes)."""
    return M.ensure(cache_root, f"collapse-v{VERSION}", name, BUILDERS[name])
