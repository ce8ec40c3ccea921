"""A detector ending in TFLite_Detection_PostProcess, end to end: read from y_boxes/y_classes with no flag, every
variant's mAP equal to pycocotools' on a LiteRT run of its written file, FIQ's loss and its clipped classes named.

The expectations are computed here, independently: tests/detection_reference.py runs each written .tflite with
LiteRT (its own reading of the four outputs) and scores it with pycocotools."""

import json

import numpy as np
import pytest

import detection_reference as reference
import detector_fixtures
from conftest import load_report, run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def detector(demo_cache):
    return detector_fixtures.ensure(demo_cache)


@pytest.fixture(scope="module")
def detector_run(detector, tmp_path_factory):
    """One run over the fixture's .tflite and its data (y_boxes, y_classes, x_calib), no --task."""
    out = tmp_path_factory.mktemp("detector_out")
    code = run_cli(detector["tflite"], detector["data"], out, "--formats", "json,md,html", name="ssd",
                   latency_runs=0)
    return code, out / "ssd"


def test_the_first_run_with_boxes_and_classes_reads_a_detector(detector_run):
    code, folder = detector_run
    assert code == 0
    report = load_report(folder)
    assert report.model.task == "detection" and report.model.num_classes == 3
    assert report.metric() == ("mAP@0.5", True)
    md = (folder / "summary.md").read_text()
    assert "Measured as a detector" in md and "TFLite_Detection_PostProcess" in md


def test_the_detectors_report_json_round_trips_and_renders_without_tensorflow(detector_run):
    from reporter.render import formats as render
    from reporter.pipeline.conclude import report_from_json

    _, folder = detector_run
    text = (folder / "report.json").read_text()
    report = report_from_json(text)
    assert report_from_json(report.to_json()) == report
    assert report.variant("fiq").metrics.figures["detection"].ap50_per_class[2] == 0.0  # class 2 never read back
    html = render.render(report, "html").decode()
    for row in ("mAP@0.5", "COCO mAP@[.5:.95]", "Recall at IoU 0.5", "AP@0.5 per class"):
        assert row in html.replace("&#64;", "@"), row


def test_the_detectors_story_leads_every_format_page_one_of_the_pdf_included(detector_run):
    """Six clipping warnings make the panel taller than a page: the PDF's first page still holds the variants'
    table and the headline (it used to hold only the title, the panel pushed whole to page 2)."""
    import story
    from reporter.pipeline.conclude import report_from_json

    _, folder = detector_run
    story.check_story(report_from_json((folder / "report.json").read_text()))


def test_every_variants_map_equals_pycocotools_on_a_litert_run_of_its_file(detector_run, detector):
    _, folder = detector_run
    data = np.load(detector["data"])
    written = json.loads((folder / "report.json").read_text())
    checked = []
    for v in written["variants"]:
        if v["status"] != "ok":
            continue
        model = (folder / f"{v['name']}.tflite").read_bytes()
        expected = reference.score(reference.run(model, data["x"]), data["y_boxes"], data["y_classes"])
        det = v["metrics"]["figures"]["detection"]
        assert det["map50"] == pytest.approx(expected["map50"], rel=1e-6), v["name"]
        assert det["map"] == pytest.approx(expected["map"], rel=1e-6), v["name"]
        assert det["recall50"] == pytest.approx(expected["recall50"], rel=1e-6), v["name"]
        per_class = {c: ap for c, ap in enumerate(det["ap50_per_class"]) if ap is not None}
        assert per_class == pytest.approx(expected["ap50_per_class"], rel=1e-6), v["name"]
        assert v["metrics"]["main"]["value"] == pytest.approx(expected["map50"], rel=1e-6)
        checked.append(v["name"])
    assert {"float", "drq", "fiq"} <= set(checked)


def _matched_score_share(dets: list, other: list, k: int) -> np.ndarray:
    """Per image, the share of the score of `dets` matched at IoU 0.5 by `other`'s boxes of the same class, by
    pycocotools' own matching (its evalImgs); 1 for an image without detections."""
    n = len(dets)
    boxes = np.zeros((n, k, 4))
    classes = np.full((n, k), -1)
    for i, d in enumerate(other):
        boxes[i, :len(d["boxes"])], classes[i, :len(d["classes"])] = d["boxes"], d["classes"]
    ev = reference._coco(dets, boxes, classes, 1.0)
    hit, total = np.zeros(n), np.array([float(np.sum(d["scores"])) for d in dets])
    for e in ev.evalImgs:
        if e is not None and e["aRng"] == ev.params.areaRng[0]:
            hit[e["image_id"]] += float(np.sum(np.asarray(e["dtScores"]) * (np.asarray(e["dtMatches"])[0] > 0)))
    return np.divide(hit, total, out=np.ones(n), where=total > 0)


