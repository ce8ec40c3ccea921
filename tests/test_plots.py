"""The per-layer and trade-off charts: what they plan to show (pure functions, no pixels), and that the
PNGs are deterministic and of a bounded size. Fast, no TensorFlow."""

import base64
import dataclasses
import itertools
import json
import struct
from pathlib import Path

import pytest

from reporter.render import plots
from reporter.model.report import RMSE_OVER_SCALE_IDEAL, Report, _build, migrate

FIXTURE = Path(__file__).parent / "fixtures" / "report.json"
OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "MUL", "FULLY_CONNECTED", "PAD", "MEAN", "RELU6")


@pytest.fixture(scope="module")
def fixture_report() -> Report:
    # Built without the findings: the charts do not read them.
    data = dict(migrate(json.loads(FIXTURE.read_text())))
    data.pop("findings", None)
    return _build(Report, data)


def with_layers(base: Report, values, suspect=None, kept=(), ops=None, ranges=None) -> Report:
    """`base` with one layer per value (RMSE/scale); `kept` positions in the recommended model's float
    layers (none: no recommended model), `suspect` positions flagged by the rule (default: above 0.7)."""
    template = base.layers[0]
    layers = []
    for i, value in enumerate(values):
        flagged = (i in suspect) if suspect is not None else value > 0.7
        layers.append(dataclasses.replace(
            template, index=i, tensor_name=f"tensor_{i}", op_name=(ops or OPS)[i % len(ops or OPS)],
            rmse_over_scale=value, range=ranges[i] if ranges else 1.0 + i % 5, suspect=flagged,
            reasons=[f"rmse/scale {value:.1f} > 0.7"] if flagged else []))
    rec = dataclasses.replace(base.recommendation, denylisted_nodes=[f"tensor_{i}" for i in kept])
    if not kept:
        rec = dataclasses.replace(rec, selective=None)
    return dataclasses.replace(base, layers=layers, recommendation=rec)


def mobilenet_like(base: Report, n=150) -> Report:
    """150 layers, RMSE/scale 0.1 .. 1.5 with three outliers (60, 13, 8) and two layers kept in float."""
    values = [0.1 + 1.4 * ((i * 37) % n) / n for i in range(n)]
    values[37], values[38], values[120] = 60.0, 13.0, 8.0
    return with_layers(base, values, kept=(37, 0))


def png_size(uri: str) -> tuple:
    data = base64.b64decode(uri.split(",", 1)[1])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


# --- helpers ------------------------------------------------------------------------------------

def test_spans_decades_is_strictly_more_than_ten_times_and_ignores_non_positive_values():
    assert not plots.spans_decades([0.1, 1.0])
    assert plots.spans_decades([0.1, 1.01])
    assert not plots.spans_decades([0.0, 0.5, 2.0, None])
    assert not plots.spans_decades([])
    assert plots.spans_decades([0.289, 0.7, 60.0])


