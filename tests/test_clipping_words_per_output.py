"""Sentences about an output quote that output's own figures, and the output-range fix is what it is called
(issue 46), on a three-output model whose outputs clip differently (tests/clipping_outputs_fixtures.py), given as
a Keras model (TF's converter builds FIQ) and as a float .tflite (LiteRT Quantizer builds it).

Every figure is recomputed here from the written .tflite files, run with plain LiteRT (tests/independent.py) and
read with ai_edge_litert: the outputs' MSE against float and its share of float's variance, the share of float's
values beyond each int8 output's range, the fix's output tensor types and the ops making its outputs."""

import json
import re

import numpy as np
import pytest

from conftest import run_recorded
import clipping_outputs_fixtures as F

pytestmark = pytest.mark.slow

ENGINES = ("keras", "tflite")
FLAGS = ("--variants", "float,fiq", "--formats", "json,md", "--latency-runs", "0", "--calibration-samples", "1000")
UNLABELLED = "output_2"  # the .tflite run is given no targets for it: a hint names it
FIX = "fiq_output_float"
MSE = r"MSE ([-+.0-9e]+) \(([.0-9]+) % of the float output's variance\)"


@pytest.fixture(scope="module")
def runs(demo_cache, tmp_path_factory):
    """{engine: (exit code, error, report folder, {output name: signature key})}."""
    folder = F.ensure(demo_cache)
    out = tmp_path_factory.mktemp("issue46_outputs")
    data = dict(np.load(folder / "data_tflite.npz"))
    del data[f"y_{UNLABELLED}"]
    np.savez(out / "data_tflite.npz", **data)
    found = {}
    for engine, model, data_path, keys in (
            ("keras", folder / "model.keras", folder / "data.npz", {n: f"output_{i}" for i, n in enumerate(F.HEADS)}),
            ("tflite", folder / "model.tflite", out / "data_tflite.npz", {f"output_{i}": f"output_{i}"
                                                                         for i in range(len(F.HEADS))})):
        code, error = run_recorded(model, data_path, out, engine, *FLAGS)
        found[engine] = (code, error, out / engine, keys)
    return found


def _ok(runs, engine):
    code, error, folder, keys = runs[engine]
    assert error is None, error
    assert code == 0, (folder / "run.log").read_text()[-3000:] if (folder / "run.log").is_file() else code
    return folder, json.loads((folder / "report.json").read_text()), keys


def _mse(mine, ref):
    mine, ref = np.asarray(mine, np.float64).reshape(len(mine), -1), np.asarray(ref, np.float64).reshape(len(ref), -1)
    return float(np.mean((mine - ref) ** 2)), float(np.var(ref))


def _int8_range(model: bytes, key: str):
    """The real values the integer tensor behind output `key` holds, read from the file: the output itself when
    it is int8 (LiteRT's FIQ), else the input of the DEQUANTIZE making it (TF's FIQ); (low, high, step)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    index = it.get_signature_runner().get_output_details()[key]["index"]
    details = {t["index"]: t for t in it.get_tensor_details()}
    tensor = details[index]
    if np.dtype(tensor["dtype"]) == np.float32:
        (op,) = [op for op in it._get_ops_details() if index in op["outputs"]]
        assert op["op_name"] == "DEQUANTIZE", op["op_name"]
        tensor = details[op["inputs"][0]]
    assert np.dtype(tensor["dtype"]) == np.int8, tensor["dtype"]
    scale, zero = tensor["quantization"]
    return (-128 - zero) * scale, (127 - zero) * scale, scale


def _clipped_share(values, low, high, step):
    """Beyond the range by more than rounding (half a step, 1 % of the range), as issue 35's test reads it."""
    margin = max(step / 2, 0.01 * (high - low))
    values = np.asarray(values, np.float64).reshape(-1)
    return float(np.mean((values < low - margin) | (values > high + margin)))


@pytest.fixture(scope="module")
def evaluation(demo_cache):
    return np.load(F.ensure(demo_cache) / "data.npz")["x"]


def _run_outputs(folder, name, x):
    from independent import signature_predict

    return signature_predict((folder / f"{name}.tflite").read_bytes(), {"x": x})


