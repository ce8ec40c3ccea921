"""The stored fixture (tests/fixtures/report.json) is what the render, gold, decision and findings tests read: its
findings must be what the current code decides and words from its measurements, or those tests check a stale
snapshot. Regenerate with `python -m tests.regen_fixtures` (the fixture's findings and tests/gold/)."""

import json
from pathlib import Path

from regen_fixtures import recomputed

FIXTURE = Path(__file__).parent / "fixtures" / "report.json"
TIMES = ("generated_at", "timings_s")  # recorded times: the only thing scrubbed


def _scrubbed(value):
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def _lines(value) -> list[str]:
    return json.dumps(_scrubbed(value), indent=1, sort_keys=True).splitlines()


def test_the_stored_findings_are_what_the_code_derives_from_the_stored_measurements():
    text = FIXTURE.read_text(encoding="utf-8")
    stored = json.loads(text)
    again = json.loads(recomputed(text).to_json())
    assert "findings" in stored, "the fixture stores no findings: nothing to check (python -m tests.regen_fixtures)"
    import difflib

    diff = "\n".join(difflib.unified_diff(_lines(stored["findings"]), _lines(again["findings"]), "stored",
                                         "recomputed", lineterm="", n=2))
    assert not diff, "the stored findings drifted from the code (python -m tests.regen_fixtures):\n" + diff
    # the recommendation's sentence is taken from the findings when they are attached
    assert stored["recommendation"]["summary"] == again["recommendation"]["summary"]


def _kept(stored, again, path="") -> list[str]:
    """Paths where `again` does not hold what `stored` holds (a field the current schema adds is not a change)."""
    if isinstance(stored, dict) and isinstance(again, dict):
        return [p for k, v in stored.items() for p in (_kept(v, again[k], f"{path}.{k}") if k in again else [f"{path}.{k}"])]
    if isinstance(stored, list) and isinstance(again, list) and len(stored) == len(again):
        return [p for i, (a, b) in enumerate(zip(stored, again)) for p in _kept(a, b, f"{path}[{i}]")]
    return [] if stored == again else [path]


def test_the_rest_of_the_fixture_is_kept_as_stored():
    """Recomputing touches the findings and the sentence taken from them, nothing measured."""
    text = FIXTURE.read_text(encoding="utf-8")
    stored, again = json.loads(text), json.loads(recomputed(text).to_json())
    for data in (stored, again):
        data.pop("findings")
        data["recommendation"].pop("summary")
    assert not _kept(stored, again)
