"""YOLO outputs as ultralytics writes them for TFLite, end to end: read from y_boxes/y_classes with no flag, every
measured model's mAP equal to pycocotools' on an independent decoding of a LiteRT run of its written file, and a
layout that two readings fit (or none) refused in one line naming the output.

The expectations are computed here: tests/yolo_fixtures.py runs each written .tflite with LiteRT and decodes it as
ultralytics' validation does (its own numpy NMS), tests/detection_reference.py scores it with pycocotools."""

import json

import numpy as np
import pytest

import detection_reference as reference
import yolo_fixtures as Y
from conftest import load_report, measured_models, one_error_line, run_cli, run_recorded

READS = {"v8": "v8 [4 + 3 classes, 64 anchors]", "v5": "v5 [64 anchors, 5 + 3 classes]"}


@pytest.fixture(scope="module")
def yolo_runs(demo_cache, tmp_path_factory):
    """One run of each fixture (.tflite and its data: y_boxes, y_classes, x_calib), no --task."""
    out = tmp_path_factory.mktemp("yolo_out")
    runs = {}
    for layout in Y.LAYOUTS:
        files = Y.ensure(demo_cache, layout)
        code, error = run_recorded(files["tflite"], files["data"], out, layout, "--formats", "json,md",
                                   "--latency-runs", "0")
        runs[layout] = (code, error, out / layout, files)
    return runs


def _run(yolo_runs, layout):
    code, error, folder, files = yolo_runs[layout]
    assert error is None, error
    log = folder / "run.log"
    assert code == 0, log.read_text()[-3000:] if log.is_file() else code
    return folder, files


@pytest.mark.slow
@pytest.mark.parametrize("layout", Y.LAYOUTS)
def test_the_first_run_with_boxes_and_classes_reads_a_yolo(yolo_runs, layout):
    folder, _ = _run(yolo_runs, layout)
    report = load_report(folder)
    assert report.model.task == "yolo" and report.model.num_classes == 3
    assert report.metric() == ("mAP@0.5", True)
    assert READS[layout] in report.model.task_reason
    for words in ("above 0.001", "IoU 0.7", "at most 300"):  # the thresholds, said
        assert words in report.model.task_reason, words
    assert "Measured as a YOLO detector" in (folder / "summary.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("layout", Y.LAYOUTS)
def test_every_measured_models_map_equals_pycocotools_on_a_litert_run_of_its_file(yolo_runs, layout):
    folder, files = _run(yolo_runs, layout)
    data = np.load(files["data"])
    written = json.loads((folder / "report.json").read_text())
    checked = []
    for name, v in measured_models(written, ok_only=True).items():
        rows = Y.litert_rows((folder / f"{name}.tflite").read_bytes(), data["x"])
        dets = Y.reference_detections(rows, layout, Y.SIZE)
        expected = reference.score(dets, data["y_boxes"], data["y_classes"])
        det = v["metrics"]["figures"]["detection"]
        assert det["map50"] == pytest.approx(expected["map50"], rel=1e-6), name
        assert det["map"] == pytest.approx(expected["map"], rel=1e-6), name
        assert det["recall50"] == pytest.approx(expected["recall50"], rel=1e-6), name
        per_class = {c: ap for c, ap in enumerate(det["ap50_per_class"]) if ap is not None}
        assert per_class == pytest.approx(expected["ap50_per_class"], rel=1e-6), name
        assert v["metrics"]["main"]["value"] == pytest.approx(expected["map50"], rel=1e-6), name
        checked.append(name)
    assert {"float", "drq", "fiq"} <= set(checked)


@pytest.mark.slow
def test_the_pixel_box_models_fiq_loses_map_beyond_noise(yolo_runs):
    """What the v5 fixture is for: boxes in pixels (0..68) and scores (0..1) share one int8 scale, so FIQ loses."""
    folder, _ = _run(yolo_runs, "v5")
    fiq = load_report(folder).findings.variant("fiq")
    assert fiq.direction == "worse" and fiq.vs_float.significant


# --- layouts the run cannot read alone ---------------------------------------------------------------------------
def _tiny(folder, dims):
    """An untrained .tflite (input [1, 8, 8, 3], one output of shape [1, *dims]) and data with boxes of 3 classes."""
    import keras
    import tensorflow as tf

    inp = keras.Input((8, 8, 3), batch_size=1)
    out = keras.layers.Reshape(dims)(keras.layers.Dense(int(np.prod(dims)))(keras.layers.Flatten()(inp)))
    model = folder / "tiny.tflite"
    model.write_bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, out)).convert())
    rng = np.random.default_rng(0)
    top = rng.uniform(0, 0.5, (12, 1, 2))
    data = folder / "tiny.npz"
    np.savez(data, x=rng.uniform(size=(12, 8, 8, 3)).astype(np.float32),
             y_boxes=np.concatenate([top, top + 0.3], axis=-1).astype(np.float32), y_classes=np.arange(12)[:, None] % 3)
    return model, data


