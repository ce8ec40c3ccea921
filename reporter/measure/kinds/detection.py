"""The detection kind: a model ending in TFLite_Detection_PostProcess, judged by mAP@0.5 against labelled boxes.

The op's four outputs (boxes [1, K, 4], classes [1, K], scores [1, K], num_detections [1]) are told apart by the
op's output index, each graph output traced back through QUANTIZE/DEQUANTIZE ops to the op, and sized by the
interpreter after allocation (the converter writes them with shape [] in the file). A run keeps one array per
model (reporter.measure.measurer): the four outputs are packed into one row per image (`Layout`), and the labels
`y_boxes` [N, L, 4] and `y_classes` [N, L] into one row per image too (`pack_labels`).

    output row: boxes K*4 (ymin, xmin, ymax, xmax per detection) | classes K | scores K | num_detections 1
    label row:  boxes L*4 (ymin, xmin, ymax, xmax, normalized)   | classes L (class ids, -1 pads)

The figures (mAP@0.5, COCO mAP@[.5:.95], AP@0.5 per class, recall at IoU 0.5) are faster-coco-eval's over each
image's first num_detections detections, class ids rounded (an int8 class 1 reads 0.996). The noise rule pairs
mAP@0.5 by a bootstrap over whole images: each detection matched once at IoU 0.5 as COCO matches it, and AP@0.5
re-accumulated on each resample of images (COCO's 101-point interpolation), so no COCO evaluation runs per resample.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.core.errors import InputError
from reporter.core.targets import rules
from reporter.measure.kinds.base import Example, Joined, Kind, LabelSource, TaskReading, check_normalized
from reporter.measure.scoring import BOOTSTRAP_DENSE, Score, Scored, resample_weights
from reporter.measure.signature import Port, Signature
from reporter.measure.task import Task
from reporter.model import figures
from reporter.model.bounds import COUNT, SHARE, figure
from reporter.model.report import Metrics

POSTPROCESS = "TFLite_Detection_PostProcess"
ROLES = ("boxes", "classes", "scores", "num")  # the op's outputs, by its output index
KEY = POSTPROCESS  # the signature key of the one port standing for the four outputs
NAME = "detections"  # its name in the report
LABELS = ("boxes", "classes")  # the label arrays y_boxes, y_classes
MAP50 = "mAP@0.5"
IOU = 0.5
_PASS_THROUGH = ("QUANTIZE", "DEQUANTIZE")
_RECALL_POINTS = np.linspace(0.0, 1.0, 101)  # COCO's recall thresholds
# Normalized label boxes may overshoot [0, 1] by this much (rounding in a converted annotation) and still be read.
BOX_TOLERANCE = 0.01
_COUNTS = ("max_detections", "max_classes_per_detection", "num_classes")  # the op returns nothing below 1
_SCALES = ("y_scale", "x_scale", "h_scale", "w_scale")  # the box decoding divides the encodings by them


@dataclass(frozen=True)
class DetectionMetrics:
    """A detector's figures (report.json's `metrics.figures.detection`), from a COCO evaluation of each image's first
    num_detections detections against the labelled boxes: mAP at IoU 0.5 (the main metric), COCO mAP over IoU
    0.5:0.95, AP at IoU 0.5 per class id (None for a class without labelled boxes) and the share of labelled boxes
    matched at IoU 0.5 by every detection the model returns (its own score threshold, `score_threshold`)."""

    map50: float = figure(SHARE)
    map: float = figure(SHARE)
    recall50: Optional[float] = figure(SHARE)  # None: no labelled box on the evaluation data (nothing to recall)
    ap50_per_class: list[Optional[float]] = figure(SHARE, default_factory=list)
    score_threshold: float = 0.0
    boxes_per_class: list[int] = figure(COUNT, default_factory=list)  # labelled boxes on the evaluation data, by class
    # pycocotools' -1 ("no labelled box") is never stored: its mAPs are read as 0 and a class without labelled boxes
    # has no AP (None), so a -1 here is refused like any other figure below 0.


class PostprocessRefused(ValueError):
    """The op's options (its custom options in the file) make every output empty or not finite."""


