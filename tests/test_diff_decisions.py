"""`quant-report diff` names a change of the model to ship: real runs of the demo breast-cancer MLP on a CPU and
with `--target int8` (which ships another model), compared as two report folders, as the README's two `--out`
folders, and as two folders of report folders matched by model name. The labels the diff must name are read from
each report.json's `findings.decision`, and the two .tflite files those decisions name are checked with LiteRT's
interpreter to be different models (float ops kept on the CPU, none on integer-only hardware)."""

import html
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from conftest import run_recorded
from reporter.cli import main

pytestmark = pytest.mark.slow

CHEAP = ("--quiet", "--formats", "json", "--latency-runs", "3")
README = Path(__file__).parents[1] / "README.md"


@pytest.fixture(scope="module")
def runs(mlp_files, tmp_path_factory):
    """`--out base` on a CPU, `--out new` with `--target int8`, and two small CPU runs named `steady` and
    `gone model` (its folder: gone_model): one run each, shared by every test here."""
    model, data = mlp_files
    root = tmp_path_factory.mktemp("diff_decisions")
    plan = {"base": ("breast_cancer_mlp",), "new": ("breast_cancer_mlp", "--target", "int8"),
            "steady": ("steady", "--variants", "float,fiq"), "gone": ("gone model", "--variants", "float")}
    done = {}
    for out, (name, *flags) in plan.items():
        done[out] = run_recorded(model, data, root / out, name, *CHEAP, *flags)
    return root, done


def _ok(runs, *names) -> Path:
    root, done = runs
    for name in names:
        code, error = done[name]
        assert error is None and code == 0, f"the {name} run: {error or f'exit code {code}'}"
    return root


def _decision(folder: Path) -> dict:
    return json.loads((folder / "report.json").read_text())["findings"]["decision"]


