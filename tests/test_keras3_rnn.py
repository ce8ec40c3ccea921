"""Keras 3 recurrent models convert through a tf_keras twin (batch 1, the same weights), proved on the data; a
layer the twin cannot rebuild is one line naming it. Custom Keras classes come in through --custom-objects
MODULE (only with --trust-model); a model needing a class nobody registered is one line naming the class and
the setting.

Every figure is checked against an independent computation: the plain LiteRT interpreter on the written float
.tflite, one sample per invoke with its state reset, scored by scikit-learn; and the proof figure against a twin
built here by hand (tf_keras, batch 1, `set_weights` from the Keras 3 model, as TF_FACTS describes)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sklearn import metrics as skm

import independent
import model_fixtures as M
from conftest import one_error_line, run_cli

VERSION = 1
GRU_VOCAB, GRU_STEPS = 20, 12


# --- fixtures: tiny Keras 3 recurrent classifiers, trained once and cached ------------------------------------
def build_lstm(folder: Path):
    """Digits read as 8 time steps of 8 features, Keras 3 LSTM(16) then a softmax over the 10 digits."""
    import keras
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 8, 8)
    x_tr, x_te, y_tr, y_te = M.split(x, y.astype(np.int64))
    M.seed()
    model = keras.Sequential([keras.Input((8, 8)), keras.layers.LSTM(16),
                              keras.layers.Dense(10, activation="softmax")], name="k3_lstm")
    M.train(model, x_tr, y_tr, "sparse_categorical_crossentropy", 1e-2, epochs=15)
    return M.save(folder, model, x_te, y_te, x_tr)


def _tokens(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Random token ids; class 1 when more than half of a sequence's tokens are below GRU_VOCAB / 2."""
    x = rng.integers(0, GRU_VOCAB, size=(n, GRU_STEPS)).astype(np.int32)
    return x, ((x < GRU_VOCAB // 2).sum(axis=1) > GRU_STEPS // 2).astype(np.int64)


def build_gru(folder: Path):
    """A functional Keras 3 model on token ids: Embedding, GRU(8), Dropout, a softmax over 2 classes."""
    import keras

    rng = np.random.default_rng(M.SEED)
    x_tr, y_tr = _tokens(800, rng)
    x_te, y_te = _tokens(200, rng)
    M.seed()
    inp = keras.Input((GRU_STEPS,), dtype="int32", name="tokens")
    h = keras.layers.Embedding(GRU_VOCAB, 8)(inp)
    h = keras.layers.GRU(8)(h)
    h = keras.layers.Dropout(0.1)(h)
    model = keras.Model(inp, keras.layers.Dense(2, activation="softmax")(h), name="k3_gru")
    M.train(model, x_tr, y_tr, "sparse_categorical_crossentropy", 1e-2, epochs=15)
    path = folder / "model.keras"
    model.save(path)
    data = folder / "data.npz"
    np.savez(data, x=x_te, y=y_te, x_calib=x_tr)  # token ids stay int32
    return path, data


@pytest.fixture(scope="module")
def lstm_files(demo_cache):
    return M.ensure(demo_cache, f"keras3-rnn-v{VERSION}", "lstm", build_lstm)


@pytest.fixture(scope="module")
def gru_files(demo_cache):
    return M.ensure(demo_cache, f"keras3-rnn-v{VERSION}", "gru", build_gru)


# --- independent computations --------------------------------------------------------------------------------
litert_outputs = independent.outputs  # raw outputs, one sample per invoke, token ids as int32


def hand_twin(keras3_model, layers):
    """The twin as a user would build it by hand: the same architecture in tf_keras with batch 1, the Keras 3
    model's weights set on it."""
    import tf_keras

    inp = tf_keras.Input(tuple(keras3_model.inputs[0].shape[1:]), batch_size=1,
                         dtype=keras3_model.inputs[0].dtype)
    h = inp
    for layer in layers:
        h = layer(h)
    twin = tf_keras.Model(inp, h)
    twin.set_weights(keras3_model.get_weights())
    return twin


def check_run(folder: Path, model_path: Path, data_path: Path, twin_layers) -> dict:
    """The report's float accuracy matches LiteRT on the written float .tflite scored by scikit-learn, and its
    proof figure matches a twin built by hand; returns report.json."""
    import keras

    report = json.loads((folder / "report.json").read_text())
    d = np.load(data_path)
    x, y = d["x"], d["y"]
    flt = next(v for v in report["variants"] if v["name"] == "float")
    assert flt["status"] == "ok", flt
    tflite = (folder / "float.tflite").read_bytes()
    out = litert_outputs(tflite, x)
    assert flt["metrics"]["accuracy"] == pytest.approx(skm.accuracy_score(y, out.argmax(axis=1)), abs=1e-9)
    assert flt["metrics"]["accuracy"] > 0.8  # a trained model, so the check can tell a wrong twin

    keras3 = keras.saving.load_model(str(model_path), compile=False)
    n = min(64, len(x))
    want = keras3.predict(x[:n], verbose=0)
    by_hand = hand_twin(keras3, twin_layers).predict(x[:n], batch_size=1, verbose=0)
    model = report["model"]
    assert model["twin_samples"] == n
    assert model["twin_max_abs_difference"] == pytest.approx(float(np.max(np.abs(want - by_hand))), abs=1e-7)
    assert model["twin_max_abs_difference"] < 1e-5
    assert float(np.max(np.abs(want - out[:n]))) < 1e-4  # the converted file computes what the Keras 3 model does
    return report


def _twin_sentence(folder: Path) -> str:
    return (folder / "summary.md").read_text()


# --- tests ---------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_keras3_lstm_measured_through_its_twin(lstm_files, tmp_path):
    import tf_keras

    model, data = lstm_files
    assert run_cli(model, data, tmp_path, "--formats", "json,md", name="lstm", latency_runs=2) == 0
    folder = tmp_path / "lstm"
    report = check_run(folder, model, data, [tf_keras.layers.LSTM(16), tf_keras.layers.Dense(10, "softmax")])
    statuses = {v["name"]: v["status"] for v in report["variants"]}
    assert all(s == "ok" for s in statuses.values()), statuses  # the twin's fused LSTM quantizes, FIQ included
    ops = _ops((folder / "float.tflite").read_bytes())
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in ops, ops
    md = _twin_sentence(folder)
    figure = report["model"]["twin_max_abs_difference"]
    assert "Converted through a tf_keras twin (batch 1)" in md
    assert f"{figure:.2g} on 64 samples" in md, md


@pytest.mark.slow
def test_keras3_gru_measured_through_its_twin(gru_files, tmp_path):
    """Float and DRQ (TensorFlow's calibrator may crash on a GRU's loop: another part of the tool contains that)."""
    import tf_keras

    from reporter.core.variants import DRQ, FLOAT

    model, data = gru_files
    assert run_cli(model, data, tmp_path, "--variants", f"{FLOAT},{DRQ}", "--formats", "json,md", name="gru",
                   latency_runs=2) == 0
    folder = tmp_path / "gru"
    report = check_run(folder, model, data, [tf_keras.layers.Embedding(GRU_VOCAB, 8), tf_keras.layers.GRU(8),
                                             tf_keras.layers.Dropout(0.1), tf_keras.layers.Dense(2, "softmax")])
    drq = next(v for v in report["variants"] if v["name"] == DRQ)
    assert drq["status"] == "ok", drq
    d = np.load(data)
    out = litert_outputs((folder / f"{DRQ}.tflite").read_bytes(), d["x"])
    assert drq["metrics"]["accuracy"] == pytest.approx(skm.accuracy_score(d["y"], out.argmax(axis=1)), abs=1e-9)


def _ops(tflite: bytes) -> set:
    from ai_edge_litert.interpreter import Interpreter

    return {op["op_name"] for op in Interpreter(model_content=tflite)._get_ops_details()}


def test_the_twin_copies_the_weights_and_its_proof_can_fail():
    """A twin with one weight changed is refused by the proof: the figure is not decoration."""
    import keras

    from reporter.inputs import keras_twin

    inp = keras.Input((6, 3), name="seq")
    h = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True))(inp)
    h = keras.layers.SimpleRNN(3)(h)
    model = keras.Model(inp, keras.layers.Dense(2)(h))
    x = np.random.default_rng(0).normal(size=(10, 6, 3)).astype(np.float32)
    twin = keras_twin.build_twin(model)
    assert twin.inputs[0].shape[0] == 1
    proof = keras_twin.prove(model, twin, x)
    assert proof.samples == 10 and proof.max_abs_difference < 1e-5
    weights = twin.get_weights()
    weights[0] = weights[0] + 0.5
    twin.set_weights(weights)
    with pytest.raises(keras_twin.TwinError, match="differ"):
        keras_twin.prove(model, twin, x)


