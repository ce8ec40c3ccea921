"""The search on models where a wide range runs along a chain of tensors (tests/region_fixtures.py): an outlier
channel in a transformer's residual stream, and a channel scaled through a CNN's squeeze-excite block. No single
tensor move fixes them; the recommended model must still win back the gap with needed layers only, checked with
the public TF path and plain LiteRT + scikit-learn (tests/independent.py).

The CLI runs once per fixture, in a child process: LiteRT aborts the process (SIGABRT) on some int8 kernels
with wide-range inputs (SQUARED_DIFFERENCE of a layer norm), and an abort in this process would end the whole
test session instead of failing these tests."""

import subprocess
import sys

import pytest

from conftest import load_report

pytestmark = pytest.mark.slow

FIXTURES = ("outlier_transformer", "wide_chain_cnn")


@pytest.fixture(scope="module")
def region_runs(demo_cache, tmp_path_factory):
    """{name: (model, data, exit code, stderr)} of one `quant-report run` per fixture, in `out`."""
    import region_fixtures

    out = tmp_path_factory.mktemp("regions_out")
    runs = {}
    for name in FIXTURES:
        model, data = region_fixtures.ensure(name, demo_cache)
        proc = subprocess.run(
            [sys.executable, "-m", "reporter", "run", str(model), "--data", str(data), "--out", str(out),
             "--name", name, "--variants", "float,fiq", "--formats", "json", "--latency-runs", "0", "--quiet"],
            capture_output=True, text=True)
        runs[name] = (model, data, proc.returncode, proc.stderr)
    return out, runs


def _report(region_runs, name):
    out, runs = region_runs
    model, data, code, err = runs[name]
    tail = "\n".join(line for line in err.splitlines() if line.strip())[-2000:]
    assert code == 0, f"quant-report run exited with {code} (-6: SIGABRT)\n{tail}"
    return load_report(out / name), out / name, model, data


@pytest.mark.parametrize("name", FIXTURES)
def test_the_recommended_model_recovers_the_gap_with_needed_layers_only(region_runs, name):
    from independent import check_recommendation

    report, folder, model, data = _report(region_runs, name)
    rec = report.recommendation
    assert rec.method == "search", rec.method
    assert rec.denylisted_nodes, rec.summary  # else check_recommendation fails on a missing selective.tflite
    acc = check_recommendation(report, folder, model, data, min_share=0.99)
    assert acc["float"] > 0.8 and acc["fiq"] < 0.3, acc  # the fixture does collapse


@pytest.mark.parametrize("name", FIXTURES)
def test_the_kept_layers_are_a_chain_not_one_tensor(region_runs, name):
    """At least two of the wide tensors stay float with their producer: what no tensor move does."""
    import numpy as np

    import region_fixtures
    from independent import public_selective

    report, _, model, data = _report(region_runs, name)
    x_calib = np.load(data)["x_calib"][: report.dataset.num_calibration]
    wide, _ = region_fixtures.chain(public_selective(model, x_calib, []))
    kept = set(report.recommendation.denylisted_nodes)
    assert kept, report.recommendation.summary
    assert len(kept & set(wide)) >= 2, (sorted(kept), wide)


@pytest.mark.parametrize("name", FIXTURES)
def test_the_report_does_not_give_up(region_runs, name):
    report, folder, _, _ = _report(region_runs, name)
    assert report.recommendation.denylisted_nodes
    for path in folder.iterdir():
        if path.suffix in (".json", ".md", ".html", ".txt"):
            assert "FIQ stays as it is" not in path.read_text(errors="replace"), path.name
    assert "FIQ stays as it is" not in (report.recommendation.summary or "")


@pytest.mark.parametrize("name", FIXTURES)
def test_the_fixture_needs_a_region(demo_cache, name):
    """The fixture itself, without the tool: FIQ collapses, the chain in float wins the gap back, and no single
    tensor move (a wide tensor's producer and consumers in float) wins back even a fifth of it."""
    import region_fixtures

    f = region_fixtures.figures(name, demo_cache)
    gap = f["float"] - f["fiq"]
    assert f["float"] > 0.8 and f["fiq"] < 0.3, f
    assert len(f["wide"]) >= 2, f["wide"]
    assert (f["chain_in_float"] - f["fiq"]) / gap >= 0.99, f
    best = max(f["single_tensor_moves"].values())
    assert (best - f["fiq"]) / gap < 0.2, f["single_tensor_moves"]