@pytest.mark.parametrize("engine", ENGINES)
def test_each_clipping_warning_quotes_its_own_outputs_figures(runs, engine, evaluation):
    folder, report, keys = _ok(runs, engine)
    flt, fiq, fix = (_run_outputs(folder, n, evaluation) for n in ("float", "fiq", FIX))
    fiq_file = (folder / "fiq.tflite").read_bytes()
    warnings = [w for w in report["findings"]["warnings"] if w["code"] == "output_clipped"
                and w["text"].startswith("FIQ's ")]
    named = [w["output"] for w in warnings]
    assert len(named) >= 2 and len(set(named)) == len(named), named  # several outputs clip, each said once
    if engine == "keras":
        assert sorted(named) == ["big", "tiny"]  # the primary, `ordinary`, does not clip: no other's figures to borrow
    shares = []
    for w in warnings:
        name, text = w["output"], w["text"]
        key = keys[name]
        low, high, step = _int8_range(fiq_file, key)
        share = _clipped_share(flt[key], low, high, step)
        shares.append(share)
        said = re.search(rf"output {re.escape(name)} holds only ([-+.0-9e]+) to ([-+.0-9e]+): ([.0-9]+) %", text)
        assert said, text
        assert float(said.group(1)) == pytest.approx(low, rel=1e-3, abs=1e-12)
        assert float(said.group(2)) == pytest.approx(high, rel=1e-3, abs=1e-12)
        assert float(said.group(3)) / 100 == pytest.approx(share, abs=6e-4)
        quoted = re.search(rf"measured output {MSE} on {re.escape(name)} against float, FIQ {MSE}", text)
        assert quoted, text
        fix_mse, variance = _mse(fix[key], flt[key])
        fiq_mse, _ = _mse(fiq[key], flt[key])
        assert float(quoted.group(1)) == pytest.approx(fix_mse, rel=1e-3)
        assert float(quoted.group(2)) / 100 == pytest.approx(fix_mse / variance, abs=6e-5)
        assert float(quoted.group(3)) == pytest.approx(fiq_mse, rel=1e-3)
        assert float(quoted.group(4)) / 100 == pytest.approx(fiq_mse / variance, abs=6e-5)
    assert len({round(s, 3) for s in shares}) == len(shares)  # the outputs clip differently
    summary = (folder / "summary.md").read_text()
    assert all(w["text"][:60] in summary for w in warnings)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_output_range_fix_has_float_outputs_keeps_the_clipping_ops_and_is_measured_on_them(runs, engine,
                                                                                              evaluation):
    from ai_edge_litert.interpreter import Interpreter

    folder, report, keys = _ok(runs, engine)
    by_name = {v["name"]: v for v in report["variants"]}
    fiq, fixed = by_name["fiq"], by_name[FIX]
    assert fixed["status"] == "ok", fixed.get("error")
    clipping = {name for name, c in fiq["clipped_outputs"].items() if c["share"] >= 0.001}
    assert clipping and not set(fixed["clipped_outputs"]) & clipping
    it = Interpreter(model_content=(folder / f"{FIX}.tflite").read_bytes())
    outputs = it.get_signature_runner().get_output_details()
    assert {k: np.dtype(d["dtype"]).name for k, d in outputs.items()} == {k: "float32" for k in outputs}
    makers = {o: op for op in it._get_ops_details() for o in op["outputs"]}
    types = {t["index"]: np.dtype(t["dtype"]).name for t in it.get_tensor_details()}
    for name in set(keys):
        op = makers[outputs[keys[name]]["index"]]
        if name in clipping:  # the op making the clipping output computes in float: no int8 range to clip at
            assert op["op_name"] not in ("DEQUANTIZE", "QUANTIZE"), (name, op["op_name"])
            assert all(types[i] == "float32" for i in op["inputs"] if i >= 0 and types[i] != "int32"), (
                name, [types[i] for i in op["inputs"] if i >= 0])
        else:  # an output that does not clip keeps FIQ's int8 op
            assert op["op_name"] == "DEQUANTIZE", (name, op["op_name"])
    if engine == "keras":
        assert clipping == {"big", "tiny"}
    flt, fix = _run_outputs(folder, "float", evaluation), _run_outputs(folder, FIX, evaluation)
    for name in clipping:
        mse, variance = _mse(fix[keys[name]], flt[keys[name]])
        error = fixed["heads"][name]["output_error"]
        assert error["mse"] == pytest.approx(mse, rel=1e-4, abs=1e-15)
        assert error["float_variance"] == pytest.approx(variance, rel=1e-4)


def test_hints_that_name_an_output_carry_its_name(runs):
    """The primary-output and unlabelled-output hints name their output in the notice's record too; they quote no
    figure of another output."""
    _, report, _ = _ok(runs, "tflite")
    hints = {h["code"]: h for h in report["findings"]["hints"]}
    assert hints["unlabelled_output"]["output"] == UNLABELLED and UNLABELLED in hints["unlabelled_output"]["text"]
    primary = next(o["name"] for o in report["model"]["outputs"] if o["primary"])
    assert hints["primary_output"]["output"] == primary and f"output {primary}" in hints["primary_output"]["text"]
    assert not re.search(r"\d\.\d", hints["unlabelled_output"]["text"] + hints["primary_output"]["text"])