@pytest.mark.slow
@pytest.mark.parametrize("dims, said", [
    ((20, 24), ("shape (20, 24), which several YOLO layouts fit for labels of 3 classes", "v8 [4 + 16 classes, 24"
                " anchors] or v5 [20 anchors, 5 + 19 classes]", "with --task yolo it is read as v8")),
    ((5, 5), ("shape (5, 5), which no YOLO layout fits for labels of 3 classes", "TFLite_Detection_PostProcess")),
])
def test_a_layout_two_readings_fit_or_none_is_one_line_naming_the_output(tmp_path, capsys, dims, said):
    model, data = _tiny(tmp_path, dims)
    line = one_error_line(run_cli(model, data, tmp_path / "out", name="tiny", latency_runs=0),
                          capsys.readouterr().err, tmp_path / "out")
    assert f"output output_0 has shape {dims}" in line, line
    for words in said:
        assert words in line, (words, line)


@pytest.mark.slow
def test_task_yolo_reads_the_layout_the_refusal_names(tmp_path):
    model, data = _tiny(tmp_path, (20, 24))
    code = run_cli(model, data, tmp_path / "out", "--task", "yolo", "--variants", "float", "--formats", "json",
                   name="tiny", latency_runs=0)
    assert code == 0
    report = load_report(tmp_path / "out" / "tiny")
    assert report.model.task == "yolo" and report.model.num_classes == 16
    assert "v8 [4 + 16 classes, 24 anchors]" in report.model.task_reason


# --- an end-to-end export: NMS inside, [K, 6] ------------------------------------------------------------------
def _nms_rows(rng, n=30, k=300):
    """Labels of 3 classes (one to three boxes an image) and rows x1, y1, x2, y2, score, class as an end-to-end
    export writes them: a detection near each labelled box (now and then of another class), some anywhere, zeros
    past them."""
    top = rng.uniform(0, 0.6, (n, 3, 2))
    y_boxes = np.concatenate([top, top + rng.uniform(0.1, 0.35, (n, 3, 2))], axis=-1)
    y_classes = rng.integers(0, 3, (n, 3))
    y_classes[:, 1:][rng.uniform(size=(n, 2)) < 0.4] = -1
    rows = np.zeros((n, k, 6))
    for i in range(n):
        j = 0
        for b, c in zip(y_boxes[i], y_classes[i]):
            if c >= 0:
                rows[i, j] = (*(b[[1, 0, 3, 2]] + rng.normal(scale=0.03, size=4)), rng.uniform(0.2, 1),
                              c if rng.uniform() < 0.85 else (c + 1) % 3)
                j += 1
        for _ in range(rng.integers(0, 6)):
            corner = rng.uniform(0, 0.7, 2)
            rows[i, j] = (*corner, *(corner + 0.2), rng.uniform(0, 0.3), rng.integers(0, 3))
            j += 1
    return y_boxes, y_classes, rows


def _read_nms(y_boxes, y_classes, rows, forced=None):
    from reporter.measure.kinds import yolo
    from reporter.measure.kinds.base import LabelSource
    from reporter.measure.kinds.reading import read_task
    from reporter.measure.signature import Port

    port = Port("detections", "output_0", 0, (1, *rows.shape[1:]), "float32", allocated=(1, *rows.shape[1:]))
    y = yolo.KIND.join_labels({"boxes": (y_boxes, False), "classes": (y_classes, True)}, port, "d.npz")
    return read_task(LabelSource(y, False, "d.npz", "y"), port, "", forced=forced)


def test_an_end_to_end_exports_rows_are_scored_as_pycocotools_scores_them():
    rng = np.random.default_rng(65)
    y_boxes, y_classes, rows = _nms_rows(rng)
    reading = _read_nms(y_boxes, y_classes, rows)
    assert "NMS inside [300 detections, 6]" in reading.reason and reading.task.num_classes == 3
    out = rows.reshape(len(rows), -1)
    expected = reference.score(Y.reference_detections(rows, "nms", 1.0), y_boxes, y_classes)
    assert reading.task.score(reading.y).measure(out).value == pytest.approx(expected["map50"], rel=1e-9)
    det = reading.task.metrics(reading.y, out, out).figures["detection"]
    assert det.map == pytest.approx(expected["map"], rel=1e-9)


def test_one_class_rows_of_six_read_two_ways_are_asked_about_then_read_as_task_yolo_says():
    """[300, 6] with labels of one class is also a one-class YOLOv5 head of 300 anchors: the run asks."""
    from reporter.core.errors import InputError

    rng = np.random.default_rng(6)
    y_boxes, y_classes, rows = _nms_rows(rng)
    y_classes = np.where(y_classes >= 0, 0, -1)
    with pytest.raises(InputError) as err:
        _read_nms(y_boxes, y_classes, rows)
    text = str(err.value)
    assert "output detections has shape (300, 6)" in text and "--task yolo" in text and "\n" not in text, text
    assert "NMS inside [300 detections, 6] or v5 [300 anchors, 5 + 1 classes]" in text, text
    assert "NMS inside" in _read_nms(y_boxes, y_classes, rows, forced="yolo").reason


def test_a_one_class_v8_head_is_read_as_a_yolo_not_as_classes_per_position():
    """[5, A] with boxes of one class: the labels packed into rows of 5 values per image fit the output's first axis,
    which the reading of labels per position (segmentation) would take as its positions."""
    y_boxes, y_classes, _ = _nms_rows(np.random.default_rng(1))
    rows = np.zeros((len(y_boxes), 5, 64))
    reading = _read_nms(y_boxes, np.where(y_classes >= 0, 0, -1), rows)
    assert reading.task.kind.name == "yolo" and reading.task.num_classes == 1
    assert "v8 [4 + 1 classes, 64 anchors]" in reading.reason
