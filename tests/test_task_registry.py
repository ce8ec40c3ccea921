"""The task-kind registry (reporter/core/tasks.py): every kind it holds is accepted by --task, read from labels
by reporter.inputs.task_reading, measured by its own main metric, and worded in a rendered report.

Expectations are written out here (the words a reader sees, metrics computed by hand or by scikit-learn), never
read back from the registry: a new kind needs its row in each table below, or these tests fail."""

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn import metrics as skm

from reporter.core import tasks

FIXTURE = Path(__file__).parent / "fixtures" / "report.json"

# kind: (model.task as report.json records it, binary_sigmoid, num_classes, model.main_metric)
RECORDED = {
    "classification": ("classification", False, 2, "accuracy"),
    "binary": ("classification", True, 2, "accuracy"),
    "multilabel": ("multilabel", False, 2, "exact-match accuracy"),
    "segmentation": ("segmentation", False, 2, "mean IoU"),
    "regression": ("regression", False, None, ""),
    "mask": ("regression", False, None, "mask IoU"),  # recorded as a regression judged by mask IoU
    "detection": ("detection", False, 2, "mAP@0.5"),
    "keypoints": ("keypoints", False, 2, "PCK@0.1"),
    "yolo": ("yolo", False, 2, "mAP@0.5"),
}
# kind: what the rendered report says (Markdown summary, then the HTML page)
WORDS = {
    "classification": (["Measured as a classifier (REASON)", "keras model, 2 classes,", "| Variant | Accuracy |",
                        "of samples"], ["<h3>Per class: precision / recall / F1</h3>"]),
    "binary": (["Measured as a binary classifier (REASON)", "| Variant | Accuracy |", "of samples"],
               ["(one sigmoid output, threshold 0.5)", "<h3>Per class: precision / recall / F1</h3>"]),
    "multilabel": (["Measured as multi-label (REASON)", "keras model, 2 labels (multi-label),",
                    "| Variant | Exact-match accuracy |", "of samples"],
                   ["<h3>Per label: precision / recall / F1 · accuracy · ROC AUC", "<th>Exact-match accuracy</th>"]),
    "segmentation": (["Measured as segmentation (a class at every position) (REASON)", "| Variant | Mean IoU |",
                      "points of mean IoU against float", "for 100 % of pixels"],
                     ["<h3>Per class, over pixels: precision / recall / F1 · IoU</h3>", "<th>Pixel accuracy</th>"]),
    "regression": (["Measured as a regression (REASON)", "output compared with float"], []),
    "mask": (["Measured as a regression (REASON)", "| Variant | Mask IoU |", "points of mask IoU against float"],
             ["<th>Mask IoU</th>"]),
    "detection": (["Measured as a detector (REASON)", "| Variant | mAP@0.5 |", "points of mAP@0.5 against float"],
                  ["<th>mAP@0.5</th>"]),
    "keypoints": (["Measured as a keypoint model (REASON)", "keras model, 2 keypoints,", "| Variant | PCK@0.1 |",
                   "points of PCK@0.1 against float"], ["<th>PCK@0.1</th>"]),
    "yolo": (["Measured as a YOLO detector (REASON)", "| Variant | mAP@0.5 |", "points of mAP@0.5 against float"],
             ["<th>mAP@0.5</th>"]),
}


def test_every_kind_has_its_expectations_here():
    assert set(tasks.NAMES) == set(RECORDED) == set(WORDS) == set(READINGS) == set(SCORES)


# --- words and metric in the report -------------------------------------------------------------------------
def _rendered(kind: str) -> tuple[str, str]:
    """tests/fixtures/report.json recorded as a model of `kind`, its findings decided and worded again."""
    from reporter.render import formats
    from reporter.pipeline.conclude import report_from_json

    task, binary_sigmoid, classes, main_metric = RECORDED[kind]
    data = json.loads(FIXTURE.read_text())
    data.pop("findings")  # decided again from the model as recorded below
    data["model"].update(task=task, binary_sigmoid=binary_sigmoid, num_classes=classes, main_metric=main_metric,
                         task_reason="REASON")
    report = report_from_json(json.dumps(data))
    return tuple(t.decode() if isinstance(t, bytes) else t for t in (formats.render(report, "md"),
                                                                      formats.render(report, "html")))


