"""A task kind's own figures live in `metrics.figures` by kind name, declared by the kind (its record, its bounds,
its rows): an old report.json with `metrics.detection` / `metrics.mean_iou` still reads and shows the same rows, is
written back in the new form only, and a kind of one's own adds its figures and rows without touching the core's
records or views. Hand-edited copies of tests/fixtures/report.json; no TensorFlow."""

import copy
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from reporter.measure.kinds.detection import DetectionMetrics
from reporter.measure.kinds.segmentation import SegmentationMetrics
from reporter.model import figures
from reporter.model.bounds import SHARE, figure
from reporter.model.report import Report
from reporter.render import kinds as kind_rows
from reporter.render.view import ReportView

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "report.json"
STORED = json.loads(FIXTURE.read_text(encoding="utf-8"))
# A detector's block as the version before `metrics.figures` wrote it: one per variant, mAP falling by variant.
BLOCK = {"map": 0.35, "recall50": 0.7, "ap50_per_class": [0.5, None], "score_threshold": 0.3,
         "boxes_per_class": [12, 0]}


def _with(change) -> dict:
    data = copy.deepcopy(STORED)
    for i, v in enumerate(data["variants"]):
        if v.get("metrics"):
            change(i, v["metrics"])
    return data


def _rows(report: Report) -> dict:
    """The quality table as a reader sees it: row label -> the cells' texts and arrows."""
    quality = ReportView(report).quality
    return {r.label: [(c.text, c.arrow) for c in r.cells] for r in quality.metric_rows + quality.per_class_rows}


def test_an_old_detectors_block_reads_into_its_figures_and_is_written_back_in_the_new_form_only():
    def old(i, m):
        m.pop("figures", None)
        m["detection"] = {"map50": 0.61 - 0.1 * i, **BLOCK}
    report = Report.from_dict(_with(old))
    for i, v in enumerate(report.variants):
        if v.metrics is not None:
            assert v.metrics.figures["detection"] == DetectionMetrics(map50=0.61 - 0.1 * i, **BLOCK)
    written = json.loads(report.to_json())
    for v in written["variants"]:
        if v.get("metrics"):
            assert "detection" not in v["metrics"] and "mean_iou" not in v["metrics"], sorted(v["metrics"])
            assert v["metrics"]["figures"]["detection"]["map"] == 0.35
    again = Report.from_json(report.to_json())
    assert again == report
    rows = _rows(report)
    made = {v.name: f"{0.61 - 0.1 * i:.3f}" for i, v in enumerate(report.variants) if v.metrics is not None}
    columns = ReportView(report).quality.basis.ok_columns
    assert [t for t, _ in rows["mAP@0.5"]] == [made.get(v.name, "–") for v in columns], rows["mAP@0.5"]
    assert "COCO mAP@[.5:.95]" in rows and "Accuracy" not in rows, sorted(rows)  # in place of a classifier's
    assert [t for t, _ in rows["0"]] == ["12"] + ["0.50" if v.name in made else "not measured" for v in columns]


def test_old_segmentation_fields_read_into_their_figures_and_show_each_class_iou():
    def old(i, m):
        m.pop("figures", None)
        m["mean_iou"], m["iou_per_class"] = 0.5 + 0.01 * i, [0.25] + [None] * (len(m["per_class"]) - 1)
    report = Report.from_dict(_with(old))
    measured = [v for v in report.variants if v.metrics is not None]
    first = measured[0].metrics.figures["segmentation"]
    assert first == SegmentationMetrics(mean_iou=0.5, iou_per_class=[0.25] + [None] * (len(first.iou_per_class) - 1))
    rows = _rows(report)
    labels = list(rows)
    assert labels[1] == "Mean IoU", labels  # beside the first metric, as before
    assert rows["0"][1][0].endswith(" · 0.25") and rows["1"][1][0].endswith(" · –"), (rows["0"], rows["1"])
    assert all(v.metrics.figures == {} for v in Report.from_dict(copy.deepcopy(STORED)).variants if v.metrics)


@dataclass(frozen=True)
class Top3Figures:
    top3: float = figure(SHARE)


@pytest.fixture
def top3_kind():
    """A kind of one's own: its figures record and its rows, each registered in one call, nothing else edited."""
    figures.register("top3demo", Top3Figures)
    read = lambda m: m.figures["top3demo"].top3 if m is not None and "top3demo" in m.figures else None  # noqa: E731
    kind_rows.register("top3demo", kind_rows.FigureRows(metrics=((read, "Top-3 (a kind of one's own)"),)))
    yield
    figures.unregister("top3demo")
    kind_rows.unregister("top3demo")


def test_a_kind_of_ones_own_declares_its_figures_and_rows_and_they_are_read_within_their_bounds(top3_kind):
    def own(i, m):
        m["figures"] = {"top3demo": {"top3": 0.9 - 0.1 * i}}
    report = Report.from_dict(_with(own))
    assert report.variants[0].metrics.figures["top3demo"] == Top3Figures(0.9)
    assert json.loads(report.to_json())["variants"][1]["metrics"]["figures"] == {"top3demo": {"top3": 0.8}}
    cells = _rows(report)["Top-3 (a kind of one's own)"]
    assert cells[0] == ("0.900", "") and cells[1][0] == "0.800" and cells[1][1], cells  # arrowed against float
    with pytest.raises(ValueError, match=r"^variants\[0\]\.metrics\.figures\.top3demo\.top3 is 1\.5: must be a share"):
        Report.from_dict(_with(lambda i, m: m.__setitem__("figures", {"top3demo": {"top3": 1.5}})))


def test_figures_no_kind_declares_are_refused_in_one_line_naming_them():
    with pytest.raises(ValueError) as found:
        Report.from_dict(_with(lambda i, m: m.__setitem__("figures", {"nokind": {"x": 1}})))
    assert str(found.value) == "variants[0].metrics.figures.nokind: no task kind declares these figures"
