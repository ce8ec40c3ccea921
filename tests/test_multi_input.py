"""Models with several inputs fed by name, and integer (token or category id) inputs
(tests/multi_io_fixtures.py): every variant is measured, the report lists the inputs by name, each
accuracy is what the written model scores when fed by name (plain LiteRT signature runners,
tests/independent.py), the collapse on one branch of a two-input model is found and fixed with needed
layers only (the public QuantizationDebugger), and bad data are refused or reported plainly."""

import json

import numpy as np
import pytest

from conftest import has_word, one_error_line, run_recorded
import multi_io_fixtures as F

pytestmark = pytest.mark.slow

RUN = ("wide_deep", "token_ids", "order_differs", "two_input_tflite")
VARIANTS = ("float", "drq", "fiq")
# Each fixture's inputs: name -> (shape with -1 for the batch, dtype).
EXPECTED_INPUTS = {
    "wide_deep": {"numeric": ([-1, 13], "float32"), "category": ([-1, 1], "int32")},
    "token_ids": {"tokens": ([-1, F.SEQUENCE_LENGTH], "int32")},
    "order_differs": {"zeta": ([-1, 4], "float32"), "alpha": ([-1, 9], "float32")},
    "two_input_tflite": {"worst": ([-1, 10], "float32"), "mean": ([-1, 20], "float32")},
}
EXTRA = ("--formats", "json,md", "--latency-runs", "3")


@pytest.fixture(scope="session")
def multi_runs(demo_cache, tmp_path_factory, run_cli):
    """Each fixture (those in RUN, and oov_ids) run once: {name: (exit code, error, report folder,
    model path, data path)}."""
    out = tmp_path_factory.mktemp("multi_out")
    runs = {}
    for name in RUN + ("oov_ids",):
        model, data = F.ensure(name, demo_cache)
        code, error = run_recorded(model, data, out, name, *EXTRA)
        runs[name] = (code, error, out / name, model, data)
    return runs


def _report(folder):
    return json.loads((folder / "report.json").read_text())


def _ok_run(multi_runs, name):
    code, error, folder, model, data = multi_runs[name]
    assert error is None, error
    assert code == 0, (code, (folder / "run.log").read_text()[-3000:] if (folder / "run.log").is_file() else "")
    return folder, _report(folder), model, data


def _inputs(name):
    return list(F.INPUTS[name])


def _variant(report, name):
    return next(v for v in report["variants"] if v["name"] == name)


def _predictions(model_bytes, x):
    from independent import signature_predict

    outputs = signature_predict(model_bytes, x)
    assert len(outputs) == 1, sorted(outputs)
    return next(iter(outputs.values())).argmax(axis=1)


@pytest.mark.parametrize("name", RUN)
def test_every_variant_is_measured(multi_runs, name):
    _, report, _, _ = _ok_run(multi_runs, name)
    assert [v["name"] for v in report["variants"]] == list(VARIANTS)
    assert all(v["status"] == "ok" for v in report["variants"]), \
        {v["name"]: (v["status"], v.get("error")) for v in report["variants"]}


@pytest.mark.parametrize("name", RUN)
def test_the_report_lists_the_inputs_by_name_and_integer_inputs_stay_integer(multi_runs, name):
    from ai_edge_litert.interpreter import Interpreter

    folder, report, _, _ = _ok_run(multi_runs, name)
    listed = report["model"].get("inputs")
    assert isinstance(listed, list), report["model"]
    got = {entry["name"]: (list(entry["shape"]), np.dtype(entry["dtype"]).name) for entry in listed}
    assert got == EXPECTED_INPUTS[name]
    for variant in VARIANTS:  # the written models agree: an int32 input is int32 in every variant
        runner = Interpreter(model_content=(folder / f"{variant}.tflite").read_bytes()).get_signature_runner()
        dtypes = {n: np.dtype(d["dtype"]).name for n, d in runner.get_input_details().items()}
        assert set(dtypes) == set(EXPECTED_INPUTS[name]), (variant, dtypes)
        for n, (_, dtype) in EXPECTED_INPUTS[name].items():
            if dtype == "int32":
                assert dtypes[n] == "int32", (variant, dtypes)


@pytest.mark.parametrize("name", RUN)
def test_each_accuracy_is_what_the_written_model_scores_fed_by_name(multi_runs, name):
    folder, report, _, data_path = _ok_run(multi_runs, name)
    data = np.load(data_path)
    x, y = F.eval_inputs(data, _inputs(name)), data["y"]
    assert report["dataset"]["num_eval"] == len(y)
    for variant in VARIANTS:
        acc = float(np.mean(_predictions((folder / f"{variant}.tflite").read_bytes(), x) == y))
        assert _variant(report, variant)["metrics"]["accuracy"] == pytest.approx(acc, abs=1e-12), (variant, acc)


