"""Issue 46: models as people ship them, round 3 (three of its points).

* Sparse weights (TFLite sparsity behind DENSIFY ops, float32 and float16 as MediaPipe ships them): before, the
  float16 file was refused ("the model is already quantized (4 int8/int16/float16 tensors ...)") and on the
  float32 file FIQ failed (LiteRT Quantizer read the sparse constants as int8 weights: "conv.cc:390 zero_point
  -128 != 0"). Now each is made dense, its outputs equal the given file's (LiteRT runs here), DRQ and FIQ are
  built, and the note names the densified tensors (read from the file here).
* Output order: a file without a signature whose subgraph outputs list is not in tensor-index order; before, the
  outputs were listed by tensor index; now in the subgraph's order, read from the file here.
* `--custom-objects FILE.py` (relative to the current folder, or to a batch file): before, refused as "not a
  module name"; a missing file is one line naming it.

Figures are checked against LiteRT runs of the files and numpy/scikit-learn, none of quant-report's own code.
"""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from sklearn import metrics as skm

import independent as I
import sparse_and_unordered_tflite_fixtures as F
from conftest import one_error_line, run_cli
from reporter.core.variants import DRQ, FIQ, FLOAT


def _model(data: bytes):
    from tensorflow.lite.tools import flatbuffer_utils as fb

    return fb.convert_bytearray_to_object(bytearray(data))


def _op_names(data: bytes) -> list[str]:
    from tensorflow.lite.python import schema_py_generated as schema

    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    model = _model(data)
    codes = model.operatorCodes
    return [names[max(codes[op.opcodeIndex].builtinCode, codes[op.opcodeIndex].deprecatedBuiltinCode)]
            for op in model.subgraphs[0].operators]


def _sparse_tensors(data: bytes) -> dict[str, int]:
    """Name -> TensorType of every tensor with sparsity parameters, read from the flatbuffer."""
    sg = _model(data).subgraphs[0]
    return {t.name.decode(): t.type for t in sg.tensors if t.sparsity is not None}


# --- sparse weights ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sparse(demo_cache):
    folder = F.ensure_sparse(demo_cache)
    return folder, np.load(folder / "data.npz")


@pytest.mark.parametrize("name, value_type", [("sparse32", "FLOAT32"), ("sparse16", "FLOAT16")])
def test_the_fixture_really_holds_sparse_weights_behind_densify(sparse, name, value_type):
    from tensorflow.lite.python import schema_py_generated as schema

    folder, _ = sparse
    given = (folder / f"{name}.tflite").read_bytes()
    assert _op_names(given).count("DENSIFY") == 2
    tensors = _sparse_tensors(given)
    assert len(tensors) == 2 and set(tensors.values()) == {getattr(schema.TensorType, value_type)}
    sg = _model(given).subgraphs[0]
    formats = [[d.format for d in t.sparsity.dimMetadata] for t in sg.tensors if t.sparsity is not None]
    assert all(schema.DimensionType.SPARSE_CSR in f for f in formats)
    if name == "sparse16":
        assert _op_names(given).count("DEQUANTIZE") == 2


@pytest.mark.parametrize("name", ["sparse32", "sparse16"])
def test_a_sparse_file_is_made_into_the_dense_float_model_it_computes(sparse, name):
    from reporter.inputs import tflite_prep

    folder, data = sparse
    given = (folder / f"{name}.tflite").read_bytes()
    prepared = tflite_prep.prepare(given)
    ops = _op_names(prepared.data)
    assert "DENSIFY" not in ops and "DEQUANTIZE" not in ops
    model = _model(prepared.data)
    from tensorflow.lite.python import schema_py_generated as schema

    assert all(t.sparsity is None for t in model.subgraphs[0].tensors)
    assert schema.TensorType.FLOAT16 not in {t.type for t in model.subgraphs[0].tensors}
    rng = np.random.default_rng(1)
    for batch in (data["x"], rng.normal(size=data["x"][:30].shape).astype(np.float32)):
        assert np.array_equal(I.outputs(prepared.data, batch), I.outputs(given, batch))
    # the dense weights are the sparse ones: every zero of the pruned kernels is there (numpy on the constants)
    buffers = [np.frombuffer(bytes(bytearray(model.buffers[t.buffer].data)), "<f4")
               for t in model.subgraphs[0].tensors if t.buffer and model.buffers[t.buffer].data is not None
               and len(t.shape) >= 2 and t.type == schema.TensorType.FLOAT32]
    assert sum(int(np.sum(b == 0)) for b in buffers) / sum(b.size for b in buffers) > 0.5
    note = prepared.changes[0]
    assert note.startswith("2 sparse weights") and "identical" in note
    for tensor in _sparse_tensors(given):
        assert tensor in note, (tensor, note)


