"""Every way of reading an output measured on the target's kernels as on the default ones: the user's `--metric`, an
output read as a regression or as a mask, and every output of a model with several, on `--target int8` (LiteRT's
reference kernels) and `--target micro` (TFLite Micro), paired with float's run by the same per-sample test.

Each figure is checked against an independent computation: the written .tflite files run here by LiteRT's reference
kernels (`OpResolverType.BUILTIN_REF`) or TFLite Micro's own Python interpreter, one sample per invoke, scored with
numpy (tests/heatmap_fixtures.py's PCK; mask IoU, MAE and MSE written out here), none of quant-report's code.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import heatmap_fixtures as H
import multi_io_fixtures as MIO
from conftest import run_recorded

FLAGS = ("--variants", "float,fiq,int8_io", "--latency-runs", "0", "--formats", "json")
WITHIN_NOISE = 0.05  # the paired test's level: a drop with p at least this is within noise


@pytest.fixture(scope="module")
def run(demo_cache, tmp_path_factory):
    """run(case): (report.json, the report folder, the data) of one quant-report run, each run once per module."""
    done = {}

    def one(case: str, model, data, *flags):
        if case not in done:
            out = tmp_path_factory.mktemp(case)
            code, error = run_recorded(model, data, out, "model", *FLAGS, *flags)
            assert error is None and code == 0, (code, error)
            folder = out / "model"
            done[case] = json.loads((folder / "report.json").read_text()), folder, np.load(data)
        return done[case]

    return one


@pytest.fixture(scope="module")
def keypoints(demo_cache):
    """The heatmap fixture: (model.keras, data_meta.npz: y the target heatmaps and meta_keypoints, the metric file)."""
    model, _ = H.ensure(demo_cache)
    return model, model.parent / "data_meta.npz", model.parent / "pck_meta.py"


# --- independent runs of the written files ---------------------------------------------------------------------
def _to_input(sample: np.ndarray, dtype, scale: float, zero: int) -> np.ndarray:
    if np.issubdtype(dtype, np.integer) and scale:
        info = np.iinfo(dtype)
        return np.clip(np.round(sample / scale + zero), info.min, info.max).astype(dtype)
    return sample.astype(np.float32)


def _from_output(value: np.ndarray, scale: float, zero: int) -> np.ndarray:
    value = np.asarray(value)
    return (value.astype(np.float64) - zero) * scale if np.issubdtype(value.dtype, np.integer) and scale else \
        value.astype(np.float64)


def litert(tflite: bytes, x: np.ndarray, reference: bool) -> dict[str, np.ndarray]:
    """Every output (by signature key, one flattened row per sample) of the file run by plain LiteRT, one sample
    per invoke; with `reference`, on its reference kernels."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=tflite, experimental_op_resolver_type=OpResolverType.BUILTIN_REF if reference
                     else OpResolverType.AUTO)
    runner = it.get_signature_runner()
    (name, port), = runner.get_input_details().items()
    outs = runner.get_output_details()
    rows: dict = {key: [] for key in outs}
    for i in range(len(x)):
        found = runner(**{name: _to_input(x[i:i + 1], port["dtype"], *port["quantization"])})
        for key, detail in outs.items():
            rows[key].append(_from_output(found[key], *detail["quantization"]).reshape(-1))
    return {key: np.stack(r) for key, r in rows.items()}


def micro(tflite: bytes, x: np.ndarray) -> np.ndarray:
    """The one output (one flattened row per sample) of the file run by TFLite Micro's Python interpreter."""
    from tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(bytes(tflite))
    port, out = it.get_input_details(0), it.get_output_details(0)

    def quantization(detail):
        q = detail["quantization_parameters"]
        return (float(q["scales"][0]), int(q["zero_points"][0])) if len(q["scales"]) else (0.0, 0)

    rows = []
    for i in range(len(x)):
        it.set_input(_to_input(x[i:i + 1], port["dtype"], *quantization(port)), 0)
        it.invoke()
        rows.append(_from_output(it.get_output(0), *quantization(out)).reshape(-1))
        it.reset()
    return np.stack(rows)


def on_target_outputs(target: str, tflite: bytes, x) -> np.ndarray:
    return micro(tflite, x) if target == "micro" else next(iter(litert(tflite, x, reference=True).values()))


def paired_p(a: np.ndarray, ref: np.ndarray) -> float:
    """Two-sided paired t-test of two models' per-sample values (1 when no sample differs)."""
    from scipy.stats import ttest_rel

    return 1.0 if not np.any(a - ref) else float(ttest_rel(a, ref).pvalue)


def checked(report: dict) -> dict:
    """{name: on_target record} of every quantized variant checked on the target (it ran there)."""
    return {v["name"]: v["on_target"] for v in report["variants"] if v.get("on_target") and v["on_target"]["runs"]}


