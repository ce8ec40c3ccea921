"""Detection labels and postprocess options that cannot be measured are named in one line before any model runs, and
a model whose outputs are NaN or inf on every sample never meets the accuracy target.

The labels are the SSD fixture's (tests/detector_fixtures.py) spoiled one way each; the detectors with broken options
are exported by the fixture's own builders (its tf.Module and the converter with allow_custom_ops, as the Object
Detection API exports them) with one postprocess attribute changed; the non-finite model is a tiny Keras model whose
output is NaN on every input, and what its report decides is checked against numpy's isfinite on a LiteRT run of each
.tflite the run wrote."""

import json

import numpy as np
import pytest

import detection_reference as reference
import detector_fixtures as D
from conftest import run_cli

pytestmark = pytest.mark.slow

SMALL = ("--variants", "float,fiq", "--formats", "json")
N = 24  # images: nothing of these runs measures anything, or measures a tiny model


@pytest.fixture(scope="module")
def ssd(demo_cache):
    return D.load(demo_cache)


def _data(ssd, tmp_path, name="data", **changed):
    """The fixture's first N images and labels (and x_calib), with `changed` arrays, as an .npz."""
    arrays = {"x": ssd["x"][:N], "y_boxes": ssd["y_boxes"][:N], "y_classes": ssd["y_classes"][:N],
              "x_calib": ssd["x_calib"][:N]}
    arrays.update(changed)
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    return path


def _refused(model, data, tmp_path, capsys) -> tuple[int, list[str]]:
    """Runs the CLI; (exit code, the lines it printed on stderr); no report folder may have been written."""
    out = tmp_path / "out"
    code = run_cli(model, data, out, *SMALL, name="det", latency_runs=0)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert not (out / "det").exists()  # nothing written, nothing shipped
    return code, err


def _one_line(err: list[str], data_name: str, *words: str) -> str:
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith("quant-report: error: ") and data_name in line, line
    for word in words:
        assert word in line, (word, line)
    return line


# --- labels -------------------------------------------------------------------------------------------------
def test_flipped_boxes_are_one_line_naming_the_array(ssd, tmp_path, capsys):
    boxes = ssd["y_boxes"][:N][:, :, [2, 3, 0, 1]]  # ymax, xmax, ymin, xmin: every labelled box upside down
    real = ssd["y_classes"][:N] >= 0
    flipped = int((boxes[..., 0] > boxes[..., 2])[real].sum())
    code, err = _refused(ssd["tflite"], _data(ssd, tmp_path, "flipped", y_boxes=boxes), tmp_path, capsys)
    assert code == 1
    _one_line(err, "flipped.npz", "'y_boxes'", "ymin > ymax", f"{flipped:,} of {int(real.sum()):,}")


def test_boxes_in_pixels_are_one_line_with_their_largest_value(ssd, tmp_path, capsys):
    boxes = ssd["y_boxes"][:N] * 312.0  # a 312-pixel image's coordinates
    top = float(boxes[ssd["y_classes"][:N] >= 0].max())
    code, err = _refused(ssd["tflite"], _data(ssd, tmp_path, "pixels", y_boxes=boxes), tmp_path, capsys)
    assert code == 1
    _one_line(err, "pixels.npz", "'y_boxes'", f"boxes look like pixels (max {top:.1f})", "normalized to [0, 1]")


def test_labels_without_any_ground_truth_are_one_line(ssd, tmp_path, capsys):
    data = _data(ssd, tmp_path, "empty", y_boxes=np.zeros_like(ssd["y_boxes"][:N]),
                 y_classes=np.full_like(ssd["y_classes"][:N], -1))
    code, err = _refused(ssd["tflite"], data, tmp_path, capsys)
    assert code == 1
    _one_line(err, "empty.npz", "'y_classes'", f"no box in any of the {N} images")


@pytest.mark.parametrize("boxes_shape, classes_shape", [((N, 0, 4), (N, 0)), ((N, 3, 0), (N, 3))])
def test_label_arrays_with_an_empty_axis_are_one_line(ssd, tmp_path, capsys, boxes_shape, classes_shape):
    data = _data(ssd, tmp_path, "hollow", y_boxes=np.zeros(boxes_shape, np.float32),
                 y_classes=np.zeros(classes_shape, np.int64))
    code, err = _refused(ssd["tflite"], data, tmp_path, capsys)
    assert code == 1
    _one_line(err, "hollow.npz", f"'y_boxes' has shape {boxes_shape}", "axis of length 0")


