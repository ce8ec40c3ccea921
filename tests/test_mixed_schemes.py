"""Mixed schemes: the recommended layers in 16x8 or dynamic range instead of float, built by LiteRT
Quantizer and measured like every other model; checked against models built here with LiteRT
Quantizer's own API."""

import json
import re

import numpy as np
import pytest

@pytest.fixture(scope="module")
def mlp_run(demo_reports):
    folder = demo_reports / "breast_cancer_mlp"
    return folder, json.loads((folder / "report.json").read_text())


def _independent_model(float_model: bytes, x_calib: np.ndarray, layers: list[str], layer_recipe) -> bytes:
    """LiteRT Quantizer called directly: static int8 for the model, `layer_recipe` for each layer (matched by
    its op scope, 'output_tensor_name;')."""
    from ai_edge_litert.interpreter import Interpreter
    from litert_quantizer import quantizer, recipe

    it = Interpreter(model_content=float_model)
    signature, spec = next(iter(it.get_signature_list().items()))
    entries = recipe.static_wi8_ai8()
    for name in layers:
        regex = "^" + re.escape(name + ";") + "$"
        entries += [dict(e, regex=regex) for e in layer_recipe()] if layer_recipe else [
            {"regex": regex, "operation": "*", "algorithm_key": "no_quantize"}]
    q = quantizer.Quantizer(float_model, entries)
    calibration = q.calibrate({signature: [{spec["inputs"][0]: x_calib[i:i + 1]} for i in range(len(x_calib))]})
    return bytes(q.quantize(calibration, enable_progress_report=False).quantized_model)


@pytest.mark.slow  # the demo's run, and models built here
def test_lighter_schemes_for_the_recommended_layers_are_built_measured_and_judged(mlp_run, mlp_files):
    from litert_quantizer import recipe

    from independent import predictions
    from reporter.inputs import data_loading
    from reporter.inputs.settings import RunSettings

    folder, report = mlp_run
    rec = report["recommendation"]
    chosen = rec["denylisted_nodes"]
    assert chosen, "the MLP's FIQ collapses: the recommendation keeps layers in float"
    alternatives = {a["scheme"]: a for a in rec["alternatives"]}
    # TF's converter made the recommended model, so LiteRT's own model with the same float layers is measured
    # too; dynamic range changes none of the normalization's SUB/MUL (no weights): not applicable, no file.
    assert set(alternatives) == {"float", "int16x8", "drq"}
    assert alternatives["drq"]["applicable"] is False and alternatives["drq"]["model"] is None
    assert not (folder / "alt_drq.tflite").exists()

    data = data_loading.load_data(str(mlp_files[1]), RunSettings("", "", "").calibration_samples)
    arrays = np.load(mlp_files[1])
    x, y = arrays["x"], arrays["y"]
    float_model = (folder / "float.tflite").read_bytes()
    for scheme, layer_recipe in (("float", None), ("int16x8", recipe.static_wi8_ai16)):
        alt = alternatives[scheme]
        assert alt["layers"] == chosen and alt["model"]["converter"] == "LiteRT Quantizer"
        built = (folder / f"alt_{scheme}.tflite").read_bytes()
        mine = _independent_model(float_model, data.x_calib.single(), chosen, layer_recipe)
        assert built == mine  # the same recipe, the same calibration: the same model
        accuracy = float(np.mean(predictions(mine, x) == y))
        assert alt["model"]["metrics"]["accuracy"] == pytest.approx(accuracy)
        assert alt["model"]["size_bytes"] == len(mine)

    found = {a["scheme"]: a for a in report["findings"]["alternatives"]}
    sixteen = found["int16x8"]
    # Judged against the recommended model on the same samples, recomputed here from the two files (exact McNemar
    # with scipy): worse when it loses beyond noise, else a lighter fix when smaller, else not lighter.
    from scipy.stats import binomtest

    selective = (folder / "selective.tflite").read_bytes()
    sel_right = predictions(selective, x) == y
    alt_right = predictions((folder / "alt_int16x8.tflite").read_bytes(), x) == y
    sel_only, alt_only = int(np.sum(sel_right & ~alt_right)), int(np.sum(~sel_right & alt_right))
    p = binomtest(alt_only, sel_only + alt_only, 0.5).pvalue if sel_only + alt_only else 1.0
    size_delta = (folder / "alt_int16x8.tflite").stat().st_size - len(selective)
    expected = "worse" if p < 0.05 and sel_only > alt_only else ("lighter" if size_delta < 0 else "not_lighter")
    assert sixteen["status"] == expected, (sel_only, alt_only, p, size_delta)
    assert sixteen["accuracy"] == pytest.approx(float(np.mean(alt_right)), abs=1e-12)
    assert sixteen["vs_recommended"]["p_value"] == pytest.approx(p, rel=1e-9)
    assert sixteen["size_delta_bytes"] == size_delta
    assert found["drq"]["status"] == "not_applicable"
    html = (folder / "report.html").read_text()
    assert "the recommended layers in 16x8 (LiteRT Quantizer)" in html
    assert "Dynamic range for the recommended layers is not applicable" in html


def test_a_lighter_scheme_is_called_a_lighter_fix_only_when_smaller_and_not_worse(fixture_report):
    """The judgement itself, on made-up paired counts: smaller and within noise is a lighter fix; smaller but
    significantly worse is not; within noise but larger is not lighter."""
    import dataclasses

    from reporter.pipeline import conclude

    base = fixture_report
    sel = base.recommendation.selective

    def alt(size_delta, only_sel, only_alt):
        paired = dict(sel.metrics.paired)
        paired["selective"] = dataclasses.replace(next(iter(paired.values())), reference_only=only_sel,
                                                  variant_only=only_alt)
        n = base.dataset.num_eval
        metrics = dataclasses.replace(sel.metrics, paired=paired,
                                      accuracy=sel.metrics.accuracy + (only_alt - only_sel) / n)
        model = dataclasses.replace(sel, name="alt_int16x8", converter="LiteRT Quantizer", metrics=metrics,
                                    size_bytes=sel.size_bytes + size_delta)
        from reporter.model.report import Alternative

        rec = dataclasses.replace(base.recommendation, alternatives=[Alternative("int16x8", [], model)])
        return conclude.findings_of(dataclasses.replace(base, recommendation=rec)).alternatives[0]

    assert alt(-500, 1, 0).status == "lighter"
    assert alt(-500, 30, 0).status == "worse"
    assert alt(+500, 1, 0).status == "not_lighter"