def test_wide_deep_collapse_is_found_and_fixed_with_needed_layers_only(multi_runs):
    """FIQ collapses on the numeric branch; the recommended model wins back >= 99 % of the gap on the
    evaluation data, and without any one of its float layers (the public debugger, fed by position in
    the float model's get_input_details() order) at least 2 more samples disagree with float."""
    from independent import public_selective_multi

    folder, report, model_path, data_path = _ok_run(multi_runs, "wide_deep")
    rec = report["recommendation"]
    assert rec["gap"]["status"] == "recovered", rec["gap"]
    data = np.load(data_path)
    names = _inputs("wide_deep")
    x, y = F.eval_inputs(data, names), data["y"]
    preds = {v: _predictions((folder / f"{v}.tflite").read_bytes(), x) for v in ("float", "fiq", "selective")}
    acc = {v: float(np.mean(p == y)) for v, p in preds.items()}
    assert acc["float"] - acc["fiq"] >= 0.2, acc  # the fixture does collapse
    assert rec["selective"]["metrics"]["accuracy"] == pytest.approx(acc["selective"], abs=1e-12), acc
    share = (acc["selective"] - acc["fiq"]) / (acc["float"] - acc["fiq"])
    assert share >= 0.99, (acc, rec["denylisted_nodes"])
    assert rec["selective"]["accuracy_gap_recovered"] == pytest.approx(share), (acc, rec["selective"])
    nodes = rec["denylisted_nodes"]
    assert nodes, rec
    n_calib = report["dataset"]["num_calibration"]
    x_calib = {k: a[:n_calib] for k, a in F.calib_inputs(data, names).items()}
    agree = int(np.sum(preds["selective"] == preds["float"]))
    for node in nodes:
        without = _predictions(public_selective_multi(model_path, x_calib, [n for n in nodes if n != node]), x)
        lost = agree - int(np.sum(without == preds["float"]))
        assert lost >= 2, (node, agree, lost, nodes)


@pytest.mark.parametrize("renamed", [("x_numeric",), ("x_numeric", "x_calib_numeric")],
                         ids=["eval-array", "eval-and-calib-arrays"])
def test_a_misnamed_input_array_is_one_line_naming_the_inputs_and_the_arrays(demo_cache, tmp_path, capfd,
                                                                            run_cli, renamed):
    """x_numeric saved as x_numbers (and, in the second case, x_calib_numeric as x_calib_numbers): one
    line that names the model's inputs as such (`numeric`, `category` as whole words, not only inside
    an array name) and the arrays found; exit code 1; nothing written."""
    model, data = F.ensure("wide_deep", demo_cache)
    arrays = dict(np.load(data))
    for key in renamed:
        arrays[key.replace("numeric", "numbers")] = arrays.pop(key)
    bad = tmp_path / "misnamed.npz"
    np.savez(bad, **arrays)
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(model, bad, out, *EXTRA, name="misnamed")
    line = one_error_line(code, capfd.readouterr().err, out)
    for word in ("numeric", "category"):  # the model's inputs, named as inputs
        assert has_word(line, word), (word, line)
    for needle in ("x_numbers", "x_category"):  # the arrays found
        assert needle in line, (needle, line)


def test_a_data_function_returning_x_as_a_dict_gives_the_same_accuracies(multi_runs, tmp_path, monkeypatch,
                                                                         run_cli):
    _, npz_report, model, data = _ok_run(multi_runs, "wide_deep")
    module = tmp_path / "qr_multi_input_data.py"
    module.write_text(
        "import numpy as np\n\n\n"
        "def load():\n"
        f"    d = np.load({str(data)!r})\n"
        "    return {'x': {'numeric': d['x_numeric'], 'category': d['x_category']},\n"
        "            'x_calib': {'numeric': d['x_calib_numeric'], 'category': d['x_calib_category']},\n"
        "            'y': d['y']}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    code = run_cli(model, "qr_multi_input_data:load", out, *EXTRA, name="wide_deep_fn")
    assert code == 0
    report = _report(out / "wide_deep_fn")
    assert {v["name"]: v["status"] for v in report["variants"]} == {v: "ok" for v in VARIANTS}
    for variant in VARIANTS:
        assert _variant(report, variant)["metrics"]["accuracy"] == \
            _variant(npz_report, variant)["metrics"]["accuracy"], variant
    assert report["model"]["inputs"] == npz_report["model"]["inputs"]


def test_ids_beyond_the_vocabulary_exit_1_with_the_report_saying_why(multi_runs):
    """The float model cannot run on the evaluation data (GATHER index out of bounds): exit code 1, and
    report.json is still written and says why."""
    code, error, folder, _, _ = multi_runs["oov_ids"]
    assert error is None, error
    assert code == 1
    assert (folder / "report.json").is_file(), list(folder.parent.iterdir()) if folder.parent.exists() else None
    report = _report(folder)
    float_variant = _variant(report, "float")
    text = " ".join([str(float_variant.get("error") or ""), json.dumps(float_variant.get("measurement_errors") or {}),
                     json.dumps(report.get("findings", {}).get("warnings") or [])]).lower()
    assert float_variant["status"] != "ok" or float_variant.get("error") or \
        report.get("findings", {}).get("warnings"), float_variant
    assert any(word in text for word in ("out of bounds", "vocabulary", "out of range")), text
