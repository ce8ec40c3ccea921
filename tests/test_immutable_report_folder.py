"""An immutable report folder is found before the run (issue 47, point 6): the earlier report there cannot be
replaced, so the run stops at once with one line naming that folder, instead of measuring everything and then
throwing the results away. The folder is made immutable with chattr, as a user's would be."""

import shutil
import subprocess

import pytest


def _immutable(folder, on: bool) -> bool:
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    return subprocess.run([chattr, "+i" if on else "-i", str(folder)], capture_output=True).returncode == 0


def test_an_immutable_report_folder_stops_the_run_before_any_work(tmp_path, demo_cache, capfd, run_cli):
    from reporter.pipeline import demo

    model, data = demo.ensure_model("breast_cancer_mlp")
    old = tmp_path / "out" / "bc"
    old.mkdir(parents=True)
    (old / "report.json").write_text("{}\n")
    if not _immutable(old, True):
        pytest.skip("chattr +i is not permitted here")
    try:
        probe = old / "probe"
        with pytest.raises(OSError):  # the folder really takes no new entry
            probe.mkdir()
        code = run_cli(model, data, tmp_path / "out", "--formats", "json", name="bc", latency_runs=2)
        err = capfd.readouterr().err
    finally:
        _immutable(old, False)
    assert code != 0
    lines = [line for line in err.splitlines() if "cannot be replaced" in line]
    assert len(lines) == 1 and str(old) in lines[0], err
    assert "calibrated" not in err and "rendered" not in err  # stopped before the run's stages, not after them
    assert sorted(p.name for p in old.iterdir()) == ["report.json"] and (old / "report.json").read_text() == "{}\n"
