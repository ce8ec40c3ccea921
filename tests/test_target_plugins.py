"""The target plug-ins' conformance suite (issue 50): every registered target answers the protocol's questions (what
runs there, why not, how accuracy is measured there, the cost, the on-target record, the words), each answer checked
against an independent expectation: the tensor types LiteRT reads from converted files, LiteRT's reference kernels
and TFLite Micro run here, the families' costs as the README states them. And a target added from outside
(tests/fp16_npu_target.py, one module registered in one line) runs a report end to end."""

import dataclasses
import json
import math
import re

import numpy as np
import pytest

from conftest import run_recorded
from independent import outputs as litert_outputs

# What each family is documented to run, by the tensor types its ops compute with (not the tool's rules): a CPU and
# TFLite Micro's loader anything (TFLite Micro itself decides); integer-only hardware the int8 specification; a GPU
# delegate float32 or float16; an Ethos-U NPU integer ops only.
FAMILY_RUNS = {
    "cpu": lambda t: True,
    "int8": lambda t: bool(t.get("int8")) and set(t) <= {"int8", "int32", "bool"},
    "gpu": lambda t: not {"int8", "int16"} & set(t),
    "micro": lambda t: True,
    "ethos-u": lambda t: bool({"int8", "int16"} & set(t)) and set(t) <= {"int8", "int16", "int32", "bool"},
}
# Which of two models meeting the target is cheaper: "fast" (2x larger, 10x faster, wholly on the NPU by Vela, 2x
# Vela's estimate) or "small" (smaller, slower, half on the NPU). Timed on a CPU: latency counts beside size; on
# integer-only hardware, TFLite Micro and a GPU delegate host latency is not the device's: size decides; on an
# Ethos-U NPU a model wholly on the NPU comes first.
FAMILY_CHEAPEST = {"cpu": "fast", "int8": "small", "gpu": "small", "micro": "small", "ethos-u": "fast"}
# Priced by size (and, on a CPU, latency) in doublings over the cheapest of the pool: fast is 2x larger; small is
# 10x slower beyond timing noise.
FAMILY_COSTS = {"cpu": {"fast": 1.0, "small": math.log2(10)}, "int8": {"fast": 1.0, "small": 0.0},
                "gpu": {"fast": 1.0, "small": 0.0}, "micro": {"fast": 1.0, "small": 0.0}}
KERNELS = {"cpu": "LiteRT's default kernels", "int8": "LiteRT's reference kernels", "gpu": "LiteRT's default kernels",
           "micro": "TFLite Micro", "ethos-u": "LiteRT's reference kernels"}


def _family(name: str) -> str:
    return re.sub(r"^(ethos-u)\d+-\d+$", r"\1", name)


def _registered():
    from reporter.core import targets

    return sorted(targets.REGISTRY)


def test_every_registered_target_has_an_expectation_here():
    """A new family added to the registry must be described here too: the suite says what it forgot."""
    assert {_family(name) for name in _registered()} == set(FAMILY_RUNS)


def test_the_target_help_and_choices_are_the_registrys(capsys):
    """--target's help names every family in its own words, and the command line accepts every registered name."""
    from reporter.cli import build_parser, main
    from reporter.core import targets

    try:
        assert main(["run", "--help"]) == 0
    except SystemExit as done:
        assert done.code == 0
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, at hyphens too
    for family in targets.FAMILIES:
        assert "".join(family.HELP.split()) in text, family.HELP
    parser = build_parser()
    for name in _registered():  # the command line takes each, as the user types it
        assert parser.parse_args(["run", "m.keras", "--data", "d.npz", "--target", name]).target == name


