"""Every registered task kind keeps the protocol (reporter/measure/kinds), as check_estimator checks an estimator.

Each kind recognises outputs and labels of its own kind, refuses another kind's saying why, its main metric agrees
with scikit-learn on synthetic data, and its record round-trips through report.json. Then a kind of one's own
(tests/top3_kind.py: one module, registered in one line) runs a report end to end.

Expectations are written out here (the labels of each kind, what report.json records, scikit-learn's value),
never read back from the kind under test: a new built-in kind needs its row in FIXTURES, or the first test fails."""

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn import metrics as skm

from reporter.core import tasks
from reporter.core.errors import InputError
from reporter.measure.kinds.base import LabelSource
from reporter.measure.signature import Port

FIXTURE = Path(__file__).parent / "fixtures" / "report.json"
N = 40


def _port(shape):
    return Port("out", "output_0", 0, (-1, *shape), "float32", allocated=(1, *shape))


def _softmax(logits):
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _fixture(name):
    """(output shape without the batch, the op making it, labels, raw outputs (N, values), classes read, the main
    metric computed with scikit-learn (None: the kind has none))."""
    rng = np.random.default_rng(sum(map(ord, name)))
    if name == "classification":
        y = rng.integers(0, 4, N)
        out = _softmax(rng.normal(size=(N, 4)) + 2 * np.eye(4)[y])
        return (4,), "SOFTMAX", y, out, 4, skm.accuracy_score(y, out.argmax(1))
    if name == "binary":
        y = rng.integers(0, 2, N)
        out = np.clip(0.3 * y + rng.uniform(size=N) * 0.7, 0, 1)[:, None]
        return (1,), "LOGISTIC", y, out, 2, skm.accuracy_score(y, (out[:, 0] >= 0.5).astype(int))
    if name == "multilabel":
        y = rng.integers(0, 2, (N, 3))
        out = np.clip(0.4 * y + rng.uniform(size=(N, 3)) * 0.6, 0, 1)
        return (3,), "LOGISTIC", y, out, 3, skm.accuracy_score(y, (out >= 0.5).astype(int))  # exact match
    if name == "segmentation":
        y = rng.integers(0, 3, (N, 4, 4))
        out = _softmax(rng.normal(size=(N, 4, 4, 3)) + 1.5 * np.eye(3)[y])
        pred = out.argmax(-1)
        return (4, 4, 3), "SOFTMAX", y, out.reshape(N, -1), 3, skm.jaccard_score(y.ravel(), pred.ravel(),
                                                                                  average="macro")
    if name == "regression":
        y = rng.normal(size=(N, 2)).astype(np.float32)
        return (2,), "", y, y + rng.normal(scale=0.1, size=y.shape), None, None
    if name == "mask":
        y = (rng.uniform(size=(N, 4, 4, 1)) > 0.5).astype(np.float32)
        out = np.clip(0.5 * y + rng.uniform(size=y.shape) * 0.5, 0, 1)
        iou = skm.jaccard_score((y >= 0.5).ravel(), (out >= 0.5).ravel())  # intersection / union over all values
        return (4, 4, 1), "LOGISTIC", y, out.reshape(N, -1), None, iou
    if name == "detection":
        return _detections(rng)
    if name == "yolo":  # a v8 output [4 + 3, 16], normalized boxes, labels packed as bind_labels packs them
        import yolo_fixtures

        return yolo_fixtures.conformance(rng, N)
    if name == "keypoints":  # heatmaps (8, 8, 4), labels (N, 4, 3) with some keypoints not labelled
        import keypoint_fixtures

        return keypoint_fixtures.conformance(rng, N)
    raise KeyError(name)


def _detections(rng, k=5, boxes=3, classes=3):
    """Labelled boxes (ymin, xmin, ymax, xmax) and class ids (-1 pads) per image, and a postprocess output packed
    as the detection kind documents it (boxes K*4 | classes K | scores K | num_detections): some detections near
    a labelled box, some of another class, some anywhere; the rows past num_detections hold garbage, as the op
    leaves them. The expected mAP@0.5 is pycocotools' (tests/detection_reference.py) on the first num_detections."""
    import detection_reference

    top = rng.uniform(0, 0.6, (N, boxes, 2))
    y_boxes = np.concatenate([top, top + rng.uniform(0.1, 0.4, (N, boxes, 2))], axis=-1)
    y_classes = rng.integers(0, classes, (N, boxes))
    y_classes[rng.uniform(size=(N, boxes)) < 0.3] = -1
    pick = rng.integers(0, boxes, (N, k))
    near = np.take_along_axis(y_boxes, pick[..., None], axis=1) + rng.normal(scale=0.04, size=(N, k, 4))
    found = np.where(rng.uniform(size=(N, k, 1)) < 0.8, near, rng.uniform(0, 1, (N, k, 4)))
    found_classes = np.where(rng.uniform(size=(N, k)) < 0.8, np.take_along_axis(y_classes, pick, axis=1),
                             rng.integers(0, classes, (N, k))).clip(0, None)
    scores = rng.uniform(size=(N, k))
    num = rng.integers(1, k + 1, N)
    out = np.concatenate([found.reshape(N, -1), found_classes + rng.choice([-0.004, 0.0, 0.004], (N, k)), scores,
                          num[:, None]], axis=1)
    dets = [{"boxes": found[i, :num[i]], "classes": found_classes[i, :num[i]], "scores": scores[i, :num[i]]}
            for i in range(N)]
    y = np.concatenate([y_boxes.reshape(N, -1), y_classes], axis=1).astype(np.float32)
    expected = detection_reference.score(dets, y_boxes.astype(np.float32), y_classes)["map50"]
    return ("detector", k, classes), "", y, out, classes, expected


