"""The documentation a newcomer reads: docs/ builds with MkDocs in strict mode (a broken link or a page left out
of the navigation fails), the settings reference is what the settings' declarations and the parser make, and
the README stays a few screens that link every page."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_builds_strict(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    built = {p.relative_to(tmp_path / "site").parent.as_posix() for p in (tmp_path / "site").rglob("index.html")}
    pages = {p.relative_to(ROOT / "docs").with_suffix("").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert {"." if p == "index" else p for p in pages} <= built


def test_settings_reference_is_generated_from_the_declarations():
    from reporter.cli import reference_markdown
    from reporter.core.schema import BATCH, GATE, RUN

    page = (ROOT / "docs" / "reference" / "settings.md").read_text()
    assert page == reference_markdown(), "regenerate: python -m reporter.cli reference > docs/reference/settings.md"
    for setting in (*RUN, *GATE, *BATCH):  # every declared setting has its row, under its flag and its batch key
        assert f"| `{setting.flag}` | `{setting.key}` |" in page


def test_readme_is_a_few_screens_and_links_every_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 12_000
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)\)", readme))
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages == linked
    for link in re.findall(r"\]\(([^)#:]+)\)", readme):
        assert (ROOT / link).exists(), link
