"""Independent detection scores of a .tflite ending in TFLite_Detection_PostProcess: LiteRT runs, pycocotools.

None of quant-report's code: the tests compare the tool's detection figures against these (pycocotools 2.0.11
checked; faster-coco-eval 1.8.0 gives the same stats on the same detections). The four outputs are told apart
by the op's output index (0 boxes [1, K, 4], 1 classes [1, K], 2 scores [1, K], 3 num_detections [1]),
following a graph output back through QUANTIZE/DEQUANTIZE ops to the op, and their shapes are read from the
interpreter after allocate_tensors(): the converter writes them as [] in the file. An int8 output is
dequantized with its own scale and zero point, and class ids are rounded (class 1 dequantizes to 0.996). Only
each image's first num_detections entries are read: the op leaves the rest unwritten.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np

POSTPROCESS = "TFLite_Detection_PostProcess"
OUTPUTS = ("boxes", "classes", "scores", "num")  # the op's output order


def _interpreter(model: bytes, reference: bool = False, delegates: bool = True):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    if reference:
        resolver = OpResolverType.BUILTIN_REF
    else:  # without the default delegate the ops stay visible (XNNPACK replaces the float ones by a DELEGATE op)
        resolver = OpResolverType.AUTO if delegates else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    it = Interpreter(model_content=bytes(model), experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    return it


def output_roles(model: bytes) -> dict:
    """{"boxes"|"classes"|"scores"|"num": the graph output's tensor index} by the postprocess op's output
    index, each graph output traced back through QUANTIZE/DEQUANTIZE ops to the op."""
    it = _interpreter(model, delegates=False)
    ops = it._get_ops_details()
    (post,) = [op for op in ops if op["op_name"] == POSTPROCESS]
    made_by = {int(t): op for op in ops for t in op["outputs"]}
    roles = {}
    for detail in it.get_output_details():
        tensor = detail["index"]
        while tensor not in post["outputs"]:
            op = made_by[tensor]
            assert op["op_name"] in ("QUANTIZE", "DEQUANTIZE"), op["op_name"]
            tensor = int(op["inputs"][0])
        roles[OUTPUTS[list(post["outputs"]).index(tensor)]] = detail["index"]
    assert set(roles) == set(OUTPUTS), roles
    return roles


def output_details(it, model: bytes) -> dict:
    """{"boxes"|"classes"|"scores"|"num": output details} of an allocated interpreter of `model` (shapes as
    the interpreter sized them)."""
    by_index = {d["index"]: d for d in it.get_output_details()}
    return {name: by_index[index] for name, index in output_roles(model).items()}


def _real(it, detail) -> np.ndarray:
    value = it.get_tensor(detail["index"])
    scale, zero = detail["quantization"]
    if np.issubdtype(value.dtype, np.integer) and scale:
        return (value.astype(np.float64) - zero) * scale
    return value.astype(np.float64)


def _feed(sample: np.ndarray, detail) -> np.ndarray:
    if detail["dtype"] == np.float32:
        return sample.astype(np.float32)
    scale, zero = detail["quantization"]
    info = np.iinfo(detail["dtype"])
    return np.clip(np.round(sample / scale + zero), info.min, info.max).astype(detail["dtype"])


def raw_outputs(model: bytes, x: np.ndarray, reference: bool = False) -> dict:
    """{"boxes" [N, K, 4], "classes" [N, K], "scores" [N, K], "num" [N]} over every image of x, real values
    (dequantized, classes not rounded), one image per invoke, with LiteRT's default (or reference) kernels."""
    it = _interpreter(model, reference)
    (inp,) = it.get_input_details()
    roles = output_details(it, model)
    rows = {name: [] for name in OUTPUTS}
    for sample in x:
        it.set_tensor(inp["index"], _feed(sample[None], inp))
        it.invoke()
        for name, detail in roles.items():
            rows[name].append(_real(it, detail)[0] if name != "num" else _real(it, detail).reshape(-1)[0])
    return {name: np.stack(v) for name, v in rows.items()}


def micro_raw_outputs(model: bytes, x: np.ndarray) -> dict:
    """raw_outputs, run by TFLite Micro's interpreter (reset between images). TFLite Micro sizes outputs by the
    file's shapes: on a file whose postprocess outputs have shape [] (as the converter writes them) it returns
    one value per output, which shows here as arrays with one value per image."""
    from tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(bytes(model))
    roles = {index: name for name, index in output_roles(model).items()}
    order = [roles[d["index"]] for d in _interpreter(model).get_output_details()]  # graph output order
    q = it.get_input_details(0)["quantization_parameters"]
    inp = {"dtype": it.get_input_details(0)["dtype"], "quantization": (q["scales"][0], q["zero_points"][0])
           if len(q["scales"]) else (0.0, 0)}
    rows = {name: [] for name in OUTPUTS}
    for sample in x:
        it.set_input(_feed(sample[None], inp), 0)
        it.invoke()
        for i, name in enumerate(order):
            value = np.array(it.get_output(i))
            oq = it.get_output_details(i)["quantization_parameters"]
            if np.issubdtype(value.dtype, np.integer) and len(oq["scales"]):
                value = (value.astype(np.float64) - oq["zero_points"][0]) * oq["scales"][0]
            value = value.astype(np.float64)
            rows[name].append(value.reshape(-1)[0] if name == "num" or value.ndim == 0 else value[0])
        it.reset()
    return {name: np.stack(v) for name, v in rows.items()}


def detections(raw: dict) -> list[dict]:
    """Per image: its first num_detections boxes, class ids (rounded) and scores."""
    out = []
    for boxes, classes, scores, num in zip(raw["boxes"], raw["classes"], raw["scores"], raw["num"]):
        n = int(round(num))
        out.append({"boxes": boxes[:n], "classes": np.rint(classes[:n]).astype(np.int64), "scores": scores[:n]})
    return out


def run(model: bytes, x: np.ndarray, reference: bool = False) -> list[dict]:
    """The detections of a LiteRT run of `model` over x (see raw_outputs, detections)."""
    return detections(raw_outputs(model, x, reference))


def _coco(dets: list[dict], y_boxes: np.ndarray, y_classes: np.ndarray, size: float):
    """pycocotools' COCOeval over the ground truth and detections, evaluated and accumulated. Boxes are
    scaled by `size` to pixels (COCO's area ranges are in pixels; only the 'all' range is read here)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    def xywh(b):
        return [float(b[1] * size), float(b[0] * size), float((b[3] - b[1]) * size), float((b[2] - b[0]) * size)]

    found = {int(c) for d in dets for c in d["classes"]}
    categories = sorted({int(c) for c in y_classes.reshape(-1) if c >= 0} | found)
    gt = {"images": [{"id": i} for i in range(len(y_boxes))], "categories": [{"id": c} for c in categories],
          "annotations": []}
    for i, (boxes, classes) in enumerate(zip(y_boxes, y_classes)):
        for b, c in zip(boxes, classes):
            if c >= 0:
                w = xywh(b)
                gt["annotations"].append({"id": len(gt["annotations"]) + 1, "image_id": i, "category_id": int(c),
                                          "bbox": w, "area": w[2] * w[3], "iscrowd": 0})
    results = [{"image_id": i, "category_id": int(c), "bbox": xywh(b), "score": float(s)}
               for i, d in enumerate(dets) for b, c, s in zip(d["boxes"], d["classes"], d["scores"])]
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
        coco_gt = COCO()
        coco_gt.dataset = gt
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(results) if results else COCO()
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


def score(dets: list[dict], y_boxes: np.ndarray, y_classes: np.ndarray, size: float = 1.0) -> dict:
    """mAP@0.5, COCO mAP@[.5:.95], AP@0.5 per class id and recall at IoU 0.5 (share of ground-truth boxes matched
    by a detection of their class, over every detection the model returns, i.e. at its own score threshold),
    from pycocotools. `size`: the images' side in pixels (COCO's area ranges), 1.0 if it does not matter."""
    ev = _coco(dets, y_boxes, y_classes, size)
    precision = ev.eval["precision"]  # [IoU thresholds, recall points, classes, area ranges, max detections]
    per_class = {}
    for k, c in enumerate(ev.params.catIds):
        p = precision[0, :, k, 0, -1]
        if (y_classes == c).any():
            per_class[int(c)] = float(p[p > -1].mean()) if (p > -1).any() else 0.0
    matched = total = 0
    for e in ev.evalImgs:  # [category, area range, image] flattened; the first area range is 'all'
        if e is None or e["aRng"] != ev.params.areaRng[0]:
            continue
        real = ~np.asarray(e["gtIgnore"], bool)
        total += int(real.sum())
        matched += int((np.asarray(e["gtMatches"])[0][real] > 0).sum())
    return {"map50": float(ev.stats[1]), "map": float(ev.stats[0]), "ap50_per_class": per_class,
            "recall50": matched / total if total else float("nan")}


def clipping(model: bytes, float_raw: dict) -> dict:
    """Per output of `model` (quantized outputs): the real range its int8 values can represent (scale and zero
    point over -128..127; None for a float output) and the share of the float model's values on the same images
    (`float_raw`, from raw_outputs) beyond that range by more than half a step. Only each image's first
    num_detections entries count: the op leaves the rest of its outputs unwritten (whatever the memory held)."""
    n = np.rint(float_raw["num"]).astype(np.int64)
    out = {}
    for name, detail in output_details(_interpreter(model), model).items():
        ref = np.asarray(float_raw[name], np.float64)
        ref = ref if name == "num" else np.concatenate([row[:k].reshape(-1) for row, k in zip(ref, n)])
        scale, zero = detail["quantization"]
        if not scale:
            out[name] = {"range": None, "clipped": 0.0}
            continue
        lo, hi = (-128 - zero) * scale, (127 - zero) * scale
        out[name] = {"range": (lo, hi), "clipped": float(np.mean((ref < lo - scale / 2) | (ref > hi + scale / 2)))}
    return out
