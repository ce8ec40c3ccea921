"""Static batches: a Keras model whose inputs fix the batch at 1, and every Keras model for a target that runs one sample
at a time (`--target micro`, `ethos-u*`), is exported and converted with a static batch of 1, so the converter invents
no shape ops (a Keras Dense on a rank-3 tensor is a Tensordot: GATHER + REDUCE_PROD with a dynamic batch, which TFLite
Micro has no kernel for); run.log says so in one line. The written files are read with plain LiteRT and the flatbuffer
reader, TFLite Micro's own interpreter runs the int8 model, and the integer repair rungs build on such a model.
Fixture: tests/static_batch_fixtures.py."""

import base64
import json

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix

from conftest import run_recorded
from independent import micro_raw
import static_batch_fixtures as F

SHAPE_OPS = {"SHAPE", "GATHER", "REDUCE_PROD"}
RUN = ("--latency-runs", "0", "--formats", "json")


def input_signature(model: bytes) -> tuple[list, list]:
    """(shape, shape_signature) of each input, read by plain LiteRT."""
    from ai_edge_litert.interpreter import Interpreter

    details = Interpreter(model_content=model).get_input_details()
    return [list(d["shape"]) for d in details], [list(d["shape_signature"]) for d in details]


def op_names(model: bytes) -> set:
    """The builtin op names of the model's main subgraph, read with TensorFlow's flatbuffer reader."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    obj = flatbuffer_utils.read_model_from_bytearray(bytearray(model))
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in obj.operatorCodes]
    return {names[codes[op.opcodeIndex]] for op in obj.subgraphs[0].operators}


@pytest.fixture(scope="module")
def files(demo_cache):
    return F.ensure(demo_cache)


@pytest.fixture(scope="module")
def micro_run(files, tmp_path_factory):
    """The batch-1 fixture run for TFLite Micro (float, FIQ and int8 I/O)."""
    model, data = files
    out = tmp_path_factory.mktemp("static_micro")
    code, error = run_recorded(model, data, out, "m", "--target", "micro", "--variants", "float,fiq,int8_io", *RUN)
    folder = out / "m"
    report = json.loads((folder / "report.json").read_text()) if (folder / "report.json").exists() else None
    return {"code": code, "error": error, "folder": folder, "report": report, "data": np.load(data)}


def test_a_batch1_model_is_written_with_its_static_batch_and_no_shape_ops(micro_run):
    assert micro_run["code"] == 0, micro_run["error"]
    for name in ("float", "fiq", "int8_io"):
        model = (micro_run["folder"] / f"{name}.tflite").read_bytes()
        shapes, signatures = input_signature(model)
        assert shapes == [[1, F.SIZE, F.SIZE, 1]] and signatures == shapes, (name, shapes, signatures)
        ops = op_names(model)
        assert not ops & SHAPE_OPS, (name, sorted(ops))
        assert "FULLY_CONNECTED" in ops, (name, sorted(ops))  # the Dense on the rank-3 tensor is still there
    log = (micro_run["folder"] / "run.log").read_text()
    said = [line for line in log.splitlines() if "static batch of 1" in line]
    assert len(said) == 1 and "model.keras" in said[0] and "fix the batch at 1" in said[0], said


def test_the_int8_model_runs_on_tflite_micro_as_reported(micro_run):
    """TFLite Micro runs the written int8 file, and its predictions from an independent run of that file are the
    ones report.json counts on the target (per sample, and the confusion matrix)."""
    assert micro_run["code"] == 0, micro_run["error"]
    variant = next(v for v in micro_run["report"]["variants"] if v["name"] == "int8_io")
    on = variant["on_target"]
    assert on["target"] == "micro" and on["runs"] is True and on["error"] == "", on
    x, y = micro_run["data"]["x"], micro_run["data"]["y"]
    raw, scale, zero = micro_raw((micro_run["folder"] / "int8_io.tflite").read_bytes(), x)
    predicted = ((raw - zero) * scale).argmax(axis=1)
    right = predicted == y
    reported = np.unpackbits(np.frombuffer(base64.b64decode(on["metrics"]["correct_bits"]), np.uint8))[:len(y)]
    assert (reported.astype(bool) == right).all()
    assert on["metrics"]["accuracy"] == pytest.approx(right.mean())
    assert on["metrics"]["confusion_matrix"] == confusion_matrix(y, predicted, labels=range(F.CLASSES)).tolist()
    assert 0 < right.mean() < 1  # the fixture gets some samples wrong: the per-sample check can fail


def dynamic_batch_float(model_path) -> bytes:
    """The fixture's float model converted the way a dynamic batch gives it (a SavedModel exported by Keras itself from
    a twin with batch None and the same weights): GATHER and REDUCE_PROD around the Tensordot."""
    import tempfile

    import keras
    import tensorflow as tf

    twin = F.build_model(None)
    twin.set_weights(keras.saving.load_model(model_path).get_weights())
    with tempfile.TemporaryDirectory() as folder:
        twin.export(folder, verbose=False)
        return bytes(tf.lite.TFLiteConverter.from_saved_model(folder).convert())


@pytest.mark.parametrize("batch", ["static (as the run writes it)", "dynamic (a SavedModel given as it is)"])
def test_the_integer_repair_rungs_build_on_the_model(batch, micro_run, files):
    """The rungs that start from the batch-1 form (static batch 1, ranges, bias correction) build an int8 model that
    LiteRT's reference kernels run, whether the float model's batch is static or was made static by the rung."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from reporter.convert import rungs
    from reporter.convert.rungs.base import RepairOptions
    from reporter.core import targets

    assert micro_run["code"] == 0, micro_run["error"]
    float_model = (micro_run["folder"] / "float.tflite").read_bytes() if batch.startswith("static") else \
        dynamic_batch_float(files[0])
    assert bool(op_names(float_model) & SHAPE_OPS) == batch.startswith("dynamic")
    data = micro_run["data"]
    wanted = ("static_batch1", "ranges", "bias_correction")
    found = {c.rung: c for c in rungs.candidates(float_model, data["x_calib"][:40], data["x"][:20],
                                                 RepairOptions(rungs=wanted), targets.of("int8"))}
    assert set(found) == set(wanted)
    for code, c in found.items():
        assert "Tensor data is null" not in c.error, (code, c.error)
        if not c.applies:  # a measured refusal ("LiteRT's default ranges agree with float best"), not a failure
            assert code == "ranges" and c.model is None, (code, c.error)
            continue
        assert c.model is not None and not c.error, (code, c.error)
        it = Interpreter(model_content=c.model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        inp = it.get_input_details()[0]
        assert inp["dtype"] == np.int8 and list(inp["shape_signature"]) == [1, F.SIZE, F.SIZE, 1], (code, inp)
        it.set_tensor(inp["index"], np.zeros(inp["shape"], np.int8))
        it.invoke()
        assert not op_names(c.model) & SHAPE_OPS, (code, sorted(op_names(c.model)))


def test_the_ladder_reads_the_runs_calibration_instead_of_calibrating_again(micro_run, files):
    """The repair ladder's batch-1 model is calibrated from the run's own LiteRT Quantizer calibration of the float
    model (a dynamic batch, its SHAPE ops folded by the batch edit), kept to the batch-1 model's tensors: the same
    statistics as LiteRT Quantizer's own calibration of the batch-1 model, and the same int8 model (issue 67: never
    calibrate the same thing twice)."""
    from litert_quantizer import quantizer, recipe

    from reporter.convert import litert
    from reporter.convert.rungs.base import RunVariants, Workspace, static_int8

    assert micro_run["code"] == 0, micro_run["error"]
    float_model = dynamic_batch_float(files[0])
    data = micro_run["data"]
    x_calib = data["x_calib"][:40].astype(np.float32)
    asked = []

    def runs_calibration():
        asked.append(1)
        return litert.LiteRtModels(float_model, x_calib).quantizer().calibration()

    space = Workspace(float_model, x_calib, data["x"][:10], run=RunVariants(calibration=runs_calibration))
    batch1 = space.base.batch1()[0]
    assert bool(op_names(float_model) & SHAPE_OPS) and not op_names(batch1) & SHAPE_OPS
    reused = space.base.calibration()
    assert asked == [1]
    q = quantizer.Quantizer(batch1, recipe.static_wi8_ai8())
    own = q.calibrate({space.base.key: [{space.inputs[0]: x_calib[i:i + 1]} for i in range(len(x_calib))]})
    assert set(reused) == set(own)
    for name, stats in own.items():
        assert stats.keys() == reused[name].keys(), name
        for k in stats:
            np.testing.assert_array_equal(np.asarray(reused[name][k]), np.asarray(stats[k]), err_msg=name)
    assert static_int8(batch1, reused) == static_int8(batch1, own)
    assert space.base._collected_for_batch1() is not None  # what the ladder read was the run's, not its own


@pytest.mark.parametrize("target, static", [("micro", True), ("ethos-u55-128", True), ("int8", False), (None, False)])
def test_a_target_that_runs_one_sample_at_a_time_gets_a_static_batch(target, static, mlp_files, tmp_path, capfd):
    """A dynamic-batch Keras model (the breast-cancer demo MLP) converts with a static batch of 1 for micro and Ethos-U
    and keeps its dynamic batch elsewhere, in the run's own export and in the side process's
    (`described.export_described`); the line run.log gets names the target."""
    import tensorflow as tf

    from reporter.convert import converter
    from reporter.inputs import described, model_loading

    model_path, _ = mlp_files
    loaded = model_loading.load_model(model_path, target=target, scratch=tmp_path)
    try:
        ours = converter.convert(loaded.make_converter, "float", None)
    finally:
        loaded.make_converter.cleanup()
    side = described.export_described(str(model_path), False, str(tmp_path / "side"), target=target)
    theirs = bytes(tf.lite.TFLiteConverter.from_saved_model(side).convert())
    for model in (ours, theirs):
        _, signatures = input_signature(model)
        assert signatures == [[1 if static else -1, 30]], (target, signatures)
    said = [line for line in capfd.readouterr().err.splitlines() if "static batch of 1" in line]
    assert said == ([f"quant-report: {model_path.name} is converted with a static batch of 1: --target {target} runs"
                     " one sample at a time, and a dynamic batch would add shape ops (SHAPE, GATHER, REDUCE_PROD) that"
                     " integer runtimes have no kernel for"] if static else [])