@pytest.mark.parametrize("kind", sorted(WORDS))
def test_a_kinds_words_and_metric_reach_the_report(kind):
    md, html = _rendered(kind)
    in_md, in_html = WORDS[kind]
    for words in in_md:
        assert words in md, (kind, words)
    for words in in_html:
        assert words in html, (kind, words)


def test_a_binary_sigmoid_is_still_recorded_as_classification():
    """Old reports load: `model.task` keeps its recorded names, the entry is looked up from them."""
    from reporter.pipeline.conclude import report_from_json

    data = json.loads(FIXTURE.read_text())
    data["model"].update(binary_sigmoid=True)
    report = report_from_json(json.dumps(data))
    assert report.model.task == "classification" and report.model.task_kind.name == "binary"
    assert json.loads(report.to_json())["model"]["task"] == "classification"


# --- --task and the reading of labels -----------------------------------------------------------------------
def _port(shape):
    from reporter.measure.kinds.detection import Layout
    from reporter.measure.signature import Port

    if shape[0] == "detector":  # the one port a detector's four postprocess outputs are read as: K, classes
        return Layout((0, 1, 2, 3), shape[1], shape[2], 0.0).port()
    return Port("out", "output_0", 0, (-1, *shape), "float32", allocated=(1, *shape))


# kind: (the output's shape without the batch, labels for 4 samples, the classes read)
READINGS = {
    "classification": ((3,), np.array([0, 2, 1, 2]), 3),
    "binary": ((1,), np.array([0, 1, 1, 0]), 2),
    "multilabel": ((3,), np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]]), 3),
    "segmentation": ((2, 2, 4), np.array([[[0, 1], [2, 3]]] * 4), 4),
    "regression": ((2,), np.array([[0.5, 1.5], [2.0, -1.0], [0.1, 0.2], [3.0, 4.0]], np.float32), None),
    "mask": ((2, 2, 1), np.array([[[[0], [1]], [[1], [1]]]] * 4, np.float32), None),
    # y_boxes (4, 1, 4) and y_classes (4, 1) packed as bind_labels gives them: boxes, then class ids
    "detection": (("detector", 5, 3), np.array([[.1, .1, .5, .5, 0], [.2, .2, .6, .6, 2], [0, 0, 0, 0, -1],
                                                [.3, .1, .9, .4, 1]], np.float32), 3),
    # y_keypoints (4, 2, 2): y, x normalized, for heatmaps (8, 8, K = 2)
    "keypoints": ((8, 8, 2), np.array([[[.1, .2], [.5, .5]]] * 4, np.float32), 2),
    # a raw YOLO output (7, 8) with y_boxes/y_classes packed as for the detector: v8 [4 + 3, 8] and v5 [7, 5 + 3]
    # both fit 3 classes; --task yolo reads v8
    "yolo": ((7, 8), np.array([[.1, .1, .5, .5, 0], [.2, .2, .6, .6, 2], [0, 0, 0, 0, -1],
                               [.3, .1, .9, .4, 1]], np.float32), 3),
}
# The classes an output named without labels has, where it is not the labelled reading's: a detector's come from its
# op's attributes, which one output of several (a head) does not carry.
UNLABELLED_CLASSES = {"detection": None, "yolo": None}


@pytest.mark.parametrize("kind", sorted(READINGS))
def test_every_kind_is_accepted_by_task_and_read_from_its_labels(kind):
    from reporter.cli import build_parser
    from reporter.inputs.task_reading import LabelSource, read_task

    args = build_parser().parse_args(["run", "m.keras", "--data", "d.npz", "--task", kind, "--task", f"out={kind}"])
    assert list(args.task) == [kind, f"out={kind}"]

    shape, y, classes = READINGS[kind]
    labels = LabelSource(y, np.issubdtype(y.dtype, np.integer), "d.npz", "y")
    reading = read_task(labels, _port(shape), "", forced=kind)
    assert reading.task.kind.name == kind and reading.task.num_classes == classes
    assert reading.reason.startswith(f"as --task {kind} says")


