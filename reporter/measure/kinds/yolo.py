"""The YOLO kind: one raw output as ultralytics writes YOLO models for TFLite, decoded and judged by mAP@0.5.

The layouts (the output's shape without the batch; nc classes, A anchors, K detections):

    v8    [4 + nc, A]  YOLOv8 / YOLO11: cx, cy, w, h, then nc class scores (sigmoid, no objectness)
    v5    [A, 5 + nc]  YOLOv5: cx, cy, w, h, an objectness, then nc class scores (a score is objectness x class)
    nms   [K, 6]       an end-to-end export with NMS inside: x1, y1, x2, y2, score, class id

Boxes are normalized to 0..1, or in pixels of the model's input (read from its input's shape): an output whose box
coordinates reach beyond PIXELS_ABOVE is read as pixels. The layout is read from the output's shape and the labels
the detection kind reads (`y_boxes` [N, L, 4] ymin, xmin, ymax, xmax normalized, `y_classes` [N, L], -1 pads): a
reading fits when its nc is at least the labels' classes and its anchors are at least its nc; of several, the one
whose nc equals the labels' is taken, and when that still leaves two, the run asks (`--task yolo` then reads the
output as ultralytics' current export would be: nms, then v8, then v5).

Decoding is ultralytics' validation's: every (anchor, class) pair scoring above SCORE is a candidate (the MAX_NMS best
kept), greedy NMS per class suppresses a box whose IoU with a better one of its class is above IOU, at most MAX_DET
detections per image are kept, then boxes are clipped to the image. The figures are then the detection kind's
(reporter.measure.kinds.detection: faster-coco-eval's mAP@0.5, COCO mAP@[.5:.95], AP@0.5 per class; mAP@0.5 paired
by a bootstrap over whole images), recorded as its `detection` figures. Agreement with float reads the detections
scoring above CONFIDENT (ultralytics' predict default), so that the many near-zero candidates do not weigh.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.core.errors import InputError
from reporter.measure.kinds import detection
from reporter.measure.kinds.base import Example, Joined, Kind, LabelSource, TaskReading
from reporter.measure.signature import Port, Signature
from reporter.measure.task import Task
from reporter.model.report import Metrics

NAME = "yolo"
V8, V5, NMS = "v8", "v5", "nms"
ORDER = (NMS, V8, V5)  # how --task yolo reads an output two layouts fit: ultralytics' exports, newest first
SCORE = 0.001  # a candidate's score must be above this (ultralytics val's conf)
IOU = 0.7  # NMS suppresses a box whose IoU with a better one of its class is above this (ultralytics val's iou)
MAX_DET = 300  # detections kept per image (ultralytics' max_det)
MAX_NMS = 30_000  # candidates NMS reads per image, the best (ultralytics' max_nms)
CONFIDENT = 0.25  # the detections agreement with float reads (ultralytics predict's conf)
PIXELS_ABOVE = 2.0  # box coordinates beyond this are pixels, not normalized (which overshoot 1 a little at most)
_IMAGE = "image"  # the output port's attribute holding the model's input (height, width), when known


@dataclass(frozen=True)
class Layout:
    """One reading of an output's shape: the layout, its classes and anchors (K detections for `nms`)."""

    name: str
    classes: int
    anchors: int

    def words(self, dims: tuple) -> str:
        a, b = dims
        if self.name == V8:
            return f"v8 [4 + {self.classes} classes, {b} anchors]"
        if self.name == V5:
            return f"v5 [{a} anchors, 5 + {self.classes} classes]"
        return f"NMS inside [{a} detections, 6]"


def layouts(dims: tuple, label_classes: int) -> list[Layout]:
    """Every layout an output of shape `dims` (without the batch) fits with labels of `label_classes` classes
    (their highest id + 1): its nc at least theirs, its anchors at least its nc; in ORDER."""
    if len(dims) != 2:
        return []
    a, b = (int(d) for d in dims)
    need = max(label_classes, 1)
    found = []
    if b == 6 and a >= 1:
        found.append(Layout(NMS, need, a))
    if a - 4 >= need and b >= a - 4:
        found.append(Layout(V8, a - 4, b))
    if b - 5 >= need and a >= b - 5:
        found.append(Layout(V5, b - 5, a))
    return found


