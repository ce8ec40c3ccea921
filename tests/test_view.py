"""The arrows, colours and number formats the reports use, and the thresholds behind them."""

from pathlib import Path

import pytest

from reporter.core import formatting as fmt
from reporter.core import judgement
from reporter.pipeline.conclude import attach, report_from_json
from reporter.render import view
from reporter.render.views import common


@pytest.mark.parametrize("value,ref,arrow", [
    (5, 5, "~"), (6, 5, "↑"), (10, 5, "↑"), (11, 5, "↑↑"), (1, 0, "↑↑"), (4, 5, "↓"), (2, 5, "↓↓"), (0, 3, "↓↓"),
    (None, 5, ""),
])
def test_count_arrow(value, ref, arrow):
    assert common.count_arrow(value, ref) == arrow


@pytest.mark.parametrize("fiq_median,fiq_p90,runs,overhead", [
    (1.06, 1.07, 50, 0.0),  # 6 % slower, each model's spread 0.01-0.02 ms: beyond noise
    (1.30, 1.80, 50, 0.0),  # 30 % slower, but FIQ's own runs spread 0.5 ms: a tie (the old 10 % rule said "1.3x slower")
    (0.40, 0.41, 50, 0.0),  # 2.5x faster
    (1.30, 1.31, 5, 0.0),  # too few runs timed to tell a spread: no claim
    (1.30, 1.31, 50, 0.2),  # beyond noise, but float runs in under 10 empty invokes (2 ms) on this host: no claim
])
def test_latency_cells_follow_the_timing_noise_rule_the_sentences_read(fiq_median, fiq_p90, runs, overhead):
    """The tables' latency words, arrows and colours say "faster" or "slower" exactly when the medians lie further
    apart than either model's own spread (p90 - median), as the headline and the decision do; else a tie ("~ same");
    nothing at all when a spread cannot be told (too few runs) or a model runs under the host's timing floor (ten
    empty invokes)."""
    import dataclasses

    from reporter.model.variant import Latency

    report = report_from_json((Path(__file__).parent / "fixtures" / "report.json").read_text())
    flt_latency = Latency(median=1.0, p90=1.02, runs=runs, overhead=overhead)
    fiq_latency = Latency(median=fiq_median, p90=fiq_p90, runs=runs, overhead=overhead)
    report = attach(dataclasses.replace(report, findings=None, variants=[
        dataclasses.replace(v, latency_ms=flt_latency if v.name == "float" else fiq_latency if v.name == "fiq"
                            else v.latency_ms) for v in report.variants]))  # the findings decide them again
    spread = max(flt_latency.p90 - flt_latency.median, fiq_latency.p90 - fiq_latency.median)
    claim = runs >= 10 and min(1.0, fiq_median) >= 10 * overhead  # computed here, not by the code under test
    told = claim and abs(fiq_median - 1.0) > spread
    ratio = fiq_median / 1.0
    if not claim:
        expected = ""
    elif not told:
        expected = "~ same"
    elif abs(ratio - 1) < 0.05:
        expected = f"{abs(1 - ratio) * 100:.0f} % {'slower' if ratio > 1 else 'faster'}"
    else:
        expected = f"{ratio:.1f}x slower" if ratio > 1 else f"{1 / ratio:.1f}x faster"
    v = view.ReportView(report)
    row = next(r for r in v.story.panel_rows if r.label == "FIQ")
    latency_cell = row.latency
    assert latency_cell.note == expected
    assert latency_cell.tone == ("neutral" if not told else "bad" if ratio > 1 else "good")
    columns = [c.name for c in v.basis.ok_columns]
    median_row = next(r for r in v.structure.size_latency_rows if r.label == "Latency, median")
    arrow = median_row.cells[columns.index("fiq")].arrow
    assert arrow == ("" if not claim else "~" if not told else "↑↑" if ratio > 2 else "↑" if ratio > 1 else "↓↓" if ratio < 0.5 else "↓")


