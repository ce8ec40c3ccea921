"""The search on models where FIQ collapses, one per failure mode (tests/collapse_fixtures.py): the
recommended model recovers the gap on the evaluation data, and every layer it keeps in float is
needed, checked with the public TF path and plain LiteRT + scikit-learn (tests/independent.py)."""

import pytest

from conftest import load_report

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def collapse_reports(demo_cache, tmp_path_factory, run_cli):
    import collapse_fixtures

    out = tmp_path_factory.mktemp("collapse_out")
    files = {}
    for name in collapse_fixtures.FIXTURES:
        model, data = collapse_fixtures.ensure(name, demo_cache)
        files[name] = (model, data)
        assert run_cli(model, data, out, "--formats", "json,md", "--variants", "float,fiq", name=name,
                       latency_runs=3) == 0, name
    return out, files


@pytest.mark.parametrize("name", ["wine_offset", "outlier_channel", "rule_worse", "mobilenet_offset"])
def test_the_recommended_model_recovers_the_gap_with_needed_layers_only(collapse_reports, name):
    from independent import check_recommendation

    out, files = collapse_reports
    report = load_report(out / name)
    rec = report.recommendation
    assert rec.gap.status == "recovered", rec.gap
    acc = check_recommendation(report, out / name, *files[name])
    assert acc["float"] - acc["fiq"] >= 0.2  # the fixture does collapse


def test_outlier_channel_keeps_producer_and_consumer_together(collapse_reports):
    out, _ = collapse_reports
    report = load_report(out / "outlier_channel")
    kept = [layer for layer in report.layers if layer.tensor_name in report.recommendation.denylisted_nodes]
    assert len(kept) == 2
    producer, consumer = kept
    flow_names = {layer.tensor_name for layer in report.layers}
    assert producer.range > 10 * consumer.range and producer.tensor_name in flow_names


def test_the_rule_makes_fiq_worse_and_the_report_says_so(collapse_reports):
    out, _ = collapse_reports
    report = load_report(out / "rule_worse")
    rule = report.recommendation.rule
    assert rule.selective.metrics.accuracy < report.variant("fiq").metrics.accuracy
    assert rule.accuracy_gap_recovered < 0
    from reporter.render.view import ReportView

    text = ReportView(report).rule_comparison
    assert f"{rule.accuracy_gap_recovered * 100:.0f} % of the gap" in text.replace("−", "-")


def test_deep_model_is_searched_within_its_budget(collapse_reports):
    """150+ Keras layers (about 65 TFLite ops once batch norms and activations are fused)."""
    import keras

    out, files = collapse_reports
    model = keras.saving.load_model(files["mobilenet_offset"][0], compile=False)
    assert sum(len(layer.layers) if hasattr(layer, "layers") else 1 for layer in model.layers) >= 100
    report = load_report(out / "mobilenet_offset")
    assert len(report.layers) >= 50
    search = report.recommendation.search
    assert search.evaluations <= search.budget
    assert len(report.recommendation.denylisted_nodes) <= 6


def test_deep_model_report_is_readable(collapse_reports):
    """A 100+-layer model: the story first, the layers that matter first, the full table after."""
    from story import check_story

    from reporter.render.view import ReportView

    out, _ = collapse_reports
    report = load_report(out / "mobilenet_offset")
    texts = check_story(report)
    view = ReportView(report)
    assert view.layers_truncated and len(view.top_layer_rows) == view.TOP_LAYERS
    kept = set(report.recommendation.denylisted_nodes)
    assert kept <= {row.layer.tensor_name for row in view.top_layer_rows}  # the kept layers are among the top
    assert 'id="layer-table-full"' in texts["html"] and texts["pdf_pages"] <= 11
    assert "full table is in report.html" in texts["pdf"]  # the PDF points to it instead
    culprit_layers = {c.layer for c in report.findings.culprits if c.layer}
    assert culprit_layers, report.findings.culprits  # the collapse is blamed on named layers
    headline = " ".join(report.findings.headline)
    assert all(layer in headline for layer in culprit_layers), (culprit_layers, headline)