def reading(dims: tuple, label_classes: int, forced: bool) -> tuple[Optional[Layout], list[Layout]]:
    """(the layout read, every layout that fits): one that fits, or the one whose classes are the labels'; with
    several left, the first in ORDER when `forced` (--task yolo), else None (the run asks)."""
    fits = layouts(dims, label_classes)
    if len(fits) <= 1:
        return (fits[0] if fits else None), fits
    exact = [f for f in fits if f.classes == max(label_classes, 1)]
    if len(exact) == 1:
        return exact[0], fits
    return ((exact or fits)[0] if forced else None), fits


def unfitting(port: Port, dims: tuple, label_classes: int) -> str:
    """Why labelled boxes cannot be read against output `port` (of shape `dims`): no YOLO layout fits it."""
    return (f"'y_boxes' and 'y_classes' are a detector's labels, but output {port.name} has shape {dims}, which no YOLO"
            f" layout fits for labels of {label_classes} classes: v8 [4 + nc, anchors], v5 [anchors, 5 + nc] (nc at"
            " least the labels' classes, anchors at least nc) or [detections, 6] (NMS inside); an SSD ends in"
            f" {detection.POSTPROCESS}")


def _dims(port: Port) -> tuple:
    """The output's shape without the batch, leading axes of length 1 dropped."""
    dims = tuple(int(d) for d in (port.allocated or port.shape))[1:]
    while len(dims) > 2 and dims[0] == 1:
        dims = dims[1:]
    return dims


@dataclass(frozen=True)
class YoloTask(Task):
    """A YOLO output's task: `num_classes` its nc, `threshold` the candidates' score (SCORE), and how to read it."""

    layout: str = V8
    dims: tuple = ()  # the output's (a, b)
    image: tuple = ()  # the model's input (height, width): pixel boxes are divided by it; () when not known
    iou: float = IOU
    max_det: int = MAX_DET


class _Labels(np.ndarray):
    """`y_boxes` and `y_classes` packed into one row per image (detection.pack_labels) for a one-output model whose
    output a YOLO layout can be: marked, so that `detect` reads only these as a YOLO's labels."""