def postprocess_problem(attributes: dict) -> str:
    """Why TFLite_Detection_PostProcess with these options (its flexbuffer custom options) cannot give a detection
    to measure: "has max_detections = 0: it returns no detection"; "" when they can."""
    said = lambda name: f"the model's {POSTPROCESS} has {name} = {_number(attributes[name])}"  # noqa: E731
    for name in _COUNTS:
        if name in attributes and not attributes[name] >= 1:
            return f"{said(name)}: it returns no detection"
    if "nms_score_threshold" in attributes and not np.isfinite(attributes["nms_score_threshold"]):
        return f"{said('nms_score_threshold')}: it returns no detection"
    for name in _SCALES:
        if name in attributes and not (np.isfinite(attributes[name]) and attributes[name] != 0):
            return (f"{said(name)}: it decodes no usable box (the box encodings are divided by it: a box scale must be"
                    " a finite number other than 0)")
    iou = attributes.get("nms_iou_threshold", 0.5)
    if not 0 < iou <= 1:
        return f"{said('nms_iou_threshold')}: the op runs only with an IoU threshold in (0, 1]"
    return ""


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Layout:
    """Where a detector's four outputs are (graph output tensor indices, by ROLES) and what its op says."""

    indices: tuple  # boxes, classes, scores, num: the graph outputs' tensor indices
    detections: int  # K: the rows of boxes, classes and scores (from the allocated interpreter)
    num_classes: int
    score_threshold: float

    @property
    def width(self) -> int:
        return 6 * self.detections + 1

    def port(self) -> Port:
        return Port(NAME, KEY, -1, (1, self.width), "float32", allocated=(1, self.width),
                    attributes=(("num_classes", self.num_classes), ("score_threshold", self.score_threshold),
                                ("detections", self.detections)))

    def pack(self, by_index: dict) -> np.ndarray:
        """One row per image from the four outputs' rows (by tensor index, dequantized). The entries past an image's
        num_detections, which the op leaves unwritten (whatever memory held, NaN included), are written 0 (boxes,
        scores) and -1 (classes), so that no reading of the packed row sees them."""
        boxes, classes, scores, num = (np.asarray(by_index[i], np.float32) for i in self.indices)
        n, k = len(boxes), self.detections
        count = num.reshape(n, -1)[:, :1]
        written = np.arange(k)[None, :] < np.clip(np.rint(np.nan_to_num(count)), 0, k)
        return np.concatenate([np.where(np.repeat(written, 4, axis=1), boxes.reshape(n, -1)[:, :4 * k], 0),
                               np.where(written, classes.reshape(n, -1)[:, :k], -1),
                               np.where(written, scores.reshape(n, -1)[:, :k], 0), count], axis=1).astype(np.float32)


def layout(model: bytes, signature: Signature) -> Optional[Layout]:
    """The detector layout of `model`, whose graph outputs are the four outputs of one TFLite_Detection_PostProcess
    op (through QUANTIZE/DEQUANTIZE ops); None for any other model. PostprocessRefused (a ValueError) when the op's
    options make its outputs empty or not finite (`postprocess_problem`)."""
    if len(signature.outputs) != len(ROLES) or POSTPROCESS.encode() not in model:
        return None  # the op's custom code is a string in the file: without it, nothing to parse
    from flatbuffers import flexbuffers

    from reporter.measure import graph, runtime

    obj = graph.read_model(model)
    sg = obj.subgraphs[0]
    names = graph.op_names(obj)
    code = lambda op: obj.operatorCodes[op.opcodeIndex].customCode  # noqa: E731
    posts = [op for op in sg.operators if code(op) in (POSTPROCESS, POSTPROCESS.encode())]
    if len(posts) != 1:
        return None
    post = posts[0]
    made_by = {int(t): op for op in sg.operators for t in op.outputs}
    roles = {}
    for port in signature.outputs:
        tensor = port.index
        while tensor not in list(post.outputs) and tensor in made_by and names[made_by[tensor].opcodeIndex] \
                in _PASS_THROUGH:
            tensor = int(made_by[tensor].inputs[0])
        if tensor not in list(post.outputs):
            return None
        roles[list(post.outputs).index(tensor)] = port.index
    if sorted(roles) != [0, 1, 2, 3]:
        return None
    attributes = flexbuffers.Loads(bytes(post.customOptions))
    problem = postprocess_problem(attributes)
    if problem:  # before LiteRT allocates it: every measurement of it would be empty or NaN
        raise PostprocessRefused(problem)
    shapes = {int(d["index"]): tuple(d["shape"]) for d in runtime.allocated(model).get_output_details()}
    boxes = shapes[roles[0]]  # [1, K, 4] once allocated (the file says [])
    if len(boxes) != 3:
        return None
    return Layout(tuple(roles[i] for i in range(4)), int(boxes[1]), int(attributes["num_classes"]),
                  float(attributes.get("nms_score_threshold", 0.0)))


