"""Issue 32, points 8, 10 and 11: `diff` across different models never gates, every JSON reader is bounded,
and every string of a report.json is escaped in summary.md and diff.md (text in the HTML). Fast: copies of
tests/fixtures/report.json, no TensorFlow."""

import copy
import json
import re
from pathlib import Path

import pytest

from conftest import one_error_line
from reporter.cli import main
from reporter.model.decode import MAX_DEPTH, JSONLimitError, loads

FIXTURE = Path(__file__).parent / "fixtures" / "report.json"
BASE = json.loads(FIXTURE.read_text())
DROP = ["--max-accuracy-drop", "0.01"]


def _write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _report(fingerprint="a" * 64, accuracy=None, top5=None, name=None) -> dict:
    """The fixture (a 2-class model with ROC AUC) with a data fingerprint; `accuracy` for every variant;
    `top5`: made a 10-class model with top-5 accuracy instead of ROC AUC."""
    data = copy.deepcopy(BASE)
    data["dataset"]["fingerprint"] = fingerprint
    if name:
        data["model"]["name"] = name
    variants = data["variants"] + [data["recommendation"]["selective"]]
    for v in variants:
        if accuracy is not None:
            v["metrics"]["accuracy"] = accuracy
            v["metrics"]["correct_bits"] = ""  # not paired: the change is shown untested, and gated
        if top5 is not None:
            v["metrics"]["roc_auc"], v["metrics"]["top5_accuracy"] = None, top5
    if top5 is not None:
        data["model"]["num_classes"] = 10
    return data


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- point 8: diff across different models -------------------------------------------------------------
NO_GATE = "BASE and NEW were measured on different data (fingerprints differ)"


def test_diff_of_two_models_on_different_data_cannot_be_gated(tmp_path, capsys):
    base = _write(tmp_path / "base.json", _report("a" * 64))
    new = _write(tmp_path / "new.json", _report("b" * 64, accuracy=0.5, top5=0.97, name="digits"))
    code, md, err = _cli(capsys, "diff", base, new, *DROP)
    assert code == 2, err  # a gate asked for on other data cannot be applied: exit 2 saying why, never a pass
    assert "gate FAILED" not in md + err
    assert f"{NO_GATE} and measure different tasks" in md and "compared without a gate" in md
    # each run's values under its own metric name: ROC AUC in BASE, top-5 accuracy in NEW
    assert "| Variant | Accuracy | ROC AUC → Top-5 accuracy | Size | Latency |" in md
    assert "| **Float** | 95.6 % → 50.0 % (−45.6 points, not tested) | 0.991 → 0.970 |" in md
    code, out, _ = _cli(capsys, "diff", base, new, *DROP, "--format", "json")
    result = json.loads(out)
    assert code == 2 and result["gate_failures"] == []
    model = result["models"][0]
    assert model["gate_note"].startswith(NO_GATE)
    fiq = next(v for v in model["variants"] if v["name"] == "fiq")
    assert (fiq["main_metric"], fiq["new_main_metric"]) == ("ROC AUC", "Top-5 accuracy")
    assert fiq["main"]["delta"] is None  # two metrics: no difference of one from the other
    code, html, _ = _cli(capsys, "diff", base, new, *DROP, "--format", "html")
    assert code == 2 and "ROC AUC 0.500 → Top-5 accuracy 0.970" in html and "compared without a gate" in html


def test_the_same_drop_on_the_same_data_still_fails_the_gate(tmp_path, capsys):
    base = _write(tmp_path / "base.json", _report("a" * 64))
    new = _write(tmp_path / "new.json", _report("a" * 64, accuracy=0.5))
    code, md, err = _cli(capsys, "diff", base, new, *DROP)
    assert code == 3 and "gate FAILED" in err
    assert "compared without a gate" not in md


def test_diff_of_runs_judged_by_different_metrics_shows_both_names_and_cannot_be_gated(tmp_path, capsys):
    base = _write(tmp_path / "base.json", _report("a" * 64))
    data = _report("a" * 64)
    data["model"]["main_metric"] = "top2"
    for v in data["variants"] + [data["recommendation"]["selective"]]:
        v["metrics"]["main"] = {"name": "top2", "value": 0.1, "share": True}
    new = _write(tmp_path / "new.json", data)
    code, md, err = _cli(capsys, "diff", base, new, *DROP)
    assert code == 2 and "cannot be applied" in err, err
    assert "are judged by different metrics (accuracy in BASE, top2 in NEW): compared without a gate" in md
    assert "accuracy 63.2 % in BASE, top2 10.0 % in NEW: not compared" in md  # FIQ, each under its own name