def test_no_code_outside_the_target_modules_branches_on_a_targets_check_and_configurations_are_listed_once():
    """Issue 50's counts, as benchmarks/target_counts.py measures them, stay at their floor."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "target_counts.py"
    spec = importlib.util.spec_from_file_location("target_counts", path)
    counts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(counts)
    files = counts._files(None)
    assert counts.check_comparisons(files) == []
    assert len(counts.ethos_lists(files)) == 1
    assert counts.hand_lists(files) == []


# --- words and the decision's sentence -------------------------------------------------------------------------
@pytest.mark.parametrize("name", _registered())
def test_a_report_decided_for_the_target_names_it_in_its_headline(name, fixture_report):
    from reporter.core import targets
    from reporter.pipeline import conclude

    target = targets.of(name)
    assert target.name == name and target.words.startswith("on ") and target.hardware
    assert target.kernels == KERNELS[_family(name)]
    report = dataclasses.replace(fixture_report, findings=None,
                                 settings=dataclasses.replace(fixture_report.settings, target=name))
    found = conclude.findings_of(report)
    assert found.decision.target == name
    assert target.words in found.headline[0], found.headline[0]


# --- cost -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", _registered())
def test_the_cheaper_model_is_the_one_the_family_values(name):
    from reporter.core import targets
    from reporter.model.findings import Option

    judged = dict(score=0.9, standing="not_worse", meets=True, runs=True, quantized=True)
    fast = Option(name="fast", label="fast", **judged, size_bytes=200_000, latency_ms=1.0, latency_p90_ms=1.02,
                  npu_share=1.0, estimate_ms=2.0)
    small = Option(name="small", label="small", **judged, size_bytes=100_000, latency_ms=10.0, latency_p90_ms=10.2,
                   npu_share=0.5, estimate_ms=1.0)
    costs = targets.of(name).costs([fast, small])
    assert min(costs, key=costs.get) == FAMILY_CHEAPEST[_family(name)], costs
    expected = FAMILY_COSTS.get(_family(name))
    if expected is not None:  # in doublings over the smallest (and, timed, the fastest)
        assert costs == pytest.approx(expected), costs


# --- what runs there: converted files read by LiteRT ------------------------------------------------------------
@pytest.fixture(scope="module")
def converted(demo_cache):
    """The digits demo CNN converted here with TensorFlow's public converter: float, float16, dynamic range (its
    weights are large enough for the converter to quantize them: a hybrid model) and full int8 (int8 input and
    output); with 40 evaluation samples."""
    import keras
    import tensorflow as tf

    from reporter.pipeline import demo

    model_path, data_path = demo.ensure_model("digits_cnn")
    data = np.load(data_path)
    model = keras.saving.load_model(str(model_path), compile=False)

    def convert(setup) -> bytes:
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        setup(converter)
        return converter.convert()

    def calibration():
        for row in data["x"][:100]:
            yield [row[None].astype(np.float32)]

    def f16(c):
        c.optimizations = [tf.lite.Optimize.DEFAULT]
        c.target_spec.supported_types = [tf.float16]

    def drq(c):
        c.optimizations = [tf.lite.Optimize.DEFAULT]

    def int8_io(c):
        drq(c)
        c.representative_dataset = calibration
        c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        c.inference_input_type = c.inference_output_type = tf.int8

    files = {"float": convert(lambda c: None), "f16": convert(f16), "drq": convert(drq), "int8_io": convert(int8_io)}
    return files, data["x"][:40].astype(np.float32), data["y"][:40]


def _read(model: bytes) -> tuple[dict, dict]:
    """(tensor kind -> count as the tool's records count them: float16 is "other"; op name -> count), read by LiteRT
    over the tensors the ops compute with."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from independent import used_types

    kinds = {("other" if k == "float16" else k): n for k, n in used_types(model).items()}
    it = Interpreter(model_content=model,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ops = {}
    for op in it._get_ops_details():
        ops[op["op_name"]] = ops.get(op["op_name"], 0) + 1
    return kinds, ops


@pytest.mark.slow
@pytest.mark.parametrize("name", _registered())
def test_what_runs_there_is_read_from_the_files_tensor_types_with_a_reason_when_not(name, converted):
    from reporter.core import targets

    files, _, _ = converted
    target = targets.of(name)
    expected = FAMILY_RUNS[_family(name)]
    for model, tflite in files.items():
        kinds, ops = _read(tflite)
        runs = expected({("float16" if k == "other" else k): n for k, n in kinds.items()})
        assert target.runs(kinds, ops, kinds) is runs, (model, kinds)
        assert (target.why_not(kinds, ops, kinds) == "") is runs, model  # a reason exactly when it does not run


# --- how accuracy is measured there: the check, against the kernels run here -----------------------------------
def _micro(model: bytes, x: np.ndarray) -> np.ndarray:
    """Outputs from TFLite Micro's own interpreter, one sample per invoke, in a process of its own."""
    import subprocess
    import sys
    import tempfile
    import textwrap
    from pathlib import Path

    script = """
        import sys
        import numpy as np
        from tflite_micro import runtime
        x = np.load(sys.argv[2])
        it = runtime.Interpreter.from_bytes(open(sys.argv[1], "rb").read())
        q = it.get_input_details(0)["quantization_parameters"]
        o = it.get_output_details(0)["quantization_parameters"]
        rows = []
        for sample in x:
            it.set_input(np.clip(np.round(sample[None] / q["scales"][0] + q["zero_points"][0]), -128, 127)
                         .astype(np.int8), 0)
            it.invoke()
            rows.append((np.array(it.get_output(0))[0].astype(np.float64) - o["zero_points"][0]) * o["scales"][0])
            it.reset()
        np.save(sys.argv[3], np.stack(rows))
    """
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / "m.tflite", Path(tmp) / "x.npy", Path(tmp) / "y.npy"]
        paths[0].write_bytes(model)
        np.save(paths[1], x)
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, paths)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return np.load(paths[2])


