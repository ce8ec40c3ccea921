"""The command line as a new user meets it: exit codes, usage errors, input checked before TensorFlow."""

import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from reporter.inputs import settings
from reporter.cli import build_parser, main
from reporter.batch.config import ConfigError, load
from reporter.core.exit_codes import ExitCode

ROOT = Path(__file__).resolve().parents[1]


def _lines(capfd):
    return [line for line in capfd.readouterr().err.splitlines() if line.strip()]


def test_exit_codes_are_documented_in_help_and_docs(capfd):
    assert main(["run", "--help"]) == ExitCode.OK
    help_text = capfd.readouterr().out
    docs = (ROOT / "docs" / "batch.md").read_text(encoding="utf-8")
    for code in ExitCode:
        assert re.search(rf"^\s+{int(code)}\s+\S", help_text, re.M), code
        assert re.search(rf"^\|\s*`{int(code)}`\s*\|", docs, re.M), f"docs/batch.md lists no exit code {int(code)}"
    assert main(["--version"]) == ExitCode.OK
    assert [c.value for c in ExitCode] == [0, 1, 2, 3, 143]


def test_flag_typo_shows_the_subcommand_usage_and_the_closest_flag(capfd):
    assert main(["run", "m.keras", "--data", "d.npz", "--calibraton-samples", "5"]) == ExitCode.USAGE
    err = capfd.readouterr().err
    assert err.startswith("usage: quant-report run ")
    assert "did you mean --calibration-samples?" in err


@pytest.mark.parametrize("argv,needle", [
    (["run", "m.keras", "--data", "d.npz", "--latency-runs", "-1"], "--latency-runs: must be an integer >= 0"),
    (["run", "m.keras", "--data", "d.npz", "--variants", "float,int4"], "unknown int4"),
    (["run", "m.keras", "--data", "d.npz", "--max-accuracy-drop", "2"], "a number from 0 to 1"),
    (["demo", "--models", "nosuch"], "unknown demo model(s) nosuch"),
    (["batch", "c.toml", "--jobs", "0"], "--jobs: must be an integer >= 1"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_flags_are_usage_errors(capfd, argv, needle):
    assert main(argv) == ExitCode.USAGE
    assert needle in capfd.readouterr().err


def test_every_setting_is_one_flag_and_one_toml_key_with_the_same_check(tmp_path):
    """The declarations make the flags and the TOML checks: both accept and refuse the same values."""
    parser = build_parser()
    sub = {a.dest: a for a in parser._subparsers._group_actions[0].choices["run"]._actions}
    for setting in settings.RUN:
        assert setting.name in sub and setting.flag in sub[setting.name].option_strings
        assert sub[setting.name].default == (list(setting.default) if setting.repeatable else setting.default)
    cases = {"calibration_samples": (0, "0"), "selection_samples": (5, "5"), "suspect_threshold": (0, "0"),
             "recommend": ("best", "best"), "formats": (["pdf", "docx"], "pdf,docx")}
    for name, (toml_value, flag_value) in cases.items():
        config = tmp_path / f"{name}.toml"
        config.write_text(f'[defaults]\n{name} = {toml_value!r}\n'.replace("'", '"')
                          + '[[model]]\npath = "m.keras"\ndata = "d.npz"\n')
        with pytest.raises(ConfigError) as info:
            load(config)
        assert any(f"'{name}' must be {settings.BY_NAME[name].must_be}" in p for p in info.value.problems)
        assert main(["run", "m.keras", "--data", "d.npz", settings.BY_NAME[name].flag, flag_value]) == ExitCode.USAGE


def _in_fresh_python(argv, cwd):
    """Runs main(argv) in a new interpreter; returns (code, stderr lines, whether TensorFlow was imported)."""
    code = textwrap.dedent(f"""
        import sys
        from reporter.cli import main
        rc = main({argv!r})
        print("RESULT", rc, "tensorflow" in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    rc, tf_loaded = proc.stdout.split("RESULT")[1].split()
    return int(rc), [line for line in proc.stderr.splitlines() if line.strip()], tf_loaded == "True"


def test_bad_input_fails_before_tensorflow_with_one_line(tmp_path):
    """Missing model, CSV data, an .npy, a pickled npz and a file as --out: one line each, exit 1,
    no progress line, TensorFlow never imported, nothing written."""
    model = tmp_path / "m.keras"
    zipfile.ZipFile(model, "w").close()  # an (empty) zip archive: passes the file check; the data fails first
    (tmp_path / "data.csv").write_text("x,y\n1,0\n")
    np.save(tmp_path / "x.npy", np.zeros(3))
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object), y=np.array([0]))
    (tmp_path / "afile").write_text("")
    cases = [
        (["nope.keras", "--data", "data.csv"], "nope.keras: no such file or folder"),
        (["m.onnx", "--data", "data.csv"], "m.onnx"),
        (["m.keras", "--data", "data.csv"], "data.csv: a CSV file: DATA must be an .npz file"),
        (["m.keras", "--data", "x.npy"], "x.npy: a single .npy array"),
        (["m.keras", "--data", "missing.npz"], "missing.npz: no such file"),
        (["m.keras", "--data", "objects.npz", "--out", "afile/reports"], "afile: --out must be a folder"),
    ]
    (tmp_path / "m.onnx").write_text("")
    for argv, needle in cases:
        rc, lines, tf_loaded = _in_fresh_python(["run", *argv, "--out", "reports"] if "--out" not in argv
                                                else ["run", *argv], tmp_path)
        assert rc == ExitCode.FAILED and len(lines) == 1, (argv, lines)
        assert lines[0].startswith("quant-report: error: ") and needle in lines[0], (argv, lines)
        assert not tf_loaded, argv
    assert not (tmp_path / "reports").exists()


def test_pickled_arrays_in_npz_are_refused_clearly(tmp_path):
    from reporter.core.errors import InputError
    from reporter.inputs.data_loading import load_data

    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object), y=np.array([0]))
    with pytest.raises(InputError, match="objects.npz: array 'x' holds Python objects"):
        load_data(str(tmp_path / "objects.npz"), 1)


@pytest.mark.slow  # converts and measures the model before rendering
def test_a_format_that_fails_to_render_fails_the_run(capfd, tmp_path, mlp_files, monkeypatch, run_cli):
    """Exit 1 and the format named, even with --quiet; the formats that did render are kept. (The PDF fails wherever
    it is laid out: the run's helper process cannot run this test's stand-in, so the run lays it out itself.)"""
    from reporter.render import formats as render

    def broken(report, images):
        raise RuntimeError("no fonts")

    monkeypatch.setattr(render, "printed_pdf", broken)
    model, data = mlp_files
    out = tmp_path / "reports"
    code = run_cli(model, data, out, "--formats", "md,pdf,json", "--variants", "float,fiq", name="m", latency_runs=2)
    lines = _lines(capfd)
    assert code == ExitCode.FAILED
    assert len(lines) == 1 and "could not render pdf" in lines[0] and "no fonts" in lines[0], lines
    assert sorted(p.name for p in (out / "m").glob("*.*") if p.suffix in (".md", ".json", ".pdf")
                  and not p.name.startswith("explorer_")) == ["report.json", "summary.md"]
