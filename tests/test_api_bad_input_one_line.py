"""The Python API's bad input (issue 46): every bad array, every failure of the user's callbacks (the calibration
generator, a dataset, Keras saving the model) and a batch whose type changes is one `QuantReportError` line that
starts with the argument it is about, and nothing is left behind (no output folder, no temporary folder); a
comparison of the two engines' models that cannot be made is recorded as a measurement error, not silently
absent."""

import json
import tempfile
import types
from pathlib import Path

import numpy as np
import pytest

import reporter

FAST = dict(variants=["float"], latency_runs=0, quiet=True)
X = np.random.default_rng(0).random((8, 2)).astype(np.float32)
Y = np.arange(8) % 3


@pytest.fixture
def places(tmp_path, monkeypatch):
    """(out, temporary folder): every temporary file of the run goes into the second, so both can be checked."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return tmp_path / "out", scratch


def _refused(places, model, data, argument: str, **settings) -> str:
    """Runs, expects a QuantReportError of one line naming `argument`, and checks that nothing was left behind."""
    out, scratch = places
    with pytest.raises(reporter.QuantReportError) as caught:
        reporter.run(model, data, out=out, **{**FAST, **settings})
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"{argument}: "), line
    assert not out.exists() or not any(out.iterdir()), sorted(out.rglob("*"))
    left = [p for p in scratch.iterdir() if not p.name.startswith("__autograph_generated_")]  # tf.function's own
    assert not left, sorted(scratch.rglob("*"))
    return line


@pytest.fixture(scope="module")
def tiny():
    import keras

    inputs = keras.Input((2,), name="x")
    return keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(inputs), name="tiny")


# Arrays given in a mapping: refused before TensorFlow is imported (the model path is never read).

def test_a_ragged_list_names_the_data(places, tmp_path):
    line = _refused(places, tmp_path / "none.keras", {"x": [[1, 2], [3]], "y": [0, 1]}, "data")
    assert "'x' is ragged" in line


def test_an_object_array_names_the_data(places, tmp_path):
    x = np.array([np.zeros(2), np.ones(2)], dtype=object)
    line = _refused(places, tmp_path / "none.keras", {"x": x, "y": [0, 1]}, "data")
    assert "'x' is an array of Python objects" in line


@pytest.mark.parametrize("key, value, words", [
    ("x", np.array([["a", "b"]] * 8), "'x' holds <U1 values (text)"),
    ("y", np.array(["cat"] * 8), "'y' holds <U3 values (text)"),
    ("x", np.array(["2024-01-01"] * 8, dtype="datetime64[D]"), "'x' holds datetime64[D] values (dates)"),
    ("x", 3.0, "'x' is a single value"),
])
def test_a_non_numeric_array_names_the_data(places, tmp_path, key, value, words):
    data = {"x": X, "y": Y, key: value}
    assert words in _refused(places, tmp_path / "none.keras", data, "data")


def test_a_dict_of_arrays_by_name_is_refused_per_array(places, tmp_path):
    line = _refused(places, tmp_path / "none.keras", {"x": {"a": X, "b": [[1], [2, 3]]}, "y": Y}, "data")
    assert "'x_b' is ragged" in line


# The user's callbacks.

def _raising_on_third():
    def representative_dataset():
        for i in range(10):
            if i == 2:
                raise ValueError("camera unplugged\nsecond line of the user's message")
            yield [X[i:i + 1]]
    return representative_dataset


def test_a_generator_that_raises_on_its_third_sample(places, tmp_path):
    line = _refused(places, tmp_path / "none.keras", {"x": X, "y": Y}, "calibration",
                    calibration=_raising_on_third())
    assert line == ("calibration: the representative-dataset generator representative_dataset() raised on its 3rd"
                    " sample: ValueError: camera unplugged")


def test_a_generator_whose_call_raises_and_one_that_is_no_iterable(places, tmp_path):
    def representative_dataset(count):  # takes an argument the converter never passes
        yield from ()

    line = _refused(places, tmp_path / "none.keras", {"x": X, "y": Y}, "calibration",
                    calibration=representative_dataset)
    assert "representative_dataset() raised when called: TypeError" in line
    line = _refused(places, tmp_path / "none.keras", {"x": X, "y": Y}, "calibration", calibration=lambda: 42)
    assert "raised when called: TypeError" in line


def test_a_generator_whose_samples_change_type(places, tmp_path):
    def representative_dataset():
        yield [X[:1]]
        yield [X[1:2].astype(np.float64)]

    line = _refused(places, tmp_path / "none.keras", {"x": X, "y": Y}, "calibration",
                    calibration=representative_dataset)
    assert "x_calib is float64 in sample 2 but float32 before" in line


def test_a_keras_model_whose_save_fails_names_the_model_and_the_layer(places):
    import keras

    class NoConfig(keras.layers.Layer):  # an argument Keras cannot write into a config, and no get_config
        def __init__(self, table, **kwargs):
            super().__init__(**kwargs)
            self.table = table

        def call(self, t):
            return t * 2.0

    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(NoConfig(object(), name="lookup")(inputs)))
    line = _refused(places, model, {"x": X, "y": Y}, "model")
    assert "Keras cannot save" in line and "layer 'lookup' (NoConfig) has no working get_config()" in line


def test_a_keras_model_whose_save_raises(places, tiny, monkeypatch):
    def save(*args, **kwargs):
        raise RuntimeError("h5py is broken\nsecond line")

    monkeypatch.setattr(tiny, "save", save)
    line = _refused(places, tiny, {"x": X, "y": Y}, "model")
    assert line.startswith("model: Keras cannot save Functional tiny") and "(RuntimeError: h5py is broken)" in line


def test_a_tf_data_dataset_whose_second_batch_has_another_type(places, tiny):
    """A tf.data pipeline fixes its element types (from_generator casts to its signature), so the change is made
    where the tool reads it: the dataset's NumPy batches."""
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)
    batches = [(X[:4], Y[:4]), (X[4:].astype(np.float64), Y[4:])]
    dataset.as_numpy_iterator = lambda: iter(batches)
    line = _refused(places, tiny, dataset, "data")
    assert "x is float64 in batch 2 but float32 before" in line


