"""A small SSD-style detector exported as TensorFlow's Object Detection API exports one for TFLite, as a fixture.

The export follows `research/object_detection/export_tflite_graph_lib_tf2.py` (`SSDModule`) of
tensorflow/models: a backbone with box and class heads over anchors (tf_keras, as the API builds it: a Keras 3
model inside a tf.Module keeps its weights as VAR_HANDLE ops that LiteRT does not run), sigmoid class scores with
a background column, center-size anchors as a constant, and an empty tf.function annotated
`experimental_implements` with TFLite_Detection_PostProcess's attributes, which the converter with
`allow_custom_ops=True` fuses into that custom op. Its four outputs have shape [] in the written file; LiteRT
sizes them (boxes [1, K, 4], classes [1, K], scores [1, K], num_detections [1]) when it prepares the op.

The data are synthetic 32x32 RGB images with 1-3 non-overlapping axis-aligned rectangles of three classes
(told apart by colour) on a noisy background. `ensure()` caches, under `cache_root/detector-v{VERSION}/ssd/`:
model.tflite (float, postprocess included, batch-1 input), saved_model/ (the SavedModel the .tflite was
converted from) and data.npz: x, y_boxes [N, K, 4] (ymin, xmin, ymax, xmax, normalized: the order the op writes
boxes) and y_classes [N, K] (the op's class ids: 0-based, background excluded; -1 pads) for evaluation, and
x_calib (training images, none in x).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
SIZE = 32  # image height and width, pixels
CLASSES = 3
MAX_OBJECTS = 3  # per image; also K, the label arrays' second dimension
N_TRAIN, N_EVAL, N_CALIB = 1200, 200, 200  # x_calib: the first N_CALIB training images
EPOCHS = 16

# The op's attributes, as the Object Detection API's pipeline config for SSD MobileNet sets them (score
# threshold 1e-8, IoU 0.6, box coder scales 10/10/5/5), with 10 detections and fast (not regular) NMS.
POSTPROCESS = {
    "max_detections": 10,
    "max_classes_per_detection": 1,
    "use_regular_nms": False,
    "nms_score_threshold": 1e-8,
    "nms_iou_threshold": 0.6,
    "y_scale": 10.0,
    "x_scale": 10.0,
    "h_scale": 5.0,
    "w_scale": 5.0,
    "num_classes": CLASSES,
}

GRID = 8  # the heads' feature map: GRID x GRID cells
ANCHOR_SCALES = (0.3, 0.45)
ANCHOR_RATIOS = (1.0, 2.0, 0.5)  # height / width
PER_CELL = len(ANCHOR_SCALES) * len(ANCHOR_RATIOS)
COLOURS = np.array([[0.9, 0.2, 0.2], [0.2, 0.85, 0.25], [0.25, 0.3, 0.95]], np.float32)
# Class 2 is the rare one, as some class is in real data sets: few images show it, so the top detections
# of most images hold no class 2, and a calibration that averages each image's largest class id (LiteRT
# Quantizer's moving average) gives the classes output a range below 2.
FREQUENCIES = (0.45, 0.4, 0.15)


def anchors() -> np.ndarray:
    """[GRID*GRID*PER_CELL, 4] center-size anchors (ycenter, xcenter, height, width), normalized, in the order
    the heads' reshape lays out their predictions (row, column, anchor)."""
    rows = []
    for i in range(GRID):
        for j in range(GRID):
            for scale in ANCHOR_SCALES:
                for ratio in ANCHOR_RATIOS:
                    rows.append([(i + 0.5) / GRID, (j + 0.5) / GRID, scale * np.sqrt(ratio), scale / np.sqrt(ratio)])
    return np.array(rows, np.float32)