def _diff(capsys, *argv) -> tuple[int, str]:
    code = main(["diff", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out


def _expected_line(base: dict, new: dict) -> str:
    return f"Model to ship: {base['label']} ({base['target']}) → {new['label']} ({new['target']})"


def _float32_tensors(tflite: Path) -> int:
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:  # TensorFlow's copy of the same interpreter
        from tensorflow.lite import Interpreter
    return sum(t["dtype"].__name__ == "float32" for t in Interpreter(model_path=str(tflite)).get_tensor_details())


def test_two_report_folders_name_the_changed_model_to_ship(runs, capsys):
    root = _ok(runs, "base", "new")
    base_folder, new_folder = root / "base" / "breast_cancer_mlp", root / "new" / "breast_cancer_mlp"
    base, new = _decision(base_folder), _decision(new_folder)
    assert (base["target"], new["target"]) == ("cpu", "int8")
    # The two decisions ship two different models: the CPU's keeps float ops, integer-only hardware's has none.
    assert base["label"] != new["label"] and base["file"] != new["file"]
    assert _float32_tensors(base_folder / base["file"]) > 0 and _float32_tensors(new_folder / new["file"]) == 0
    line = _expected_line(base, new)

    code, md = _diff(capsys, base_folder, new_folder)
    assert code == 0  # a change of the model to ship is said, not a failure (exit codes: docs/batch.md)
    heading = md.index("### breast_cancer_mlp")
    assert md.index(line) > heading and md.index(line) < md.index("breast_cancer_mlp:", heading)  # said first
    assert "Recommended" not in md  # the float-keep set is named as what it is, never as the model to ship
    assert "another model to ship for breast_cancer_mlp" in md

    code, page = _diff(capsys, base_folder, new_folder, "--format", "html")
    assert code == 0 and line in html.unescape(re.sub(r"<[^>]+>", "", page))

    code, out = _diff(capsys, base_folder, new_folder, "--format", "json")
    decision = json.loads(out)["models"][0]["decision"]
    assert code == 0 and decision["lines"][0] == line and "ship" in decision["changed"]
    assert (decision["base"]["variant"], decision["new"]["variant"]) == (base["variant"], new["variant"])

    # A gate on the baseline still decides the exit code by accuracy alone: the same samples, no variant worse.
    code, _ = _diff(capsys, base_folder, new_folder, "--max-accuracy-drop", "0.01")
    assert code == 0


def test_the_readme_example_works_as_written(runs, capsys, monkeypatch):
    """README.md's `quant-report diff base/ new/`, run as written where base/ and new/ are two `--out` folders."""
    root = _ok(runs, "base", "new")
    commands = re.findall(r"^(quant-report diff [^#\n]*)", README.read_text(), flags=re.M)
    assert len(commands) == 1, commands
    monkeypatch.chdir(root)
    code = main(shlex.split(commands[0])[1:])
    md = capsys.readouterr().out
    assert code == 0
    assert _expected_line(_decision(root / "base" / "breast_cancer_mlp"),
                          _decision(root / "new" / "breast_cancer_mlp")) in md


def _parent(root: Path, name: str, folders: dict[str, Path]) -> Path:
    parent = root / name
    shutil.rmtree(parent, ignore_errors=True)
    parent.mkdir()
    for sub, source in folders.items():
        shutil.copytree(source, parent / sub)
    return parent


def test_folders_of_report_folders_are_compared_by_model_name(runs, capsys):
    root = _ok(runs, "base", "new", "steady", "gone")
    mlp_cpu, mlp_int8 = root / "base" / "breast_cancer_mlp", root / "new" / "breast_cancer_mlp"
    steady, gone = root / "steady" / "steady", root / "gone" / "gone_model"
    # Folders named otherwise than their models: matched by report.json's model name, not by folder.
    a = _parent(root, "combo_a", {"breast_cancer_mlp": mlp_cpu, "steady": steady, "gone_model": gone})
    b = _parent(root, "combo_b", {"mlp_on_int8": mlp_int8, "steady": steady})
    assert not (a / "index.json").exists() and not (b / "index.json").exists()

    code, out = _diff(capsys, a, b, "--format", "json")
    assert code == 0
    models = {m["name"]: m for m in json.loads(out)["models"]}
    assert {n: m["status"] for n, m in models.items()} == {
        "breast_cancer_mlp": "compared", "steady": "compared", "gone model": "removed"}
    line = _expected_line(_decision(mlp_cpu), _decision(mlp_int8))
    assert models["breast_cancer_mlp"]["decision"]["lines"] == [line]
    # The same decision on both sides: nothing said about it.
    assert models["steady"]["decision"]["changed"] == [] and models["steady"]["decision"]["lines"] == []

    code, md = _diff(capsys, a, b)
    assert code == 0
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]] for r in md.splitlines()
            if r.startswith("| ") and not r.startswith("| Model")}
    assert rows["breast_cancer_mlp"][:2] == ["changed", line.removeprefix("Model to ship: ")]
    assert rows["steady"][1] == "–" and rows["gone model"][0] == "removed"
    assert "1 removed" in md and "another model to ship for breast_cancer_mlp" in md
    assert not re.search(r"steady: (Model to ship|Target|Verdict|Gate):", md)

    code, page = _diff(capsys, a, b, "--format", "html")
    assert code == 0 and html.unescape(page).count("Model to ship:") == 1


def test_unchanged_decisions_say_nothing_extra(runs, capsys):
    root = _ok(runs, "base", "steady")
    a = _parent(root, "same_a", {"breast_cancer_mlp": root / "base" / "breast_cancer_mlp",
                                 "steady": root / "steady" / "steady"})
    for argv in ((a, a), (root / "base" / "breast_cancer_mlp", a / "breast_cancer_mlp")):
        for fmt in ("md", "html"):
            code, text = _diff(capsys, *argv, "--format", fmt)
            assert code == 0
            for said in ("Model to ship:", "Target:", "Verdict:", "Gate:", "another model to ship"):
                assert said not in text, (argv, fmt, said)
