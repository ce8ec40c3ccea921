"""The built-in demo: four small models trained on data that ships with scikit-learn.

1. digits_cnn: a Keras 3 CNN on the 8x8 digits; quantizes well.
2. digits_lstm: a tf_keras LSTM reading each digit's 8 rows as a sequence (fused LSTM ops).
3. breast_cancer_mlp: a Keras 3 MLP whose first layer normalizes raw features; FIQ collapses.
4. wine_wide_deep: two inputs fed by name, raw float features (one of them offset by 1000) through a
   Normalization and an int32 category id through an Embedding; FIQ collapses on the float branch.

Models and data are trained once and cached (QUANT_REPORT_CACHE, else ~/.cache/quant-report), so a
second demo does not retrain. Training is seeded, so numbers repeat run after run on one machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from reporter.core.schema import DEMO_MODELS

DEMO_VERSION = 1
SEED = 0
MODELS = DEMO_MODELS  # the names `demo --models` takes, declared with the settings


def cache_dir() -> Path:
    root = os.environ.get("QUANT_REPORT_CACHE") or Path.home() / ".cache" / "quant-report"
    return Path(root) / f"demo-v{DEMO_VERSION}"


def _split(x, y, test_size):
    from sklearn.model_selection import train_test_split

    return train_test_split(x, y, test_size=test_size, random_state=SEED, stratify=y)


def _seed():
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(SEED)
    tf.config.experimental.enable_op_determinism()


def _digits(shape):
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32).reshape((-1, *shape))
    return _split(x, digits.target.astype(np.int64), 0.25)


def train_digits_cnn(folder: Path) -> tuple[Path, Path]:
    import keras

    x_tr, x_te, y_tr, y_te = _digits((8, 8, 1))
    _seed()
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(10, activation="softmax"),
        ],
        name="digits_cnn",
    )
    _fit(model, x_tr, y_tr)
    return _save(folder, model, "digits_cnn.keras", x_te, y_te, x_tr)


def train_digits_lstm(folder: Path) -> tuple[Path, Path]:
    """tf_keras, because Keras 3 LSTMs do not convert; trained with a dynamic batch, saved with batch 1."""
    import tensorflow as tf
    import tf_keras

    x_tr, x_te, y_tr, y_te = _digits((8, 8))
    tf_keras.utils.set_random_seed(SEED)
    tf.config.experimental.enable_op_determinism()

    def build(batch_size):
        inp = tf_keras.Input((8, 8), batch_size=batch_size)
        h = tf_keras.layers.LSTM(32)(inp)
        out = tf_keras.layers.Dense(10, activation="softmax")(h)
        return tf_keras.Model(inp, out, name="digits_lstm")

    trainer = build(None)
    _fit(trainer, x_tr, y_tr)
    model = build(1)
    model.set_weights(trainer.get_weights())
    return _save(folder, model, "digits_lstm.h5", x_te, y_te, x_tr)


def train_breast_cancer_mlp(folder: Path) -> tuple[Path, Path]:
    """Raw features, normalized inside the model: the SUB/MUL pair that FIQ quantizes badly."""
    import keras
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    x_tr, x_te, y_tr, y_te = _split(x.astype(np.float32), y.astype(np.int64), 0.2)
    _seed()
    model = keras.Sequential(
        [
            keras.Input((30,)),
            keras.layers.Normalization(mean=x_tr.mean(axis=0), variance=x_tr.var(axis=0)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(2, activation="softmax"),
        ],
        name="breast_cancer_mlp",
    )
    _fit(model, x_tr, y_tr)
    return _save(folder, model, "breast_cancer_mlp.keras", x_te, y_te, x_tr)


WIDE_DEEP_OFFSET = 1000.0  # alcohol 11..15 becomes 1011..1015: the normalization's input range is wide
WIDE_DEEP_BINS = 10  # the category id: ash binned into this many quantile bins


def train_wine_wide_deep(folder: Path) -> tuple[Path, Path]:
    """Two inputs of different types, saved by name (x_numeric, x_category): the raw wine features with
    alcohol offset by 1000, normalized inside the model, and ash binned into an int32 id through an
    Embedding. FIQ's int8 input cannot resolve the small features next to ~1000: the numeric branch's
    normalization SUB/MUL must stay float."""
    import keras
    from sklearn.datasets import load_wine
    from sklearn.model_selection import train_test_split

    x, y = load_wine(return_X_y=True)
    numeric = x.copy()
    numeric[:, 0] += WIDE_DEEP_OFFSET
    edges = np.quantile(x[:, 2], np.linspace(0, 1, WIDE_DEEP_BINS + 1)[1:-1])
    category = np.digitize(x[:, 2], edges).astype(np.int32)[:, None]
    idx_tr, idx_te, y_tr, y_te = train_test_split(np.arange(len(y)), y.astype(np.int64), test_size=0.3,
                                                  random_state=SEED, stratify=y)
    x_tr = {"numeric": numeric[idx_tr], "category": category[idx_tr]}
    x_te = {"numeric": numeric[idx_te], "category": category[idx_te]}
    _seed()
    num_in = keras.Input((13,), name="numeric")
    cat_in = keras.Input((1,), dtype="int32", name="category")
    x64 = np.asarray(x_tr["numeric"], np.float64)  # float32 sums over values near 1,000 drift
    h_num = keras.layers.Normalization(mean=x64.mean(axis=0), variance=x64.var(axis=0))(num_in)
    h_cat = keras.layers.Flatten()(keras.layers.Embedding(WIDE_DEEP_BINS, 4)(cat_in))
    h = keras.layers.Concatenate()([h_num, h_cat])
    h = keras.layers.Dense(32, activation="relu")(h)
    h = keras.layers.Dense(16, activation="relu")(h)
    model = keras.Model([num_in, cat_in], keras.layers.Dense(3, activation="softmax")(h), name="wide_deep")
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
    model.fit({"numeric": x_tr["numeric"].astype(np.float32), "category": x_tr["category"]}, y_tr, epochs=80,
              batch_size=32, verbose=0)
    path = folder / "wine_wide_deep.keras"
    model.save(path)
    data = folder / "wine_wide_deep.npz"
    np.savez(data, y=y_te, **{f"x_{n}": a.astype(np.float32 if n == "numeric" else np.int32) for n, a in x_te.items()},
             **{f"x_calib_{n}": a.astype(np.float32 if n == "numeric" else np.int32) for n, a in x_tr.items()})
    return path, data


def _fit(model, x, y):
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=40, batch_size=32, verbose=0)


def _save(folder: Path, model, filename: str, x_eval, y_eval, x_calib) -> tuple[Path, Path]:
    """Saves the model and its data: evaluation on the held-out split, calibration on training
    samples, so the two do not overlap."""
    path = folder / filename
    model.save(path)
    data = folder / (Path(filename).stem + ".npz")
    np.savez(data, x=x_eval, y=y_eval, x_calib=x_calib)
    return path, data


TRAINERS: dict[str, Callable[[Path], tuple[Path, Path]]] = {
    "digits_cnn": train_digits_cnn,
    "digits_lstm": train_digits_lstm,
    "breast_cancer_mlp": train_breast_cancer_mlp,
    "wine_wide_deep": train_wine_wide_deep,
}


def cached(final: Path, build: Callable[[Path], str], say=None) -> str:
    """Builds `final` once: `build(tmp)` fills a temporary folder and returns a note kept in
    `final/complete`, which is what later calls (and other processes) read instead of building.

    A lock file beside `final` makes concurrent callers (test workers, batch workers) wait for one
    build instead of racing; the folder appears whole or not at all."""
    import fcntl

    done = final / "complete"
    if done.is_file():
        return done.read_text()
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.is_file():  # another process built it while this one waited
            return done.read_text()
        if say:
            say()
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        try:
            note = build(tmp)
            (tmp / "complete").write_text(note)
            if final.exists():  # an incomplete leftover
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return done.read_text()


def ensure_model(name: str, say=print, progress=None) -> tuple[Path, Path]:
    """The cached model and data files for demo model `name`, training them first if needed."""
    final = cache_dir() / name

    def train(tmp: Path) -> str:
        with progress.capture(tmp / "train.log") if progress else contextlib.nullcontext():
            model_path, data_path = TRAINERS[name](tmp)
        return f"{model_path.name}\n{data_path.name}\n"

    note = cached(final, train, say=lambda: say(f"[{name}] training the demo model (once; cached in {final})"))
    model_file, data_file = note.split("\n")[:2]
    return final / model_file, final / data_file