def images(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n images [n, SIZE, SIZE, 3] in [0, 1] with their boxes [n, K, 4] (normalized corners) and class ids
    [n, K] (-1 pads, boxes 0)."""
    x = rng.uniform(0.0, 0.25, (n, SIZE, SIZE, 3)).astype(np.float32)
    boxes = np.zeros((n, MAX_OBJECTS, 4), np.float32)
    classes = np.full((n, MAX_OBJECTS), -1, np.int64)
    for k in range(n):
        placed = []
        for _ in range(rng.integers(1, MAX_OBJECTS + 1)):
            for _attempt in range(30):  # rejection sampling: objects do not overlap (one label per pixel)
                h, w = rng.integers(7, 17, size=2)
                y0, x0 = rng.integers(0, SIZE - h + 1), rng.integers(0, SIZE - w + 1)
                box = (y0, x0, y0 + h, x0 + w)
                if all(box[0] >= b[2] or box[2] <= b[0] or box[1] >= b[3] or box[3] <= b[1] for b in placed):
                    break
            else:
                continue
            c = int(rng.choice(CLASSES, p=FREQUENCIES))
            x[k, box[0]:box[2], box[1]:box[3]] = COLOURS[c] + rng.uniform(-0.1, 0.05, 3)
            boxes[k, len(placed)] = np.array(box, np.float32) / SIZE
            classes[k, len(placed)] = c
            placed.append(box)
    return np.clip(x, 0.0, 1.0), boxes, classes


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every corner box in a [A, 4] with every one in b [B, 4]: [A, B]."""
    y0 = np.maximum(a[:, None, 0], b[None, :, 0])
    x0 = np.maximum(a[:, None, 1], b[None, :, 1])
    y1 = np.minimum(a[:, None, 2], b[None, :, 2])
    x1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(y1 - y0, 0, None) * np.clip(x1 - x0, 0, None)
    area = lambda r: (r[:, 2] - r[:, 0]) * (r[:, 3] - r[:, 1])  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None, :] - inter)


def targets(boxes: np.ndarray, classes: np.ndarray, anchor: np.ndarray):
    """SSD training targets: box encodings [n, A, 4] (the faster-RCNN box coder with the op's scales) with a
    positive flag appended ([n, A, 5]), and class targets [n, A, C+1] (column 0: background) with a weight
    column appended ([n, A, C+2]; 0 for the anchors neither matched nor clearly background). An anchor is
    matched at IoU >= 0.5, and each object to its best anchor; background below 0.4."""
    n, a = len(boxes), len(anchor)
    corners = np.stack([anchor[:, 0] - anchor[:, 2] / 2, anchor[:, 1] - anchor[:, 3] / 2,
                        anchor[:, 0] + anchor[:, 2] / 2, anchor[:, 1] + anchor[:, 3] / 2], axis=1)
    box_t = np.zeros((n, a, 5), np.float32)
    cls_t = np.zeros((n, a, CLASSES + 2), np.float32)
    s = POSTPROCESS
    for k in range(n):
        real = classes[k] >= 0
        gt, gc = boxes[k][real], classes[k][real]
        iou = _iou(corners, gt)  # [A, G]
        best = iou.argmax(axis=1)
        best_iou = iou.max(axis=1)
        best_iou[iou.argmax(axis=0)] = 1.0  # every object keeps its best anchor
        best[iou.argmax(axis=0)] = np.arange(len(gt))
        pos = best_iou >= 0.5
        g = gt[best]
        yc, xc = (g[:, 0] + g[:, 2]) / 2, (g[:, 1] + g[:, 3]) / 2
        h, w = g[:, 2] - g[:, 0], g[:, 3] - g[:, 1]
        enc = np.stack([(yc - anchor[:, 0]) / anchor[:, 2] * s["y_scale"],
                        (xc - anchor[:, 1]) / anchor[:, 3] * s["x_scale"],
                        np.log(h / anchor[:, 2]) * s["h_scale"],
                        np.log(w / anchor[:, 3]) * s["w_scale"]], axis=1)
        box_t[k, :, :4] = np.where(pos[:, None], enc, 0.0)
        box_t[k, :, 4] = pos
        cls_t[k, pos, 1 + gc[best[pos]]] = 1.0
        cls_t[k, ~pos, 0] = 1.0
        cls_t[k, :, -1] = pos | (best_iou < 0.4)
    return box_t, cls_t