@pytest.mark.parametrize("kind", sorted(READINGS))
def test_every_kind_names_an_unlabelled_output_too(kind):
    """--task for an output without labels (compared with float): its classes from the output's shape."""
    from reporter.inputs.labels import Head
    from reporter.inputs.task_reading import head_spec

    shape, _, classes = READINGS[kind]
    classes = UNLABELLED_CLASSES.get(kind, classes)
    spec = head_spec(Head(_port(shape), None, False, False), "d.npz", "", 0.5, forced=kind)
    assert spec.task.kind.name == kind and spec.task.num_classes == classes


def test_a_kind_the_registry_does_not_hold_is_refused_by_task():
    from reporter.cli import main

    assert main(["run", "m.keras", "--data", "d.npz", "--task", "ranking"]) == 2


# --- each kind's own main metric ----------------------------------------------------------------------------
def _outputs(kind):
    """(raw outputs of 6 samples, labels as the measurements compare them, the main metric by hand)."""
    from reporter.measure.task import label_codes

    if kind == "classification":
        out = np.array([[.7, .2, .1], [.1, .8, .1], [.2, .2, .6], [.5, .4, .1], [.3, .3, .4], [.1, .6, .3]])
        y = np.array([0, 1, 1, 0, 2, 2])
        return out, y, skm.accuracy_score(y, out.argmax(1))
    if kind == "binary":
        out = np.array([[.9], [.2], [.6], [.4], [.5], [.1]])
        y = np.array([1, 0, 0, 0, 1, 1])
        return out, y, skm.accuracy_score(y, (out[:, 0] >= 0.5).astype(int))
    if kind == "multilabel":
        out = np.array([[.9, .1], [.8, .7], [.2, .3], [.6, .6], [.1, .9], [.4, .4]])
        bits = np.array([[1, 0], [1, 1], [0, 1], [1, 1], [0, 1], [1, 0]])
        return out, label_codes(bits), skm.accuracy_score(bits, (out >= 0.5).astype(int))  # exact match
    if kind == "segmentation":
        rng = np.random.default_rng(3)
        out = rng.random((6, 2, 2, 3))
        y = rng.integers(0, 3, (6, 4))
        pred = out.reshape(6, 4, 3).argmax(-1)
        return out.reshape(6, -1), y, skm.jaccard_score(y.ravel(), pred.ravel(), average="macro")
    if kind == "detection":  # 2 detections per image (boxes | classes | scores | num), one labelled box each
        import detection_reference

        y_boxes = np.array([[[.1, .1, .5, .5]], [[.2, .2, .6, .6]], [[.5, .5, .9, .9]]] * 2)
        y_classes = np.array([[0], [1], [1], [0], [0], [1]])
        boxes = np.concatenate([y_boxes + 0.02, np.full_like(y_boxes, 0.3)], axis=1)
        classes = np.array([[0, 1], [1, 0], [0, 1], [0, 0], [1, 0], [1, 1]])
        scores = np.array([[.9, .2], [.8, .7], [.6, .5], [.4, .3], [.9, .1], [.7, .6]])
        num = np.array([2, 2, 1, 2, 2, 1])
        out = np.concatenate([boxes.reshape(6, -1), classes, scores, num[:, None]], axis=1)
        dets = [{"boxes": boxes[i, :num[i]], "classes": classes[i, :num[i]], "scores": scores[i, :num[i]]}
                for i in range(6)]
        y = np.concatenate([y_boxes.reshape(6, -1), y_classes], axis=1)
        return out, y, detection_reference.score(dets, y_boxes, y_classes)["map50"]
    if kind == "mask":  # pooled over every value of every sample: output >= 0.5 against target >= 0.5
        out = np.array([[.9, .2, .6, .1], [.4, .7, .8, .3], [.1, .1, .2, .9], [.6, .6, .6, .6], [.3, .8, .1, .5],
                        [.2, .2, .9, .9]])
        y = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1], [1, 1, 0, 1], [0, 1, 0, 1], [0, 1, 1, 1]], np.float32)
        return out, y, skm.jaccard_score(y.ravel(), (out >= 0.5).ravel().astype(int))
    if kind == "keypoints":  # heatmaps (4, 4, 2): each keypoint at its top cell's centre, (row + 0.5) / 4; right
        # within 0.1 x the diagonal of the box of the image's labelled keypoints (visibility > 0), of the image's
        # (sqrt 2) where that box is flat
        out = np.zeros((6, 4, 4, 2))
        top = [((0, 0), (3, 3)), ((1, 1), (2, 2)), ((0, 3), (3, 0)), ((2, 2), (2, 2)), ((0, 0), (0, 1)),
               ((3, 3), (0, 0))]
        for i, cells in enumerate(top):
            for k, (r, c) in enumerate(cells):
                out[i, r, c, k] = 1.0
        y = np.array([[[.125, .125, 2], [.875, .875, 2]],  # both right
                      [[.375, .375, 2], [.9, .9, 2]],  # 0.39 off, the diagonal 0.74: one right
                      [[.2, .8, 2], [.8, .2, 2]],  # each 0.106 off, the diagonal 0.85: none right
                      [[.1, .1, 0], [.625, .625, 2]],  # one labelled keypoint, right
                      [[.125, .125, 2], [.125, .625, 2]],  # a flat box: 0.25 off the image's 0.14: one right
                      [[.5, .5, 2], [.125, .125, 2]]])  # 0.53 off, the diagonal 0.53: one right
        return out.reshape(6, -1), y.reshape(6, -1), 6 / 11
    if kind == "yolo":  # the detection case's boxes as a v8 [4 + 2, 4] head, 3 anchors empty: its mAP by hand
        import detection_reference
        import yolo_fixtures

        y_boxes = np.array([[[.1, .1, .5, .5]], [[.2, .2, .6, .6]], [[.5, .5, .9, .9]]] * 2)
        y_classes = np.array([[0], [1], [1], [0], [0], [1]])
        out = np.zeros((6, 6, 4))
        b = y_boxes[:, 0] + 0.02
        out[:, 0, 0], out[:, 1, 0], out[:, 2, 0], out[:, 3, 0] = (b[:, 1] + b[:, 3]) / 2, (b[:, 0] + b[:, 2]) / 2, \
            b[:, 3] - b[:, 1], b[:, 2] - b[:, 0]
        out[np.arange(6), 4 + np.array([0, 1, 0, 0, 1, 1]), 0] = [.9, .8, .6, .4, .9, .7]
        y = np.concatenate([y_boxes.reshape(6, -1), y_classes], axis=1)
        dets = yolo_fixtures.reference_detections(out, "v8", 1.0)
        return out.reshape(6, -1), y, detection_reference.score(dets, y_boxes, y_classes)["map50"]
    out = np.array([[0.1], [0.2], [0.3], [0.4], [0.5], [0.6]])
    return out, out[:, 0], None