def test_the_search_reads_matched_detections_not_class_id_lists(detector_run, detector):
    """A detector's selection score (what the search aims at on unlabelled samples): each image's score-weighted F1
    of its detections matched to float's at IoU 0.5, same class; equal to the same figure from pycocotools'
    matching of LiteRT runs of the written files."""
    from reporter.core import tasks
    from reporter.measure import evaluate
    from reporter.measure.task import Task

    _, folder = detector_run
    x = np.load(detector["data"])["x_calib"][:60]
    flt_model, fiq_model = ((folder / f"{name}.tflite").read_bytes() for name in ("float", "fiq"))
    task = Task(tasks.of("detection"), 3)
    got = task.agreement(evaluate.predict(fiq_model, x), evaluate.predict(flt_model, x))
    flt, fiq = reference.run(flt_model, x), reference.run(fiq_model, x)
    precision, recall = _matched_score_share(fiq, flt, 10), _matched_score_share(flt, fiq, 10)
    expected = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-300), 0)
    assert got == pytest.approx(expected, rel=1e-6, abs=1e-9)
    assert 0.3 < got.mean() < 0.99  # FIQ's clipped classes and scores: far from float, but not nothing
    steps = json.loads((folder / "report.json").read_text())["recommendation"]["search"]["steps"]
    assert all(0.3 < s["selection_score"] < 0.99 for s in steps)


def test_litert_quantizers_fiq_is_worse_beyond_noise_and_its_clipped_classes_named(detector_run):
    _, folder = detector_run
    report = load_report(folder)
    fiq = report.findings.variant("fiq")
    assert fiq.direction == "worse" and fiq.vs_float.significant
    assert report.findings.variant("drq").direction not in ("worse",)
    md = (folder / "summary.md").read_text()
    assert "FIQ loses" in md and "mAP@0.5" in md
    clipped = report.variant("fiq").clipped_outputs
    classes = [c for c in clipped.values() if c.part == "classes"]
    assert classes and classes[0].share > 0.05  # class 2 reads as 1.1 at most: it rounds to 1
    assert "(classes) holds only" in md and "so class 2 reads as class 1" in md
    assert "x_calib but not on the evaluation data" not in md


def test_labels_beyond_the_detectors_classes_are_one_line_naming_the_array(detector, tmp_path, capsys):
    data = dict(np.load(detector["data"]))
    data["y_classes"] = np.where(data["y_classes"] == 2, 3, data["y_classes"])
    bad = tmp_path / "bad.npz"
    np.savez(bad, **data)
    code = run_cli(detector["tflite"], bad, tmp_path / "out", name="bad", latency_runs=0)
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    line = [e for e in err if "y_classes" in e]
    assert len(line) == 1 and "3 classes" in line[0], err


def test_outputs_another_runtime_gives_one_by_one_are_read_as_the_detector_they_are(detector_run, detector):
    """What TFLite Micro hands back (each output by signature key, one row per image) is read like LiteRT's run:
    the mAP@0.5 of the written FIQ from the independent LiteRT run's four outputs equals pycocotools'."""
    from reporter.core import tasks
    from reporter.measure import evaluate
    from reporter.measure.task import Task

    _, folder = detector_run
    data = np.load(detector["data"])
    model = (folder / "fiq.tflite").read_bytes()
    raw = reference.raw_outputs(model, data["x"])
    keys = {p.index: p.key for p in evaluate.signature(model).outputs}
    outputs = {keys[index]: raw[role].reshape(len(data["x"]), -1) for role, index in
               reference.output_roles(model).items()}
    packed = evaluate.joined_outputs(model, outputs)
    y = np.concatenate([data["y_boxes"].reshape(len(data["x"]), -1), data["y_classes"]], axis=1)
    score = Task(tasks.of("detection"), 3).score(y)
    expected = reference.score(reference.detections(raw), data["y_boxes"], data["y_classes"])["map50"]
    assert score.value(packed) == pytest.approx(expected, rel=1e-6)