def test_a_layer_the_twin_cannot_rebuild_is_one_line_naming_it(capfd, tmp_path):
    import keras

    model = keras.Sequential([keras.Input((8, 8)), keras.layers.LSTM(4), keras.layers.UnitNormalization(name="unit"),
                              keras.layers.Dense(2)])
    path = tmp_path / "k3_odd.keras"
    model.save(path)
    data = tmp_path / "seq.npz"
    np.savez(data, x=np.zeros((3, 8, 8), np.float32), y=np.array([0, 1, 0]))
    capfd.readouterr()
    out = tmp_path / "out"
    code = run_cli(path, data, out)
    line = one_error_line(code, capfd.readouterr().err, out)
    for word in ("k3_odd.keras", "LSTM", "unit (UnitNormalization)", "tf_keras", "batch_size=1"):
        assert word in line, line


# --- custom objects ------------------------------------------------------------------------------------------
SCALE_MODULE = '''
import keras

@keras.saving.register_keras_serializable(package="demo")
class Scale(keras.layers.Layer):
    def __init__(self, factor=2.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x):
        return x * self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}
'''

SAVE_SCALED = '''
import sys
import numpy as np
import keras
import scale_layers

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.normal(size=(300, 4)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("int64")
model = keras.Sequential([keras.Input((4,)), scale_layers.Scale(3.0), keras.layers.Dense(2, activation="softmax")])
model.compile(keras.optimizers.Adam(0.05), "sparse_categorical_crossentropy")
model.fit(x[:200], y[:200], epochs=10, verbose=0)
model.save(sys.argv[1])
np.savez(sys.argv[2], x=x[200:], y=y[200:], x_calib=x[:200])
'''


