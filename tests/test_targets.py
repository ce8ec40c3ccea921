"""--target end to end (issue 35): the model to ship for a CPU, integer-only hardware and a GPU delegate, the
decided .tflite in the report folder, the reference kernels' agreement checked with a plain LiteRT interpreter,
and the gate by target (exit 3 when no model for the target meets --max-accuracy-drop)."""

import json

import numpy as np
import pytest

from conftest import load_report

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def target_runs(demo_cache, tmp_path_factory, run_cli):
    """One collapse fixture (FIQ loses 40 points to a normalization layer; 2 ops in float fix it) for each target,
    and the demo's digits CNN (FIQ as good as float) for integer-only hardware; exit codes kept."""
    import collapse_fixtures
    from reporter.pipeline import demo

    out = tmp_path_factory.mktemp("targets")
    wine = collapse_fixtures.ensure("wine_offset", demo_cache)
    cnn = demo.ensure_model("digits_cnn")
    codes = {}
    for name, (model, data), target in (("wine_cpu", wine, "cpu"), ("wine_int8", wine, "int8"),
                                        ("wine_gpu", wine, "gpu"), ("cnn_int8", cnn, "int8")):
        codes[name] = run_cli(model, data, out, "--formats", "json,md", "--target", target,
                              "--max-accuracy-drop", "0.02", name=name, latency_runs=3)
    return out, codes, {"wine": wine, "cnn": cnn}


def _decision(out, name):
    return json.loads((out / name / "report.json").read_text())["findings"]["decision"]


def test_a_collapse_on_a_cpu_ships_the_measured_fix(target_runs):
    out, codes, _ = target_runs
    d = _decision(out, "wine_cpu")
    assert codes["wine_cpu"] == 0 and d["meets_target"] and d["target"] == "cpu"
    report = load_report(out / "wine_cpu")
    shipped = next(m for m in [*report.variants, report.recommendation.selective] if m.name == d["variant"])
    flt = report.variant("float")
    assert flt.metrics.accuracy - shipped.metrics.accuracy <= 0.02  # measured within the limit
    assert (out / "wine_cpu" / d["file"]).is_file()
    headline = report.findings.headline
    assert headline[0] == d["reason"] and headline[0].startswith(f"Ship {d['label']} on a CPU")
    assert "FIQ loses" in headline[1]  # then what FIQ lost
    summary = (out / "wine_cpu" / "summary.md").read_text()
    assert "Trade-off:" not in summary and "Lighter fix" not in summary and "the pick" not in summary


def test_the_same_collapse_on_integer_only_hardware_is_repaired_in_integers_or_fails_the_gate(target_runs):
    """The wine collapse on integer-only hardware: the int8 model is far below float, the FIQ fix keeps ops in float
    (which such hardware does not run), so the repair ladder climbs. Either a rung meets the limit and ships (its
    accuracy, read from the written file with LiteRT's reference kernels and the written input transform, within
    the limit) or nothing ships and the gate fails with exit 3."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    out, codes, files = target_runs
    d = _decision(out, "wine_int8")
    report = json.loads((out / "wine_int8" / "report.json").read_text())
    assert report["repairs"], "the ladder did not climb"
    if not d["meets_target"]:
        assert codes["wine_int8"] == 3 and d["variant"] == ""
        assert report["findings"]["headline"][0].startswith("Nothing to ship on integer-only hardware")
        return
    assert codes["wine_int8"] == 0 and d["variant"].startswith("repair_")
    model = (out / "wine_int8" / d["file"]).read_bytes()
    data = np.load(files["wine"][1])
    x = {k[2:] if k.startswith("x_") else "": data[k] for k in data.files if k.startswith("x") and k != "x_calib"}
    transform = d["input_transform"]
    it = Interpreter(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    runner = it.get_signature_runner()
    feeds = {}
    for name, detail in runner.get_input_details().items():
        values = x.get(name, x.get("")).astype(np.float32)
        if transform and transform["input"] == name:
            values = (values - np.asarray(transform["subtract"])) / np.asarray(transform["divide"])
        scale, zero = detail["quantization"]
        if scale:
            values = np.clip(np.round(values / scale + zero), -128, 127).astype(detail["dtype"])
        feeds[name] = values.astype(detail["dtype"])
    predicted = []
    for i in range(len(data["y"])):
        out_ = runner(**{k: v[i:i + 1] for k, v in feeds.items()})
        predicted.append(next(iter(out_.values())).argmax())
    accuracy = float(np.mean(np.asarray(predicted) == data["y"]))
    flt = next(o for o in d["options"] if o["name"] == "float")
    assert flt["score"] - accuracy <= 0.02 + 1e-9


def test_integer_only_hardware_ships_an_integer_only_model_with_its_reference_kernel_agreement(target_runs):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    out, codes, files = target_runs
    d = _decision(out, "cnn_int8")
    assert codes["cnn_int8"] == 0 and d["variant"] == "int8_io" and d["meets_target"]
    model = (out / "cnn_int8" / d["file"]).read_bytes()
    x = np.load(files["cnn"][1])["x"]
    n = d["reference_agreement"]["samples"]
    outs = []
    for resolver in (OpResolverType.AUTO, OpResolverType.BUILTIN_REF):  # one sample per invoke, independently
        it = Interpreter(model_content=model, experimental_op_resolver_type=resolver)
        it.allocate_tensors()
        i, o = it.get_input_details()[0], it.get_output_details()[0]
        scale, zero = i["quantization"]
        rows = []
        for sample in x[:n]:
            it.set_tensor(i["index"], np.clip(np.round(sample[None] / scale + zero), -128, 127).astype(np.int8))
            it.invoke()
            rows.append(it.get_tensor(o["index"])[0].astype(np.int32))
        outs.append(np.stack(rows))
    default, reference = outs
    agreement = d["reference_agreement"]
    assert n == min(256, len(x))
    assert agreement["identical_share"] == pytest.approx(float(np.mean(default == reference)), abs=1e-9)
    assert agreement["max_steps"] == pytest.approx(float(np.abs(default - reference).max()), abs=1e-3)
    top = float(np.mean(default.argmax(1) == reference.argmax(1)))
    assert agreement["top1_agreement"] == pytest.approx(top, abs=1e-9)
    assert "reference kernels" in load_report(out / "cnn_int8").findings.headline[0]


def test_a_gpu_delegate_ships_float16(target_runs):
    out, codes, _ = target_runs
    d = _decision(out, "wine_gpu")
    assert codes["wine_gpu"] == 0 and d["variant"] == "f16" and (out / "wine_gpu" / "f16.tflite").is_file()
    assert d["candidates"] == 1  # float16 is the only quantized model a GPU delegate runs as built
