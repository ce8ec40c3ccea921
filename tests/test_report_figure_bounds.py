"""Every figure report.json carries is read within its bounds (reporter.model.bounds): a hand-edited report.json with
a share above 1, a negative recall, a size ratio of 1e308 or a latency step of 99 is refused by `render` in every
format and by `diff` on either side, in one line naming the field (exit 2), and nothing is written. Hand-edited
copies of tests/fixtures/report.json, one with a detector's block built from its record; no TensorFlow."""

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from reporter.cli import main
from reporter.model.report import Report
from reporter.measure.kinds.detection import DetectionMetrics
from reporter.model.variant import MainMetric

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "report.json"
CLASSIFIER = json.loads(FIXTURE.read_text(encoding="utf-8"))
RENDERS = ("html", "md", "pdf", "json")


def _detector() -> dict:
    """The fixture with a detector's figures on every model it measured, as the detection kind writes them: the
    block and its main metric (mAP@0.5, a share) from their records."""
    data = copy.deepcopy(CLASSIFIER)
    for i, v in enumerate(data["variants"]):
        det = DetectionMetrics(map50=0.61 - 0.1 * i, map=0.35, recall50=0.7, ap50_per_class=[0.5, None],
                               score_threshold=0.3, boxes_per_class=[12, 0])
        v["metrics"]["figures"] = {"detection": dataclasses.asdict(det)}
        v["metrics"]["main"] = dataclasses.asdict(MainMetric("mAP@0.5", det.map50, low=0.4, high=0.7))
    return data


DETECTOR = _detector()


def _set(where, value):
    """A change that sets the field at `where` (keys and indices) to `value`."""
    def change(data):
        for step in where[:-1]:
            data = data[step]
        data[where[-1]] = value
    return change


COVERAGE = {"FULLY_CONNECTED": {"tensors": 3, "quantized": 3, "elements": 960, "quantized_elements": 7_200}}
# (case, base report, the field's path, the value written there, what the refusal says: the field and the value)
CASES = [
    ("detection mAP 1.5", DETECTOR, ("variants", 2, "metrics", "figures", "detection", "map50"), 1.5,
     "variants[2].metrics.figures.detection.map50 is 1.5"),
    ("detection recall -0.3", DETECTOR, ("variants", 2, "metrics", "figures", "detection", "recall50"), -0.3,
     "variants[2].metrics.figures.detection.recall50 is -0.3"),
    ("AP of a class 7", DETECTOR, ("variants", 1, "metrics", "figures", "detection", "ap50_per_class"), [7.0, None],
     "variants[1].metrics.figures.detection.ap50_per_class[0] is 7.0"),
    ("COCO mAP -1", DETECTOR, ("variants", 2, "metrics", "figures", "detection", "map"), -1.0,
     "variants[2].metrics.figures.detection.map is -1.0"),
    ("main metric (a share) 1.5", DETECTOR, ("variants", 2, "metrics", "main", "value"), 1.5,
     "variants[2].metrics.main.value is 1.5"),
    ("size ratio 1e308", CLASSIFIER, ("findings", "variants", 2, "size_ratio"), 1e308,
     "findings.variants[2].size_ratio is 1e+308"),
    ("latency step 99", CLASSIFIER, ("findings", "variants", 2, "latency_vs_float"), 99,
     "findings.variants[2].latency_vs_float is 99"),
    ("NPU share 750 %", CLASSIFIER, ("findings", "decision", "options", 2, "npu_share"), 7.5,
     "findings.decision.options[2].npu_share is 7.5"),
    ("weight share 750 %", CLASSIFIER, ("variants", 2, "weight_coverage"), COVERAGE,
     "variants[2].weight_coverage.FULLY_CONNECTED.quantized_elements is 7200"),
    ("count 2.5", CLASSIFIER, ("layers", 0, "num_elements"), 2.5, "layers[0].num_elements is 2.5"),
    ("negative size", CLASSIFIER, ("findings", "decision", "options", 1, "size_bytes"), -9424,
     "findings.decision.options[1].size_bytes is -9424"),
]


def _write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("base", [CLASSIFIER, DETECTOR], ids=["classifier", "detector"])
def test_the_unedited_reports_render_in_every_format_and_diff(tmp_path, capsys, base):
    """The control of the cases below: the reports they edit render and diff as they are."""
    src = _write(tmp_path / "run" / "report.json", base)
    for fmt in RENDERS:
        out = tmp_path / f"out.{fmt}"
        assert main(["render", str(src), "--format", fmt, "--out", str(out)]) == 0, capsys.readouterr().err
        assert out.stat().st_size > 0
    assert main(["diff", str(src), str(src), "--out", str(tmp_path / "diff.md")]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("case, base, where, value, said", CASES, ids=[c[0] for c in CASES])
def test_a_figure_beyond_its_bounds_is_refused_in_one_line_naming_it(tmp_path, capsys, case, base, where, value,
                                                                     said):
    edited = copy.deepcopy(base)
    _set(where, value)(edited)
    bad = _write(tmp_path / "bad" / "report.json", edited)
    good = _write(tmp_path / "good" / "report.json", base)
    out = tmp_path / "out"
    out.mkdir()
    runs = [(f"render --format {fmt}", ["render", str(bad), "--format", fmt, "--out", str(out / f"r.{fmt}")])
            for fmt in RENDERS]
    runs += [("diff, edited BASE", ["diff", str(bad), str(good), "--out", str(out / "diff.md")]),
             ("diff, edited NEW", ["diff", str(good), str(bad), "--format", "json", "--out", str(out / "diff.json")])]
    for what, argv in runs:
        code = main(argv)
        err = _lines(capsys.readouterr().err)
        assert code == 1, (what, code, err)
        assert len(err) == 1, (what, err)
        assert str(bad) in err[0] and f"{said}: must be " in err[0], (what, err[0])
        assert "Traceback" not in err[0]
    assert not any(out.iterdir()), sorted(p.name for p in out.iterdir())  # nothing written, not even in part


def test_every_sample_report_still_reads():
    """The reports the tool wrote (the committed samples, the fixtures of older versions) are within every bound: the
    bounds refuse only what no run writes."""
    paths = sorted((ROOT / "sample_reports").glob("*/report.json")) + sorted(FIXTURE.parent.glob("report*.json"))
    assert len(paths) >= 5
    for path in paths:
        report = Report.from_json(path.read_text(encoding="utf-8"))
        assert report.variants, path


def test_the_documented_bounds_are_the_declared_ones():
    """docs/report-json.md states the bounds the reader applies: the table made from the records' declarations."""
    from reporter.model.bounds import markdown

    page = (ROOT / "docs" / "report-json.md").read_text(encoding="utf-8")
    table = markdown(Report)
    assert "`DetectionMetrics.map50`" in table and "`VariantFinding.latency_vs_float`" in table
    assert table in page, "regenerate the table: python -c 'from reporter.model.bounds import markdown; " \
                          "from reporter.model.report import Report; print(markdown(Report))'"
