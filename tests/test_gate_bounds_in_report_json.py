"""Issue 47, points 1 and 5: a gate the user asked for that cannot be applied fails (exit 2, one line), and a
hand-edited report.json is read with bounds (finite, non-negative sizes and latencies, accuracies in [0, 1],
names capped). Hand-edited copies of tests/fixtures/report.json; no TensorFlow."""

import copy
import json
import warnings
from pathlib import Path

import pytest

from reporter.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "report.json"
BASE = json.loads(FIXTURE.read_text())


def _write(folder: Path, change=None) -> Path:
    data = copy.deepcopy(BASE)
    if change is not None:
        change(data)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(data), encoding="utf-8")
    return folder / "report.json"


def _fingerprint(value):
    def change(data):
        data["dataset"]["fingerprint"] = value
    return change


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# --- point 1: a requested gate that cannot be applied fails ---------------------------------------------
def test_a_requested_gate_on_runs_of_different_data_exits_2_with_one_line(tmp_path, capsys):
    base = _write(tmp_path / "base", _fingerprint("a" * 64))
    new = _write(tmp_path / "new", _fingerprint("b" * 64))
    out = tmp_path / "diff.md"
    code = main(["diff", str(base), str(new), "--max-accuracy-drop", "0.01", "--out", str(out)])
    err = _lines(capsys.readouterr().err)
    assert code == 2
    assert len(err) == 1, err
    assert "cannot be applied" in err[0] and "different data" in err[0], err
    assert out.is_file()  # the side-by-side comparison is still written for the user to read


def test_a_requested_gate_on_runs_of_different_tasks_names_the_tasks(tmp_path, capsys):
    def regression(data):
        data["model"]["task"] = "regression"
        data["model"]["num_classes"] = None

    base = _write(tmp_path / "base")
    new = _write(tmp_path / "new", regression)
    code = main(["diff", str(base), str(new), "--max-accuracy-drop", "0.01", "--format", "json",
                 "--out", str(tmp_path / "diff.json")])
    err = _lines(capsys.readouterr().err)
    assert code == 2
    assert len(err) == 1 and "different tasks" in err[0], err


def test_without_a_requested_gate_different_data_are_compared_as_before(tmp_path, capsys):
    base = _write(tmp_path / "base", _fingerprint("a" * 64))
    new = _write(tmp_path / "new", _fingerprint("b" * 64))
    code = main(["diff", str(base), str(new)])
    captured = capsys.readouterr()
    assert code == 0
    assert "compared without a gate" in captured.out
    assert captured.err == ""


def test_a_requested_gate_on_the_same_data_still_applies(tmp_path, capsys):
    base = _write(tmp_path / "base", _fingerprint("a" * 64))
    new = _write(tmp_path / "new", _fingerprint("a" * 64))
    assert main(["diff", str(base), str(new), "--max-accuracy-drop", "0.01"]) == 0
    assert capsys.readouterr().err == ""


# --- point 5: report.json read with bounds -----------------------------------------------------------------
def _set(*path_and_value):
    *path, key, value = path_and_value

    def change(data):
        for step in path:
            data = data[step]
        data[key] = value
    return change


BOUNDS = [
    ("huge latency", _set("variants", 2, "latency_ms", "median", 1e308), "variants[2].latency_ms.median"),
    ("negative latency", _set("variants", 0, "latency_ms", "p90", -1.0), "variants[0].latency_ms.p90"),
    ("negative size", _set("variants", 1, "size_bytes", -5), "variants[1].size_bytes"),
    ("accuracy above 1", _set("variants", 2, "metrics", "accuracy", 3.5), "variants[2].metrics.accuracy"),
    ("negative accuracy", _set("variants", 0, "metrics", "accuracy", -3.5), "variants[0].metrics.accuracy"),
]


@pytest.mark.parametrize("case, change, field", BOUNDS, ids=[c[0] for c in BOUNDS])
def test_a_value_out_of_bounds_is_one_line_naming_the_field(tmp_path, capsys, case, change, field):
    src = _write(tmp_path / "r", change)
    code = main(["render", str(src), "--format", "md"])
    err = _lines(capsys.readouterr().err)
    assert code == 1
    assert len(err) == 1 and field in err[0], err
    assert not (tmp_path / "r" / "summary.md").exists()
    # diff reads the same way
    good = _write(tmp_path / "good")
    code = main(["diff", str(good), str(src)])
    err = _lines(capsys.readouterr().err)
    assert code == 1 and len(err) == 1 and field in err[0], err


def test_a_huge_model_name_is_elided_in_every_format(tmp_path, capsys):
    name = "m" * 200_000

    def rename(data):
        data["model"]["name"] = name

    src = _write(tmp_path / "r", rename)
    for fmt in ("md", "html"):
        assert main(["render", str(src), "--format", fmt]) == 0, capsys.readouterr().err
    out = tmp_path / "diff.md"
    assert main(["diff", str(_write(tmp_path / "good")), str(src), "--out", str(out)]) == 0
    for path in (tmp_path / "r" / "summary.md", tmp_path / "r" / "report.html", out):
        text = path.read_text(encoding="utf-8")
        assert "m" * 1000 not in text, path
        assert "m" * 200 in text, path  # the start of the name is kept


def test_matplotlib_warnings_never_reach_the_terminal(tmp_path, capfd, monkeypatch):
    # matplotlib warns while a chart is drawn (here: every savefig, as it does on odd layouts and glyphs): the
    # render prints only the written file's path, nothing of the warning.
    import matplotlib.figure

    savefig = matplotlib.figure.Figure.savefig

    def warning_savefig(self, *args, **kwargs):
        warnings.warn("Tight layout not applied. tight_layout cannot make Axes height small enough",
                      UserWarning)
        return savefig(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", warning_savefig)
    src = _write(tmp_path / "r")
    with warnings.catch_warnings(record=True) as escaped:  # what Python would print to the terminal
        warnings.simplefilter("always")
        assert main(["render", str(src), "--format", "html"]) == 0
    assert [str(w.message) for w in escaped] == []
    assert capfd.readouterr().err == ""