def test_padding_rows_are_accepted_whatever_their_coordinates(ssd):
    """A row whose class is -1 is no box: NaN, -1 or pixel coordinates there are never read, and the labels are
    packed as with zeros there (what mAP is computed on)."""
    from reporter.measure.kinds import detection

    boxes, classes = ssd["y_boxes"][:N].copy(), ssd["y_classes"][:N]
    pads = classes < 0
    assert pads.any() and (~pads).any()
    zeros = np.where(pads[..., None], 0.0, boxes).astype(np.float32)
    odd = boxes.copy()
    odd[pads] = np.array([np.nan, -1.0, 312.0, -1.0], np.float32)
    expected = np.concatenate([zeros.reshape(N, -1), classes.reshape(N, -1)], axis=1)
    packed = detection.pack_labels({"boxes": (odd, False), "classes": (classes, True)}, D.CLASSES, "data.npz")
    np.testing.assert_array_equal(packed, expected)


# --- postprocess options ------------------------------------------------------------------------------------
def _exported(folder, monkeypatch, **options) -> str:
    """A detector exported by the fixture's builders (an untrained backbone: nothing of it runs) with the postprocess
    attributes `options`, converted from its SavedModel as the fixture converts; the .tflite's path."""
    import tensorflow as tf

    for key, value in options.items():
        monkeypatch.setitem(D.POSTPROCESS, key, value)
    module = D.detection_module(D.backbone())
    saved = folder / "saved_model"
    tf.saved_model.save(module, str(saved), signatures=module.inference_fn.get_concrete_function())
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved))
    converter.allow_custom_ops = True
    path = folder / "ssd.tflite"
    path.write_bytes(converter.convert())
    return path


@pytest.mark.parametrize("options, said", [
    ({"max_detections": 0}, "has max_detections = 0: it returns no detection"),
    ({"y_scale": float("nan")}, "has y_scale = nan"),
])
def test_postprocess_options_without_detections_are_one_line_and_nothing_ships(ssd, tmp_path, capsys, monkeypatch,
                                                                               options, said):
    from flatbuffers import flexbuffers
    from tensorflow.lite.tools import flatbuffer_utils

    model = _exported(tmp_path, monkeypatch, **options)
    obj = flatbuffer_utils.read_model_from_bytearray(bytearray(model.read_bytes()))
    (op,) = [op for op in obj.subgraphs[0].operators if obj.operatorCodes[op.opcodeIndex].customCode]
    written = flexbuffers.Loads(bytes(op.customOptions))  # the option as the converter wrote it into the file
    key, value = next(iter(options.items()))
    assert written[key] == value or (np.isnan(value) and np.isnan(written[key]))
    capsys.readouterr()
    code, err = _refused(model, _data(ssd, tmp_path), tmp_path, capsys)
    assert code == 1  # a model that cannot be measured (reporter/core/exit_codes.py: FAILED)
    _one_line(err, "ssd.tflite", "TFLite_Detection_PostProcess", said)


# --- outputs NaN or inf on every sample ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def nan_run(tmp_path_factory):
    """A Keras classifier whose output is NaN for every input (Dense, x * inf, Dense: +inf and -inf summed),
    measured as float and weight-only int8 (its FIQ cannot be calibrated on infinite ranges)."""
    import keras

    folder = tmp_path_factory.mktemp("nan_model")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 32)).astype(np.float32)
    inputs = keras.Input((32,))
    h = keras.layers.Rescaling(scale=float("inf"))(keras.layers.Dense(64)(inputs))
    keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(h)).save(folder / "nan.keras")
    np.savez(folder / "nan.npz", x=x, y=rng.integers(0, 3, len(x)), x_calib=x[:20])
    out = folder / "out"
    code = run_cli(folder / "nan.keras", folder / "nan.npz", out, "--variants", "float,wo8", "--formats", "json",
                   name="nan", latency_runs=0)
    return code, out / "nan", x


def _finite_rows(model: bytes, x: np.ndarray) -> np.ndarray:
    """(N,) whether LiteRT's run of `model` gives a finite output for each sample."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    runner = it.get_signature_runner()
    (name,) = runner.get_input_details()
    rows = [np.asarray(next(iter(runner(**{name: s[None]}).values()))) for s in x]
    return np.array([np.isfinite(r).all() for r in rows])


def test_a_model_whose_outputs_are_nan_everywhere_never_meets_the_accuracy_target(nan_run):
    code, folder, x = nan_run
    assert code == 0
    report = json.loads((folder / "report.json").read_text())
    finite = {v["name"]: _finite_rows((folder / f"{v['name']}.tflite").read_bytes(), x)
              for v in report["variants"] if v["status"] == "ok"}
    assert not finite["float"].any() and not finite["wo8"].any()  # the premise, by LiteRT itself
    decision = report["findings"]["decision"]
    for option in (decision or {}).get("options", []):  # a model meets only against a float that can be compared
        if option["meets"]:
            assert finite["float"].any() and finite[option["name"]].any(), option["name"]
    assert decision is None or not decision["meets_target"]
    headline = " ".join(report["findings"]["headline"])
    assert "meets the accuracy target" not in headline and "against float's 0.0 %" not in headline
    said = [w["text"] for w in report["findings"]["warnings"]]  # float's outputs are not finite: nothing compared
    assert any(t.startswith("Float") and "NaN or inf on every evaluation sample" in t for t in said), said
