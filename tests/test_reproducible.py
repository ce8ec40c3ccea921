"""The same report renders to the same bytes in another process: rendering twice in one process would share
its hash seed, its caches and matplotlib's state, and so could not catch output that depends on them
(set order, ids, timestamps). No TensorFlow."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import FIXTURE_REPORT

ROOT = Path(__file__).resolve().parents[1]
FORMATS = ("html", "md", "json", "pdf")


def test_every_format_renders_to_the_same_bytes_in_another_process(fixture_report, tmp_path):
    from reporter.render import formats as render

    code = textwrap.dedent("""
        import sys
        from pathlib import Path
        sys.modules["tensorflow"] = None  # rendering needs none
        from reporter.plugins import register_builtins
        register_builtins()  # what an entry point does first (this script is its own)
        from reporter.pipeline.conclude import report_from_json
        from reporter.render import formats as render

        report = report_from_json(Path(sys.argv[1]).read_text())
        for fmt in sys.argv[3:]:
            (Path(sys.argv[2]) / fmt).write_bytes(render.render(report, fmt))
    """)
    # Another hash seed than this process's: str and set ordering differ between the two.
    seed = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed}
    run = subprocess.run([sys.executable, "-c", code, str(FIXTURE_REPORT), str(tmp_path), *FORMATS],
                         capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    for fmt in FORMATS:
        here = render.render(fixture_report, fmt)
        there = (tmp_path / fmt).read_bytes()
        assert len(here) > 1000, fmt  # a real document, not an empty render on both sides
        assert here == there, f"{fmt} differs between two processes"
    assert (tmp_path / "json").read_text() == FIXTURE_REPORT.read_text()  # and equals the stored report
