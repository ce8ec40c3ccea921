"""Two small YOLO-style detectors written as ultralytics writes YOLO models for TFLite, as fixtures.

Both read the synthetic images of tests/detector_fixtures.py (1-3 non-overlapping rectangles of three classes told
apart by colour), shown at twice their size (64x64 RGB), through the same tiny anchor-free network: a few
convolutions down to an 8x8 grid (stride 8), and at every cell a box (centre (cell + 2 sigmoid(t) - 0.5) / 8, width
and height sigmoids) and sigmoid scores. The cells whose centre lies in an object's box (and the one holding its
centre) are its positives; the scores are trained towards the IoU of the cell's box with the object's, as YOLO's
losses train them (so that they are not all 0 or 1). Boxes and scores are concatenated into ONE output, as YOLO's
export does, so that int8 gives them one scale:

* `v8`: [1, 4 + 3, 64], YOLOv8/v11's layout: cx, cy, w, h NORMALIZED to 0..1, then the 3 class scores, no
  objectness, one column per grid cell (a CONCATENATION, then a TRANSPOSE).
* `v5`: [1, 64, 5 + 3], YOLOv5's layout: cx, cy, w, h in PIXELS of the 64x64 input, an objectness, then the 3
  class scores (a detection's score is objectness x class score). Its int8 output's scale is about 68/255, so
  scores below about 0.13 round to 0 and the rest to a few levels: FIQ loses mAP, mostly at high IoU.

`ensure()` caches, under `cache_root/yolo-v{VERSION}/{v8,v5}/`: model.tflite (float, input [1, 64, 64, 3]) and
data.npz: x, y_boxes [N, 3, 4] (ymin, xmin, ymax, xmax normalized), y_classes [N, 3] (-1 pads) for evaluation and
x_calib (training images, none in x). No ultralytics code or model is used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import detector_fixtures as D
import model_fixtures as M

VERSION = 1
SCALE = 2  # the generator's 32x32 images are shown to the network at twice their size (nearest neighbour)
SIZE, CLASSES = D.SIZE * SCALE, D.CLASSES
GRID = 8  # cells per side: stride 8
ANCHORS = GRID * GRID
N_TRAIN, N_EVAL, N_CALIB = 1500, 200, 200
EPOCHS = 30
LAYOUTS = ("v8", "v5")


def _cells() -> np.ndarray:
    """[ANCHORS, 2] each cell's (column, row), in the order the head's reshape lays the cells out (row-major)."""
    rows, cols = np.divmod(np.arange(ANCHORS), GRID)
    return np.stack([cols, rows], axis=1).astype(np.float32)


def targets(boxes: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """[n, ANCHORS, 4 + C + 1] training targets: box (cx, cy, w, h normalized), class one-hot, and a positive flag:
    the cells whose centre lies in an object's box, and the cell holding its centre (as ultralytics' assigners pick
    their candidates)."""
    n = len(boxes)
    t = np.zeros((n, ANCHORS, 4 + CLASSES + 1), np.float32)
    centres = (_cells() + 0.5) / GRID  # (x, y)
    for k in range(n):
        for b, c in zip(boxes[k], classes[k]):
            if c < 0:
                continue
            cy, cx = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
            inside = (centres[:, 0] > b[1]) & (centres[:, 0] < b[3]) & (centres[:, 1] > b[0]) & (centres[:, 1] < b[2])
            inside[int(min(cy * GRID, GRID - 1)) * GRID + int(min(cx * GRID, GRID - 1))] = True
            t[k, inside, :4] = (cx, cy, b[3] - b[1], b[2] - b[0])
            t[k, inside, 4 + c] = 1.0
            t[k, inside, -1] = 1.0
    return t


def network(batch_size=None):
    """The Keras 3 network: image -> (decoded boxes [A, 4] cx, cy, w, h normalized, class logits [A, C], objectness
    logit [A, 1]) over the grid's cells."""
    import keras
    from keras import layers, ops

    image = keras.Input((SIZE, SIZE, 3), batch_size=batch_size, name="image")
    h = layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(image)
    h = layers.Conv2D(32, 3, strides=2, padding="same", activation="relu")(h)
    h = layers.Conv2D(48, 3, strides=2, padding="same", activation="relu")(h)
    h = layers.Conv2D(48, 3, padding="same", activation="relu")(h)
    h = layers.Conv2D(64, 3, padding="same", activation="relu")(h)
    raw = layers.Reshape((ANCHORS, 4))(layers.Conv2D(4, 1, name="box")(h))
    logits = layers.Reshape((ANCHORS, CLASSES))(layers.Conv2D(CLASSES, 1, name="cls")(h))
    obj = layers.Reshape((ANCHORS, 1))(layers.Conv2D(1, 1, name="obj")(h))
    xy = (ops.sigmoid(raw[..., :2]) * 2.0 - 0.5 + _cells()) / GRID
    box = layers.Concatenate()([xy, ops.sigmoid(raw[..., 2:])])
    return keras.Model(image, [box, logits, obj])