def test_a_tf_data_dataset_that_fails_on_its_second_batch(places, tiny):
    import tensorflow as tf

    x = X.copy()
    x[5, 0] = np.nan
    dataset = tf.data.Dataset.from_tensor_slices((x, Y)).map(
        lambda a, b: (tf.debugging.check_numerics(a, "a NaN in the user's data"), b)).batch(4)
    line = _refused(places, tiny, dataset, "data")
    assert "the tf.data.Dataset raised on its 2nd batch: InvalidArgumentError: a NaN in the user's data" in line
    assert "function_node" not in line


def test_data_found_wrong_by_the_run_is_named_as_the_argument(places, tiny):
    """A problem found once the run reads the arrays names `data`, not the temporary folder they were written to."""
    line = _refused(places, tiny, {"x": X, "y": Y[:7]}, "data")
    assert line == "data: 'x' has 8 samples but 'y' has 7"


# The two engines' models compared.

def test_an_engine_pair_that_cannot_be_compared_is_recorded():
    from reporter.core import variants
    from reporter.measure import engines
    from reporter.model.variant import VariantResult

    tf_name, litert_name, _ = variants.ENGINE_PAIRS[0]
    nan = np.full((6, 1), np.nan, np.float32)
    m = types.SimpleNamespace(task=types.SimpleNamespace(classification=False),
                              outputs={variants.FLOAT: np.ones((6, 1), np.float32), tf_name: nan, litert_name: nan})
    results = {name: VariantResult(name=name, status="ok") for name in (variants.FLOAT, tf_name, litert_name)}
    [pair] = engines.pairs(m, results)
    assert pair.output_mse is None
    error = results[litert_name].measurement_errors[engines.MEASUREMENT]
    assert error.startswith(f"output MSE against {variants.short(tf_name)}: ValueError: none of the 6 samples")
    assert not results[tf_name].measurement_errors


@pytest.mark.slow
def test_a_lost_engine_pair_mse_is_in_report_json(regression_files, tmp_path, monkeypatch):
    """A regression model built by both engines; the comparison of their outputs fails (as it does when no sample
    has finite outputs from both): report.json records why, and the report's notices say it."""
    import keras

    from reporter.core import variants
    from reporter.measure import engines
    from reporter.measure import metrics as qmetrics

    def output_error(outputs, reference):
        if outputs is not reference:  # the pair's comparison; float against itself (its variance) still works
            raise ValueError("none of the 60 samples has finite outputs in both this model and float")
        return qmetrics.output_error(outputs, reference)

    monkeypatch.setattr(engines, "qmetrics", types.SimpleNamespace(output_error=output_error))
    tf_name, litert_name, _ = variants.ENGINE_PAIRS[0]
    model_path, data_path = regression_files
    report = reporter.run(keras.saving.load_model(model_path), dict(np.load(data_path)), out=tmp_path, name="pair",
                          variants=[variants.FLOAT, tf_name, litert_name], latency_runs=0, quiet=True)
    stored = json.loads((tmp_path / "pair" / "report.json").read_text())
    [pair] = [p for p in stored["engines"] if p["tf"] == tf_name]
    assert pair["litert"] == litert_name and pair["output_mse"] is None
    litert = next(v for v in stored["variants"] if v["name"] == litert_name)
    assert "none of the 60 samples" in litert["measurement_errors"][engines.MEASUREMENT]
    assert report.variant(litert_name).not_measured(engines.MEASUREMENT)
    assert "none of the 60 samples" in (tmp_path / "pair" / "summary.md").read_text()


def test_a_failed_preload_is_said_and_kept():
    from reporter.pipeline import preload

    log = types.SimpleNamespace(lines=[], write=lambda text: log.lines.append(text), flush=lambda: None)
    preload._import_all(("reporter_no_such_module_46",), log)
    assert "ModuleNotFoundError" in preload.FAILED["reporter_no_such_module_46"]
    assert log.lines == [f"quant-report: preloading reporter_no_such_module_46 failed"
                         f" ({preload.FAILED['reporter_no_such_module_46']}); the code that needs it will say so"
                         " where it is used\n"]
