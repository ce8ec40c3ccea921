"""Regenerate what the tests store from the current code: the findings of tests/fixtures/report.json (decided
and worded again from its measurements; the measurements themselves are left as they are) and the gold files
tests/gold/ rendered from it (tests/test_render.py --refresh-gold).

    python -m tests.regen_fixtures          (from the repository's root, in its virtualenv)

Run it after an intended change to the findings or their words, read `git diff tests/fixtures tests/gold`, and
commit what you meant to change; tests/test_fixture_drift.py fails until the stored findings match the code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "report.json"


def recomputed(text: str):
    """The stored report with its findings dropped and decided and worded again by the current code, as the
    pipeline attaches them (reporter.pipeline.conclude.attach: the findings and the recommendation's sentence)."""
    from reporter.model.report import Report
    from reporter.pipeline.conclude import attach

    data = json.loads(text)
    data.pop("findings", None)
    return attach(Report.from_dict(data))


def regenerate_fixture(path: Path = FIXTURE) -> bool:
    """Rewrite `path` with recomputed findings; True when it changed."""
    old = path.read_text(encoding="utf-8")
    new = recomputed(old).to_json()
    if new != old:
        path.write_text(new, encoding="utf-8")
    return new != old


def main() -> int:
    changed = regenerate_fixture()
    print(f"{FIXTURE.relative_to(HERE.parent)}: {'findings regenerated' if changed else 'unchanged'}")
    gold = subprocess.run([sys.executable, "-m", "pytest", str(HERE / "test_render.py"), "-k", "test_golden_files",
                           "--refresh-gold", "-q", "-n", "0", "-p", "no:cacheprovider"], cwd=HERE.parent)
    return gold.returncode


if __name__ == "__main__":
    sys.exit(main())
