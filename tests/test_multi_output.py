"""Models with several outputs (tests/multi_io_fixtures.py: two_heads, two_heads_collapse, unlabelled_head):
the report lists every output by name with its task, each head's accuracy is what the written model
scores on that head (plain LiteRT signature runners, outputs matched to Keras output names by the Keras
order, tests/independent.py), `variants[].metrics` is the primary head's, the collapse is fixed on every
labelled head, a head without labels is compared with float, and the gate and misnamed labels name heads."""

import json

import numpy as np
import pytest

from conftest import has_word, one_error_line, run_recorded
import multi_io_fixtures as F

pytestmark = pytest.mark.slow

RUN = ("two_heads", "two_heads_collapse", "unlabelled_head")
VARIANTS = ("float", "drq", "fiq")
EXTRA = ("--formats", "json,md", "--latency-runs", "3")
# Extra runs: (run name, fixture, flags)
FLAGGED = {"two_heads_primary_is_even": ("two_heads", ("--primary-output", "is_even"))}
NO_LABELS = ("no label", "unlabelled", "unlabeled", "without label", "not labelled", "not labeled")


@pytest.fixture(scope="session")
def output_runs(demo_cache, tmp_path_factory, run_cli):
    """Each fixture in RUN run once, and each run of FLAGGED: {run name: (exit code, error, report folder,
    model path, data path, fixture name)}."""
    out = tmp_path_factory.mktemp("multi_output_out")
    runs = {}
    for run_name, (fixture, flags) in {**{n: (n, ()) for n in RUN}, **FLAGGED}.items():
        model, data = F.ensure(fixture, demo_cache)
        code, error = run_recorded(model, data, out, run_name, *EXTRA, *flags)
        runs[run_name] = (code, error, out / run_name, model, data, fixture)
    return runs


def _report(folder):
    return json.loads((folder / "report.json").read_text())


def _ok_run(output_runs, name):
    code, error, folder, model, data, fixture = output_runs[name]
    assert error is None, error
    assert code == 0, (code, (folder / "run.log").read_text()[-3000:] if (folder / "run.log").is_file() else "")
    return folder, _report(folder), model, data, fixture


def _variant(report, name):
    return next(v for v in report["variants"] if v["name"] == name)


def _head_predictions(model_bytes, x, fixture):
    """Predicted classes per head, by Keras output name (output_<i> is the i-th Keras output)."""
    from independent import signature_predict

    return F.head_predictions(signature_predict(model_bytes, {"x": x}), fixture)


def _head_accuracies(folder, variant, data, fixture):
    preds = _head_predictions((folder / f"{variant}.tflite").read_bytes(), data["x"], fixture)
    return {head: float(np.mean(preds[head] == y)) for head, y in F.labels(data, fixture).items()}


def _head(variant_result, head):
    heads = variant_result.get("heads") or {}
    assert head in heads, (variant_result["name"], sorted(heads))
    return heads[head]


def _broken_heads(acc, min_drop=0.1):
    """The labelled heads on which FIQ loses at least `min_drop` accuracy against float (independently)."""
    return [h for h in acc["float"] if acc["float"][h] - acc["fiq"][h] >= min_drop]



@pytest.mark.parametrize("name", RUN)
def test_every_variant_is_measured(output_runs, name):
    _, report, _, _, _ = _ok_run(output_runs, name)
    assert [v["name"] for v in report["variants"]] == list(VARIANTS)
    assert all(v["status"] == "ok" for v in report["variants"]), \
        {v["name"]: (v["status"], v.get("error")) for v in report["variants"]}


@pytest.mark.parametrize("name", RUN)
def test_the_report_lists_the_outputs_with_their_tasks_labels_and_one_primary(output_runs, name):
    _, report, _, _, fixture = _ok_run(output_runs, name)
    listed = report["model"].get("outputs")
    assert isinstance(listed, list) and listed, report["model"]
    assert [o["name"] for o in listed] == list(F.OUTPUTS[fixture]), listed
    for i, (o, (task, classes)) in enumerate(zip(listed, F.OUTPUTS[fixture].values())):
        assert o["task"] == task, o
        assert o["num_classes"] == classes, o
        assert o["key"] == f"output_{i}", o  # the Keras output order
        assert o["shape"][-1] == (1 if task == "binary" else classes), o
        assert o["labelled"] is (o["name"] in F.LABELLED[fixture]), o
    primaries = [o["name"] for o in listed if o["primary"]]
    assert primaries == [F.LABELLED[fixture][0]], listed  # by default the first labelled output