@pytest.mark.parametrize("n, step", [(31, 2), (60, 5), (150, 10), (300, 20), (1000, 100)])
def test_index_ticks_are_sparse(n, step):
    assert plots.index_tick_step(n) == step
    assert -(-n // step) <= plots.MAX_INDEX_TICKS


def test_short_number():
    assert plots.short_number(60) == "60"
    assert plots.short_number(13.355) == "13.4"
    assert plots.short_number(0.289) == "0.289"
    assert plots.short_number(2157.9) == "2,158"
    assert plots.short_number(0) == "0"


def test_label_positions_never_overlap_nor_leave_the_axes():
    widths = [0.3, 0.2, 0.25]
    pos = plots._label_positions([0.0, 0.01, 0.02], widths)
    for (a, wa), (b, wb) in itertools.pairwise(zip(pos, widths)):
        assert b - a >= (wa + wb) / 2
    assert pos[0] - widths[0] / 2 >= 0 and pos[-1] + widths[-1] / 2 <= 1
    pos = plots._label_positions([0.97, 0.98, 0.99], widths)
    assert pos[-1] + widths[-1] / 2 <= 1 and pos[0] - widths[0] / 2 >= 0


# --- the fixture: 6 layers, one at RMSE/scale 13.4 ---------------------------------------------

def test_fixture_rmse_plan(fixture_report):
    plan = plots.layer_rmse_plan(fixture_report)
    assert plan.log  # 0.097 .. 13.4: the 0.289 and 0.7 lines would merge on a linear axis
    assert plan.ylim[0] < 0.097 and plan.ylim[1] > 13.36
    assert plan.names_on_axis
    assert plan.tick_labels == ("0 SUB", "1 MUL", "2 FULLY_CONNECTED", "3 FULLY_CONNECTED",
                                "4 FULLY_CONNECTED", "5 SOFTMAX")
    assert plan.tick_rotation == 45  # "2 FULLY_CONNECTED" does not fit a sixth of the axis
    # The search keeps layers 0 and 1 in float; the rule flags layer 1 only.
    assert plan.categories == ("kept", "kept_flagged", "other", "other", "other", "other")
    assert plan.legend_labels == (
        "kept in float (recommended)",
        "kept in float (recommended), flagged by the rule too",
        "other layers",
        "ideal 0.289 (1/\u221a12: rounding only)",
        "rule threshold 0.7",
    )
    assert [line.value for line in plan.lines] == [RMSE_OVER_SCALE_IDEAL, 0.7]
    assert plan.annotated == ()  # the axis already names every layer


def test_fixture_ranges_plan_is_log_without_lines(fixture_report):
    plan = plots.layer_ranges_plan(fixture_report)
    assert plan.log  # 0.996 .. 2158
    assert plan.lines == ()
    assert "rule threshold 0.7" not in plan.legend_labels


# --- categories and legend entries -------------------------------------------------------------

def test_no_suspect_entry_when_no_layer_is_flagged(fixture_report):
    report = with_layers(fixture_report, [0.2, 0.25, 0.3, 0.28, 0.22, 0.29])
    plan = plots.layer_rmse_plan(report)
    assert set(plan.categories) == {"other"}
    assert not plan.log  # 0.2 .. 0.7 (the threshold line included): within a decade
    assert plan.legend_labels == ("layers", "ideal 0.289 (1/\u221a12: rounding only)", "rule threshold 0.7")
    assert not any("flagged" in label or "kept" in label for label in plan.legend_labels)
    # Nothing highlighted and no reference line: no legend at all.
    assert plots.layer_ranges_plan(report).legend_labels == ()


def test_flagged_only_without_a_recommended_model(fixture_report):
    report = with_layers(fixture_report, [0.2, 3.0, 0.3])
    assert report.recommendation.selective is None
    assert plots.kept_in_float(report) == set()
    plan = plots.layer_rmse_plan(report)
    assert plan.categories == ("other", "flagged", "other")
    assert plan.legend_labels[:2] == ("flagged by the rmse/scale rule", "other layers")


def test_kept_and_flagged_are_told_apart(fixture_report):
    report = with_layers(fixture_report, [0.2, 3.0, 0.3, 5.0], kept=(0, 3))
    assert plots.layer_categories(report) == ["kept", "flagged", "other", "kept_flagged"]
    assert plots.layer_rmse_plan(report).legend_labels[:4] == (
        "kept in float (recommended)",
        "kept in float (recommended), flagged by the rule too",
        "flagged by the rmse/scale rule",
        "other layers",
    )


# --- scale: one huge value, few layers --------------------------------------------------------

def test_three_layers_with_one_huge_rmse(fixture_report):
    report = with_layers(fixture_report, [0.25, 60.0, 0.31], kept=(1,))
    plan = plots.layer_rmse_plan(report)
    assert plan.log
    bottom, top = plan.ylim
    assert bottom < 0.25 and top > 60
    assert plan.tick_labels == ("0 CONV_2D", "1 DEPTHWISE_CONV_2D", "2 ADD")
    assert plan.tick_rotation == 0  # three names fit side by side
    assert plan.bar_width < 0.5  # three bars are not three slabs


def test_linear_axis_when_within_a_decade(fixture_report):
    plan = plots.layer_rmse_plan(with_layers(fixture_report, [0.2, 0.5, 1.5, 1.9]))
    assert not plan.log
    assert plan.ylim[0] == 0 and plan.ylim[1] > 1.9


def test_zero_value_on_a_log_axis_is_labelled(fixture_report):
    plan = plots.layer_rmse_plan(with_layers(fixture_report, [0.0, 13.0, 0.3]))
    assert plan.log and plan.zeros == (0,)
    assert plan.ylim[0] > 0


# --- many layers ---------------------------------------------------------------------------------

def test_mobilenet_like_plan(fixture_report):
    report = mobilenet_like(fixture_report)
    plan = plots.layer_rmse_plan(report)
    assert plan.log
    assert not plan.names_on_axis
    assert plan.tick_labels == tuple(str(i) for i in range(0, 150, 10))
    # The three largest errors are labelled with index and op name, left to right.
    assert plan.annotated == (37, 38, 120)
    assert plan.annotations == ("37 PAD: 60", "38 MEAN: 13", "120 CONV_2D: 8")
    widths = [plots._text_width_in(t, plots.ANNOTATION_FONT) / plots.AXES_WIDTH_IN for t in plan.annotations]
    spans = sorted((x - w / 2, x + w / 2) for x, w in zip(plan.annotation_x, widths))
    assert spans[0][0] >= 0 and spans[-1][1] <= 1
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert plan.marked == (0, 37)  # the kept layers get a marker above their thin bars
    assert plan.legend_labels[0] == "kept in float (recommended)"


def test_flat_chart_labels_nothing(fixture_report):
    report = with_layers(fixture_report, [0.2 + 0.4 * ((i * 37) % 150) / 150 for i in range(150)])
    plan = plots.layer_rmse_plan(report)
    assert not plan.log
    assert plan.annotated == () and plan.annotations == ()


# --- the PNGs ------------------------------------------------------------------------------------

def test_layer_charts_are_deterministic(fixture_report):
    report = mobilenet_like(fixture_report)
    assert plots.layer_rmse(report) == plots.layer_rmse(report)
    assert plots.layer_ranges(fixture_report) == plots.layer_ranges(fixture_report)


def test_layer_charts_have_a_fixed_bounded_size(fixture_report):
    sizes = [png_size(plots.layer_rmse(r)) for r in (
        fixture_report, with_layers(fixture_report, [0.25, 60.0, 0.31], kept=(1,)), mobilenet_like(fixture_report))]
    sizes.append(png_size(plots.layer_ranges(mobilenet_like(fixture_report))))
    for width, height in sizes:
        assert 600 <= width <= 800 and 300 <= height <= 450, sizes
    widths = [w for w, _ in sizes]
    assert max(widths) - min(widths) <= 30  # same width on the page whatever the number of layers


def test_no_layers_no_chart(fixture_report):
    empty = dataclasses.replace(fixture_report, layers=[])
    assert plots.layer_rmse(empty) == "" and plots.layer_ranges(empty) == ""


def test_tradeoff_renders_deterministically(fixture_report):
    uri = plots.tradeoff(fixture_report)
    assert uri.startswith("data:image/png;base64,") and uri == plots.tradeoff(fixture_report)
    sizes = [s.size_bytes for s in fixture_report.recommendation.search.steps]
    assert not plots.spans_decades(sizes)  # a linear size axis for the fixture's 6.4 .. 10 KB


def test_without_a_recommendation_the_rule_line_is_judgements_default(fixture_report, monkeypatch):
    """The rmse/scale rule's line falls back on reporter.core.judgement.SUSPECT_THRESHOLD."""
    from reporter.core import judgement

    report = dataclasses.replace(fixture_report, recommendation=None)
    assert plots.layer_rmse_plan(report).lines[1].value == judgement.SUSPECT_THRESHOLD
    monkeypatch.setattr(judgement, "SUSPECT_THRESHOLD", 1.5)
    assert plots.layer_rmse_plan(report).lines[1].label == "rule threshold 1.5"