def test_batch_folders_are_gated_per_model_only_where_comparable(tmp_path, capsys):
    def batch(name, reports):
        for model, data in reports.items():
            _write(tmp_path / name / model / "report.json", data)
        rows = [{"name": m, "status": "ok", "folder": m} for m in reports]
        return _write(tmp_path / name / "index.json", {"rows": rows}).parent

    base = batch("base", {"same": _report("a" * 64), "other": _report("c" * 64)})
    new = batch("new", {"same": _report("a" * 64, accuracy=0.5), "other": _report("d" * 64, accuracy=0.5)})
    code, md, err = _cli(capsys, "diff", base, new, *DROP)
    assert code == 2  # one model's gate cannot be applied (exit 2 outranks the other's failed gate, 3)
    failed = [line for line in err.splitlines() if "gate FAILED" in line]
    assert failed and all(line.split("FAILED: ")[1].startswith("same:") for line in failed), err
    assert f"**No gate for other:** {NO_GATE}: compared without a gate." in md
    assert "1 model not comparable, not gated" in md


# --- point 10: bounded JSON readers ---------------------------------------------------------------------
def _deep() -> str:
    data = copy.deepcopy(BASE)
    data["settings"]["deep"] = "@"
    return json.dumps(data).replace('"@"', "[" * 600 + "]" * 600)


def _huge_int() -> str:
    return json.dumps(BASE).replace('"size_bytes": 9424', '"size_bytes": ' + "9" * 400, 1)


def _huge_float() -> str:
    return json.dumps(BASE).replace('"p90": ', '"p90": 1e400, "x": ', 1)


@pytest.mark.parametrize("text,needle", [
    (_deep(), f"nested more than {MAX_DEPTH} levels deep"),
    (_huge_int(), "the integer 999999999999… (400 digits) is too large"),
    (_huge_float(), "the number 1e400 is too large for a float"),
    (json.dumps({**BASE, "model": {**BASE["model"], "num_classes": 2**62}}),
     "model.num_classes: 4,611,686,018,427,387,904 is not a count this tool reads"),
], ids=["deep", "huge int", "huge float", "absurd class count"])
@pytest.mark.parametrize("command", ["render json", "render md", "diff as BASE", "diff as NEW"])
def test_a_hostile_report_json_is_one_line(tmp_path, capsys, text, needle, command):
    bad = _write(tmp_path / "bad.json", text)
    out = tmp_path / "out"
    out.mkdir()
    if command.startswith("render"):
        argv = ["render", bad, "--format", command.split()[1], "--out", out / "report.out"]
    else:
        pair = [bad, FIXTURE] if command == "diff as BASE" else [FIXTURE, bad]
        argv = ["diff", *pair, "--out", out / "diff.md"]
    line = one_error_line(*_cli(capsys, *argv)[::2], out)
    assert str(bad) in line and needle in line, line


def _batch_with_index(tmp_path: Path, rows) -> Path:
    folder = tmp_path / "batch"
    _write(folder / "m" / "report.json", BASE)
    _write(folder / "index.json", rows if isinstance(rows, str) else {"rows": rows})
    return folder


@pytest.mark.parametrize("rows,needle", [
    (None, "rows: expected a list, got null"),
    ([{"folder": "m", "status": "ok"}], "rows[0].name: required field is missing"),
    ([{"name": None, "folder": "m"}], "rows[0].name: expected a model name, got null"),
    (["m"], "rows[0]: expected an object, got a string"),
    ([{"name": "m", "folder": "m"}, {"name": "m", "folder": "m"}], 'rows[1].name: "m" appears twice'),
    ([{"name": "m", "folder": "../../etc"}], 'rows[0].folder: "../../etc" is not a folder inside'),
    ([{"name": "m", "folder": ["m"]}], "rows[0].folder: expected a string, got a list"),
    ('{"rows": ' + "[" * 300 + "]" * 300 + "}", f"nested more than {MAX_DEPTH} levels deep"),
    ('{"rows": [{"name": "m", "seconds": ' + "7" * 500 + "}]}", "is too large"),
    ("[]", 'not a quant-report index.json (no "rows" list)'),
], ids=["rows null", "no name", "name null", "row a string", "name twice", "folder outside", "folder list",
        "deep", "huge int", "not an object"])
def test_a_broken_index_json_is_one_line(tmp_path, capsys, rows, needle):
    folder = _batch_with_index(tmp_path, rows)
    out = tmp_path / "out"
    out.mkdir()
    for pair in ([folder, FIXTURE], [FIXTURE, folder]):
        line = one_error_line(*_cli(capsys, "diff", *pair, "--out", out / "diff.md")[::2], out)
        assert str(folder / "index.json") in line and needle in line, line
    # the same as --baseline: refused before anything runs (usage error), nothing written
    code = main(["run", "no-model.keras", "--data", "no.npz", "--out", str(out / "run"), "--baseline", str(folder)])
    assert code == 2 and not (out / "run").exists()
    assert needle in capsys.readouterr().err