# --- the user's metric ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["int8", "micro"])
def test_the_users_metric_is_measured_on_the_targets_kernels_and_ships_a_model_that_meets_it(run, keypoints, target):
    model, data_path, metric = keypoints
    report, folder, data = run(f"pck_{target}", model, data_path, "--metric", f"{metric}:pck", "--target", target)
    x, truth = data["x"], data["meta_keypoints"]
    float_pck = H.pck(truth, litert((folder / "float.tflite").read_bytes(), x, reference=False)["output_0"])
    assert report["variants"][0]["metrics"]["main"]["value"] == pytest.approx(float_pck.mean(), abs=1e-12)
    on = checked(report)
    # TFLite Micro runs both; integer-only hardware takes int8 I/O only (FIQ's float I/O is not checked there)
    assert set(on) == ({"fiq", "int8_io"} if target == "micro" else {"int8_io"}), on
    meets = {}
    for name, record in on.items():
        mine = H.pck(truth, on_target_outputs(target, (folder / f"{name}.tflite").read_bytes(), x))
        main = record["metrics"]["main"]
        assert main["name"] == "pck" and main["value"] == pytest.approx(mine.mean(), abs=1e-12), name
        delta, p = mine.mean() - float_pck.mean(), paired_p(mine, float_pck)
        assert main["paired"]["float"]["delta"] == pytest.approx(delta, abs=1e-12), name
        assert main["paired"]["float"]["p_value"] == pytest.approx(p, rel=1e-6, abs=1e-12), name
        meets[name] = delta >= 0 or p >= WITHIN_NOISE
    decision = report["findings"]["decision"]
    assert decision["variant"] in on and decision["meets_target"], decision["reason"]
    assert meets[decision["variant"]], (decision["variant"], meets)


# --- an output read as a regression, or as a mask ---------------------------------------------------------------
def test_an_output_read_as_a_regression_has_its_target_error_measured_on_the_targets_kernels(run, keypoints):
    model, data_path, _ = keypoints
    report, folder, data = run("regression_int8", model, data_path, "--task", "regression", "--target", "int8")
    x, y = data["x"], data["y"].reshape(len(data["x"]), -1)
    flt = litert((folder / "float.tflite").read_bytes(), x, reference=False)["output_0"]
    on = checked(report)["int8_io"]
    mine = on_target_outputs("int8", (folder / "int8_io.tflite").read_bytes(), x)
    assert on["target_error"]["mae"] == pytest.approx(np.mean(np.abs(mine - y)), rel=1e-6)
    assert on["target_error"]["rmse"] == pytest.approx(np.sqrt(np.mean((mine - y) ** 2)), rel=1e-6)
    assert on["output_error"]["mse"] == pytest.approx(np.mean((mine - flt) ** 2), rel=1e-5)
    assert report["findings"]["decision"]["variant"] == "int8_io"


def test_an_output_read_as_a_mask_is_judged_by_mask_iou_on_the_targets_kernels(run, keypoints):
    model, data_path, _ = keypoints
    report, folder, data = run("mask_int8", model, data_path, "--target", "int8")
    x, truth = data["x"], data["y"].reshape(len(data["x"]), -1) >= 0.5

    def iou(out):
        predicted = out >= 0.5
        return (predicted & truth).sum() / (predicted | truth).sum()

    flt = litert((folder / "float.tflite").read_bytes(), x, reference=False)["output_0"]
    mine = on_target_outputs("int8", (folder / "int8_io.tflite").read_bytes(), x)
    main = checked(report)["int8_io"]["metrics"]["main"]
    assert main["name"] == "mask IoU" and main["value"] == pytest.approx(iou(mine), abs=1e-12)
    assert main["paired"]["float"]["delta"] == pytest.approx(iou(mine) - iou(flt), abs=1e-12)
    # the decision judges it by that figure (here it loses beyond noise: mask IoU at 0.5 moves with the cells' edges)
    option = next(o for o in report["findings"]["decision"]["options"] if o["name"] == "int8_io")
    assert option["score"] == pytest.approx(iou(mine), abs=1e-12) and option["standing"] != "not_measured", option


# --- several outputs --------------------------------------------------------------------------------------------
def test_every_labelled_output_of_a_model_with_several_is_measured_on_the_targets_kernels(run, demo_cache):
    model, data_path = MIO.ensure("two_heads", demo_cache)
    report, folder, data = run("two_heads_int8", model, data_path, "--target", "int8")
    x, labels = data["x"], MIO.labels(data, "two_heads")
    flt = MIO.head_predictions(litert((folder / "float.tflite").read_bytes(), x, reference=False), "two_heads")
    mine = MIO.head_predictions(litert((folder / "int8_io.tflite").read_bytes(), x, reference=True), "two_heads")
    heads = checked(report)["int8_io"]["heads"]
    assert set(heads) == set(labels)
    for head, y in labels.items():
        right, float_right = mine[head] == y, flt[head] == y
        metrics = heads[head]["metrics"]
        assert metrics["accuracy"] == pytest.approx(right.mean(), abs=1e-12), head
        assert metrics["paired"]["float"] == {"reference_only": int(np.sum(float_right & ~right)),
                                              "variant_only": int(np.sum(~float_right & right))}, head
