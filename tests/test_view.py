"""The arrows, colours and number formats the reports use."""

import pytest

from reporter.findings import report_from_json
from reporter.render import view


@pytest.mark.parametrize("value,ref,arrow", [
    (5, 5, "~"), (6, 5, "↑"), (10, 5, "↑"), (11, 5, "↑↑"), (1, 0, "↑↑"), (4, 5, "↓"), (2, 5, "↓↓"), (0, 3, "↓↓"),
    (None, 5, ""),
])
def test_count_arrow(value, ref, arrow):
    assert view.count_arrow(value, ref) == arrow


def test_latency_arrow_ignores_small_noise():
    assert view.count_arrow(1.05, 1.0, same_ratio=0.10) == "~"
    assert view.count_arrow(1.2, 1.0, same_ratio=0.10) == "↑"


@pytest.mark.parametrize("value,ref,arrow", [
    (0.900, 0.900, "~"), (0.904, 0.900, "~"), (0.896, 0.900, "~"), (0.910, 0.900, "↑"), (0.950, 0.900, "↑"),
    (0.951, 0.900, "↑↑"), (0.890, 0.900, "↓"), (0.849, 0.900, "↓↓"), (0.5, None, ""),
])
def test_metric_arrow(value, ref, arrow):
    assert view.metric_arrow(value, ref) == arrow


def test_tone_follows_direction_of_good():
    assert view.tone("↓↓", higher_is_better=True) == "bad"
    assert view.tone("↓", higher_is_better=False) == "good"
    assert view.tone("~", higher_is_better=True) == "neutral"


@pytest.mark.parametrize("func,arg,text", [
    (view.fmt_bytes, 900, "900 B"), (view.fmt_bytes, 9424, "9.2 KB"), (view.fmt_bytes, 3 * 1024**2, "3.0 MB"),
    (view.fmt_signed_bytes, 240, "+240 B"), (view.fmt_signed_bytes, -2048, "−2.0 KB"),
    (view.fmt_ms, 0.000852, "0.852 µs"), (view.fmt_ms, 12.345, "12.3 ms"),
    (view.fmt_percent, 0.7297, "73.0 %"), (view.fmt_points, -0.325, "−32.5"), (view.fmt_points, 0.0001, "±0.0"),
    (view.fmt_number, 2157.9, "2158"), (view.fmt_number, 0.0000123, "1.230e-05"), (view.fmt_number, 0, "0"),
])
def test_formats(func, arg, text):
    assert func(arg) == text


def test_rule_comparison_and_verdicts_of_the_breast_cancer_fixture():
    from pathlib import Path

    from reporter.model.report import Report

    report = report_from_json((Path(__file__).parent / "fixtures" / "report.json").read_text())
    v = view.ReportView(report)
    fiq = next(line for line in v.verdicts if line.startswith("FIQ"))
    assert "accuracy 63.2 % against float's 95.6 % (−32.5 points" in fiq
    assert "predicts class 1 for 100 % of samples" in fiq
    assert v.rule_comparison == ("The rmse/scale rule: 1 layer, 73 % of the gap, 6.8 KB; the search: 2 layers,"
                                 " 100 % of the gap, 6.6 KB.")


@pytest.mark.parametrize("name,limit,short", [
    ("a/b/c", 60, "a/b/c"),
    ("x" * 100, 21, "x" * 8 + "…" + "x" * 12),
])
def test_long_names_are_shortened_in_the_middle(name, limit, short):
    assert view.shorten(name, limit) == short
    assert len(view.shorten(name, limit)) <= limit


def test_tiny_errors_and_near_equal_sizes_are_worded_so_that_they_read_right():
    """A regression variant with no error is 'no error', a tiny one is '< 0.01 %', never '0.00 %'; a size
    within 5 % of float is a percentage, never '1.0x smaller'."""
    from reporter.findings.derive import _size_words
    from reporter.core.formatting import fmt_mse

    assert fmt_mse(0.0, 3100.0) == "MSE 0 (no error)"
    assert fmt_mse(0.0763, 3100.0) == "MSE 0.0763 (< 0.01 % of the float output's variance)"
    assert fmt_mse(6.076, 3100.0) == "MSE 6.076 (0.20 % of the float output's variance)"
    assert _size_words(0.99) == "1 % smaller than float"
    assert _size_words(1.03) == "3 % larger than float"
    assert _size_words(0.5) == "2.0x smaller than float"
    assert _size_words(1.001) == "same size as float"