# kind: (the main metric's name as report.json records it, whether its paired test resamples samples)
SCORES = {
    "classification": ("accuracy", False),
    "binary": ("accuracy", False),
    "multilabel": ("exact-match accuracy", False),
    "segmentation": ("mean IoU", True),
    "regression": (None, None),
    "mask": ("mask IoU", True),
    "detection": ("mAP@0.5", True),
    "keypoints": ("PCK@0.1", True),
    "yolo": ("mAP@0.5", True),
}


@pytest.mark.parametrize("kind", sorted(SCORES))
def test_every_kind_is_measured_by_its_own_main_metric(kind):
    from reporter.measure.task import Task
    from reporter.inputs.metric import task_score

    out, y, expected = _outputs(kind)
    shape = {"segmentation": (2, 2, 3), "keypoints": (4, 4, 2)}.get(kind, out.shape[1:])
    task = Task.of(tasks.of(kind), int(np.prod(shape)), shape)
    if kind == "yolo":
        from reporter.measure.kinds.yolo import YoloTask

        task = YoloTask(tasks.of(kind), 2, 0.001, layout="v8", dims=(6, 4))
    score = task_score(task, y)
    name, bootstrapped = SCORES[kind]
    if name is None:
        assert score is None  # a regression is measured by its output error, not a main metric
        return
    assert score.name == name and score.bootstrapped == bootstrapped
    assert score.measure(out).value == pytest.approx(expected)