def _iou(a, b):
    """IoU of centre-size boxes (cx, cy, w, h) a and b, position by position."""
    from keras import ops

    w = ops.maximum(ops.minimum(a[..., 0] + a[..., 2] / 2, b[..., 0] + b[..., 2] / 2)
                    - ops.maximum(a[..., 0] - a[..., 2] / 2, b[..., 0] - b[..., 2] / 2), 0.0)
    h = ops.maximum(ops.minimum(a[..., 1] + a[..., 3] / 2, b[..., 1] + b[..., 3] / 2)
                    - ops.maximum(a[..., 1] - a[..., 3] / 2, b[..., 1] - b[..., 3] / 2), 0.0)
    inter = w * h
    return inter / (a[..., 2] * a[..., 3] + b[..., 2] * b[..., 3] - inter + 1e-9)


def _loss(layout: str):
    """Box L1 on the positive cells; scores aimed at the IoU of the cell's box with its object's, as YOLO's losses aim
    them (v8: the class score, v5: the objectness, the class scores then one-hot where an object is)."""
    from keras import ops

    def loss(y_true, y_pred):
        box_t, cls_t, pos = y_true[..., :4], y_true[..., 4:4 + CLASSES], y_true[..., -1]
        box_p, cls_p, obj_p = y_pred[..., :4], y_pred[..., 4:4 + CLASSES], y_pred[..., 4 + CLASSES]
        positives = ops.maximum(ops.sum(pos, axis=-1), 1.0)
        box = ops.sum(ops.sum(ops.abs(box_t - box_p), axis=-1) * pos, axis=-1) / positives
        quality = ops.stop_gradient(_iou(box_p, box_t)) * pos
        bce = lambda t, p: ops.binary_crossentropy(t[..., None], p[..., None], from_logits=True)[..., 0]  # noqa: E731
        if layout == "v8":
            cls, obj = ops.sum(bce(cls_t * quality[..., None], cls_p), axis=(-1, -2)) / positives, 0.0
        else:
            cls = ops.sum(ops.sum(bce(cls_t, cls_p), axis=-1) * pos, axis=-1) / positives
            obj = ops.sum(bce(quality, obj_p), axis=-1) / positives
        return 10.0 * box + cls + obj

    return loss


def exported(trained, layout: str):
    """The inference model, batch 1: boxes and sigmoid scores concatenated into one output in `layout`."""
    import keras
    from keras import layers, ops

    model = network(batch_size=1)
    model.set_weights(trained.get_weights())
    box, logits, obj = model.outputs
    if layout == "v8":
        out = layers.Permute((2, 1))(layers.Concatenate()([box, ops.sigmoid(logits)]))
    else:
        out = layers.Concatenate()([box * float(SIZE), ops.sigmoid(obj), ops.sigmoid(logits)])
    return keras.Model(model.inputs, out)