@pytest.mark.parametrize("name", RUN + tuple(FLAGGED))
def test_each_head_accuracy_is_what_the_written_model_scores_on_that_head(output_runs, name):
    folder, report, _, data_path, fixture = _ok_run(output_runs, name)
    data = np.load(data_path)
    assert report["dataset"]["num_eval"] == len(data["x"])
    for variant in VARIANTS:
        acc = _head_accuracies(folder, variant, data, fixture)
        result = _variant(report, variant)
        assert set(result.get("heads") or {}) == set(F.OUTPUTS[fixture]), (variant, sorted(result.get("heads") or {}))
        for head, expected in acc.items():
            metrics = _head(result, head).get("metrics")
            assert metrics, (variant, head, _head(result, head))
            assert metrics["accuracy"] == pytest.approx(expected, abs=1e-12), (variant, head, acc)


@pytest.mark.parametrize("name", RUN)
def test_the_variant_metrics_are_the_primary_heads(output_runs, name):
    _, report, _, _, fixture = _ok_run(output_runs, name)
    primary = F.LABELLED[fixture][0]
    for variant in report["variants"]:
        assert variant["metrics"] == _head(variant, primary)["metrics"], (variant["name"], primary)


def test_primary_output_flag_makes_the_variant_metrics_that_heads(output_runs):
    folder, report, _, data_path, fixture = _ok_run(output_runs, "two_heads_primary_is_even")
    assert [o["name"] for o in report["model"]["outputs"] if o["primary"]] == ["is_even"], report["model"]["outputs"]
    data = np.load(data_path)
    for variant in VARIANTS:
        result = _variant(report, variant)
        assert result["metrics"] == _head(result, "is_even")["metrics"], variant
        acc = _head_accuracies(folder, variant, data, fixture)["is_even"]
        assert result["metrics"]["accuracy"] == pytest.approx(acc, abs=1e-12), (variant, acc)


def test_two_heads_collapse_is_found_and_fixed_on_every_labelled_head(output_runs):
    """FIQ collapses (independently: the public FIQ model written as fiq.tflite); the recommended model
    (selective.tflite) wins back >= 99 % of the float-to-FIQ gap on every labelled head, its reported head
    accuracies are what it scores, and the findings' headline or warnings name every head FIQ breaks."""
    folder, report, _, data_path, fixture = _ok_run(output_runs, "two_heads_collapse")
    rec = report["recommendation"]
    assert rec and rec["gap"]["status"] == "recovered", rec and rec["gap"]
    assert (folder / "selective.tflite").is_file(), sorted(p.name for p in folder.iterdir())
    data = np.load(data_path)
    acc = {v: _head_accuracies(folder, v, data, fixture) for v in ("float", "fiq", "selective")}
    broken = _broken_heads(acc)
    assert max(acc["float"][h] - acc["fiq"][h] for h in acc["float"]) >= 0.2, acc  # the fixture does collapse
    for head in F.LABELLED[fixture]:
        gap = acc["float"][head] - acc["fiq"][head]
        if gap > 0:
            share = (acc["selective"][head] - acc["fiq"][head]) / gap
            assert share >= 0.99, (head, acc, rec["denylisted_nodes"])
        else:
            assert acc["selective"][head] >= acc["float"][head], (head, acc)
        reported = _head(rec["selective"], head).get("metrics")
        assert reported and reported["accuracy"] == pytest.approx(acc["selective"][head], abs=1e-12), \
            (head, acc, reported)
    findings = report["findings"]
    text = " ".join([json.dumps(findings.get("headline") or []), json.dumps(findings.get("warnings") or [])])
    missing = [h for h in broken if not has_word(text, h)]
    assert not missing, (missing, broken, findings.get("headline"), findings.get("warnings"))


def test_an_unlabelled_sigmoid_head_gets_its_agreement_with_float_and_no_metrics(output_runs):
    folder, report, _, data_path, fixture = _ok_run(output_runs, "unlabelled_head")
    data = np.load(data_path)
    float_preds = _head_predictions((folder / "float.tflite").read_bytes(), data["x"], fixture)["is_even"]
    for variant in VARIANTS:
        head = _head(_variant(report, variant), "is_even")
        assert head.get("metrics") is None, (variant, head)
        assert head.get("agreement_with_float") is not None, (variant, head)
        preds = _head_predictions((folder / f"{variant}.tflite").read_bytes(), data["x"], fixture)["is_even"]
        assert head["agreement_with_float"] == pytest.approx(float(np.mean(preds == float_preds)), abs=1e-12), variant
    assert _variant(report, "float")["heads"]["is_even"]["agreement_with_float"] == 1.0


def test_the_summary_says_the_unlabelled_head_has_no_labels(output_runs):
    folder, _, _, _, _ = _ok_run(output_runs, "unlabelled_head")
    summary = (folder / "summary.md").read_text()
    lines = [line for line in summary.splitlines() if has_word(line, "is_even")]
    assert lines, summary
    assert any(any(phrase in line.lower() for phrase in NO_LABELS) for line in lines), lines