@pytest.fixture(scope="module")
def scaled_files(tmp_path_factory):
    """A Keras 3 model with a registered custom layer (Scale, from scale_layers.py beside it), saved by another
    process, so that this one has never imported the class."""
    folder = tmp_path_factory.mktemp("custom")
    (folder / "scale_layers.py").write_text(textwrap.dedent(SCALE_MODULE))
    (folder / "save.py").write_text(textwrap.dedent(SAVE_SCALED))
    subprocess.run([sys.executable, "save.py", "scaled.keras", "scaled.npz"], cwd=folder, check=True,
                   capture_output=True)
    return folder


def test_an_unregistered_custom_class_is_named_with_the_setting(capfd, scaled_files, tmp_path):
    out = tmp_path / "out"
    code = run_cli(scaled_files / "scaled.keras", scaled_files / "scaled.npz", out)
    line = one_error_line(code, capfd.readouterr().err, out)
    for word in ("scaled.keras", "Scale", "--custom-objects", "--trust-model"):
        assert word in line, line
    assert "deserialized" not in line, line


def test_custom_objects_needs_trust_model(capfd, scaled_files, tmp_path):
    out = tmp_path / "out"
    code = run_cli(scaled_files / "scaled.keras", scaled_files / "scaled.npz", out, "--custom-objects",
                   "scale_layers")
    err = capfd.readouterr().err
    assert code == 1, err  # the model's input refused (exit 1), not a malformed command line (2)
    assert "--custom-objects" in err and "--trust-model" in err, err
    assert "Traceback" not in err
    assert not out.exists() or not any(out.rglob("*"))


@pytest.mark.slow
def test_custom_objects_with_trust_model_loads_and_measures(scaled_files, tmp_path, monkeypatch):
    from reporter.core.variants import FLOAT

    monkeypatch.chdir(scaled_files)  # scale_layers.py is looked for in the current folder
    assert run_cli("scaled.keras", "scaled.npz", tmp_path, "--custom-objects", "scale_layers", "--trust-model",
                   "--variants", FLOAT, "--formats", "json", name="scaled", latency_runs=0) == 0
    report = json.loads((tmp_path / "scaled" / "report.json").read_text())
    d = np.load(scaled_files / "scaled.npz")
    out = litert_outputs((tmp_path / "scaled" / "float.tflite").read_bytes(), d["x"])
    flt = report["variants"][0]
    assert flt["metrics"]["accuracy"] == pytest.approx(skm.accuracy_score(d["y"], out.argmax(axis=1)), abs=1e-9)
    assert flt["metrics"]["accuracy"] > 0.9
    assert report["settings"]["custom_objects"] == "scale_layers"


def test_a_custom_objects_module_that_does_not_import_is_one_line(capfd, scaled_files, tmp_path):
    out = tmp_path / "out"
    code = run_cli(scaled_files / "scaled.keras", scaled_files / "scaled.npz", out, "--custom-objects",
                   "no_such_module_xyz", "--trust-model")
    line = one_error_line(code, capfd.readouterr().err, out)
    assert "no_such_module_xyz" in line and "--custom-objects" in line, line


