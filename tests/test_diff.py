"""`quant-report diff` and the baseline gate: what a change did to a model, tested on real runs of the demo
MLP (the same model twice, a perturbed copy, a run on other evaluation samples, an old report), with the
significance checked against scipy on predictions made here."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from reporter.cli import main

pytestmark = pytest.mark.slow

RUN = ["--quiet", "--formats", "json,md", "--latency-runs", "3", "--variants", "float,drq,fiq"]


def _run(model, data, out, name, *extra) -> int:
    return main(["run", str(model), "--data", str(data), "--out", str(out), "--name", name, *RUN, *extra])


@pytest.fixture(scope="module")
def runs(mlp_files, tmp_path_factory):
    """BASE, the same model again, a perturbed copy (every weight of the first Dense layer + noise) and the
    same model on the first 80 evaluation samples only."""
    import keras

    model_path, data_path = mlp_files
    root = tmp_path_factory.mktemp("diff")
    model = keras.saving.load_model(str(model_path), compile=False)
    dense = next(layer for layer in model.layers if isinstance(layer, keras.layers.Dense))
    kernel, bias = dense.get_weights()
    rng = np.random.default_rng(0)
    dense.set_weights([kernel + rng.normal(0, 6.0 * kernel.std(), kernel.shape).astype(kernel.dtype), bias])
    perturbed = root / "perturbed.keras"
    model.save(perturbed)
    data = dict(np.load(data_path))
    subset = root / "subset.npz"
    np.savez(subset, x=data["x"][:80], y=data["y"][:80], x_calib=data["x_calib"])
    out = {}
    for name, (m, d) in {"base": (model_path, data_path), "again": (model_path, data_path),
                         "perturbed": (perturbed, data_path), "subset": (model_path, subset)}.items():
        assert _run(m, d, root / name, "mlp") == 0
        out[name] = root / name / "mlp"
    out["root"], out["data"] = root, data
    return out


def _diff(capsys, *argv) -> tuple[int, str, str]:
    code = main(["diff", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_unchanged_model_shows_no_change_beyond_noise(runs, capsys):
    code, out, _ = _diff(capsys, runs["base"], runs["again"], "--format", "json")
    assert code == 0
    model = json.loads(out)["models"][0]
    assert model["status"] == "compared" and model["same_samples"] is True
    for v in model["variants"]:
        # Latency is re-timed and may move a little; nothing moves beyond noise.
        assert v["status"] == "unchanged", v
        assert v["accuracy"]["significant"] is False and v["accuracy"]["delta"] == 0
    code, md, _ = _diff(capsys, runs["base"], runs["again"])
    assert "mlp: no change beyond noise." in md and "Unchanged: Float, DRQ, FIQ" in md


def test_a_changed_model_is_detected_with_mcnemar_on_the_same_samples(runs, capsys):
    from scipy.stats import binomtest

    from reporter.measure import evaluate

    code, out, _ = _diff(capsys, runs["base"], runs["perturbed"], "--format", "json")
    assert code == 0
    flt = next(v for v in json.loads(out)["models"][0]["variants"] if v["name"] == "float")
    x, y = runs["data"]["x"], runs["data"]["y"]
    ok_base = np.argmax(evaluate.predict((runs["base"] / "float.tflite").read_bytes(), x), axis=1) == y
    ok_new = np.argmax(evaluate.predict((runs["perturbed"] / "float.tflite").read_bytes(), x), axis=1) == y
    b, c = int(np.sum(ok_base & ~ok_new)), int(np.sum(~ok_base & ok_new))
    p = binomtest(b, b + c, 0.5).pvalue  # exact McNemar, computed here
    assert flt["accuracy"]["base"] == pytest.approx(ok_base.mean())
    assert flt["accuracy"]["new"] == pytest.approx(ok_new.mean())
    assert flt["accuracy"]["p_value"] == pytest.approx(p)
    assert ok_new.mean() < ok_base.mean() - 0.05 and p < 0.05
    assert flt["status"] == "changed" and flt["accuracy"]["significant"] is True


def test_the_diff_gate_fails_naming_the_model_and_numbers(runs, capsys):
    code, md, err = _diff(capsys, runs["base"], runs["perturbed"], "--max-accuracy-drop", "0.01")
    assert code == 3
    assert "gate FAILED" in err and "mlp: Float accuracy" in err and "limit 1" in err
    assert "Gate failed" in md
    assert len(md.splitlines()) < 60
    code, _, err = _diff(capsys, runs["base"], runs["again"], "--max-accuracy-drop", "0.01")
    assert code == 0 and "gate FAILED" not in err


def test_run_with_a_baseline_writes_the_diff_and_gates_on_it(runs, mlp_files, capsys):
    out = runs["root"] / "gated"
    code = _run(runs["root"] / "perturbed.keras", mlp_files[1], out, "mlp", "--baseline", str(runs["base"]),
                "--max-accuracy-drop", "0.01")
    err = capsys.readouterr().err
    assert code == 3, err
    assert "baseline gate FAILED" in err and "mlp: Float accuracy" in err
    diff = json.loads((out / "mlp" / "diff.json").read_text())
    assert diff["gate_failures"] and (out / "mlp" / "diff.md").is_file()
    # A baseline that does not exist is refused before anything runs.
    code = _run(mlp_files[0], mlp_files[1], runs["root"] / "nothing", "mlp", "--baseline", "no/such/report")
    assert code == 2 and not (runs["root"] / "nothing").exists()


def test_other_evaluation_data_are_said_plainly_and_not_tested(runs, capsys):
    code, out, _ = _diff(capsys, runs["base"], runs["subset"], "--format", "json")
    model = json.loads(out)["models"][0]
    assert model["same_samples"] is False and "evaluation data differ" in model["samples_note"]
    assert all(v["accuracy"]["p_value"] is None for v in model["variants"] if v["accuracy"])
    code, md, _ = _diff(capsys, runs["base"], runs["subset"])
    assert "The evaluation data differ" in md


def test_a_version_1_report_as_base_is_compared_without_a_test(runs, capsys):
    from pathlib import Path

    v1 = Path(__file__).parent / "fixtures" / "report_v1.json"
    code, out, _ = _diff(capsys, v1, runs["base"], "--format", "json")
    assert code == 0
    model = json.loads(out)["models"][0]
    assert model["same_samples"] is None and "does not record which samples" in model["samples_note"]
    assert all(v["accuracy"]["significant"] is None for v in model["variants"] if v["accuracy"])
    for fmt in ("md", "html"):
        code, text, _ = _diff(capsys, v1, runs["base"], "--format", fmt)
        assert code == 0 and "breast_cancer_mlp" in text


def _batch_folder(root, name, rows):
    folder = root / name
    folder.mkdir()
    index_rows = []
    for model, source in rows.items():
        if source is None:
            index_rows.append({"name": model, "status": "failed", "folder": model, "error": "did not convert"})
            continue
        shutil.copytree(source, folder / model)
        index_rows.append({"name": model, "status": "ok", "folder": model})
    (folder / "index.json").write_text(json.dumps({"rows": index_rows}))
    return folder


def test_batches_are_matched_by_name_with_models_added_removed_and_failed(runs, capsys):
    base = _batch_folder(runs["root"], "batch_base", {"mlp": runs["base"], "old": runs["again"],
                                                        "broken": runs["again"]})
    new = _batch_folder(runs["root"], "batch_new", {"mlp": runs["perturbed"], "fresh": runs["again"],
                                                      "broken": None})
    code, out, _ = _diff(capsys, base, new, "--format", "json")
    assert code == 0
    status = {m["name"]: m["status"] for m in json.loads(out)["models"]}
    assert status == {"mlp": "compared", "old": "removed", "fresh": "added", "broken": "failed"}
    code, md, _ = _diff(capsys, base, new)
    assert "| mlp | changed |" in md and "| old | removed |" in md and "| fresh | added |" in md
    assert "1 model compared, 1 changed; 1 added; 1 removed; 1 failed in a run" in md


def test_diff_never_imports_tensorflow(runs):
    probe = ("import sys; from reporter.cli import main; "
             f"code = main(['diff', {str(runs['base'])!r}, {str(runs['perturbed'])!r}, '--format', 'html']); "
             "assert 'tensorflow' not in sys.modules, 'tensorflow imported'; sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<h1>quant-report diff</h1>" in done.stdout


def test_batch_with_a_baseline_writes_the_diff_beside_the_index_and_gates(runs, mlp_files, capsys):
    config = runs["root"] / "batch.toml"
    config.write_text(
        '[defaults]\nformats = ["json"]\nlatency_runs = 3\nvariants = ["float", "fiq"]\n\n'
        f'[[model]]\nname = "mlp"\npath = "{runs["root"] / "perturbed.keras"}"\ndata = "{mlp_files[1]}"\n')
    out = runs["root"] / "batch_out"
    code = main(["batch", str(config), "--out", str(out), "--jobs", "1", "--quiet", "--baseline", str(runs["base"]),
                 "--max-accuracy-drop", "0.01"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "baseline gate FAILED: mlp: Float accuracy" in err
    diff = json.loads((out / "diff.json").read_text())
    assert [m["name"] for m in diff["models"]] == ["mlp"] and diff["gate_failures"]


def test_the_example_workflow_uses_commands_and_flags_that_exist():
    """examples/quant-report-pr.yml is documentation that must not rot: every quant-report command in it
    parses with the tool's own parser, and it comments the diff with gh and uploads the reports."""
    import re
    import shlex
    from pathlib import Path

    from reporter.cli import build_parser

    text = (Path(__file__).parents[1] / "examples" / "quant-report-pr.yml").read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    joined = re.sub(r">\n\s+", "", code)  # folded YAML blocks: one line each
    joined = re.sub(r"\n\s{10,}(?=--)", " ", joined)
    commands = re.findall(r"quant-report (?:batch|diff|run)[^|\n]*", joined)
    kinds = {c.split()[1] for c in commands}
    assert {"batch", "diff"} <= kinds
    for command in commands:
        build_parser().parse_args(shlex.split(command.strip())[1:])  # raises UsageError on an unknown flag
    assert "--baseline reports-base --max-accuracy-drop" in joined
    assert "gh pr comment" in text and "--body-file diff.md" in text and "upload-artifact" in text


def test_what_counts_as_a_change_is_judgements():
    """`diff`'s change rules live in reporter.core.judgement: an accuracy change beyond noise (or any, untested),
    an output error that moved, a latency LATENCY_CHANGE_RATIO times off and by LATENCY_CHANGE_MIN_MS."""
    from reporter.core import judgement

    assert judgement.accuracy_differs(True, 0.01) and not judgement.accuracy_differs(False, -0.2)
    assert judgement.accuracy_differs(None, 0.01) and not judgement.accuracy_differs(None, 0.0)
    assert judgement.output_error_changed(0.0, 0.5) and not judgement.output_error_changed(0.5, 0.5)
    assert judgement.latency_changed(1.0, 1.6) and judgement.latency_changed(1.0, 0.6)
    assert not judgement.latency_changed(1.0, 1.2)
    assert not judgement.latency_changed(0.001, 0.01)  # ten times slower, but by microseconds: timing noise