@pytest.mark.parametrize("value,ref,arrow", [
    (0.900, 0.900, "~"), (0.904, 0.900, "~"), (0.896, 0.900, "~"), (0.910, 0.900, "↑"), (0.950, 0.900, "↑"),
    (0.951, 0.900, "↑↑"), (0.890, 0.900, "↓"), (0.849, 0.900, "↓↓"), (0.5, None, ""),
])
def test_metric_arrow(value, ref, arrow):
    assert common.metric_arrow(value, ref) == arrow


def test_tone_follows_direction_of_good():
    assert common.tone("↓↓", higher_is_better=True) == "bad"
    assert common.tone("↓", higher_is_better=False) == "good"
    assert common.tone("~", higher_is_better=True) == "neutral"


@pytest.mark.parametrize("func,arg,text", [
    (fmt.fmt_bytes, 900, "900 B"), (fmt.fmt_bytes, 9424, "9.2 KB"), (fmt.fmt_bytes, 3 * 1024**2, "3.0 MB"),
    (fmt.fmt_signed_bytes, 240, "+240 B"), (fmt.fmt_signed_bytes, -2048, "−2.0 KB"),
    (fmt.fmt_ms, 0.000852, "0.852 µs"), (fmt.fmt_ms, 12.345, "12.3 ms"),
    (fmt.fmt_percent, 0.7297, "73.0 %"), (fmt.fmt_percent, -0.00004, "0.0 %"), (fmt.fmt_percent, -0.37, "-37.0 %"),
    (fmt.fmt_points, -0.325, "−32.5"), (fmt.fmt_points, 0.0001, "±0.0"),
    (fmt.fmt_number, 2157.9, "2158"), (fmt.fmt_number, 0.0000123, "1.230e-05"), (fmt.fmt_number, 0, "0"),
])
def test_formats(func, arg, text):
    assert func(arg) == text


def test_rule_comparison_and_verdicts_of_the_breast_cancer_fixture():
    report = report_from_json((Path(__file__).parent / "fixtures" / "report.json").read_text())
    v = view.ReportView(report)
    fiq = next(line for line in v.quality.verdicts if line.startswith("FIQ"))
    assert "accuracy 63.2 % against float's 95.6 % (−32.5 points" in fiq
    assert "predicts class 1 for 100 % of samples" in fiq
    assert v.recommendation.rule_comparison == v.rule_comparison == ("The rmse/scale rule: 1 layer, 73 % of the gap, 6.8 KB; the search: 2 layers,"
                                 " 100 % of the gap, 6.6 KB.")


@pytest.mark.parametrize("name,limit,short", [
    ("a/b/c", 60, "a/b/c"),
    ("x" * 100, 21, "x" * 8 + "…" + "x" * 12),
])
def test_long_names_are_shortened_in_the_middle(name, limit, short):
    assert fmt.shorten(name, limit) == short
    assert len(fmt.shorten(name, limit)) <= limit


def test_tiny_errors_and_near_equal_sizes_are_worded_so_that_they_read_right():
    """A regression variant with no error is 'no error', a tiny one is '< 0.01 %', never '0.00 %'; a size
    within 5 % of float is a percentage, never '1.0x smaller'."""
    from reporter.render.words.verdicts import size_words as _size_words
    from reporter.core.formatting import fmt_mse

    assert fmt_mse(0.0, 3100.0) == "MSE 0 (no error)"
    assert fmt_mse(0.0763, 3100.0) == "MSE 0.0763 (< 0.01 % of the float output's variance)"
    assert fmt_mse(6.076, 3100.0) == "MSE 6.076 (0.20 % of the float output's variance)"
    assert _size_words(0.99) == "1 % smaller than float"
    assert _size_words(1.03) == "3 % larger than float"
    assert _size_words(0.5) == "2.0x smaller than float"
    assert _size_words(1.001) == "same size as float"