FIXTURES = ("classification", "binary", "multilabel", "yolo", "segmentation", "regression", "mask", "detection", "keypoints")
# kind: the fixture of another kind whose labels and output it must refuse
REFUSES = {"classification": "binary", "binary": "classification", "multilabel": "classification",
           "segmentation": "classification", "regression": "segmentation", "mask": "regression",
           "detection": "segmentation", "keypoints": "segmentation", "yolo": "segmentation"}
# kind: (`model.task`, `model.binary_sigmoid` in report.json, the kind a report read back names)
RECORDED = {"classification": ("classification", False, "classification"),
            "binary": ("classification", True, "binary"),
            "multilabel": ("multilabel", False, "multilabel"),
            "segmentation": ("segmentation", False, "segmentation"),
            "regression": ("regression", False, "regression"),
            "mask": ("regression", False, "regression"),  # with `model.main_metric` "mask IoU"
            "detection": ("detection", False, "detection"),
            "keypoints": ("keypoints", False, "keypoints"),
            "yolo": ("yolo", False, "yolo")}
KINDS = [k.name for k in tasks.kinds()]


def _read(kind, fixture):
    shape, made_by, y, *_ = _fixture(fixture)
    labels = LabelSource(y, np.issubdtype(y.dtype, np.integer), "d.npz", "y")
    return kind.recognise(labels, _detector_port(*shape[1:]) if shape[0] == "detector" else _port(shape), 0.5,
                          made_by)


def _detector_port(k, classes):
    """The one port a detector's four postprocess outputs are read as (what reporter.measure.evaluate gives)."""
    from reporter.measure.kinds.detection import Layout

    return Layout((0, 1, 2, 3), k, classes, 0.0).port()


def test_every_registered_kind_has_a_fixture_here():
    assert KINDS == list(FIXTURES)


@pytest.mark.parametrize("name", KINDS)
def test_a_kind_recognises_its_own_output_and_labels(name):
    kind = tasks.of(name)
    _, _, y, out, classes, _ = _fixture(name)
    reading = _read(kind, name)
    assert reading.task.kind is kind and reading.task.num_classes == classes and reading.reason
    # the labels kept are the ones given, as the kind compares them
    assert (kind.decode(reading.task, reading.y).reshape(y.shape) == y).all()


@pytest.mark.parametrize("name", KINDS)
def test_a_kind_refuses_another_kinds_output_and_labels_saying_why(name):
    with pytest.raises(InputError) as err:
        _read(tasks.of(name), REFUSES[name])
    text = str(err.value)
    assert "d.npz" in text and ("'y'" in text or "output out" in text) and "\n" not in text, text


@pytest.mark.parametrize("name", KINDS)
def test_a_kinds_main_metric_and_correctness_agree_with_scikit_learn(name):
    kind = tasks.of(name)
    reading = _read(kind, name)
    _, _, y, out, _, expected = _fixture(name)
    score = reading.task.score(reading.y)
    if expected is None:
        assert score is None and kind.main_metric == ""  # measured by its output error against float
        assert reading.task.metrics(reading.y, out, out) is None
        return
    assert score.name == kind.main_metric
    assert score.measure(out).value == pytest.approx(expected, rel=1e-12)
    assert score.value(out) == pytest.approx(expected, rel=1e-12)
    correct = reading.task.correct(out, reading.y)
    if kind.sample_correct:  # the share of samples right is the metric, and McNemar pairs them
        assert correct.shape == (N,) and correct.mean() == pytest.approx(expected, rel=1e-12)
        assert reading.task.metrics(reading.y, out, out).accuracy == pytest.approx(expected, rel=1e-12)
    else:  # bootstrapped over whole samples: no per-sample right or wrong
        assert correct is None and score.bootstrapped