@dataclass(frozen=True)
class Detections:
    """A packed output read back: (N, K, 4) boxes, (N, K) class ids (rounded), (N, K) scores, (N,) counts."""

    boxes: np.ndarray
    classes: np.ndarray
    scores: np.ndarray
    num: np.ndarray

    @classmethod
    def unpack(cls, out: np.ndarray) -> "Detections":
        out = np.asarray(out, np.float64)
        n, k = len(out), (out.shape[1] - 1) // 6
        classes = np.rint(np.nan_to_num(out[:, 4 * k:5 * k], nan=-1.0)).astype(np.int64)
        num = np.clip(np.rint(np.nan_to_num(out[:, 6 * k], nan=0.0)), 0, k).astype(np.int64)
        return cls(out[:, :4 * k].reshape(n, k, 4), classes, out[:, 5 * k:6 * k], num)


def unpack_labels(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(y_boxes (N, L, 4), y_classes (N, L)) from a packed label row."""
    y = np.asarray(y, np.float64)
    n, l_ = len(y), y.shape[1] // 5
    return y[:, :4 * l_].reshape(n, l_, 4), np.rint(y[:, 4 * l_:]).astype(np.int64)


def pack_labels(labels: dict, num_classes: int, source) -> np.ndarray:
    """y_boxes [N, L, 4] and y_classes [N, L] (labels by name, as bind_labels reads them) as one row per image; a
    InputError naming the array that does not fit (`check_boxes`). A padding row (class -1) is no box: its
    coordinates are not read, and written 0."""
    boxes, classes = (np.asarray(labels[name][0]) for name in LABELS)
    if classes.ndim == 1 and boxes.ndim == 3 and boxes.shape[1] == 1:  # one box slot: read_labels made (n, 1) flat
        classes = classes[:, None]
    if boxes.ndim != 3 or boxes.shape[2] != 4 or boxes.shape[1] < 1:
        raise InputError(source, f"'y_boxes' has shape {boxes.shape}: expected (n, boxes, 4) with at least one box"
                                " slot per image, each box ymin, xmin, ymax, xmax normalized to 0..1 (-1 classes pad)")
    if classes.ndim != 2 or classes.shape != boxes.shape[:2]:
        raise InputError(source, f"'y_classes' has shape {classes.shape} but 'y_boxes' has {boxes.shape}: expected"
                                f" one class id per box, ({boxes.shape[0]}, {boxes.shape[1]}), -1 where no box")
    if classes.size and not np.all(classes == np.round(classes)):
        raise InputError(source, "'y_classes' holds values that are not class ids (whole numbers, -1 pads)")
    if classes.size and (classes.min() < -1 or classes.max() >= num_classes):
        raise InputError(source, f"labels out of range: 'y_classes' holds {int(classes.min())}..{int(classes.max())}"
                                f" but the detector has {num_classes} classes (0..{num_classes - 1}; -1 pads)")
    real = classes >= 0
    check_boxes(boxes, real, source)
    n = len(boxes)
    boxes = np.where(real[..., None], boxes, 0)
    return np.concatenate([boxes.reshape(n, -1), classes.reshape(n, -1)], axis=1).astype(np.float32)


def check_boxes(boxes: np.ndarray, real: np.ndarray, source) -> None:
    """The labelled boxes (`real`: the rows whose class is not -1) are ground truth the op's boxes can match: some
    image has one, each is finite, normalized (within [0, 1] up to BOX_TOLERANCE) and ordered (ymin <= ymax,
    xmin <= xmax); an InputError naming the first problem otherwise."""
    if not real.any():
        raise InputError(source, f"'y_classes' holds no box in any of the {len(real):,} images (every class id is -1):"
                                " there is no ground truth to measure mAP against")
    b = boxes[real].astype(np.float64)
    check_normalized(b, source, "y_boxes", "boxes", BOX_TOLERANCE)
    for low, high, axis in ((0, 2, "ymin > ymax"), (1, 3, "xmin > xmax")):
        flipped = b[:, low] > b[:, high]
        if flipped.any():
            image, slot = (int(i[flipped.argmax()]) for i in np.nonzero(real))
            raise InputError(source, f"'y_boxes' has {int(flipped.sum()):,} of {len(b):,} labelled boxes with {axis}"
                                    f" (first: image {image}, box {slot}): each box is ymin, xmin, ymax, xmax, not"
                                    " x, y, width, height")


def _attribute(port: Port, name: str):
    return dict(port.attributes).get(name)


class Detection(Kind):
    """A detector's postprocess outputs against labelled boxes and classes."""

    name = "detection"
    words = "a detector"
    main_metric = MAP50
    paired_test = ("paired bootstrap over whole images of mAP@0.5 (each detection matched once at IoU 0.5, as"
                   " COCO matches it, AP re-accumulated per resample)")
    accuracy_label = MAP50
    share_metric = MAP50
    plain_points = False
    unit = "detections"  # what a resample never splits (an image's detections stay together)
    per_class_title = "AP@0.5 per class"
    per_class_columns = "AP@0.5"
    class_count_compared = True
    sample_correct = False
    top_class = False  # the packed row is boxes, classes and scores: no top class

    # --- the protocol's additions: several outputs read as one, several label arrays as one -----------------
    def joins(self, model: bytes, signature: Signature) -> Optional[Joined]:
        found = layout(model, signature)
        return None if found is None else Joined(found.port(), found.pack)

    def join_labels(self, labels: dict, port: Port, source) -> Optional[np.ndarray]:
        if port.key != KEY:
            return None
        if set(labels) != set(LABELS):
            found = ", ".join(f"y_{n}" if n else "y" for n in labels) or "none"
            raise InputError(source, f"the model ends in {POSTPROCESS} (a detector): expected the label arrays y_boxes"
                                     " (n, boxes, 4: ymin, xmin, ymax, xmax normalized) and y_classes (n, boxes:"
                                     f" class ids, -1 pads), found {found}")
        return pack_labels(labels, _attribute(port, "num_classes"), source)

    def parts(self, model: bytes, out: np.ndarray) -> Optional[dict]:
        """Each postprocess output's values: boxes, classes (as the op writes them, not rounded) and scores of each
        image's first num_detections detections (the op leaves the rest unwritten), and the counts."""
        from reporter.measure import evaluate

        sig = evaluate.signature(model)
        found = layout(model, sig)
        if found is None:
            return None
        packed = np.asarray(out, np.float64)
        n, k = len(packed), found.detections
        num = np.clip(np.rint(packed[:, 6 * k]), 0, k).astype(np.int64)
        first = (np.arange(k)[None, :] < num[:, None])
        values = {"boxes": packed[:, :4 * k].reshape(n, k, 4)[first].reshape(-1),
                  "classes": packed[:, 4 * k:5 * k][first], "scores": packed[:, 5 * k:6 * k][first],
                  "num": packed[:, 6 * k]}
        keys = {p.index: p.key for p in sig.outputs}
        return {keys[index]: (role, values[role]) for role, index in zip(ROLES, found.indices)}

    # --- recognising --------------------------------------------------------------------------------------
    def examples(self, rng, n: int) -> list[Example]:
        return [_example(rng, n)]

    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        if port.key != KEY:
            raise InputError(labels.source, f"--task {self.name}: output {port.name} is not made by {POSTPROCESS};"
                                            " a detector's outputs are the four outputs of that op")
        y = np.asarray(labels.y)
        if y.ndim != 2 or y.shape[1] % 5:
            raise InputError(labels.source, f"--task {self.name}: the labels must be y_boxes and y_classes")
        k, classes = _attribute(port, "detections"), _attribute(port, "num_classes")
        # The task's threshold is the op's own score threshold: recall counts every detection the op returns.
        return TaskReading(y.astype(np.float32), Task(self, classes, _attribute(port, "score_threshold")),
                           f"the model ends in {POSTPROCESS}, whose boxes, classes and scores of {k} detections per"
                           f" image are read against the labelled boxes and classes: {classes} classes, judged by"
                           " mAP@0.5 over each image's first num_detections detections, class ids rounded")

    def detect(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> Optional[TaskReading]:
        return self.recognise(labels, port, threshold, made_by) if port.key == KEY else None

    def classes_of(self, size: int, shape: tuple) -> None:
        return None  # read from the op's attributes, never from the output's width

    # --- reading outputs ----------------------------------------------------------------------------------
    def predict(self, task: Task, out: np.ndarray) -> np.ndarray:
        """(N, K) class ids of each image's detections, -1 past num_detections (what agreement with float reads)."""
        d = Detections.unpack(out)
        return np.where(np.arange(d.classes.shape[1])[None, :] < d.num[:, None], d.classes, -1)

    def scores(self, task: Task, out: np.ndarray) -> np.ndarray:
        return Detections.unpack(out).scores

    def agreement(self, task: Task, out: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """(N,) each image's score-weighted F1 of its detections against the reference's (float's): a detection is
        matched by one of the other's of its class at IoU 0.5 (as COCO matches), and counts by its score, so that the
        op's low-score detections (with no score threshold, every image has K of them) hardly count."""
        mine, theirs = Detections.unpack(out), Detections.unpack(ref)
        classes = task.num_classes if task.num_classes is not None else \
            max(int(max(mine.classes.max(initial=-1), theirs.classes.max(initial=-1))) + 1, 1)
        precision = _matched_score_share(mine, theirs, classes)
        recall = _matched_score_share(theirs, mine, classes)
        both = precision + recall
        return np.divide(2 * precision * recall, both, out=np.zeros_like(both), where=both > 0)

    def correct(self, task: Task, out: np.ndarray, y: np.ndarray) -> None:
        return None  # an image is not right or wrong as a whole: mAP@0.5 is paired by a bootstrap over images

    # --- measuring ----------------------------------------------------------------------------------------
    def metrics(self, task: Task, y: np.ndarray, out: np.ndarray, float_out: Optional[np.ndarray]) -> Metrics:
        found = coco_scores(Detections.unpack(out), *unpack_labels(y))
        classes = _classes(task, y)
        agree = None
        if float_out is not None:
            agree = float(np.mean(np.all(self.predict(task, out) == self.predict(task, float_out), axis=1)))
        per_class = [found["ap50_per_class"].get(c) for c in range(classes)]
        _, y_classes = unpack_labels(y)
        support = [int((y_classes == c).sum()) for c in range(classes)]
        return Metrics(agreement_with_float=agree,
                       figures=figures.Figures({"detection": DetectionMetrics(found["map50"], found["map"],
                                                                            found["recall50"], per_class,
                                                                            task.threshold, support)}))

    def score(self, task: Task, y: np.ndarray) -> Score:
        return MeanAP(task, y)


def _classes(task: Task, y: np.ndarray) -> int:
    """The detector's classes: its op's (`task.num_classes`), else, for a task named without the op's attributes,
    the labels' highest class id + 1."""
    if task.num_classes is not None:
        return task.num_classes
    return max(int(unpack_labels(y)[1].max(initial=-1)) + 1, 1)


def _detections(d: Detections, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = int(d.num[i])
    return d.boxes[i, :n], d.classes[i, :n], d.scores[i, :n]


def _xywh(b: np.ndarray) -> list:
    return [float(b[1]), float(b[0]), float(b[3] - b[1]), float(b[2] - b[0])]


def coco_scores(d: Detections, y_boxes: np.ndarray, y_classes: np.ndarray) -> dict:
    """faster-coco-eval's mAP@0.5, mAP@[.5:.95], AP@0.5 per class id (classes with labelled boxes), recall at IoU
    0.5 (labelled boxes matched by any detection the model returns)."""
    from faster_coco_eval import COCO, COCOeval_faster

    dets = [_detections(d, i) for i in range(len(y_boxes))]
    found = {int(c) for _, classes, _ in dets for c in classes}
    categories = sorted({int(c) for c in y_classes.reshape(-1) if c >= 0} | found)
    gt = {"images": [{"id": i} for i in range(len(y_boxes))], "categories": [{"id": c} for c in categories],
          "annotations": []}
    for i, (boxes, classes) in enumerate(zip(y_boxes, y_classes)):
        for b, c in zip(boxes, classes):
            if c >= 0:
                w = _xywh(b)
                gt["annotations"].append({"id": len(gt["annotations"]) + 1, "image_id": i, "category_id": int(c),
                                          "bbox": w, "area": w[2] * w[3], "iscrowd": 0})
    results = [{"image_id": i, "category_id": int(c), "bbox": _xywh(b), "score": float(s)}
               for i, (boxes, classes, scores) in enumerate(dets) for b, c, s in zip(boxes, classes, scores)]
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its summary
        coco_gt = COCO()
        coco_gt.dataset = gt
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(results) if results else COCO()
        ev = COCOeval_faster(coco_gt, coco_dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    precision = ev.eval["precision"]  # [IoU thresholds, recall points, classes, area ranges, max detections]
    recall = ev.eval["recall"]  # [IoU thresholds, classes, area ranges, max detections]
    per_class, matched = {}, 0.0
    total = int((y_classes >= 0).sum())
    for k, c in enumerate(ev.params.catIds):
        support = int((y_classes == c).sum())
        if support:
            p = precision[0, :, k, 0, -1]
            per_class[int(c)] = float(p[p > -1].mean()) if (p > -1).any() else 0.0
            matched += max(float(recall[0, k, 0, -1]), 0.0) * support
    return {"map50": max(float(ev.stats[1]), 0.0), "map": max(float(ev.stats[0]), 0.0), "ap50_per_class": per_class,
            "recall50": matched / total if total else float("nan")}


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of boxes (ymin, xmin, ymax, xmax), (len(a), len(b)), as COCO computes it (no +1)."""
    top = np.maximum(a[:, None, 0], b[None, :, 0])
    left = np.maximum(a[:, None, 1], b[None, :, 1])
    bottom = np.minimum(a[:, None, 2], b[None, :, 2])
    right = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(bottom - top, 0, None) * np.clip(right - left, 0, None)
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])  # noqa: E731
    union = area(a)[:, None] + area(b)[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


@dataclass(frozen=True)
class Matches:
    """Every detection of every image, matched once at IoU 0.5 as COCO matches (by score, to the unmatched
    labelled box of its class with the highest IoU at least 0.5): class, image, score, matched; and the labelled
    boxes per image and class."""

    classes: np.ndarray
    images: np.ndarray
    scores: np.ndarray
    hits: np.ndarray
    boxes_per: np.ndarray  # (N, classes) labelled boxes


def match(d: Detections, y_boxes: np.ndarray, y_classes: np.ndarray, num_classes: int) -> Matches:
    rows = []
    boxes_per = np.zeros((len(y_boxes), num_classes), np.int64)
    for i in range(len(y_boxes)):
        boxes, classes, scores = _detections(d, i)
        for c in np.unique(classes):
            mine = np.flatnonzero(classes == c)
            mine = mine[np.argsort(-scores[mine], kind="mergesort")]
            truth = y_boxes[i][y_classes[i] == c]
            ious = _iou(boxes[mine], truth) if len(truth) else np.zeros((len(mine), 0))
            taken = np.zeros(len(truth), bool)
            for r, j in enumerate(mine):
                best, at = -1, min(IOU, 1 - 1e-10)
                for g in range(len(truth)):
                    if not taken[g] and ious[r, g] >= at:
                        best, at = g, ious[r, g]
                if best >= 0:
                    taken[best] = True
                rows.append((c, i, scores[j], best >= 0))
        for c in range(num_classes):
            boxes_per[i, c] = int((y_classes[i] == c).sum())
    a = np.array(rows, dtype=np.float64).reshape(-1, 4)
    return Matches(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2], a[:, 3] > 0, boxes_per)


def _matched_score_share(d: Detections, other: Detections, num_classes: int) -> np.ndarray:
    """(N,) the share of each image's detection scores (its first num_detections) matched by `other`'s detections
    (1 for an image with none)."""
    k = other.classes.shape[1]
    classes = np.where(np.arange(k)[None, :] < other.num[:, None], other.classes, -1)
    m = match(d, other.boxes, classes, num_classes)
    n = len(d.num)
    total = np.bincount(m.images, weights=m.scores, minlength=n)
    hit = np.bincount(m.images, weights=m.scores * m.hits, minlength=n)
    return np.divide(hit, total, out=np.ones(n), where=total > 0)


def resampled_map50(m: Matches, weights: np.ndarray) -> np.ndarray:
    """mAP@0.5 on each resample of images (`weights` (R, N): how often each image is drawn), accumulated as COCO
    does (interpolated precision at 101 recall points, averaged over the classes with labelled boxes)."""
    aps = []
    for c in range(m.boxes_per.shape[1]):
        positives = weights @ m.boxes_per[:, c]  # (R,)
        if not m.boxes_per[:, c].any():
            continue
        mine = np.flatnonzero(m.classes == c)
        mine = mine[np.argsort(-m.scores[mine], kind="mergesort")]
        w = weights[:, m.images[mine]].astype(np.float64)  # (R, D)
        tp = np.cumsum(w * m.hits[mine], axis=1)
        fp = np.cumsum(w * ~m.hits[mine], axis=1)
        recall = tp / np.maximum(positives, 1e-12)[:, None]
        precision = tp / np.maximum(tp + fp, np.spacing(1))
        precision = np.maximum.accumulate(precision[:, ::-1], axis=1)[:, ::-1]  # monotone, as COCO's
        ap = np.zeros(len(weights))
        for r in range(len(weights)):
            if positives[r] <= 0:
                ap[r] = np.nan
                continue
            at = np.searchsorted(recall[r], _RECALL_POINTS, side="left")
            ok = at < recall.shape[1]
            ap[r] = precision[r, at[ok]].sum() / len(_RECALL_POINTS) if recall.shape[1] else 0.0
        aps.append(ap)
    if not aps:
        return np.zeros(len(weights))
    return np.nanmean(np.array(aps), axis=0)


class MeanAP(Score):
    """mAP@0.5: faster-coco-eval's value, its interval and paired test from a bootstrap over whole images."""

    bootstrapped = True

    def __init__(self, task: Task, y: np.ndarray):
        super().__init__(task, y, MAP50)
        self.weights = resample_weights(len(y), BOOTSTRAP_DENSE)
        self.y_boxes, self.y_classes = unpack_labels(y)

    def detections(self, out) -> Detections:
        """The detections a model's output holds (here the packed postprocess outputs; a raw YOLO head's, decoded)."""
        return Detections.unpack(out)

    def value(self, out) -> float:
        return coco_scores(self.detections(out), self.y_boxes, self.y_classes)["map50"]

    def measure(self, out) -> Scored:
        d = self.detections(out)
        matches = match(d, self.y_boxes, self.y_classes, _classes(self.task, self.y))
        value = coco_scores(d, self.y_boxes, self.y_classes)["map50"]
        return Scored(value, boot=resampled_map50(matches, self.weights))


KIND = Detection()
# report.json's metrics.figures.detection; files written before it kept the record as `metrics.detection`
figures.register("detection", DetectionMetrics, replaces={"detection": None})
rules.add_host_ops(POSTPROCESS)  # integer-only hardware leaves the postprocess to the host CPU


# --- its example for the conformance checks (reporter.testing.check_kind) -------------------------------------
def _example(rng, n: int, k: int = 5, boxes: int = 3, classes: int = 3) -> Example:
    """A postprocess output packed as the detection kind reads it (boxes K*4 | classes K | scores K | num), with
    labelled boxes (ymin, xmin, ymax, xmax) and class ids (-1 pads) packed as y_boxes and y_classes are joined."""
    top = rng.uniform(0, 0.6, (n, boxes, 2))
    y_boxes = np.concatenate([top, top + rng.uniform(0.1, 0.4, (n, boxes, 2))], axis=-1)
    y_classes = rng.integers(0, classes, (n, boxes))
    y_classes[rng.uniform(size=(n, boxes)) < 0.3] = -1

    def packed():
        pick = rng.integers(0, boxes, (n, k))
        near = np.take_along_axis(y_boxes, pick[..., None], axis=1) + rng.normal(scale=0.02, size=(n, k, 4))
        corner = rng.uniform(0, 0.6, (n, k, 2))
        anywhere = np.concatenate([corner, corner + rng.uniform(0.1, 0.4, (n, k, 2))], axis=-1)
        found = np.clip(np.where(rng.uniform(size=(n, k, 1)) < 0.8, near, anywhere), 0, 1)  # ymin < ymax, xmin < xmax
        found_classes = np.where(rng.uniform(size=(n, k)) < 0.8, np.take_along_axis(y_classes, pick, axis=1),
                                 rng.integers(0, classes, (n, k))).clip(0, None)
        num = rng.integers(1, k + 1, n)
        return np.concatenate([found.reshape(n, -1), found_classes, rng.uniform(size=(n, k)), num[:, None]],
                              axis=1).astype(np.float32)

    port = Layout((0, 1, 2, 3), k, classes, 0.0).port()
    return Example("detector outputs", tuple(port.shape[1:]), "", None, packed(), packed(), port=port,
                labels_are_classes=False, arrays={"boxes": y_boxes.astype(np.float32), "classes": y_classes})
