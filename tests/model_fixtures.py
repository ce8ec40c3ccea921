"""What the test fixtures' models share (tests/collapse_fixtures.py, drq_fixtures.py, task_fixtures.py): a
seeded Keras MLP, its training, the train/evaluation split, and the on-disk cache of model.keras + data.npz.

A model is a function of the seed, the layers and the training set here: a change that alters what any
fixture builds must bump that fixture module's VERSION, so that its cached models are built again."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

SEED = 0
BATCH_SIZE = 32


def seed():
    """Python, numpy and TensorFlow seeded, and TensorFlow's ops deterministic: the same model every build."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(SEED)
    tf.config.experimental.enable_op_determinism()


def split(x, y, stratify=True, test_size=0.3):
    """(x_train, x_eval, y_train, y_eval): a seeded split, stratified by the labels unless told not to."""
    from sklearn.model_selection import train_test_split

    return train_test_split(x, y, test_size=test_size, random_state=SEED, stratify=y if stratify else None)


def normalization(x_train):
    """A Keras Normalization with the training inputs' per-feature mean and variance, summed in float64
    (float32 sums over values in the hundreds or thousands drift)."""
    import keras

    x64 = np.asarray(x_train, np.float64)
    return keras.layers.Normalization(mean=x64.mean(axis=0), variance=x64.var(axis=0))


def mlp(n_inputs: int, hidden, outputs: int, activation=None, *, normalize_with=None, names=None, name=None):
    """A seeded Sequential MLP, not yet trained: [Normalization of `normalize_with`], one ReLU Dense per
    entry of `hidden`, then Dense(outputs, activation). `names`: the Dense layers' names, else Keras's own."""
    import keras

    seed()
    names = list(names) if names else [None] * (len(hidden) + 1)
    assert len(names) == len(hidden) + 1, names
    layers = [keras.Input((n_inputs,))]
    if normalize_with is not None:
        layers.append(normalization(normalize_with))
    layers += [keras.layers.Dense(h, activation="relu", name=n) for h, n in zip(hidden, names)]
    layers.append(keras.layers.Dense(outputs, activation=activation, name=names[-1]))
    return keras.Sequential(layers, name=name)


def train(model, x, y, loss: str, learning_rate: float, epochs: int):
    """Adam at `learning_rate`, batches of BATCH_SIZE, silent."""
    import keras

    model.compile(keras.optimizers.Adam(learning_rate), loss)
    model.fit(x, y, epochs=epochs, batch_size=BATCH_SIZE, verbose=0)
    return model


def save(folder: Path, model, x_eval, y_eval, x_calib) -> tuple[Path, Path]:
    """model.keras and data.npz (x, y for evaluation; x_calib, the training inputs) in `folder`."""
    path = folder / "model.keras"
    model.save(path)
    data = folder / "data.npz"
    np.savez(data, x=x_eval.astype(np.float32), y=y_eval, x_calib=x_calib.astype(np.float32))
    return path, data


def ensure(cache_root, family: str, name: str, build: Callable[[Path], object]) -> tuple[Path, Path]:
    """The cached model and data of fixture `name` under `cache_root/family/` (family names the fixture
    module and its VERSION, e.g. collapse-v4), built by `build(folder)` first if needed, once across
    processes (reporter.pipeline.demo.cached: a lock, and the folder appears whole or not at all)."""
    from reporter.pipeline.demo import cached

    final = Path(cache_root) / family / name
    cached(final, lambda tmp: (build(tmp), "ok\n")[1])
    return final / "model.keras", final / "data.npz"