def test_arrows_are_judgement_steps_drawn():
    """The views draw the steps reporter.render.steps reads from judgement's thresholds: 0 the same, 1 changed, 2 a
    big change."""
    from reporter.render import steps

    assert steps.count_step(11, 5) == 2 and steps.count_step(4, 5) == -1 and steps.count_step(5, 5) == 0
    assert steps.count_step(None, 5) is None
    assert steps.metric_step(0.951, 0.900) == 2 and steps.metric_step(0.896, 0.900) == 0
    assert [common.ARROWS[step] for step in (-2, -1, 0, 1, 2)] == ["↓↓", "↓", "~", "↑", "↑↑"]


def test_legend_states_the_judgement_thresholds(monkeypatch):
    """The legend's words follow the constants in reporter.core.judgement: change one, the legend follows."""
    report = report_from_json((Path(__file__).parent / "fixtures" / "report.json").read_text())
    legend = dict(view.ReportView(report).legend)
    assert "within 0.5 points of it (metrics)" in legend["~"]
    assert "fewer than 10 runs were timed" in legend["~"]
    assert "more than 2x higher / lower (counts, sizes, latency), or more than 5 points" in legend["↑↑ / ↓↓"]
    monkeypatch.setattr(judgement, "MIN_TIMED_RUNS", 20)
    monkeypatch.setattr(judgement, "METRIC_SAME_POINTS", 1.5)
    monkeypatch.setattr(judgement, "METRIC_BIG_POINTS", 10.0)
    monkeypatch.setattr(judgement, "COUNT_BIG_RATIO", 3.0)
    legend = dict(view.ReportView(report).legend)
    assert "within 1.5 points of it (metrics)" in legend["~"]
    assert "fewer than 20 runs were timed" in legend["~"]
    assert "more than 3x higher / lower (counts, sizes, latency), or more than 10 points" in legend["↑↑ / ↓↓"]
    assert common.metric_arrow(0.910, 0.900) == "~"  # the arrows follow the same constants
    assert common.count_arrow(14, 5) == "↑"


def test_template_sentences_state_the_judgement_thresholds(monkeypatch):
    """The quality section's sentence and the panel's interval heading come from the judgement constants."""
    from reporter.render import formats as render

    report = report_from_json((Path(__file__).parent / "fixtures" / "report.json").read_text())
    html = render.render_html(report).decode()
    assert "within 0.5 points, <b>↑↑/↓↓</b> beyond 5 points" in html and "p &lt; 0.05)" in html
    assert ">95 % interval<" in html
    monkeypatch.setattr(judgement, "METRIC_SAME_POINTS", 1.0)
    monkeypatch.setattr(judgement, "ALPHA", 0.01)
    monkeypatch.setattr(judgement, "CONFIDENCE", 0.9)
    md = render.render_md(report).decode()
    assert "| 90 % interval |" in md
    words = view.ReportView(report).quality.thresholds
    assert (words.metric_same, words.alpha) == ("1 points", "0.01")


def test_the_report_view_is_composed_of_section_views():
    report = report_from_json((Path(__file__).parent / "fixtures" / "report.json").read_text())
    v = view.ReportView(report)
    assert v.layers.top_layer_rows is v.top_layer_rows  # a section's value, also by its name on the whole view
    assert v.markdown.kept_rows == v.recommendation.kept_rows[: v.markdown.KEPT_ROWS]
    assert v.column_labels[:3] == ["Float", "DRQ", "FIQ"]
    with pytest.raises(AttributeError):
        v.no_such_value


@pytest.mark.parametrize("ratio,words", [(80 / 6528 + 1, "1 % larger"), (1.4, "1.4x larger"), (0.5, "2.0x smaller"),
                                         (0.97, "3 % smaller"), (1.0, "same size"), (1.004, "same size")])
def test_a_size_close_to_the_other_is_said_in_percent_never_as_1_0x(ratio, words):
    """"+80 B (1.0x larger)" read as no change; the tables say sizes as the sentences do."""
    from reporter.render.words.verdicts import size_change

    assert size_change(ratio) == words
