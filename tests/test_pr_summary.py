"""What a reviewer reads first, fit for a pull request: the model shipped named in the first table (checked by
running that file with LiteRT), the same summary on every run of the same model (latency words decided only
above this host's timing floor), target facts only where the target's own tool ran the model, and a summary short
enough to read in a minute."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import run_recorded

WORD_BUDGET = 400  # summary.md outside <details>
TIME = re.compile(r"\d(?:\.\d+)? ?(?:µs|ms|s)\b")  # a line holding a timing differs run to run


def _first_table(md: str) -> list[list[str]]:
    """The rows of summary.md's first table (header and rule left out), as cells."""
    rows = []
    for line in md.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


def _outside_details(md: str) -> str:
    return re.sub(r"<details>.*?</details>", "", md, flags=re.S)


@pytest.fixture(scope="module")
def runs(mlp_files, tmp_path_factory):
    """The breast-cancer MLP (whose FIQ collapses on its normalization layer) run twice on the CPU target, once for
    int8 (a host-side repair ships) and once for TFLite Micro."""
    model, data = mlp_files
    out = tmp_path_factory.mktemp("pr_summary")
    done = {}
    for name, flags in (("cpu_a", ()), ("cpu_b", ()), ("int8", ("--target", "int8")),
                        ("micro", ("--target", "micro"))):
        done[name] = run_recorded(model, data, out, name, "--formats", "md,json", *flags)
    return out, done, data


def _report(out: Path, name: str) -> dict:
    return json.loads((out / name / "report.json").read_text())


def _litert_accuracy(path: Path, x: np.ndarray, y: np.ndarray, transform: dict) -> float:
    """The written file's accuracy, run one sample at a time by LiteRT, its input standardized as the folder's
    input_transform.json says and quantized as the file's input says."""
    import tensorflow as tf

    it = tf.lite.Interpreter(model_path=str(path))
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    x = (x - np.asarray(transform["subtract"], np.float32)) / np.asarray(transform["divide"], np.float32)
    right = 0
    for xi, yi in zip(x, y):
        if inp["dtype"] in (np.int8, np.uint8):
            scale, zero = inp["quantization"]
            xi = np.clip(np.round(xi / scale + zero), -128 if inp["dtype"] == np.int8 else 0,
                         127 if inp["dtype"] == np.int8 else 255).astype(inp["dtype"])
        it.set_tensor(inp["index"], xi[None].astype(inp["dtype"]))
        it.invoke()
        scores = it.get_tensor(out["index"])[0].astype(np.float64)
        right += int(np.argmax(scores) == yi)
    return right / len(y)


def test_the_first_table_is_the_model_shipped_with_float_and_it_is_what_litert_measures(runs):
    out, done, data = runs
    assert done["int8"] == (0, None), done["int8"]
    decision = _report(out, "int8")["findings"]["decision"]
    shipped = out / "int8" / decision["file"]
    transform = json.loads((out / "int8" / "input_transform.json").read_text())
    assert transform["model"] == decision["file"]  # a host-side repair ships: the case the first table got wrong
    md = (out / "int8" / "summary.md").read_text()
    rows = _first_table(md)
    assert rows[0][0].startswith("**") and "(ship)" in rows[0][0], rows
    assert rows[1][0] == "Float", rows
    label = rows[0][0].split("**")[1]
    assert label.replace("\\", "") == decision["label"]
    with np.load(data) as d:
        x, y = d["x"].astype(np.float32), d["y"]
    accuracy = _litert_accuracy(shipped, x, y, transform)
    assert rows[0][1] == f"{accuracy * 100:.1f} %"
    # The float-keep set is named as what it is, never "Recommended", where it is not what ships.
    assert "Recommended" not in _outside_details(md)


def test_two_runs_of_the_same_model_give_the_same_summary_but_for_timings(runs):
    out, done, _ = runs
    assert done["cpu_a"] == (0, None) and done["cpu_b"] == (0, None)
    a, b = ((out / n / "summary.md").read_text().replace(n, "NAME") for n in ("cpu_a", "cpu_b"))
    untimed = [[line for line in text.splitlines() if not TIME.search(line)] for text in (a, b)]
    assert untimed[0] == untimed[1]
    # The first sentence names no latency of models this host times at a few microseconds.
    first = a.split("\n\n")[2].splitlines()[0]
    assert not re.search(r"faster|slower|as fast", first), first


def test_a_micro_run_says_no_only_for_what_tflite_micro_refused(runs):
    out, done, _ = runs
    assert done["micro"] == (0, None), done["micro"]
    from tflite_micro.python.tflite_micro import runtime as micro

    md = (out / "micro" / "summary.md").read_text()
    table = next(t for t in re.split(r"\n\n", md) if "| Runs on TFLite Micro |" in t)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    header = [c.strip() for c in table.splitlines()[0].strip("|").split("|")]
    runs_col = header.index("Runs on TFLite Micro")
    decision = _report(out, "micro")["findings"]["decision"]
    files = {o["label"]: o["name"] for o in decision["options"]}
    seen = set()
    for row in rows:
        said, name = row[runs_col], files[row[0].strip("*").replace("\\", "")]
        seen.add(said)
        assert said in ("yes", "no", "not tried"), row
        if said == "yes":  # TFLite Micro's own interpreter loads and runs the written file
            path = out / "micro" / f"{name}.tflite"
            interpreter = micro.Interpreter.from_bytes(path.read_bytes(), arena_size=1 << 20)
            assert interpreter is not None
        if name in ("float", "drq"):  # never given to TFLite Micro: never "no"
            assert said == "not tried", row
    assert "not tried" in seen


def test_every_demo_summary_fits_a_review(demo_reports):
    for folder in sorted(p for p in demo_reports.iterdir() if (p / "summary.md").is_file()):
        md = (folder / "summary.md").read_text()
        words = len(_outside_details(md).split())
        assert words <= WORD_BUDGET, f"{folder.name}: {words} words outside <details>"
        assert "<details>" in md