@pytest.fixture(scope="module")
def sparse_reports(sparse, tmp_path_factory):
    folder, _ = sparse
    out = tmp_path_factory.mktemp("sparse_out")
    found = {}
    for name in ("sparse32", "sparse16"):
        code = run_cli(folder / f"{name}.tflite", folder / "data.npz", out, "--formats", "json,md", name=name,
                       latency_runs=0)
        found[name] = (code, out / name, json.loads((out / name / "report.json").read_text()))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sparse32", "sparse16"])
def test_a_sparse_file_is_quantized_and_measured(sparse, sparse_reports, name):
    from reporter.measure import structure

    folder, data = sparse
    code, out, report = sparse_reports[name]
    assert code == 0
    variants = {v["name"]: v for v in report["variants"]}
    assert all(variants[v]["status"] == "ok" for v in (FLOAT, DRQ, FIQ)), [v.get("error") for v in variants.values()]
    given = (folder / f"{name}.tflite").read_bytes()
    assert variants[FLOAT]["metrics"]["accuracy"] == pytest.approx(I.accuracy(given, data["x"], data["y"]))
    written_float = (out / f"{FLOAT}.tflite").read_bytes()
    assert np.array_equal(I.outputs(written_float, data["x"]), I.outputs(given, data["x"]))
    for v in (DRQ, FIQ):
        written = (out / f"{v}.tflite").read_bytes()
        assert variants[v]["metrics"]["accuracy"] == pytest.approx(I.accuracy(written, data["x"], data["y"]))
        assert structure.tensor_types(written)["int8"] > 0, v
    assert abs(variants[FIQ]["metrics"]["accuracy"] - variants[FLOAT]["metrics"]["accuracy"]) < 0.05
    note = " ".join(report["model"]["input_changes"])
    summary = (out / "summary.md").read_text()
    for tensor in _sparse_tensors(given):
        assert tensor in note and tensor in summary, tensor


# --- output order --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def two_outputs(demo_cache):
    return F.ensure_two_outputs(demo_cache)


def test_the_fixture_lists_its_outputs_out_of_tensor_index_order(two_outputs):
    given = _model((two_outputs / "two_out.tflite").read_bytes())
    outputs = [int(i) for i in given.subgraphs[0].outputs]
    assert not given.signatureDefs and outputs != sorted(outputs)


def test_a_model_without_a_signature_lists_its_outputs_in_its_own_order(two_outputs):
    from reporter.measure import evaluate
    from reporter.inputs import tflite_prep

    given = (two_outputs / "two_out.tflite").read_bytes()
    sg = _model(given).subgraphs[0]
    own = [sg.tensors[i].name.decode() for i in sg.outputs]
    sig = evaluate.signature(tflite_prep.prepare(given).data)
    assert sig.output_names() == own


@pytest.mark.slow
def test_the_report_lists_the_outputs_in_the_models_order(two_outputs, tmp_path):
    given = (two_outputs / "two_out.tflite").read_bytes()
    sg = _model(given).subgraphs[0]
    own = [sg.tensors[i].name.decode() for i in sg.outputs]
    assert run_cli(two_outputs / "two_out.tflite", two_outputs / "data.npz", tmp_path, "--variants", FLOAT,
                   "--formats", "json", name="two", latency_runs=0) == 0
    report = json.loads((tmp_path / "two" / "report.json").read_text())
    assert [o["name"] for o in report["model"]["outputs"]] == own
    # the class output's accuracy is the file's own (LiteRT, scikit-learn)
    from ai_edge_litert.interpreter import Interpreter

    data = np.load(two_outputs / "data.npz")
    classes = next(o for o in own if f"y_{o}" in data.files)
    it = Interpreter(model_content=given)
    it.resize_tensor_input(it.get_input_details()[0]["index"], data["x"].shape)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], data["x"])
    it.invoke()
    index = next(d["index"] for d in it.get_output_details() if d["name"] == classes)
    expected = skm.accuracy_score(data[f"y_{classes}"], it.get_tensor(index).argmax(axis=1))
    heads = report["variants"][0]["heads"]
    assert list(heads) == own
    assert heads[classes]["metrics"]["accuracy"] == pytest.approx(expected, abs=1e-9)


# --- --custom-objects FILE.py --------------------------------------------------------------------------------
SCALE_MODULE = '''
import keras

@keras.saving.register_keras_serializable(package="issue46")
class Scale46(keras.layers.Layer):
    def __init__(self, factor=2.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x):
        return x * self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}
'''