@pytest.mark.slow
def test_the_side_process_exports_the_twin(lstm_files, tmp_path):
    """Big models export on the side (reporter.convert.side calls reporter.inputs.described.export_described): that
    export is the twin's too, and converts to the fused LSTM op."""
    import tensorflow as tf

    from reporter.inputs import described

    model, _ = lstm_files
    folder = described.export_described(str(model), False, str(tmp_path / "saved"))
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in _ops(tf.lite.TFLiteConverter.from_saved_model(folder).convert())


@pytest.fixture(scope="module")
def any_length_files(tmp_path_factory):
    """A Keras 3 model over sequences of any length (Input((None, 8))): Masking, a Bidirectional LSTM, softmax;
    untrained (seeded), which is enough to compare what each runtime computes."""
    import keras
    from sklearn.datasets import load_digits

    folder = tmp_path_factory.mktemp("any_length")
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 8, 8)
    M.seed()
    model = keras.Sequential([keras.Input((None, 8)), keras.layers.Masking(),
                              keras.layers.Bidirectional(keras.layers.LSTM(6)),
                              keras.layers.Dense(10, activation="softmax")])
    model.save(folder / "any.keras")
    np.savez(folder / "any.npz", x=x[:150], y=y[:150], x_calib=x[150:250])
    return folder / "any.keras", folder / "any.npz"


@pytest.mark.slow
def test_a_sequence_of_unknown_length_takes_the_datas(any_length_files, tmp_path):
    """The twin's unknown time dimension is fixed to the data's, so the measured models take whole samples."""
    import keras

    from reporter.core.variants import FLOAT

    model, data = any_length_files
    assert run_cli(model, data, tmp_path, "--variants", FLOAT, "--formats", "json", name="any",
                   latency_runs=0) == 0
    report = json.loads((tmp_path / "any" / "report.json").read_text())
    d = np.load(data)
    tflite = (tmp_path / "any" / "float.tflite").read_bytes()
    out = litert_outputs(tflite, d["x"])
    want = keras.saving.load_model(str(model), compile=False).predict(d["x"], verbose=0)
    assert float(np.max(np.abs(want - out))) < 1e-5
    flt = report["variants"][0]
    assert flt["metrics"]["accuracy"] == pytest.approx(skm.accuracy_score(d["y"], out.argmax(axis=1)), abs=1e-9)
    assert report["model"]["twin_samples"] == 64 and report["model"]["twin_max_abs_difference"] < 1e-5


def test_the_side_process_leaves_an_unknown_length_to_the_run(any_length_files, tmp_path):
    """The side process has no data to size the twin with: it declines, and the run exports the twin itself."""
    from reporter.inputs import described

    model, _ = any_length_files
    with pytest.raises(RuntimeError, match="come from the data"):
        described.export_described(str(model), False, str(tmp_path / "saved"))


@pytest.mark.slow
def test_custom_objects_in_a_batch_is_found_beside_the_batch_file(scaled_files, tmp_path):
    """A batch file's `custom_objects` module is looked for in the batch file's folder (the run's cwd is not)."""
    from reporter.cli import main
    from reporter.core.variants import FLOAT

    (scaled_files / "batch.toml").write_text(textwrap.dedent(f'''
        [defaults]
        variants = ["{FLOAT}"]
        formats = ["json"]
        latency_runs = 0
        trust_model = true
        custom_objects = "scale_layers"

        [[model]]
        name = "scaled"
        path = "scaled.keras"
        data = "scaled.npz"
    '''))
    assert main(["batch", str(scaled_files / "batch.toml"), "--out", str(tmp_path), "--quiet"]) == 0
    report = json.loads((tmp_path / "scaled" / "report.json").read_text())
    assert report["variants"][0]["status"] == "ok" and report["settings"]["custom_objects"] == "scale_layers"


def test_a_twin_that_differs_is_refused_in_one_line_naming_the_model(any_length_files):
    from reporter.core.errors import InputError
    from reporter.inputs import model_loading

    model, data = any_length_files
    loaded = model_loading.load_model(str(model))
    x = np.load(data)["x"]
    loaded.fit_twin(x)
    assert tuple(loaded.keras_model.inputs[0].shape) == (1, 8, 8)  # the data's sequence length, batch 1
    weights = loaded.keras_model.get_weights()
    loaded.keras_model.set_weights([w + 0.3 for w in weights])
    with pytest.raises(InputError) as raised:
        loaded.prove_twin(x)
    text = str(raised.value)
    assert "any.keras" in text and "does not compute what the model does" in text and "LSTM" in text, text
    assert "\n" not in text