def backbone():
    """The tf_keras network: image -> (box encodings [A, 4], class logits [A, C+1]) over the anchors."""
    import tf_keras as keras

    image = keras.Input((SIZE, SIZE, 3), name="image")
    h = keras.layers.Conv2D(16, 3, padding="same", activation="relu")(image)
    h = keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="relu")(h)
    h = keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="relu")(h)
    h = keras.layers.Conv2D(48, 3, padding="same", activation="relu")(h)
    box = keras.layers.Conv2D(PER_CELL * 4, 3, padding="same")(h)
    cls = keras.layers.Conv2D(PER_CELL * (CLASSES + 1), 3, padding="same")(h)
    box = keras.layers.Reshape((GRID * GRID * PER_CELL, 4), name="box_encodings")(box)
    cls = keras.layers.Reshape((GRID * GRID * PER_CELL, CLASSES + 1), name="class_logits")(cls)
    return keras.Model(image, [box, cls], name="ssd")


def _box_loss(y_true, y_pred):
    """Huber loss of the matched anchors' encodings, per positive anchor."""
    import tensorflow as tf

    pos = y_true[..., 4]
    d = tf.abs(y_true[..., :4] - y_pred)
    huber = tf.reduce_sum(tf.where(d < 1.0, 0.5 * d * d, d - 0.5), axis=-1)
    return tf.reduce_sum(huber * pos, axis=-1) / tf.maximum(tf.reduce_sum(pos, axis=-1), 1.0)


def _class_loss(y_true, y_pred):
    """Sigmoid focal loss (alpha 0.25, gamma 2, as the API's SSD MobileNet FPN configs), per positive anchor."""
    import tensorflow as tf

    target, weight = y_true[..., :-1], y_true[..., -1]
    p = tf.sigmoid(y_pred)
    ce = tf.nn.sigmoid_cross_entropy_with_logits(labels=target, logits=y_pred)
    p_t = target * p + (1 - target) * (1 - p)
    alpha = target * 0.25 + (1 - target) * 0.75
    focal = tf.reduce_sum(alpha * (1 - p_t) ** 2 * ce, axis=-1) * weight
    positives = tf.reduce_sum(1.0 - target[..., 0], axis=-1)
    return tf.reduce_sum(focal, axis=-1) / tf.maximum(positives, 1.0)


def implements_signature() -> str:
    """The `experimental_implements` string, worded as SSDModule.postprocess_implements_signature words it
    (floats with %f: the score threshold 1e-8 is written 0.000000, as the API writes it)."""
    p = POSTPROCESS
    attrs = [
        'name: "TFLite_Detection_PostProcess"',
        'attr { key: "max_detections" value { i: %d } }' % p["max_detections"],
        'attr { key: "max_classes_per_detection" value { i: %d } }' % p["max_classes_per_detection"],
        'attr { key: "use_regular_nms" value { b: %s } }' % str(p["use_regular_nms"]).lower(),
        'attr { key: "nms_score_threshold" value { f: %f } }' % p["nms_score_threshold"],
        'attr { key: "nms_iou_threshold" value { f: %f } }' % p["nms_iou_threshold"],
        'attr { key: "y_scale" value { f: %f } }' % p["y_scale"],
        'attr { key: "x_scale" value { f: %f } }' % p["x_scale"],
        'attr { key: "h_scale" value { f: %f } }' % p["h_scale"],
        'attr { key: "w_scale" value { f: %f } }' % p["w_scale"],
        'attr { key: "num_classes" value { i: %d } }' % p["num_classes"],
    ]
    return " ".join(attrs)


