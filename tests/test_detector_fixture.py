"""The SSD fixture (tests/detector_fixtures.py) is a detector as the Object Detection API ships one: the custom op
with the attributes it was exported with, outputs LiteRT sizes only when it prepares the op, a float mAP@0.5
well above chance by pycocotools on a LiteRT run (tests/detection_reference.py), int8 models that keep
(TF's converter) or lose (LiteRT Quantizer's clipped outputs) it, and files TFLite Micro reads once the
outputs' shapes are written in (tests/detector_shapes.py)."""

import numpy as np
import pytest

import detection_reference as R
import detector_fixtures as D
import detector_shapes

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ssd(demo_cache):
    return D.load(demo_cache)


@pytest.fixture(scope="module")
def float_raw(ssd):
    return R.raw_outputs(ssd["model"], ssd["x"])


@pytest.fixture(scope="module")
def tf_fiq_int8_io(ssd):
    """TF's converter's full-integer model with int8 input and outputs, from the fixture's SavedModel."""
    return D.tf_int8_io(ssd)


def _file_tensors(model: bytes):
    from tensorflow.lite.tools import flatbuffer_utils

    obj = flatbuffer_utils.read_model_from_bytearray(bytearray(model))
    return obj, obj.subgraphs[0]


def test_the_postprocess_op_carries_the_attributes_it_was_exported_with(ssd):
    from flatbuffers import flexbuffers

    obj, graph = _file_tensors(ssd["model"])
    (op,) = [op for op in graph.operators if detector_shapes.op_name(obj, op) == R.POSTPROCESS]
    options = flexbuffers.Loads(bytes(op.customOptions))
    # the API words the floats with %f (the score threshold 1e-8 is written 0.000000); the flexbuffer holds
    # use_regular_nms as 0/1
    expected = {k: float("%f" % v) if isinstance(v, float) else int(v) for k, v in D.POSTPROCESS.items()}
    assert options.keys() == expected.keys()
    for key, value in expected.items():
        assert options[key] == pytest.approx(value, rel=1e-6), key
    # its inputs: box encodings [1, A, 4], sigmoid scores with a background column [1, A, C+1], anchors [A, 4]
    shapes = [list(graph.tensors[i].shape) for i in op.inputs]
    a = len(D.anchors())
    assert shapes == [[1, a, 4], [1, a, D.CLASSES + 1], [a, 4]]


def test_outputs_have_no_shape_in_the_file_and_their_sizes_after_allocation(ssd, float_raw):
    _, graph = _file_tensors(ssd["model"])
    assert [list(graph.tensors[i].shape) for i in graph.outputs] == [[]] * 4
    k = D.POSTPROCESS["max_detections"]
    it = R._interpreter(ssd["model"])
    sizes = {name: list(d["shape"]) for name, d in R.output_details(it, ssd["model"]).items()}
    assert sizes == {"boxes": [1, k, 4], "classes": [1, k], "scores": [1, k], "num": [1]}
    # the score threshold the API writes (0) keeps every image's K detections
    assert (float_raw["num"] == k).all()


def test_labels_are_the_ops_boxes_and_class_ids(ssd):
    boxes, classes = ssd["y_boxes"], ssd["y_classes"]
    assert boxes.shape == (len(ssd["x"]), D.MAX_OBJECTS, 4) and classes.shape == boxes.shape[:2]
    real = classes >= 0
    assert set(np.unique(classes)) == {-1, *range(D.CLASSES)}
    assert (real[:, 0]).all()  # every image holds an object
    b = boxes[real]
    assert ((b >= 0) & (b <= 1)).all() and (b[:, 2] > b[:, 0]).all() and (b[:, 3] > b[:, 1]).all()
    assert len(ssd["x_calib"]) == D.N_CALIB
    assert not any((ssd["x_calib"] == im).all(axis=(1, 2, 3)).any() for im in ssd["x"][:20])  # distinct images


def test_float_detects_what_is_there(ssd, float_raw):
    scores = R.score(R.detections(float_raw), ssd["y_boxes"], ssd["y_classes"], D.SIZE)
    assert scores["map50"] > 0.9, scores
    assert scores["map"] > 0.7, scores
    assert min(scores["ap50_per_class"].values()) > 0.85, scores
    # detections are the op's own: classes are whole class ids, scores sorted, boxes in the image
    assert np.array_equal(float_raw["classes"], np.rint(float_raw["classes"]))
    assert (np.diff(float_raw["scores"], axis=1) <= 0).all()


def test_tf_converter_int8_keeps_the_map_and_litert_quantizer_clips_the_classes(ssd, float_raw, tf_fiq_int8_io):
    from litert_quantizer import quantizer, recipe

    base = R.score(R.detections(float_raw), ssd["y_boxes"], ssd["y_classes"], D.SIZE)["map50"]
    tf_int8 = R.score(R.run(tf_fiq_int8_io, ssd["x"]), ssd["y_boxes"], ssd["y_classes"], D.SIZE)
    assert tf_int8["map50"] == pytest.approx(base, abs=0.02)
    q = quantizer.Quantizer(ssd["model"], recipe.static_wi8_ai8())
    calibration = q.calibrate({"serving_default": [{"input": s[None]} for s in ssd["x_calib"]]})
    litert = bytes(q.quantize(calibration, enable_progress_report=False).quantized_model)
    clipped = R.clipping(litert, float_raw)
    # the moving-average range of the classes output stops below 1.5: class 2 reads as class 1
    assert clipped["classes"]["range"][1] < 1.5 and clipped["classes"]["clipped"] > 0.05, clipped
    scores = R.score(R.run(litert, ssd["x"]), ssd["y_boxes"], ssd["y_classes"], D.SIZE)
    assert scores["ap50_per_class"][2] < 0.05 and scores["map50"] < base - 0.2, scores


def test_tflite_micro_reads_the_outputs_once_their_shapes_are_in_the_file(ssd, tf_fiq_int8_io):
    from tflite_micro import runtime

    as_written = runtime.Interpreter.from_bytes(tf_fiq_int8_io)
    assert [list(as_written.get_output_details(i)["shape"]) for i in range(4)] == [[]] * 4
    x = ssd["x"][:40]
    assert R.micro_raw_outputs(tf_fiq_int8_io, x)["boxes"].shape == (len(x),)  # one value per output
    fixed = detector_shapes.with_static_shapes(tf_fiq_int8_io)
    _, graph = _file_tensors(fixed)
    k = D.POSTPROCESS["max_detections"]
    assert sorted(list(graph.tensors[i].shape) for i in graph.outputs) == [[1], [1, k], [1, k], [1, k, 4]]
    reference = R.raw_outputs(tf_fiq_int8_io, x, reference=True)
    # LiteRT reads the rewritten file as before; TFLite Micro now detects what LiteRT's reference kernels detect
    assert all(np.array_equal(reference[key], v) for key, v in R.raw_outputs(fixed, x, reference=True).items())
    for got, want in zip(R.detections(R.micro_raw_outputs(fixed, x)), R.detections(reference)):
        for key in ("boxes", "classes", "scores"):
            np.testing.assert_array_equal(got[key], want[key])
