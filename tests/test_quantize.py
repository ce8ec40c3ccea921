"""Calibrate once: the private-API path gives the models the public debugger path gives, the fallback
works when the private API is gone, and names that match no tensor are refused."""

import pytest

from conftest import load_report

pytestmark = pytest.mark.slow  # every test converts a model


@pytest.fixture(scope="module")
def mlp(mlp_files):
    from reporter.inputs import data_loading, model_loading

    model_path, data_path = mlp_files
    data = data_loading.load_data(str(data_path), 100)
    # the one input's arrays, as the seed notebook holds them (the independent checks take plain arrays)
    data.x, data.x_calib = data.x.single().astype("float32"), data.x_calib.single().astype("float32")
    return model_loading.load_model(model_path), data, model_path


def test_calibrate_once_gives_the_public_debuggers_models(mlp):
    from independent import public_selective, without_conversion_metadata
    from reporter.debug.debugger import layer_statistics
    from reporter.convert.quantize import CALIBRATE_ONCE, FiqQuantizer

    from reporter.convert.converter import convert

    model, data, path = mlp
    float_model = convert(model.make_converter, "float", data.x_calib)
    # Calibrated by the converter (a conversion of its own) and from the float variant (the pipeline's way).
    quantizers = (FiqQuantizer(model.make_converter, data.x_calib),
                  FiqQuantizer(model.make_converter, data.x_calib, float_model=float_model))
    assert [q.calibrated_from for q in quantizers] == ["converter", "float model"]
    for q in quantizers:
        assert q.method == CALIBRATE_ONCE and not q.note and q.calibrated_from
        layers, _ = layer_statistics(q, data.x_calib)
        names = [layer.tensor_name for layer in layers]
        for nodes in ([], names[:1], names[:2], [names[3]], []):  # FIQ again after the others: built once, the same
            assert without_conversion_metadata(q.quantize(nodes)) == \
                without_conversion_metadata(public_selective(path, data.x_calib, nodes)), nodes
    # Whole-model verify: error piles up after the broken normalization, so it exceeds the local one.
    assert layers[2].propagated_rmse_over_scale > 10 * layers[2].rmse_over_scale


def test_public_fallback_builds_the_same_models(mlp):
    from reporter.convert.quantize import PUBLIC_DEBUGGER, FiqQuantizer

    model, data, _ = mlp
    fast = FiqQuantizer(model.make_converter, data.x_calib)
    slow = FiqQuantizer(model.make_converter, data.x_calib, force_public=True)
    assert slow.method == PUBLIC_DEBUGGER and "public QuantizationDebugger" in slow.note
    nodes = sorted(n for n in fast.tensor_names if "normalization" in n)[:1]
    assert len(nodes) == 1, sorted(fast.tensor_names)  # one layer in float: not just the plain FIQ model
    assert slow.quantize(nodes) == fast.quantize(nodes)
    assert slow.debug_model(whole_model=True) is None  # the propagated view needs the private API


def test_unknown_names_are_refused_with_the_closest_ones(mlp):
    from reporter.convert.quantize import FiqQuantizer, UnknownNodeError

    model, data, _ = mlp
    q = FiqQuantizer(model.make_converter, data.x_calib)
    real = next(n for n in q.tensor_names if n.endswith("normalization_1/Sub"))
    with pytest.raises(UnknownNodeError, match="closest"):
        q.quantize([real + "x"])


def test_run_falls_back_to_the_public_path_and_says_so(tmp_path, monkeypatch, mlp_files, run_cli):
    from reporter.convert import quantize

    def moved():
        raise AttributeError("module 'tensorflow.lite.python.convert' has no attribute 'mlir_quantize'")

    monkeypatch.setattr(quantize, "_private_mlir_quantize", moved)
    model, data = mlp_files
    out = tmp_path / "out"
    assert run_cli(model, data, out, "--formats", "json,md", "--search-budget", "8", latency_runs=2) == 0
    report = load_report(out / "breast_cancer_mlp")
    rec = report.recommendation
    assert rec.quantizer == "public-debugger" and "not available" in rec.quantizer_note
    assert report.layers and all(layer.propagated_rmse_over_scale is None for layer in report.layers)
    assert rec.selective.ok and rec.search.evaluations <= 8


def test_keep_float_names_and_ops_are_checked_and_kept(tmp_path, mlp_files, capfd, run_cli):
    model, data = mlp_files
    out = tmp_path / "out"

    def run(*extra):
        return run_cli(model, data, out, "--formats", "json", *extra, latency_runs=2)

    assert run("--keep-float", "breast_cancer_mlp_1/normalization_1/Subb") == 1
    err = capfd.readouterr().err
    assert "breast_cancer_mlp.keras" in err and "--keep-float" in err and "normalization_1/Sub'" in err
    assert run("--keep-float-ops", "MEAN") == 1
    assert "no MEAN op" in capfd.readouterr().err
    assert not out.exists() or not any(out.iterdir())  # nothing half-written
    dense = "breast_cancer_mlp_1/dense_3_1/MatMul;breast_cancer_mlp_1/dense_3_1/BiasAdd"
    assert run("--keep-float", dense) == 0
    rec = load_report(out / "breast_cancer_mlp").recommendation
    assert dense in rec.denylisted_nodes and dense in rec.forced_nodes
    assert rec.search.steps and all(dense in step.denylisted_nodes for step in rec.search.steps)