@pytest.mark.slow
@pytest.mark.parametrize("name", _registered())
def test_the_check_measures_on_the_targets_kernels_and_its_record_round_trips(name, converted, fixture_report,
                                                                               tmp_path):
    """The full-int8 model checked as the target's plug-in checks it (with the tools the run hands in): its outputs
    are those of the kernels the target names, run here; the record it makes survives report.json. The hybrid (DRQ)
    model, which computes in float, does not run where the target's tool decides, with the tool's reason."""
    from reporter.core import targets, variants
    from reporter.measure import hardware
    from reporter.model.variant import OnTarget
    from reporter.pipeline.conclude import report_from_json

    target = targets.of(name)
    files, x, _ = converted
    if not target.checked:  # accuracy as measured: nothing to run there
        assert not target.tool and target.kernels == "LiteRT's default kernels"
        return
    model = files["int8_io"]
    kinds, ops = _read(model)
    found = target.check.run(model, target.runs(kinds, ops, kinds), x, hardware, tmp_path)
    assert found.runs and not found.error, found.error
    (outputs,) = found.outputs.values()
    expected = _micro(model, x) if target.kernels == "TFLite Micro" else litert_outputs(model, x, reference=True)
    assert np.allclose(np.asarray(outputs, dtype=np.float64), expected, atol=1e-6)
    if target.tool_heading == "Vela":
        assert found.figures.config == name and found.figures.npu_ops > 0 and found.figures.cpu_ops == 0
    _a_hybrid_model_is_refused_by_the_tool(target, files["drq"], x, tmp_path)
    on = OnTarget(name, target.kernels, found.runs, error=found.error,
                  tools={target.check.key: found.figures} if found.figures is not None else {})
    assert target.check.said(on)
    report = dataclasses.replace(fixture_report, settings=dataclasses.replace(fixture_report.settings, target=name),
                                 variants=[dataclasses.replace(v, on_target=on) if v.name == variants.FIQ else v
                                           for v in fixture_report.variants], findings=None)
    again = report_from_json(report.to_json())
    assert again.settings.target == name and again.variant(variants.FIQ).on_target == on


