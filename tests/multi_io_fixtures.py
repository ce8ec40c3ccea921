"""Models with several inputs fed by name, and integer (token or category id) inputs, for the tests of
multi-input support (tests/test_multi_input.py).

Each is seeded, trained in seconds on data that ships with scikit-learn, and cached on disk like the
other fixtures (`ensure`). Data follow the tool's conventions: one input: `x` (evaluation) and
`x_calib` (training inputs); several inputs: `x_<input name>` and `x_calib_<input name>` per input;
labels `y`. Evaluation data and calibration (training) inputs never overlap. Integer inputs are saved
as int32.

* wide_deep: inputs `numeric` (wine's 13 raw features, alcohol shifted by +1000, through a
  Normalization) and `category` (int32 id of ash, a weak feature, binned into 10 quantiles,
  through an Embedding); concatenated, Dense 32-16, softmax. Full-integer quantization collapses on the
  numeric branch (the quantized input cannot resolve the small features next to ~1000); keeping that
  branch's normalization SUB/MUL in float fixes it.
* token_ids: input `tokens`, 64 int32 token ids per sample (digits' pixel value 0..16 at position p is
  token 17 * p + value, vocabulary 1088: a bag of (position, value) words) into
  Embedding -> GlobalAveragePooling1D -> Dense softmax.
* order_differs: float inputs `zeta` (wine's first 4 standardized features) then `alpha` (the other 9):
  the Keras order is the reverse of the sorted signature order and the shapes differ, so a positional
  mix-up fails loudly.
* two_input_tflite: a float model.tflite (converted without optimizations) of a two-input float model
  on breast cancer (inputs `worst` = the 10 "worst" features, then `mean` = the other 20, standardized).
* oov_ids: the token_ids model with evaluation data in which some samples hold ids beyond the
  vocabulary: the float model cannot run on them.

Models with several outputs (tests/test_multi_output.py) save their labels per output as
`y_<output name>` (Keras output names, `model.output_names`, in the Keras output order):

* two_heads: digits (8x8 pixels / 16, flattened to 64 floats, input `x`) -> shared Dense 32-16 ->
  outputs `digit` (10-way softmax, labels `y_digit`) and `is_even` (one sigmoid unit, labels
  `y_is_even`, 1 when the digit is even). Full-integer quantization stays close to float on both heads.
* two_heads_collapse: wine's 13 raw features with alcohol shifted by +1000 (one float input `x`) through
  a Normalization -> shared Dense 32-16 -> outputs `cultivar` (3-way softmax, `y_cultivar`) and
  `high_alcohol` (one sigmoid unit, `y_high_alcohol`: alcohol above the training split's median).
  Full-integer quantization collapses (the quantized input cannot resolve the features next to ~1000 and
  ~1,700); keeping the normalization's SUB/MUL in float fixes both heads.
* unlabelled_head: the two_heads model with only `y_digit`: the `is_even` head has no labels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
FIXTURES = ("wide_deep", "token_ids", "order_differs", "two_input_tflite", "oov_ids", "two_heads",
            "two_heads_collapse", "unlabelled_head")
TOKEN_VALUES = 17  # digits' pixel values 0..16
SEQUENCE_LENGTH = 64
VOCABULARY = TOKEN_VALUES * SEQUENCE_LENGTH
OOV_SAMPLES = 20  # evaluation samples of oov_ids whose ids are shifted beyond the vocabulary

# The model file in the fixture's folder, where it is not model.keras.
MODEL_FILES = {"two_input_tflite": "model.tflite"}
# Each fixture's inputs in the Keras model's order: name -> dtype.
INPUTS = {
    "wide_deep": {"numeric": "float32", "category": "int32"},
    "token_ids": {"tokens": "int32"},
    "order_differs": {"zeta": "float32", "alpha": "float32"},
    "two_input_tflite": {"worst": "float32", "mean": "float32"},
    "oov_ids": {"tokens": "int32"},
    "two_heads": {"x": "float32"},
    "two_heads_collapse": {"x": "float32"},
    "unlabelled_head": {"x": "float32"},
}
# The models with several outputs: output name -> (task, num_classes), in the Keras output order (signature
# outputs output_0, output_1, ...). A sigmoid head is "binary" with 2 classes.
OUTPUTS = {
    "two_heads": {"digit": ("classification", 10), "is_even": ("binary", 2)},
    "two_heads_collapse": {"cultivar": ("classification", 3), "high_alcohol": ("binary", 2)},
    "unlabelled_head": {"digit": ("classification", 10), "is_even": ("binary", 2)},
}
# The outputs whose labels the fixture's data.npz holds (y_<name>).
LABELLED = {
    "two_heads": ("digit", "is_even"),
    "two_heads_collapse": ("cultivar", "high_alcohol"),
    "unlabelled_head": ("digit",),
}
TWO_HEADS_COLLAPSE_OFFSET = 1000.0  # alcohol 11..15 becomes 1011..1015, as in the demo's wine_wide_deep


def save(folder: Path, model, x_eval: dict, y_eval, x_calib: dict) -> tuple[Path, Path]:
    """model.keras and data.npz in `folder`: one input as `x`/`x_calib`, several as `x_<name>` and
    `x_calib_<name>`; integer inputs stay int32, the others become float32."""
    path = folder / "model.keras"
    model.save(path)
    return path, save_data(folder / "data.npz", x_eval, y_eval, x_calib)


def save_data(path: Path, x_eval: dict, y_eval, x_calib: dict) -> Path:
    def typed(a):
        a = np.asarray(a)
        return a.astype(np.int32) if np.issubdtype(a.dtype, np.integer) else a.astype(np.float32)

    if len(x_eval) == 1:
        (name,) = x_eval
        arrays = {"x": typed(x_eval[name]), "x_calib": typed(x_calib[name])}
    else:
        arrays = {f"x_{n}": typed(a) for n, a in x_eval.items()}
        arrays.update({f"x_calib_{n}": typed(a) for n, a in x_calib.items()})
    np.savez(path, y=np.asarray(y_eval), **arrays)
    return path


def _split_columns(columns: dict, y):
    """A seeded stratified split of several aligned arrays: ({name: train}, {name: eval}, y_tr, y_te)."""
    idx_tr, idx_te, y_tr, y_te = M.split(np.arange(len(y)), y.astype(np.int64))
    return ({n: a[idx_tr] for n, a in columns.items()}, {n: a[idx_te] for n, a in columns.items()},
            y_tr, y_te)


def _train(model, x: dict, y, learning_rate: float, epochs: int):
    return M.train(model, x, y, "sparse_categorical_crossentropy", learning_rate, epochs)


def build_wide_deep(folder: Path):
    """The demo's wine_wide_deep (reporter.pipeline.demo.train_wine_wide_deep), under the fixture's file names."""
    from reporter.pipeline import demo

    model, data = demo.train_wine_wide_deep(folder)
    return model.rename(folder / "model.keras"), data.rename(folder / "data.npz")


def _digit_tokens():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    tokens = x.astype(np.int32) + TOKEN_VALUES * np.arange(SEQUENCE_LENGTH, dtype=np.int32)
    return tokens, y


def _token_model(x_tr, y_tr):
    import keras

    M.seed()
    inp = keras.Input((SEQUENCE_LENGTH,), dtype="int32", name="tokens")
    h = keras.layers.Embedding(VOCABULARY, 16)(inp)
    h = keras.layers.GlobalAveragePooling1D()(h)
    out = keras.layers.Dense(10, activation="softmax")(h)
    model = keras.Model(inp, out, name="token_ids")
    return _train(model, x_tr, y_tr, 1e-2, 30)


def build_token_ids(folder: Path):
    tokens, y = _digit_tokens()
    x_tr, x_te, y_tr, y_te = _split_columns({"tokens": tokens}, y)
    model = _token_model(x_tr["tokens"], y_tr)
    return save(folder, model, x_te, y_te, x_tr)


def build_oov_ids(folder: Path):
    tokens, y = _digit_tokens()
    x_tr, x_te, y_tr, y_te = _split_columns({"tokens": tokens}, y)
    model = _token_model(x_tr["tokens"], y_tr)
    bad = x_te["tokens"].copy()
    bad[:OOV_SAMPLES] += VOCABULARY  # ids VOCABULARY .. 2 * VOCABULARY - 1: beyond the Embedding's table
    return save(folder, model, {"tokens": bad}, y_te, x_tr)


def _standardized(x, y):
    """Features standardized with the training split's mean and deviation (the split is the one used
    later, so the evaluation data play no part)."""
    idx_tr, _, _, _ = M.split(np.arange(len(y)), y.astype(np.int64))
    mean, std = x[idx_tr].mean(axis=0), x[idx_tr].std(axis=0)
    return (x - mean) / std


def _two_input_mlp(first: tuple[str, int], second: tuple[str, int], classes: int, name: str):
    import keras

    M.seed()
    a = keras.Input((first[1],), name=first[0])
    b = keras.Input((second[1],), name=second[0])
    h = keras.layers.Concatenate()([keras.layers.Dense(8, activation="relu")(a),
                                    keras.layers.Dense(8, activation="relu")(b)])
    h = keras.layers.Dense(16, activation="relu")(h)
    out = keras.layers.Dense(classes, activation="softmax")(h)
    return keras.Model([a, b], out, name=name)


def build_order_differs(folder: Path):
    from sklearn.datasets import load_wine

    x, y = load_wine(return_X_y=True)
    x = _standardized(x, y).astype(np.float32)
    x_tr, x_te, y_tr, y_te = _split_columns({"zeta": x[:, :4], "alpha": x[:, 4:]}, y)
    model = _two_input_mlp(("zeta", 4), ("alpha", 9), 3, "order_differs")
    _train(model, x_tr, y_tr, 1e-2, 40)
    return save(folder, model, x_te, y_te, x_tr)


def build_two_input_tflite(folder: Path):
    import tensorflow as tf
    from sklearn.datasets import load_breast_cancer

    x, y = load_breast_cancer(return_X_y=True)
    x = _standardized(x, y).astype(np.float32)
    x_tr, x_te, y_tr, y_te = _split_columns({"worst": x[:, 20:], "mean": x[:, :20]}, y)
    model = _two_input_mlp(("worst", 10), ("mean", 20), 2, "two_input")
    _train(model, x_tr, y_tr, 1e-2, 40)
    (folder / "model.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    return folder / "model.tflite", save_data(folder / "data.npz", x_te, y_te, x_tr)


def save_heads(folder: Path, model, x_eval, labels: dict, x_calib) -> tuple[Path, Path]:
    """model.keras and data.npz for a model with one float input and several outputs: `x`, `x_calib`
    (float32) and `y_<output name>` (int64) for each entry of `labels`."""
    path = folder / "model.keras"
    model.save(path)
    data = folder / "data.npz"
    np.savez(data, x=np.asarray(x_eval, np.float32), x_calib=np.asarray(x_calib, np.float32),
             **{f"y_{n}": np.asarray(a, np.int64) for n, a in labels.items()})
    return path, data


def _two_head_model(n_inputs: int, classes: tuple[str, int], binary: str, name: str, normalize_with=None):
    """A seeded functional MLP: one float input `x` [-> Normalization of `normalize_with`] -> Dense 32-16
    (shared) -> a softmax head `classes[0]` of `classes[1]` units, then a sigmoid head `binary` of one unit."""
    import keras

    M.seed()
    inp = keras.Input((n_inputs,), name="x")
    h = M.normalization(normalize_with)(inp) if normalize_with is not None else inp
    h = keras.layers.Dense(32, activation="relu")(h)
    h = keras.layers.Dense(16, activation="relu")(h)
    soft = keras.layers.Dense(classes[1], activation="softmax", name=classes[0])(h)
    sig = keras.layers.Dense(1, activation="sigmoid", name=binary)(h)
    return keras.Model(inp, [soft, sig], name=name)


def _train_heads(model, x, labels: dict, softmax: str, sigmoid: str, learning_rate: float, epochs: int):
    """Adam at `learning_rate`, sparse categorical cross-entropy on the softmax head, binary on the
    sigmoid head, batches of M.BATCH_SIZE, silent."""
    import keras

    model.compile(keras.optimizers.Adam(learning_rate),
                  loss={softmax: "sparse_categorical_crossentropy", sigmoid: "binary_crossentropy"})
    model.fit(x, {softmax: labels[softmax], sigmoid: labels[sigmoid].astype(np.float32)[:, None]},
              epochs=epochs, batch_size=M.BATCH_SIZE, verbose=0)
    return model


def _two_heads(folder: Path, labelled: tuple):
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    x_tr, x_te, y_tr, y_te = M.split(x, y.astype(np.int64))
    model = _two_head_model(64, ("digit", 10), "is_even", "two_heads")
    _train_heads(model, x_tr, {"digit": y_tr, "is_even": (y_tr % 2 == 0).astype(np.int64)},
                 "digit", "is_even", 1e-2, 30)
    labels = {"digit": y_te, "is_even": (y_te % 2 == 0).astype(np.int64)}
    return save_heads(folder, model, x_te, {n: labels[n] for n in labelled}, x_tr)


def build_two_heads(folder: Path):
    return _two_heads(folder, LABELLED["two_heads"])


def build_unlabelled_head(folder: Path):
    """The two_heads model (the same seeded build), with labels for `digit` only."""
    return _two_heads(folder, LABELLED["unlabelled_head"])


def build_two_heads_collapse(folder: Path):
    from sklearn.datasets import load_wine

    x, y = load_wine(return_X_y=True)
    x = x.copy()
    x[:, 0] += TWO_HEADS_COLLAPSE_OFFSET
    idx_tr, idx_te, y_tr, y_te = M.split(np.arange(len(y)), y.astype(np.int64))
    median = np.median(x[idx_tr, 0])
    high = (x[:, 0] > median).astype(np.int64)
    model = _two_head_model(13, ("cultivar", 3), "high_alcohol", "two_heads_collapse", normalize_with=x[idx_tr])
    _train_heads(model, x[idx_tr].astype(np.float32), {"cultivar": y_tr, "high_alcohol": high[idx_tr]},
                 "cultivar", "high_alcohol", 1e-3, 120)
    return save_heads(folder, model, x[idx_te], {"cultivar": y_te, "high_alcohol": high[idx_te]}, x[idx_tr])


BUILDERS = {
    "wide_deep": build_wide_deep,
    "token_ids": build_token_ids,
    "order_differs": build_order_differs,
    "two_input_tflite": build_two_input_tflite,
    "oov_ids": build_oov_ids,
    "two_heads": build_two_heads,
    "two_heads_collapse": build_two_heads_collapse,
    "unlabelled_head": build_unlabelled_head,
}


def ensure(name: str, cache_root) -> tuple[Path, Path]:
    """The cached model (model.keras, or model.tflite for two_input_tflite) and data.npz of fixture
    `name`, built first if needed (once across processes)."""
    model, data = M.ensure(cache_root, f"multi-io-v{VERSION}", name, BUILDERS[name])
    return model.with_name(MODEL_FILES.get(name, model.name)), data


def eval_inputs(data, names) -> dict:
    """The evaluation inputs of a loaded data.npz keyed by input name (`names`: the model's inputs)."""
    if "x" in data.files and len(names) == 1:
        return {names[0]: data["x"]}
    return {n: data[f"x_{n}"] for n in names}


def calib_inputs(data, names) -> dict:
    """The calibration inputs of a loaded data.npz keyed by input name (the evaluation ones if absent)."""
    if "x" in data.files and len(names) == 1:
        return {names[0]: data["x_calib"] if "x_calib" in data.files else data["x"]}
    return {n: data[f"x_calib_{n}"] if f"x_calib_{n}" in data.files else data[f"x_{n}"] for n in names}


def labels(data, name: str) -> dict:
    """The evaluation labels of fixture `name`'s loaded data.npz keyed by output name (labelled heads only)."""
    return {n: data[f"y_{n}"] for n in LABELLED[name]}


def head_predictions(outputs: dict, name: str) -> dict:
    """Predicted classes per head from `independent.signature_predict`'s outputs (keyed `output_<i>`, in
    the Keras output order): argmax of a softmax head, `>= 0.5` for a sigmoid head."""
    assert sorted(outputs) == [f"output_{i}" for i in range(len(OUTPUTS[name]))], sorted(outputs)
    preds = {}
    for i, (head, (task, _)) in enumerate(OUTPUTS[name].items()):
        out = np.asarray(outputs[f"output_{i}"])
        preds[head] = (out.reshape(len(out), -1)[:, 0] >= 0.5).astype(np.int64) if task == "binary" \
            else out.argmax(axis=1)
    return preds
