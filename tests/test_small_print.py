"""The report's small print is true: sample counts as used, the selection data named exactly, forced layers
counted, what the search could detect, one time per progress line."""

import dataclasses
import json

import numpy as np
import pytest

from test_findings import base, changed  # noqa: F401 - `base` is a fixture


def test_the_smallest_detectable_change_matches_an_exact_binomial_test():
    """Independently of quant-report's own McNemar: the fewest discordant samples, all one way, that scipy's
    exact two-sided binomial test calls significant, over the selection size."""
    from scipy.stats import binomtest

    from reporter.core.judgement import detectable_share

    fewest = next(k for k in range(1, 50) if binomtest(k, k, 0.5).pvalue < 0.05)
    for n in (5, 50, 200, 500, 4000):
        expected = fewest / n if fewest <= n else None
        assert detectable_share(n) == pytest.approx(expected) if expected else detectable_share(n) is None


def test_when_no_layer_passes_the_report_states_what_the_selection_could_detect(base):
    rec = base.recommendation
    search = dataclasses.replace(rec.search, target_met=False, selection_data=dataclasses.replace(
        rec.search.selection_data, num_samples=200, detectable=0.03))
    nothing = dataclasses.replace(rec, denylisted_nodes=[], selective=None, alternatives=[], search=search)
    text = changed(base, recommendation=nothing).findings.recommendation
    assert "on 200 selection samples" in text and "3.0 points" in text
    assert "helps" not in text  # not measurable is not "no layer helps"
    small = changed(base, recommendation=nothing)
    gap = dataclasses.replace(small.findings.gap, fiq_drop=0.028)
    from reporter.render.words.recommendation import none_measurable as _none_measurable

    assert "below it" in _none_measurable(search, gap) and "2.8 points" in _none_measurable(search, gap)
    assert "below it" not in text  # the fixture's 32-point loss is well above 3 points


def test_forced_op_types_are_named_in_the_recommendation(base):
    rec = dataclasses.replace(base.recommendation, denylisted_ops=["SOFTMAX"])
    found = changed(base, recommendation=rec).findings
    assert "every SOFTMAX op (--keep-float-ops)" in found.recommendation
    assert any("SOFTMAX" in line for line in found.headline)
    only_ops = dataclasses.replace(rec, denylisted_nodes=[])
    text = changed(base, recommendation=only_ops).findings.recommendation
    assert "no layer in float beyond every SOFTMAX op" in text and "0 layers" not in text


@pytest.mark.slow
def test_a_calibration_request_beyond_the_data_and_an_overlapping_selection_are_said(mlp_files, tmp_path, capfd):
    """--calibration-samples beyond x_calib: calibrated on what there is, said once in the terminal and in the
    warnings; the search then chooses on x_calib with the calibration samples in it, and says so."""
    from conftest import run_cli

    model, data = mlp_files
    with np.load(data) as d:
        available = len(d["x_calib"])
    code = run_cli(model, data, tmp_path, "--calibration-samples", "100000", "--keep-float-ops", "SOFTMAX",
                   "--formats", "json,md", "--latency-runs", "0", name="m", quiet=False)
    err = capfd.readouterr().err
    assert code == 0, err
    report = json.loads((tmp_path / "m" / "report.json").read_text())
    assert report["dataset"]["num_calibration"] == available
    assert err.count("asked for 100,000 calibration samples") == 1 and f"the data hold {available:,}" in err
    codes = {w["code"]: w["text"] for w in report["findings"]["warnings"]}
    assert f"holds {available:,}" in codes["calibration_short"]
    sel = report["recommendation"]["search"]["selection_data"]
    assert sel["overlaps_calibration"] and "selection_overlap" in codes
    assert "SOFTMAX op (--keep-float-ops)" in report["findings"]["recommendation"]
    searched = [line for line in err.splitlines() if "searched" in line]
    assert len(searched) == 1 and searched[0].count(" s)") == 1 and " in " not in searched[0].split(":")[0]