# --- decoding -----------------------------------------------------------------------------------------------
def _iou_one(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU of one corner box (x1, y1, x2, y2) with each of `others` [k, 4]."""
    w = np.clip(np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]), 0, None)
    h = np.clip(np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]), 0, None)
    inter = w * h
    union = (box[2] - box[0]) * (box[3] - box[1]) + (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1]) \
        - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, iou: float, limit: int) -> np.ndarray:
    """The kept candidates' indices, best first (at most `limit`): greedy NMS per class, a box suppressed when its
    IoU with a kept box of its class is above `iou`; ties in score keep the candidates' order. One pass in score
    order over every class, so that it stops once `limit` are kept (the best `limit` of a full pass)."""
    left = np.argsort(-scores, kind="stable")
    kept = []
    while left.size and len(kept) < limit:
        best, rest = left[0], left[1:]
        kept.append(best)
        left = rest[~((classes[rest] == classes[best]) & (_iou_one(boxes[best], boxes[rest]) > iou))]
    return np.array(kept, np.int64)


def _corners(task: YoloTask, out: np.ndarray) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """(boxes [N, A, 4] x1, y1, x2, y2 as the output gives them, scores [N, A, nc], or for `nms` scores [N, K] and
    class ids [N, K])."""
    a, b = task.dims
    out = np.asarray(out, np.float64).reshape(len(out), a, b)
    if task.layout == NMS:
        return out[..., :4], out[..., 4], np.rint(np.nan_to_num(out[..., 5], nan=-1.0)).astype(np.int64)
    raw = out.transpose(0, 2, 1) if task.layout == V8 else out
    nc = task.num_classes
    scores = raw[..., 4:4 + nc] if task.layout == V8 else raw[..., 5:5 + nc] * raw[..., 4:5]
    cx, cy, w, h = (raw[..., i] for i in range(4))
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=-1), scores, None


def _scale(task: YoloTask, boxes: np.ndarray) -> np.ndarray:
    """(x, y, x, y) to divide the boxes by: 1 for normalized boxes, the input's width and height for pixels."""
    finite = boxes[np.isfinite(boxes)]
    if not finite.size or np.abs(finite).max() <= PIXELS_ABOVE:
        return np.ones(4)
    if not task.image:
        raise ValueError(f"the YOLO output's boxes are in pixels (up to {np.abs(finite).max():g}) but the model's input"
                         " size is not known to divide them by")
    h, w = task.image
    return np.array([w, h, w, h], np.float64)


def decode(task: YoloTask, out: np.ndarray, threshold: Optional[float] = None) -> detection.Detections:
    """Each image's detections as the detection kind reads them (boxes ymin, xmin, ymax, xmax normalized, class
    ids, scores, counts; at most `task.max_det`), candidates scoring above `threshold` (default the task's)."""
    threshold = task.threshold if threshold is None else threshold
    boxes, scores, ids = _corners(task, out)
    boxes = boxes / _scale(task, boxes)
    n, k = len(boxes), task.max_det
    found = detection.Detections(np.zeros((n, k, 4)), np.full((n, k), -1, np.int64), np.zeros((n, k)),
                                 np.zeros(n, np.int64))
    for i in range(n):
        if ids is not None:  # NMS inside: the rows scoring above the threshold, best first
            s = scores[i]
            rows = np.flatnonzero((s > threshold) & np.isfinite(boxes[i]).all(axis=1))
            rows = rows[np.argsort(-s[rows], kind="stable")][:k]
            b, c, s = boxes[i, rows], ids[i, rows], s[rows]
        else:
            anchor, c = np.nonzero(scores[i] > threshold)  # anchor by anchor, class by class
            s = scores[i][anchor, c]
            ok = np.isfinite(boxes[i, anchor]).all(axis=1)
            anchor, c, s = anchor[ok], c[ok], s[ok]
            best = np.argsort(-s, kind="stable")[:MAX_NMS]
            anchor, c, s = anchor[best], c[best], s[best]
            keep = nms(boxes[i, anchor], s, c, task.iou, k)
            b, c, s = boxes[i, anchor[keep]], c[keep], s[keep]
        b = np.clip(b, 0.0, 1.0)
        m = len(s)
        found.boxes[i, :m] = b[:, [1, 0, 3, 2]]
        found.classes[i, :m], found.scores[i, :m], found.num[i] = c, s, m
    return found


def pack(d: detection.Detections) -> np.ndarray:
    """Detections as the detection kind's packed row: boxes K*4 | classes K | scores K | num 1."""
    n = len(d.num)
    return np.concatenate([d.boxes.reshape(n, -1), d.classes, d.scores, d.num[:, None]], axis=1).astype(np.float64)


def _yolo(task: Task) -> YoloTask:
    if not isinstance(task, YoloTask):
        raise ValueError("a YOLO output is read with its labels (its layout follows from them)")
    return task


# --- the kind -----------------------------------------------------------------------------------------------
class Yolo(Kind):
    """A YOLO's raw output (or its end-to-end output) against labelled boxes and classes."""

    name = NAME
    words = "a YOLO detector"
    main_metric = detection.MAP50
    paired_test = (f"paired bootstrap over whole images of mAP@0.5 (detections decoded above score {SCORE:g}, NMS per"
                   f" class at IoU {IOU:g}, at most {MAX_DET} per image; each matched once at IoU 0.5, as COCO matches"
                   " it, AP re-accumulated per resample)")
    accuracy_label = detection.MAP50
    share_metric = detection.MAP50
    plain_points = False
    unit = "detections"  # what a resample never splits (an image's detections stay together)
    per_class_title = detection.Detection.per_class_title
    per_class_columns = detection.Detection.per_class_columns
    sample_correct = False
    top_class = False

    # --- what the model says: its input's size, on the one output's port -------------------------------------
    def joins(self, model: bytes, signature: Signature) -> Optional[Joined]:
        """For a model with one image input and one output of two axes (beyond the batch): that output as it is,
        its port holding the input's (height, width), by which pixel boxes are divided."""
        if len(signature.inputs) != 1 or len(signature.outputs) != 1:
            return None
        image, port = tuple(signature.inputs[0].allocated or signature.inputs[0].shape), signature.outputs[0]
        if len(image) != 4 or len(_dims(port)) != 2 or port.key == detection.KEY:
            return None
        joined = dataclasses.replace(port, attributes=port.attributes + ((_IMAGE, (int(image[1]), int(image[2]))),))
        return Joined(joined, lambda by_index: by_index[port.index])

    def join_labels(self, labels: dict, port: Port, source) -> Optional[np.ndarray]:
        if set(labels) != set(detection.LABELS) or port.key == detection.KEY:
            return None
        classes = np.asarray(labels["classes"][0])
        label_classes = int(np.nanmax(classes, initial=-1)) + 1 if classes.size else 0
        fits = layouts(_dims(port), label_classes)
        if not fits:
            raise InputError(source, unfitting(port, _dims(port), label_classes))
        return detection.pack_labels(labels, max(f.classes for f in fits), source).view(_Labels)

    # --- recognising --------------------------------------------------------------------------------------
    def detect(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> Optional[TaskReading]:
        return self._read(labels, port, forced=False) if isinstance(labels.y, _Labels) else None

    def examples(self, rng, n: int) -> list[Example]:
        return [_example(rng, n)]

    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        y = np.asarray(labels.y)
        if not isinstance(labels.y, _Labels) and (y.ndim != 2 or not y.shape[1] or y.shape[1] % 5):
            raise InputError(labels.source, f"--task {NAME}: a YOLO's labels are y_boxes (n, boxes, 4: ymin, xmin,"
                                            " ymax, xmax normalized) and y_classes (n, boxes: class ids, -1 pads),"
                                            f" found '{labels.what}' of shape {y.shape}")
        return self._read(labels, port, forced=True)

    def _read(self, labels: LabelSource, port: Port, forced: bool) -> TaskReading:
        y = np.asarray(labels.y, np.float32)
        _, y_classes = detection.unpack_labels(y)
        label_classes = int(y_classes.max(initial=-1)) + 1
        dims = _dims(port)
        found, fits = reading(dims, label_classes, forced)
        if not fits:
            raise InputError(labels.source, unfitting(port, dims, label_classes))
        if found is None:
            choices = " or ".join(f.words(dims) for f in fits)
            pick = reading(dims, label_classes, True)[0]
            raise InputError(labels.source, f"output {port.name} has shape {dims}, which several YOLO layouts fit for"
                                            f" labels of {label_classes} classes: {choices}; with --task {NAME} it is"
                                            f" read as {pick.words(dims)}, as ultralytics' newest export writes it")
        image = dict(port.attributes).get(_IMAGE, ())
        task = YoloTask(self, found.classes, SCORE, layout=found.name, dims=dims, image=tuple(image))
        size = f"the {image[0]}x{image[1]} input" if image else "the input"
        if found.name == NMS:
            what = (f"x1, y1, x2, y2, score, class id: NMS inside, {found.classes} classes as the labels' highest id"
                    " + 1")
            decoding = f"the rows scoring above {SCORE:g}, at most {MAX_DET} per image"
        else:
            what = "cx, cy, w, h, then the class scores, no objectness" if found.name == V8 else \
                "cx, cy, w, h, an objectness, then the class scores: a score is objectness x class score"
            decoding = (f"decoded as ultralytics' validation does: candidates scoring above {SCORE:g}, NMS per class"
                        f" at IoU {IOU:g}, at most {MAX_DET} detections per image")
        return TaskReading(y, task,
                           f"output {port.name} {dims} reads as a YOLO's {found.words(dims)} ({what}); boxes"
                           f" normalized, or pixels of {size} where they reach beyond {PIXELS_ABOVE:g}; {decoding};"
                           " judged by mAP@0.5 against the labelled boxes")

    def classes_of(self, size: int, shape: tuple) -> None:
        return None  # read with the labels, never from the output's width alone

    # --- reading outputs ----------------------------------------------------------------------------------
    def predict(self, task: Task, out: np.ndarray) -> np.ndarray:
        """(N, MAX_DET) class ids of each image's confident detections (score above CONFIDENT), -1 past them."""
        return detection.KIND.predict(task, pack(decode(_yolo(task), out, CONFIDENT)))

    def scores(self, task: Task, out: np.ndarray) -> np.ndarray:
        return decode(_yolo(task), out, CONFIDENT).scores

    def agreement(self, task: Task, out: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """(N,) each image's score-weighted F1 of its confident detections against float's (the detection kind's)."""
        t = _yolo(task)
        return detection.KIND.agreement(t, pack(decode(t, out, CONFIDENT)), pack(decode(t, ref, CONFIDENT)))

    def correct(self, task: Task, out: np.ndarray, y: np.ndarray) -> None:
        return None  # mAP@0.5 is paired by a bootstrap over images

    # --- measuring ----------------------------------------------------------------------------------------
    def metrics(self, task: Task, y: np.ndarray, out: np.ndarray, float_out: Optional[np.ndarray]) -> Metrics:
        """The detection kind's figures of the decoded detections; agreement with float: the share of images whose
        confident detections have float's classes."""
        t = _yolo(task)
        found = detection.KIND.metrics(t, y, pack(decode(t, out)), None)
        agree = None
        if float_out is not None:
            agree = float(np.mean(np.all(self.predict(t, out) == self.predict(t, float_out), axis=1)))
        return dataclasses.replace(found, agreement_with_float=agree)

    def score(self, task: Task, y: np.ndarray) -> "MeanAP":
        return MeanAP(_yolo(task), y)


class MeanAP(detection.MeanAP):
    """mAP@0.5 of the decoded detections, as the detection kind scores and bootstraps it."""

    def detections(self, out) -> detection.Detections:
        return decode(self.task, out)


KIND = Yolo()


# --- its example for the conformance checks (reporter.testing.check_kind) -------------------------------------
def _example(rng, n: int, anchors: int = 64, boxes: int = 3, classes: int = 3) -> Example:
    """One raw YOLOv8-layout output [4 + nc, anchors] (cx, cy, w, h normalized, then nc sigmoid class scores): some
    anchors on the labelled boxes, scoring their class high, the rest anywhere scoring low; y_boxes and y_classes."""
    top = rng.uniform(0, 0.6, (n, boxes, 2))
    y_boxes = np.concatenate([top, top + rng.uniform(0.15, 0.35, (n, boxes, 2))], axis=-1)
    y_classes = np.tile(np.arange(classes), (n, 1))[:, :boxes]  # every class labelled: the layout's nc is read
    y_classes[:, 1:][rng.uniform(size=(n, boxes - 1)) < 0.3] = -1

    def raw(jitter: float):
        cy, cx = rng.uniform(0.1, 0.9, (2, n, anchors))
        h, w = rng.uniform(0.05, 0.3, (2, n, anchors))
        scores = rng.uniform(0, 0.05, (n, classes, anchors))
        for b in range(boxes):  # anchor b: the labelled box b, its class scored high
            real = y_classes[:, b] >= 0
            box = y_boxes[:, b] + rng.normal(scale=jitter, size=(n, 4))
            cy[real, b], cx[real, b] = (box[real, 0] + box[real, 2]) / 2, (box[real, 1] + box[real, 3]) / 2
            h[real, b], w[real, b] = box[real, 2] - box[real, 0], box[real, 3] - box[real, 1]
            scores[real, y_classes[real, b], b] = rng.uniform(0.6, 0.95, int(real.sum()))
        return np.concatenate([np.stack([cx, cy, w, h], axis=1), scores], axis=1).astype(np.float32)

    return Example("YOLO raw output", (4 + classes, anchors), "", None, raw(0.005), raw(0.02), labels_are_classes=False,
                arrays={"boxes": y_boxes.astype(np.float32), "classes": y_classes})
