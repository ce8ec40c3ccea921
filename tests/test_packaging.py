"""An installed (non-editable) copy finds its templates and renders reports."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import FIXTURE_REPORT

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_carries_templates_and_renders(tmp_path):
    tree_before = sorted(p.name for p in ROOT.iterdir())
    # Build from a copy, so that setuptools' build/ and *.egg-info land in tmp_path, not in the tree.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("reporter", "templates"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q",
         "-w", str(tmp_path / "dist")],
        capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stderr
    wheel = next((tmp_path / "dist").glob("quant_report-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "reporter/templates/report.html.j2" in names
    assert "reporter/templates/summary.md.j2" in names
    assert "reporter/templates/report.css" in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.modules['tensorflow'] = None\n"
        "import reporter.render.formats as r; from reporter.pipeline.conclude import report_from_json\n"
        "assert r.templates_dir() == __import__('pathlib').Path(sys.argv[1]) / 'reporter' / 'templates'\n"
        "html = r.render(report_from_json(open(sys.argv[2]).read()), 'html')\n"
        "assert b'Quantization report' in html\n"
    )
    run = subprocess.run([sys.executable, "-c", code, str(site), str(FIXTURE_REPORT)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in ROOT.iterdir()) == tree_before  # no build/ or *.egg-info left behind