def test_bounded_loads():
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(JSONLimitError, match="nested more than"):
        loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert loads(json.dumps({"s": "[" * 1000})) == {"s": "[" * 1000}  # brackets in strings are text
    assert loads(json.dumps({"s": '\\"[[[' * 500})) == {"s": '\\"[[[' * 500}
    assert loads(str(2**63 - 1)) == 2**63 - 1 and loads(str(-(2**63 - 1))) == -(2**63 - 1)
    for text in (str(2**63), "1" + "0" * 5000, "-1e309"):
        with pytest.raises(JSONLimitError, match="too large"):
            loads(text)
    with pytest.raises(JSONLimitError, match=r"line 3, column 6"):
        loads('{\n"a": 1,\n"b": ' + "9" * 30 + "}")


def test_resume_treats_a_hostile_report_json_as_incomplete(tmp_path):
    from reporter.batch.config import ModelEntry
    from reporter.batch.runner import is_complete

    entry = ModelEntry("m", tmp_path / "m.keras", str(tmp_path / "d.npz"), {}, 1)
    for text in ("[1, 2]", "[" * 5000 + "]" * 5000, '{"settings": ' + "9" * 5000 + "}", '{"settings": []}'):
        _write(tmp_path / "m" / "report.json", text)
        assert is_complete(tmp_path, entry, "fingerprint") is False


# --- point 11: every string escaped in summary.md and diff.md -------------------------------------------
PAYLOAD = (" <script>alert(1)</script> [x](javascript:alert(1)) ![i](javascript:alert(2))"
           " <img src=x onerror=alert(3)> &lt;b&gt; <https://evil.example> <b>raw</b>")
# Strings the tool reads as values (a variant's name, a status, a task): left as they are.
STRUCTURAL = {"status", "name", "task", "direction", "verdict", "kind", "reference", "method", "scheme", "phase",
              "calibration_source", "source", "fingerprint", "correct_bits", "dtype", "generated_at", "recommend",
              "picks", "score", "converter", "variants", "main_metric", "score_name"}
TAGS = {"p", "h2", "h3", "table", "thead", "tbody", "tr", "th", "td", "strong", "em", "code", "br",
        "details", "summary"}  # the last two: summary.md's own fold, written by its template


def _hostile() -> dict:
    def walk(value, key=None):
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        return value + PAYLOAD if isinstance(value, str) and key not in STRUCTURAL else value

    data = walk(copy.deepcopy(BASE))
    data["tool_version"] = "<script>alert(1)</script>](javascript:alert(1))"
    data["tensorflow_version"] = "[2.21](javascript:alert(2)) <b>x</b>"
    data["model"]["name"] = "<img src=x onerror=alert(1)>[m](javascript:x)"
    data["dataset"]["source"] = "# data.npz" + PAYLOAD
    return data


def _as_github_would(md: str) -> str:
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", html))
    assert tags <= TAGS, tags - TAGS  # no <script>, <img>, <a>, <b>: no raw HTML, no link, no image
    return html


def test_every_string_of_a_report_is_text_in_summary_md_and_html(tmp_path, capsys):
    hostile = _write(tmp_path / "r" / "report.json", _hostile())
    code, _, err = _cli(capsys, "render", hostile, "--format", "md", "--out", tmp_path / "summary.md")
    assert code == 0, err
    md = (tmp_path / "summary.md").read_text(encoding="utf-8")
    html = _as_github_would(md)
    assert "quant-report &lt;script&gt;alert(1)&lt;/script&gt;](javascript:alert(1))" in html  # shown as text
    assert "TensorFlow [2.21](javascript:alert(2)) &lt;b&gt;x&lt;/b&gt;" in html
    assert "<h1>" not in html and "# data.npz" not in md.replace("\\#", "")
    code, _, err = _cli(capsys, "render", hostile, "--format", "html", "--out", tmp_path / "report.html")
    assert code == 0, err
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<img src=x" not in page and "<b>raw</b>" not in page and "<b>x</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;](javascript:alert(1))" in page


def test_every_string_is_text_in_diff_md(tmp_path, capsys):
    hostile = _write(tmp_path / "r" / "report.json", _hostile())
    for pair in ([FIXTURE, hostile], [hostile, FIXTURE]):
        code, md, err = _cli(capsys, "diff", *pair)
        assert code == 0, err
        _as_github_would(md)
        code, page, err = _cli(capsys, "diff", *pair, "--format", "html")
        assert code == 0 and "<script" not in page and "<img src=x" not in page, err