@pytest.mark.parametrize("name", KINDS)
def test_a_kinds_record_round_trips_through_report_json(name):
    from reporter.pipeline.conclude import report_from_json

    kind = tasks.of(name)
    task, binary_sigmoid, read_back = RECORDED[name]
    data = json.loads(FIXTURE.read_text())
    data.pop("findings")
    data["model"].update(task=kind.record.task, binary_sigmoid=kind.record.binary_sigmoid,
                         num_classes=2 if kind.has_classes else None, main_metric=kind.main_metric)
    report = report_from_json(report_from_json(json.dumps(data)).to_json())
    written = json.loads(report.to_json())["model"]
    assert (written["task"], written["binary_sigmoid"], written["main_metric"]) == (task, binary_sigmoid,
                                                                                   kind.main_metric)
    assert report.model.task_kind is tasks.of(read_back)


def test_a_name_taken_is_refused_and_a_kind_needs_a_name():
    from reporter.measure.kinds import register
    from reporter.measure.kinds.classification import Classification

    with pytest.raises(ValueError, match="already registered"):
        register(Classification())
    with pytest.raises(ValueError, match="no name"):
        register(type("Nameless", (Classification,), {"name": ""})())


def test_a_kind_that_detects_its_own_output_is_read_without_task():
    """A registered kind's `detect` is asked before the shared reading: here a kind that takes every softmax of more
    than 3 classes; without it, the same output and labels read as a classifier."""
    import top3_kind
    from reporter.measure.kinds import register, unregister
    from reporter.measure.kinds.reading import read_task

    class Detected(top3_kind.TopThree):
        name = "top3_detected"

        def detect(self, labels, port, threshold, made_by=""):
            return self.recognise(labels, port, threshold) if made_by == "SOFTMAX" and port.size > 3 else None

    shape, made_by, y, *_ = _fixture("classification")
    labels = LabelSource(y, True, "d.npz", "y")
    register(Detected())
    try:
        assert read_task(labels, _port(shape), made_by).task.kind.name == "top3_detected"
    finally:
        unregister("top3_detected")
    assert read_task(labels, _port(shape), made_by).task.kind.name == "classification"


# --- a kind of one's own, end to end ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def top3_run(demo_cache, tmp_path_factory):
    """The top2 fixture (a digits softmax classifier, 10 classes) run with --task top3: a kind registered in one
    line from tests/top3_kind.py."""
    import seg_fixtures
    import top3_kind
    from conftest import run_cli
    from reporter.measure import kinds

    kinds.register(top3_kind.KIND)  # the one line
    try:
        model, data = seg_fixtures.ensure("top2", demo_cache)
        out = tmp_path_factory.mktemp("top3_out")
        code = run_cli(model, data, out, "--variants", "float,fiq", "--task", "top3", "--formats", "json,md",
                       name="top3", latency_runs=3)
        yield code, out / "top3", data
    finally:
        kinds.unregister(top3_kind.KIND.name)


@pytest.mark.slow
def test_a_kind_of_ones_own_runs_a_report_end_to_end(top3_run):
    from independent import signature_input_order, signature_predict
    from reporter.render import formats
    from reporter.pipeline.conclude import report_from_json

    code, folder, data_path = top3_run
    assert code == 0, (folder / "run.log").read_text()[-3000:] if (folder / "run.log").is_file() else code
    report = json.loads((folder / "report.json").read_text())
    assert report["model"]["task"] == "top3" and report["model"]["main_metric"] == "top-3 accuracy"
    data = np.load(data_path)
    x, y = data["x"], data["y"]
    for variant in ("float", "fiq"):
        model = (folder / f"{variant}.tflite").read_bytes()
        (name,) = signature_input_order(model)
        (scores,) = signature_predict(model, {name: x}).values()
        expected = skm.top_k_accuracy_score(y, np.asarray(scores, np.float64), k=3, labels=range(10))
        measured = next(v for v in report["variants"] if v["name"] == variant)["metrics"]
        assert measured["accuracy"] == pytest.approx(expected, abs=1e-12), variant
    # McNemar's counts pair the two models' top-3 correctness
    assert "float" in next(v for v in report["variants"] if v["name"] == "fiq")["metrics"]["paired"]
    summary = (folder / "summary.md").read_text()
    assert "Measured as a top-3 classifier (as --task top3 says: a sample is right when its class is among the 3" \
           " highest scores)" in summary, summary[:3000]
    assert "| Variant | Top-3 accuracy |" in summary, summary[:3000]
    # report.json re-renders with the kind registered
    again = formats.render(report_from_json((folder / "report.json").read_text()), "md").decode()
    assert "Measured as a top-3 classifier" in again