SAVE_SCALED = '''
import sys
import numpy as np
import keras
sys.path.insert(0, "layers")
import scale46

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.normal(size=(300, 4)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("int64")
model = keras.Sequential([keras.Input((4,)), scale46.Scale46(3.0), keras.layers.Dense(2, activation="softmax")])
model.compile(keras.optimizers.Adam(0.05), "sparse_categorical_crossentropy")
model.fit(x[:200], y[:200], epochs=10, verbose=0)
model.save(sys.argv[1])
np.savez(sys.argv[2], x=x[200:], y=y[200:], x_calib=x[:200])
'''


@pytest.fixture(scope="module")
def scaled_files(tmp_path_factory):
    """A Keras 3 model with a registered custom layer (Scale46, in layers/scale46.py: a file, not a module on
    any path), saved by another process, so that this one has never imported the class."""
    folder = tmp_path_factory.mktemp("custom46")
    (folder / "layers").mkdir()
    (folder / "layers" / "scale46.py").write_text(textwrap.dedent(SCALE_MODULE))
    (folder / "save.py").write_text(textwrap.dedent(SAVE_SCALED))
    subprocess.run([sys.executable, "save.py", "scaled.keras", "scaled.npz"], cwd=folder, check=True,
                   capture_output=True)
    return folder


def _float_accuracy_checked(folder, out_folder, report):
    from ai_edge_litert.interpreter import Interpreter

    d = np.load(folder / "scaled.npz")
    it = Interpreter(model_content=(out_folder / f"{FLOAT}.tflite").read_bytes())
    it.resize_tensor_input(it.get_input_details()[0]["index"], d["x"].shape)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], d["x"])
    it.invoke()
    predicted = it.get_tensor(it.get_output_details()[0]["index"]).argmax(axis=1)
    flt = report["variants"][0]
    assert flt["status"] == "ok"
    assert flt["metrics"]["accuracy"] == pytest.approx(skm.accuracy_score(d["y"], predicted), abs=1e-9)
    assert flt["metrics"]["accuracy"] > 0.9


@pytest.mark.slow
def test_custom_objects_takes_a_file_relative_to_the_working_folder(scaled_files, tmp_path, monkeypatch):
    """Before: "--custom-objects must be a module name, not './layers/scale46.py'"."""
    monkeypatch.chdir(scaled_files)
    assert run_cli("scaled.keras", "scaled.npz", tmp_path, "--custom-objects", "./layers/scale46.py",
                   "--trust-model", "--variants", FLOAT, "--formats", "json", name="scaled", latency_runs=0) == 0
    report = json.loads((tmp_path / "scaled" / "report.json").read_text())
    _float_accuracy_checked(scaled_files, tmp_path / "scaled", report)
    assert report["settings"]["custom_objects"] == "./layers/scale46.py"


@pytest.mark.slow
def test_custom_objects_in_a_batch_takes_a_file_beside_the_batch_file(scaled_files, tmp_path, monkeypatch):
    from reporter.cli import main

    monkeypatch.chdir(tmp_path)  # the working folder is not the batch file's
    (scaled_files / "batch46.toml").write_text(textwrap.dedent(f'''
        [defaults]
        variants = ["{FLOAT}"]
        formats = ["json"]
        latency_runs = 0
        trust_model = true
        custom_objects = "layers/scale46.py"

        [[model]]
        name = "scaled"
        path = "scaled.keras"
        data = "scaled.npz"
    '''))
    assert main(["batch", str(scaled_files / "batch46.toml"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    report = json.loads((tmp_path / "out" / "scaled" / "report.json").read_text())
    _float_accuracy_checked(scaled_files, tmp_path / "out" / "scaled", report)


def test_a_custom_objects_module_name_still_works(scaled_files):
    """The module-name form: layers/ as a package-less folder, the module found in the current folder."""
    from reporter.inputs import model_loading

    model_loading.import_custom_objects("scale46", True, str(scaled_files / "layers"))
    import keras

    assert keras.saving.get_registered_object("issue46>Scale46") is not None


def test_a_missing_custom_objects_file_is_one_line_naming_it(capfd, scaled_files, tmp_path, monkeypatch):
    monkeypatch.chdir(scaled_files)
    out = tmp_path / "out"
    code = run_cli("scaled.keras", "scaled.npz", out, "--custom-objects", "layers/no_such_file.py",
                   "--trust-model")
    line = one_error_line(code, capfd.readouterr().err, out)
    assert "no_such_file.py" in line and "--custom-objects" in line, line