def test_the_gate_checks_every_labelled_head_and_names_the_one_that_breaks(demo_cache, tmp_path, capfd, run_cli):
    from reporter.core.exit_codes import ExitCode

    model, data = F.ensure("two_heads_collapse", demo_cache)
    capfd.readouterr()
    # --gate-variant fiq: the gate holds FIQ itself (without it, the model to ship for the target, which meets)
    code = run_cli(model, data, tmp_path, "--formats", "json", "--max-accuracy-drop", "0.01", "--gate-variant", "fiq",
                   name="gate", latency_runs=3)
    err = capfd.readouterr().err
    assert code == ExitCode.GATE_FAILED == 3, (code, err)
    gate_lines = [line for line in err.splitlines() if "gate" in line.lower()]
    assert gate_lines, err
    heads = F.LABELLED["two_heads_collapse"]
    assert any(has_word(line, h) for line in gate_lines for h in heads), gate_lines


def test_a_label_array_named_for_no_output_is_one_line_naming_the_outputs_and_the_arrays(demo_cache, tmp_path,
                                                                                       capfd, run_cli):
    """y_digit saved as y_digits: one line that names the model's outputs as such (`digit`, `is_even` as
    whole words, not only inside an array name) and the arrays found; exit code 1; nothing written."""
    model, data = F.ensure("two_heads", demo_cache)
    arrays = dict(np.load(data))
    arrays["y_digits"] = arrays.pop("y_digit")
    bad = tmp_path / "misnamed.npz"
    np.savez(bad, **arrays)
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(model, bad, out, *EXTRA, name="misnamed")
    line = one_error_line(code, capfd.readouterr().err, out)
    for word in ("digit", "is_even"):  # the model's outputs, named as outputs
        assert has_word(line, word), (word, line)
    for needle in ("y_digits", "y_is_even"):  # the arrays found
        assert needle in line, (needle, line)


def test_diff_pairs_each_output_and_its_gate_names_the_output_that_dropped(output_runs, tmp_path, capsys):
    """`quant-report diff` compares every labelled output on the same samples (McNemar on the stored
    correctness), and its baseline gate fails on an output other than the primary one."""
    import base64
    import shutil

    from reporter.cli import main

    folder, report, *_ = _ok_run(output_runs, "two_heads")
    new = tmp_path / "new"
    shutil.copytree(folder, new)
    n = report["dataset"]["num_eval"]
    fiq = _variant(report, "fiq")
    m = fiq["heads"]["is_even"]["metrics"]
    ok = np.unpackbits(np.frombuffer(base64.b64decode(m["correct_bits"]), np.uint8))[:n].astype(bool)
    ok[np.flatnonzero(ok)[:40]] = False  # NEW's FIQ gets 40 more is_even samples wrong
    m["correct_bits"], m["accuracy"] = base64.b64encode(np.packbits(ok).tobytes()).decode(), float(ok.mean())
    report.pop("findings")  # derived again from the changed measurements when read
    (new / "report.json").write_text(json.dumps(report))
    capsys.readouterr()
    code = main(["diff", str(folder), str(new), "--format", "json", "--max-accuracy-drop", "0.02"])
    out, err = capsys.readouterr()
    assert code == 3
    diff = json.loads(out)
    change = next(v for v in diff["models"][0]["variants"] if v["name"] == "fiq")["heads"]["is_even"]
    assert change["delta"] == pytest.approx(-40 / n) and change["significant"] is True
    assert "output is_even" in err and "output is_even" in diff["gate_failures"][0]["message"]


def test_the_markdown_folds_outputs_beyond_its_limit_and_keeps_the_leading_one(output_runs):
    """A model with many outputs: summary.md shows MarkdownView.HEAD_ROWS of them (the leading output
    first) and says how many more the HTML has; the HTML keeps every one."""
    import copy

    from reporter.pipeline.conclude import report_from_json
    from reporter.render import formats as render
    from reporter.render.views.markdown import MarkdownView

    folder, report, *_ = _ok_run(output_runs, "two_heads")
    report.pop("findings")
    extra = MarkdownView.HEAD_ROWS + 1
    first_other = next(o for o in report["model"]["outputs"] if not o["primary"])
    for i in range(extra):
        report["model"]["outputs"].append(dict(first_other, name=f"extra{i}", key=f"output_{i + 2}"))
        for v in report["variants"]:
            v["heads"][f"extra{i}"] = copy.deepcopy(v["heads"][first_other["name"]])
    loaded = report_from_json(json.dumps(report))
    md = render.render(loaded, "md").decode()
    rows = [line for line in md.splitlines() if line.startswith("| ") and "(accuracy" in line]
    total = len(report["model"]["outputs"])
    assert len(rows) == MarkdownView.HEAD_ROWS and "leads the report" in rows[0]
    assert f"{total - MarkdownView.HEAD_ROWS} more outputs" in md
    html = render.render(loaded, "html").decode()
    assert all(f"extra{i} (accuracy" in html for i in range(extra))
