"""Bad input: one clear line naming the file and the problem, exit code 1, nothing written."""

import numpy as np
import pytest

from conftest import one_error_line, run_cli


def _run(capfd, out, model, data, *extra):
    code = run_cli(model, data, out, *extra)
    err = capfd.readouterr().err
    return code, err


def _assert_clean_error(code, err, out, *needles):
    line = one_error_line(code, err, out)
    for needle in needles:
        assert str(needle) in line, (needle, line)


@pytest.fixture()
def out(tmp_path):
    return tmp_path / "reports"


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def test_missing_model(capfd, tmp_path, out, mlp_files):
    _, data = mlp_files
    code, err = _run(capfd, out, tmp_path / "nope.keras", data)
    _assert_clean_error(code, err, out, "nope.keras", "no such file")


def test_file_that_is_not_a_model(capfd, tmp_path, out, mlp_files):
    _, data = mlp_files
    bad = tmp_path / "corrupt.keras"
    bad.write_bytes(b"this is not a zip archive")
    code, err = _run(capfd, out, bad, data)
    _assert_clean_error(code, err, out, "corrupt.keras", "not a Keras 3 .keras file")


def test_zip_that_is_not_a_keras_model(capfd, tmp_path, out, mlp_files):
    import zipfile

    _, data = mlp_files
    bad = tmp_path / "other.keras"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("hello.txt", "not a model")
    code, err = _run(capfd, out, bad, data)
    _assert_clean_error(code, err, out, "other.keras", "cannot be read as a Keras 3 .keras model")


def test_unsupported_model_format(capfd, tmp_path, out, mlp_files):
    _, data = mlp_files
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"\0")
    code, err = _run(capfd, out, bad, data)
    _assert_clean_error(code, err, out, "model.onnx", "unsupported model format")


def test_folder_that_is_not_a_savedmodel(capfd, tmp_path, out, mlp_files):
    _, data = mlp_files
    folder = tmp_path / "empty_model"
    folder.mkdir()
    code, err = _run(capfd, out, folder, data)
    _assert_clean_error(code, err, out, "empty_model", "saved_model.pb")


@pytest.mark.parametrize("missing", ["x", "y"])
def test_npz_without_x_or_y(capfd, tmp_path, out, mlp_files, missing):
    model, data = mlp_files
    arrays = dict(np.load(data))
    del arrays[missing]
    bad = _npz(tmp_path / "partial.npz", **arrays)
    code, err = _run(capfd, out, model, bad)
    _assert_clean_error(code, err, out, "partial.npz", f"no array '{missing}'")


def test_x_that_does_not_fit_the_model(capfd, tmp_path, out, mlp_files):
    model, data = mlp_files
    d = np.load(data)
    bad = _npz(tmp_path / "wide.npz", x=np.zeros((4, 31), np.float32), y=d["y"][:4])
    code, err = _run(capfd, out, model, bad)
    _assert_clean_error(code, err, out, "wide.npz", "(31,)", "expects (30)")


def test_labels_out_of_range(capfd, tmp_path, out, mlp_files):
    model, data = mlp_files
    d = np.load(data)
    y = d["y"].copy()
    y[0] = 7
    bad = _npz(tmp_path / "labels.npz", x=d["x"], y=y)
    code, err = _run(capfd, out, model, bad)
    _assert_clean_error(code, err, out, "labels.npz", "labels out of range", "2 classes")


def test_empty_data_set(capfd, tmp_path, out, mlp_files):
    model, _ = mlp_files
    bad = _npz(tmp_path / "empty.npz", x=np.zeros((0, 30), np.float32), y=np.zeros((0,), np.int64))
    code, err = _run(capfd, out, model, bad)
    _assert_clean_error(code, err, out, "empty.npz", "empty")


def test_npz_that_is_not_an_archive(capfd, tmp_path, out, mlp_files):
    model, _ = mlp_files
    bad = tmp_path / "garbage.npz"
    bad.write_text("hello")
    code, err = _run(capfd, out, model, bad)
    _assert_clean_error(code, err, out, "garbage.npz", "not an .npz archive")


def test_keras3_lstm_is_explained(capfd, tmp_path, out, mlp_files):
    import keras

    model = keras.Sequential([keras.Input((8, 8)), keras.layers.LSTM(4), keras.layers.UnitNormalization(),
                              keras.layers.Dense(2)])  # a layer its tf_keras twin cannot rebuild
    path = tmp_path / "k3_lstm.keras"
    model.save(path)
    data = _npz(tmp_path / "seq.npz", x=np.zeros((3, 8, 8), np.float32), y=np.array([0, 1, 0]))
    capfd.readouterr()  # TensorFlow's start-up lines from building the model here, not from the tool
    code, err = _run(capfd, out, path, data)
    _assert_clean_error(code, err, out, "k3_lstm.keras", "LSTM", "tf_keras", "batch_size=1")


def test_bad_data_function(capfd, out, mlp_files):
    model, _ = mlp_files
    code, err = _run(capfd, out, model, "no_such_module_xyz:load")
    _assert_clean_error(code, err, out, "no_such_module_xyz:load", "cannot import")


@pytest.mark.slow  # converts the model for the first, good run
def test_failed_run_keeps_an_earlier_report(capfd, tmp_path, mlp_files):
    """A run that fails on bad input leaves a previous report of the same name untouched."""
    model, data = mlp_files
    out = tmp_path / "reports"
    assert run_cli(model, data, out, "--variants", "float", name="m", latency_runs=2) == 0
    before = (out / "m" / "report.json").read_bytes()
    bad = _npz(tmp_path / "empty.npz", x=np.zeros((0, 30), np.float32), y=np.zeros((0,), np.int64))
    assert run_cli(model, bad, out, name="m") == 1
    assert (out / "m" / "report.json").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["m"]


def test_labels_of_a_two_output_model_must_name_the_output(capfd, tmp_path, out):
    """One `y` for two outputs cannot be matched to either: one line naming the outputs and the arrays."""
    import keras

    inp = keras.Input((4,))
    model = keras.Model(inp, [keras.layers.Dense(2, name="left")(inp), keras.layers.Dense(3, name="right")(inp)])
    path = tmp_path / "two_heads.keras"
    model.save(path)
    data = _npz(tmp_path / "d.npz", x=np.zeros((3, 4), np.float32), y=np.array([0, 1, 0]))
    capfd.readouterr()  # TensorFlow's start-up lines from building the model here, not from the tool
    code, err = _run(capfd, out, path, data)
    _assert_clean_error(code, err, out, "d.npz", "2 outputs: left, right", "y_<output name>", "found y")