def images(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tests/detector_fixtures.py's images, SCALE times larger (the boxes, normalized, are the same)."""
    x, boxes, classes = D.images(n, rng)
    return np.repeat(np.repeat(x, SCALE, axis=1), SCALE, axis=2), boxes, classes


def build(folder: Path, layout: str):
    """Trains the `layout` detector (seeded, deterministic) and writes model.tflite and data.npz."""
    import keras
    import tensorflow as tf

    M.seed()
    rng = np.random.default_rng(M.SEED)
    x_tr, b_tr, c_tr = images(N_TRAIN, rng)
    x_ev, b_ev, c_ev = images(N_EVAL, rng)
    net = network()
    train = keras.Model(net.inputs, keras.layers.Concatenate()(net.outputs))
    train.compile(keras.optimizers.Adam(3e-3), _loss(layout))
    train.fit(x_tr, targets(b_tr, c_tr), epochs=EPOCHS, batch_size=32, verbose=0, shuffle=True)
    converter = tf.lite.TFLiteConverter.from_keras_model(exported(net, layout))
    (folder / "model.tflite").write_bytes(converter.convert())
    np.savez(folder / "data.npz", x=x_ev, y_boxes=b_ev, y_classes=c_ev, x_calib=x_tr[:N_CALIB])


def ensure(cache_root, layout: str) -> dict:
    """The cached `layout` detector ({"tflite", "data"}: paths), built first if needed (once across processes)."""
    _, data = M.ensure(cache_root, f"yolo-v{VERSION}", layout, lambda folder: build(folder, layout))
    return {"tflite": data.parent / "model.tflite", "data": data}


# --- an independent reading of a YOLO output: LiteRT runs, ultralytics' decoding and NMS in numpy -----------------
SCORE, IOU, MAX_DET, MAX_NMS = 0.001, 0.7, 300, 30_000  # ultralytics val's conf, iou, max_det and max_nms


def litert_rows(model: bytes, x: np.ndarray) -> np.ndarray:
    """[n, a, b] the one output of `model` for every image of x (one invoke each, LiteRT's default kernels), an
    integer output dequantized with its own scale and zero point."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=bytes(model))
    it.allocate_tensors()
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    rows = []
    for sample in x:
        value = sample[None].astype(np.float32)
        if inp["dtype"] != np.float32:
            scale, zero = inp["quantization"]
            info = np.iinfo(inp["dtype"])
            value = np.clip(np.round(value / scale + zero), info.min, info.max).astype(inp["dtype"])
        it.set_tensor(inp["index"], value)
        it.invoke()
        got = it.get_tensor(out["index"])[0].astype(np.float64)
        if out["dtype"] != np.float32:
            scale, zero = out["quantization"]
            got = (got - zero) * scale
        rows.append(got)
    return np.stack(rows)


def _pairwise_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    lo, hi = np.maximum(box[:2], boxes[:, :2]), np.minimum(box[2:], boxes[:, 2:])
    inter = np.prod(np.clip(hi - lo, 0, None), axis=1)
    area = lambda b: (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])  # noqa: E731
    return inter / (area(box) + area(boxes) - inter)


def reference_detections(rows: np.ndarray, layout: str, size: float) -> list[dict]:
    """Per image {"boxes" (ymin, xmin, ymax, xmax normalized), "classes", "scores"}, read as ultralytics'
    `non_max_suppression` reads a prediction for validation: every (anchor, class) scoring above SCORE (v5:
    objectness x class), the MAX_NMS best, boxes offset by class * 4 so that classes never overlap, one greedy
    pass suppressing IoU above IOU, the MAX_DET best kept, boxes clipped to the image; `nms` rows (x1, y1, x2, y2,
    score, class) above SCORE, best first. Boxes beyond 2 are pixels of a `size` x `size` input."""
    found = []
    for r in rows:
        if layout == "nms":
            xyxy_all, scores_all = r[:, :4], r[:, 4:5]
        else:
            p = r.T if layout == "v8" else r
            scores_all = p[:, 4:] if layout == "v8" else p[:, 5:] * p[:, 4:5]
            xyxy_all = np.concatenate([p[:, :2] - p[:, 2:4] / 2, p[:, :2] + p[:, 2:4] / 2], axis=1)
        if np.abs(xyxy_all).max() > 2:
            xyxy_all = xyxy_all / size
        anchor, classes = np.nonzero(scores_all > SCORE)
        scores = scores_all[anchor, classes]
        order = np.argsort(-scores, kind="stable")[:MAX_DET if layout == "nms" else MAX_NMS]
        anchor, classes, scores = anchor[order], classes[order], scores[order]
        xyxy = xyxy_all[anchor]
        if layout == "nms":
            classes = np.rint(r[anchor, 5]).astype(int)
        else:
            shifted = xyxy + classes[:, None] * 4.0
            alive, keep = np.ones(len(scores), bool), []
            for i in range(len(scores)):
                if alive[i]:
                    keep.append(i)
                    alive &= ~(_pairwise_iou(shifted[i], shifted) > IOU)
            keep = keep[:MAX_DET]
            xyxy, classes, scores = xyxy[keep], classes[keep], scores[keep]
        found.append({"boxes": np.clip(xyxy, 0, 1)[:, [1, 0, 3, 2]], "classes": classes, "scores": scores})
    return found


def conformance(rng, n: int) -> tuple:
    """tests/test_task_kinds.py's row for the YOLO kind: (output shape, op, labels packed as bind_labels packs
    y_boxes and y_classes, raw outputs (n, values), classes, mAP@0.5 by pycocotools on `reference_detections`). A v8
    output [4 + 3, 16] with normalized boxes: a box near each labelled one (its class scored 0.3-1, another class
    sometimes), the other anchors anywhere with low scores."""
    import detection_reference

    classes, anchors, slots = 3, 16, 3
    top = rng.uniform(0, 0.6, (n, slots, 2))
    y_boxes = np.concatenate([top, top + rng.uniform(0.1, 0.4, (n, slots, 2))], axis=-1)
    y_classes = rng.integers(0, classes, (n, slots))
    y_classes[rng.uniform(size=(n, slots)) < 0.3] = -1
    y_classes[:, 0] = np.maximum(y_classes[:, 0], 0)
    out = np.zeros((n, 4 + classes, anchors))
    centre = rng.uniform(0.1, 0.9, (n, 2, anchors))
    out[:, :2], out[:, 2:4] = centre, rng.uniform(0.05, 0.5, (n, 2, anchors))
    out[:, 4:] = rng.uniform(0, 0.2, (n, classes, anchors)) ** 3
    for i in range(n):
        for slot, (b, c) in enumerate(zip(y_boxes[i], y_classes[i])):
            if c < 0:
                continue
            jitter = rng.normal(scale=0.03, size=4)
            out[i, :4, slot] = ((b[1] + b[3]) / 2 + jitter[0], (b[0] + b[2]) / 2 + jitter[1], b[3] - b[1] + jitter[2],
                                b[2] - b[0] + jitter[3])
            out[i, 4 + c, slot] = rng.uniform(0.3, 1)
            out[i, 4 + (c + 1) % classes, slot] = rng.uniform(0, 0.5)
    y = np.concatenate([np.where(y_classes[..., None] >= 0, y_boxes, 0).reshape(n, -1), y_classes], axis=1)
    dets = reference_detections(out, "v8", 1.0)
    expected = detection_reference.score(dets, y_boxes.astype(np.float32), y_classes)["map50"]
    return (4 + classes, anchors), "", y.astype(np.float32), out.reshape(n, -1), classes, expected
