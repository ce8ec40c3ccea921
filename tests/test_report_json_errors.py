"""A malformed report.json is refused when it is read, with one line that names the field and the problem
(`quant-report render` / `diff` read reports through Report.from_json). Fast, no TensorFlow."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reporter.model.report import Report

FIXTURE = Path(__file__).parent / "fixtures" / "report.json"
REPO = Path(__file__).resolve().parent.parent
BASE = json.loads(FIXTURE.read_text())


def mutated(change) -> str:
    """The fixture report with `change(data)` applied, as JSON text."""
    data = copy.deepcopy(BASE)
    change(data)
    return json.dumps(data)


def setter(*path_and_value):
    """A change that sets data[p0][p1]...[pn] = value."""
    *path, key, value = path_and_value

    def change(data):
        for step in path:
            data = data[step]
        data[key] = value

    return change


def dropper(*path):
    def change(data):
        for step in path[:-1]:
            data = data[step]
        del data[path[-1]]

    return change


# (case id, report.json text, what the one-line message must contain)
CASES = [
    # not an object at the top
    ("list", "[1, 2, 3]", "the top level is a list, not a JSON object"),
    ("null", "null", "the top level is null, not a JSON object"),
    ("string", '"text"', "the top level is a string, not a JSON object"),
    ("number", "42", "the top level is an integer, not a JSON object"),
    ("true", "true", "the top level is true, not a JSON object"),
    # the version
    ("no version", "{}", "schema_version: missing"),
    ("version string", mutated(setter("schema_version", "4")),
     'schema_version: expected an integer, got a string ("4")'),
    ("version true", mutated(setter("schema_version", True)), "schema_version: expected an integer, got true"),
    ("version newer", mutated(setter("schema_version", 99)), "schema_version: 99 is not supported"),
    # top-level fields
    ("variants string", mutated(setter("variants", "oops")), 'variants: expected a list, got a string ("oops")'),
    ("model list", mutated(setter("model", [])), "model: expected an object, got a list"),
    ("settings list", mutated(setter("settings", [1])), "settings: expected an object, got a list"),
    ("generated_at number", mutated(setter("generated_at", 2024)),
     "generated_at: expected a string, got an integer (2024)"),
    ("timings null", mutated(setter("timings_s", "total", None)), "timings_s.total: expected a number, got null"),
    ("findings list", mutated(setter("findings", [])), "findings: expected an object, got a list"),
    ("unknown top field", mutated(setter("rows", [])), 'report.json: unknown field "rows"'),
    # nested
    ("size_bytes string", mutated(setter("variants", 1, "size_bytes", "big")),
     'variants[1].size_bytes: expected an integer, got a string ("big")'),
    ("size_bytes float", mutated(setter("variants", 1, "size_bytes", 1.5)),
     "variants[1].size_bytes: expected an integer, got a number (1.5)"),
    ("size_bytes true", mutated(setter("variants", 1, "size_bytes", True)),
     "variants[1].size_bytes: expected an integer, got true"),
    ("variant not an object", mutated(setter("variants", 0, "fiq")), 'variants[0]: expected an object, got a string'),
    ("model name missing", mutated(dropper("model", "name")), "model.name: required field is missing"),
    ("model name null", mutated(setter("model", "name", None)), "model.name: expected a string, got null"),
    ("unknown variant field", mutated(setter("variants", 0, "bogus", 1)), 'variants[0]: unknown field "bogus"'),
    ("accuracy string", mutated(setter("variants", 0, "metrics", "accuracy", "0.9")),
     'variants[0].metrics.accuracy: expected a number, got a string ("0.9")'),
    ("confusion cell", mutated(setter("variants", 0, "metrics", "confusion_matrix", 0, 1, 0.5)),
     "variants[0].metrics.confusion_matrix[0][1]: expected an integer, got a number (0.5)"),
    ("ops count", mutated(setter("variants", 0, "ops", "CONV 2D", "many")),
     'variants[0].ops["CONV 2D"]: expected an integer, got a string ("many")'),
    ("latency object", mutated(setter("variants", 0, "latency_ms", 3.2)),
     "variants[0].latency_ms: expected an object, got a number (3.2)"),
    ("layer suspect", mutated(setter("layers", 2, "suspect", 1)),
     "layers[2].suspect: expected true or false, got an integer (1)"),
    ("selective status", mutated(setter("recommendation", "selective", "status", 1)),
     "recommendation.selective.status: expected a string, got an integer (1)"),
    ("finding ok", mutated(setter("findings", "variants", 0, "ok", "yes")),
     'findings.variants[0].ok: expected true or false, got a string ("yes")'),
    ("nan", mutated(setter("variants", 0, "metrics", "accuracy", float("nan"))),
     "variants[0].metrics.accuracy: expected a finite number, got NaN"),
    ("long string shortened", mutated(setter("variants", 1, "size_bytes", "x" * 100 + "\n\u2028tail")),
     'variants[1].size_bytes: expected an integer, got a string ("' + "x" * 40 + '…")'),
]


@pytest.mark.parametrize("text,needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_malformed_report_is_a_one_line_value_error(text, needle):
    with pytest.raises(ValueError) as info:
        Report.from_json(text)
    message = str(info.value)
    assert needle in message, message
    assert len(message.splitlines()) == 1 and "tail" not in message, message


def test_valid_reports_still_load():
    """Every stored fixture (versions 1 to 5) reads; integers where a number is declared stay integers."""
    for path in sorted(FIXTURE.parent.glob("report*.json")):
        Report.from_json(path.read_text())
    data = copy.deepcopy(BASE)
    data["timings_s"] = {"total": 3}
    assert Report.from_json(json.dumps(data)).timings_s == {"total": 3}


def test_the_render_command_prints_one_line_and_writes_nothing(tmp_path):
    bad = tmp_path / "BAD.json"
    bad.write_text(mutated(setter("variants", 1, "size_bytes", "big")))
    out = tmp_path / "OUT.md"
    result = subprocess.run(
        [sys.executable, "-m", "reporter", "render", str(bad), "--format", "md", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(bad) in lines[0] and "variants[1].size_bytes" in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    assert not out.exists()