def _a_hybrid_model_is_refused_by_the_tool(target, model: bytes, x: np.ndarray, tmp_path):
    from reporter.measure import hardware

    kinds, ops = _read(model)
    assert {"int8", "float32"} <= set(kinds)  # independently a hybrid: int8 weights, float32 activations
    fits = target.runs(kinds, ops, kinds)
    if not target.checks(fits):  # not checked: its tensor types alone say it does not run there
        assert not fits and target.why_not(kinds, ops, kinds)
        return
    try:
        found = target.check.run(model, fits, x, hardware, tmp_path)
        runs, why = found.runs, found.error
    except RuntimeError as exc:  # the tool could not run it: its reason is the record's error
        runs, why = False, str(exc)
    assert not runs and why


# --- a new target: one module, registered in one line, end to end ------------------------------------------------
@pytest.fixture(scope="module")
def fp16_npu_run(demo_cache, tmp_path_factory):
    """`quant-report run --target fp16-npu` on the breast-cancer demo MLP, with tests/fp16_npu_target.py registered
    for the run (and only for it)."""
    import fp16_npu_target
    from reporter.core import targets
    from reporter.pipeline import demo

    model, data = demo.ensure_model("breast_cancer_mlp")
    out = tmp_path_factory.mktemp("fp16_npu")
    targets.register(fp16_npu_target)
    try:
        code, error = run_recorded(model, data, out, "bc", "--target", "fp16-npu", "--variants", "float,drq",
                                   "--formats", "json,md", "--latency-runs", "2")
    finally:
        targets.unregister(fp16_npu_target)
    folder = out / "bc"
    return {"code": code, "error": error, "folder": folder, "data": np.load(data),
            "report": json.loads((folder / "report.json").read_text()) if (folder / "report.json").exists() else None}


def _float16_only(model: bytes) -> bool:
    """Read by LiteRT: float16 tensors and no integer tensor (int32 shapes aside)."""
    from ai_edge_litert.interpreter import Interpreter

    kinds = {np.dtype(d["dtype"]).name for d in Interpreter(model_content=model).get_tensor_details()}
    return "float16" in kinds and not {"int8", "int16"} & kinds


@pytest.mark.slow
def test_a_target_added_as_one_module_ships_what_it_runs_measured_on_its_kernels(fp16_npu_run):
    assert fp16_npu_run["code"] == 0, fp16_npu_run["error"]
    report, folder, data = fp16_npu_run["report"], fp16_npu_run["folder"], fp16_npu_run["data"]
    assert report["settings"]["target"] == "fp16-npu"
    d = report["findings"]["decision"]
    assert d["target"] == "fp16-npu"
    # what runs there, read from each written file by LiteRT: only the float16 model (added by the target)
    for option in d["options"]:
        assert option["runs"] is _float16_only((folder / f"{option['name']}.tflite").read_bytes()), option["name"]
    assert [o["name"] for o in d["options"] if o["runs"]] == ["f16"]
    # its accuracy there is the reference kernels', run here
    model = (folder / d["file"]).read_bytes()
    accuracy = float(np.mean(litert_outputs(model, data["x"], reference=True).argmax(axis=1) == data["y"]))
    assert d["variant"] == "f16" and d["meets_target"], d["reason"]
    assert d["hardware"]["kernels"] == "LiteRT's reference kernels" and d["hardware"]["runs"]
    assert d["hardware"]["metrics"]["accuracy"] == pytest.approx(accuracy, abs=1e-12)
    assert next(o for o in d["options"] if o["name"] == "f16")["score"] == pytest.approx(accuracy, abs=1e-12)
    headline = report["findings"]["headline"][0]
    assert headline.startswith("Ship ") and "on a float16 NPU" in headline, headline
    assert report["repairs"] == []  # not integer-only hardware: no repair ladder
    assert "On the target: fp16-npu, checked with LiteRT's reference kernels" in (folder / "summary.md").read_text()