def detection_module(network):
    """A tf.Module like the API's SSDModule: `inference_fn(image [1, SIZE, SIZE, 3])` ending in the empty
    postprocess function the converter replaces by TFLite_Detection_PostProcess."""
    import tensorflow as tf

    anchor = anchors()

    @tf.function(experimental_implements=implements_signature())
    def dummy_post_processing(box_encodings, class_predictions, anchors):  # noqa: ARG001 (the op reads them)
        boxes = tf.constant(0.0, dtype=tf.float32, name="boxes")
        scores = tf.constant(0.0, dtype=tf.float32, name="scores")
        classes = tf.constant(0.0, dtype=tf.float32, name="classes")
        num_detections = tf.constant(0.0, dtype=tf.float32, name="num_detections")
        return boxes, scores, classes, num_detections

    class SSDModule(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = network

        @tf.function(input_signature=[tf.TensorSpec([1, SIZE, SIZE, 3], tf.float32, name="input")])
        def inference_fn(self, image):
            box, logits = self.model(image, training=False)
            with tf.name_scope("raw_outputs"):
                box_encodings = tf.identity(box, name="box_encodings")
                class_predictions = tf.identity(tf.sigmoid(logits), name="class_predictions")
            anchor_const = tf.identity(tf.constant(anchor), name="anchors")
            # tf.function reverses the order of the outputs; the API reverses them back, and so does this
            return dummy_post_processing(box_encodings, class_predictions, anchor_const)[::-1]

    return SSDModule()


def build(folder: Path):
    """Trains the detector (seeded, deterministic) and writes model.tflite, saved_model/ and data.npz."""
    import tensorflow as tf
    import tf_keras as keras

    keras.utils.set_random_seed(M.SEED)
    tf.config.experimental.enable_op_determinism()
    rng = np.random.default_rng(M.SEED)
    x_tr, b_tr, c_tr = images(N_TRAIN, rng)
    x_ev, b_ev, c_ev = images(N_EVAL, rng)
    anchor = anchors()
    box_t, cls_t = targets(b_tr, c_tr, anchor)
    network = backbone()
    network.compile(keras.optimizers.Adam(3e-3), [_box_loss, _class_loss])
    network.fit(x_tr, [box_t, cls_t], epochs=EPOCHS, batch_size=32, verbose=0, shuffle=True)

    saved = folder / "saved_model"
    module = detection_module(network)
    fn = module.inference_fn.get_concrete_function()
    tf.saved_model.save(module, str(saved), signatures=fn)
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved))
    converter.allow_custom_ops = True
    (folder / "model.tflite").write_bytes(converter.convert())
    np.savez(folder / "data.npz", x=x_ev, y_boxes=b_ev, y_classes=c_ev, x_calib=x_tr[:N_CALIB])


def ensure(cache_root) -> dict:
    """The cached detector ({"tflite", "saved_model", "data"}: paths), built first if needed (once across
    processes)."""
    _, data = M.ensure(cache_root, f"detector-v{VERSION}", "ssd", build)
    folder = data.parent
    return {"tflite": folder / "model.tflite", "saved_model": folder / "saved_model", "data": data}


def load(cache_root) -> dict:
    """The fixture's files (`ensure`), the float model's bytes and the data arrays, in one dict."""
    files = ensure(cache_root)
    data = np.load(files["data"])
    return dict(files, model=files["tflite"].read_bytes(), **{k: data[k] for k in data.files})


def tf_int8_io(ssd: dict, samples: int = 200) -> bytes:
    """TF's converter's full-integer detector with int8 input and outputs, from the fixture's SavedModel, calibrated
    on the first `samples` of x_calib (the postprocess in float behind two DEQUANTIZE ops, four QUANTIZE ops after)."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(str(ssd["saved_model"]))
    converter.allow_custom_ops = True
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([s[None]] for s in ssd["x_calib"][:samples])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    return bytes(converter.convert())
