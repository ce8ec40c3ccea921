"""The other model formats, the optional variants, non-classification outputs and failure isolation."""

import numpy as np
import pytest
from sklearn import metrics as skm

from conftest import load_report

pytestmark = pytest.mark.slow  # every test converts a model


def test_savedmodel_all_variants_and_data_function(tmp_path, monkeypatch, mlp_files, run_cli):
    """A SavedModel folder, every variant, one-hot labels from a module:function data source."""
    import keras

    model_path, data_path = mlp_files
    saved = tmp_path / "mlp_savedmodel"
    keras.saving.load_model(model_path).export(str(saved))
    monkeypatch.setenv("QR_TEST_DATA", str(data_path))
    out = tmp_path / "out"
    code = run_cli(saved, "data_fixture_module:load", out, "--variants", "float,drq,fiq,f16,int16x8,int8_io",
                   "--calibration-samples", "50", latency_runs=3)
    assert code == 0
    report = load_report(out / "mlp_savedmodel")
    assert report.model.format == "saved_model"
    assert report.dataset.calibration_overlaps_eval is True  # no x_calib in the function's data
    assert report.dataset.num_calibration == 50
    by_name = {v.name: v for v in report.variants}
    assert list(by_name) == ["float", "drq", "fiq", "f16", "int16x8", "int8_io"]
    assert all(v.ok for v in by_name.values()), [(v.name, v.error) for v in report.variants]
    assert by_name["int16x8"].tensor_types["int16"] > 0
    assert by_name["f16"].tensor_types["other"] > 0  # float16 weights
    # int8_io: check accuracy against a manual run with quantized input.
    from ai_edge_litert.interpreter import Interpreter

    d = np.load(data_path)
    it = Interpreter(model_path=str(out / "mlp_savedmodel" / "int8_io.tflite"))
    inp, outp = it.get_input_details()[0], it.get_output_details()[0]
    assert inp["dtype"] == np.int8
    scale, zero = inp["quantization"]
    it.resize_tensor_input(inp["index"], [len(d["x"]), 30])
    it.allocate_tensors()
    it.set_tensor(inp["index"], np.clip(np.round(d["x"] / scale + zero), -128, 127).astype(np.int8))
    it.invoke()
    preds = it.get_tensor(outp["index"]).argmax(axis=1)
    assert by_name["int8_io"].metrics.accuracy == pytest.approx(skm.accuracy_score(d["y"], preds))


def test_single_output_model_reports_output_error(tmp_path, run_cli):
    import keras

    keras.utils.set_random_seed(1)
    x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], np.float32)).astype(np.float32)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    model.fit(x, y, epochs=2, verbose=0)
    model.save(tmp_path / "reg.keras")
    np.savez(tmp_path / "reg.npz", x=x, y=y)
    out = tmp_path / "out"
    assert run_cli(tmp_path / "reg.keras", tmp_path / "reg.npz", out, latency_runs=2) == 0
    report = load_report(out / "reg")
    assert report.model.task == "regression" and report.model.num_classes is None
    from ai_edge_litert.interpreter import Interpreter

    def outputs(name):
        it = Interpreter(model_path=str(out / "reg" / f"{name}.tflite"))
        inp = it.get_input_details()[0]
        it.resize_tensor_input(inp["index"], [len(x), 4])
        it.allocate_tensors()
        it.set_tensor(inp["index"], x)
        it.invoke()
        return it.get_tensor(it.get_output_details()[0]["index"]).reshape(-1).astype(np.float64)

    ref = outputs("float")
    fiq = report.variant("fiq")
    assert fiq.metrics is None
    assert fiq.output_error.mse == pytest.approx(np.mean((outputs("fiq") - ref) ** 2))
    assert fiq.output_error.max_abs_error == pytest.approx(np.max(np.abs(outputs("fiq") - ref)))
    # The MSE's scale, and the sentence a reader gets: the share of the float output's variance.
    assert fiq.output_error.float_variance == pytest.approx(np.var(ref))
    share = f"{100 * np.mean((outputs('fiq') - ref) ** 2) / np.var(ref):.2f} % of the float output's variance"
    assert share in " ".join(report.findings.headline)


def test_one_failing_variant_does_not_stop_the_others(tmp_path, monkeypatch, mlp_files, run_cli):
    from reporter.convert import converter as convert

    real = convert.convert

    def flaky(make_converter, variant, x_calib):
        if variant == "drq":
            raise RuntimeError("converter exploded\nsecond line")
        return real(make_converter, variant, x_calib)

    monkeypatch.setattr(convert, "convert", flaky)
    model, data = mlp_files
    out = tmp_path / "out"
    assert run_cli(model, data, out, latency_runs=2) == 0
    report = load_report(out / "breast_cancer_mlp")
    drq = report.variant("drq")
    assert drq.status == "failed" and drq.error == "RuntimeError: converter exploded"
    assert report.variant("fiq").ok and report.variant("float").ok
    assert not (out / "breast_cancer_mlp" / "drq.tflite").exists()
    assert "converter exploded" in (out / "breast_cancer_mlp" / "run.log").read_text()


def test_denylisting_every_layer_is_refused_clearly(tmp_path, mlp_files, run_cli):
    model, data = mlp_files
    out = tmp_path / "out"
    assert run_cli(model, data, out, "--first-layers", "99", "--recommend", "rule", latency_runs=2) == 0
    report = load_report(out / "breast_cancer_mlp")
    assert report.layers and all(layer.suspect for layer in report.layers)
    sel = report.recommendation.selective
    assert sel.status == "failed"
    assert "every debugged layer would stay in float" in sel.error


def test_first_layers_are_marked_with_their_reason(tmp_path, mlp_files, run_cli):
    model, data = mlp_files
    out = tmp_path / "out"
    assert run_cli(model, data, out, "--variants", "float,fiq", "--first-layers", "2", "--recommend", "rule",
                   latency_runs=2) == 0
    report = load_report(out / "breast_cancer_mlp")
    first_two = report.layers[:2]
    assert len(first_two) == 2 and all("one of the first 2 layers" in layer.reasons for layer in first_two)
    assert report.recommendation.denylisted_nodes[:2] == [layer.tensor_name for layer in first_two]
    # With the SUB (huge range) in float as well, the selective model should recover at least as much.
    assert report.recommendation.selective.metrics.accuracy >= report.variant("fiq").metrics.accuracy
