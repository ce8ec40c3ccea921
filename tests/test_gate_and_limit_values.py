"""Every gate and limit value is checked by its one declaration (reporter/core/schema.py) wherever it is given:
`run`, `batch`, `batch --baseline`, `diff`, a batch file and the Python API; a bad one is one usage line naming the
flag or key (exit 2) before any model runs, with nothing written. And a value a run accepts is one `render` and
`diff` read back: report.json's settings are read with the same checks (bounds included)."""

import json
import math
import shutil
from pathlib import Path

import pytest

from reporter.cli import main
from reporter.core.errors import QuantReportError
from reporter.core.exit_codes import ExitCode

FIXTURE = Path(__file__).parent / "fixtures" / "report.json"
BAD_LIMITS = ("-3", "nan", "inf", "1e309", "1.5")  # below 0, not a number, infinite, overflowing, above 1
QUICK = ("--variants", "float,fiq", "--latency-runs", "0", "--formats", "json", "--quiet")


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _two_reports(tmp_path: Path) -> tuple[Path, Path]:
    """Two report folders holding the stored report: a diff of them needs no run."""
    folders = tmp_path / "base", tmp_path / "new"
    for folder in folders:
        folder.mkdir()
        shutil.copy(FIXTURE, folder / "report.json")
    return folders


def _usage_line(code, err: str, flag: str) -> str:
    lines = _lines(err)
    assert code == ExitCode.USAGE, (code, err)
    assert len(lines) == 1, lines
    assert flag in lines[0] and "Traceback" not in err, lines[0]
    return lines[0]


def _batch_config(tmp_path: Path, model, data, extra: str = "") -> Path:
    config = tmp_path / "models.toml"
    config.write_text(f"{extra}\n[[model]]\nname = \"mlp\"\npath = {json.dumps(str(model))}\n"
                      f"data = {json.dumps(str(data))}\n", encoding="utf-8")
    return config


# --- the gate's limit: diff, batch --baseline, the API ------------------------------------------------------
@pytest.mark.parametrize("limit", BAD_LIMITS)
def test_diff_refuses_a_limit_that_is_not_a_number_from_0_to_1(tmp_path, capsys, limit):
    """Before: -3 and nan failed the gate ("limit nan points", exit 3) or passed it (inf, 1e309, 1.5: exit 0)."""
    base, new = _two_reports(tmp_path)
    out = tmp_path / "diff.md"
    code = main(["diff", str(base), str(new), "--max-accuracy-drop", limit, "--out", str(out)])
    captured = capsys.readouterr()
    line = _usage_line(code, captured.err, "--max-accuracy-drop")
    assert "a number from 0 to 1" in line and repr(limit) in line
    assert captured.out == "" and not out.exists()


@pytest.mark.parametrize("limit", BAD_LIMITS)
def test_batch_with_a_baseline_refuses_a_bad_limit_before_any_model_runs(tmp_path, capsys, mlp_files, limit):
    """Before: the models ran, then the baseline's diff ended in a traceback (nan) or judged with the bad limit."""
    base, _ = _two_reports(tmp_path)
    config = _batch_config(tmp_path, *mlp_files)
    out = tmp_path / "reports"
    code = main(["batch", str(config), "--out", str(out), "--baseline", str(base), "--max-accuracy-drop", limit,
                 "--jobs", "1", "--quiet"])
    line = _usage_line(code, capsys.readouterr().err, "--max-accuracy-drop")
    assert "a number from 0 to 1" in line
    assert not out.exists()  # no model ran: no report folder, no index, no diff


@pytest.mark.parametrize("limit", [float(text) for text in BAD_LIMITS], ids=BAD_LIMITS)
def test_the_api_comparison_refuses_a_bad_limit_in_one_line(tmp_path, limit):
    """compare_runs is what `diff` and `--baseline` call, and a script's way to compare two runs."""
    from reporter.pipeline.conclude import compare_runs

    base, new = _two_reports(tmp_path)
    with pytest.raises(QuantReportError) as info:
        compare_runs(base, new, limit)
    assert len(_lines(str(info.value))) == 1
    assert str(info.value).startswith("max_accuracy_drop must be a number from 0 to 1"), info.value


@pytest.mark.parametrize("limit", [float(text) for text in BAD_LIMITS], ids=BAD_LIMITS)
def test_the_one_gate_rule_judges_no_loss_against_a_bad_limit(limit):
    """A NaN limit failed every loss, an infinite one passed every loss: the rule now refuses to judge."""
    from reporter.findings.gate import Gate, Loss, failing

    with pytest.raises(QuantReportError):
        Gate(limit, "fiq")
    with pytest.raises(QuantReportError):
        failing([Loss("fiq", 0.5)], limit)


# --- limits recorded in report.json: the run refuses what render and diff would refuse --------------------------
@pytest.mark.parametrize("flag,value", [
    ("--micro-arena", str(2**63)),  # beyond what report.json's reader holds
    ("--micro-arena", str(2**64)),
    ("--micro-arena", str(2**32)),  # one byte more than a 32-bit device addresses
    ("--calibration-samples", str(2**63)),
    ("--suspect-threshold", "1e309"),  # infinite: report.json holds no Infinity
])
def test_run_refuses_a_value_its_report_could_not_be_read_back_with(tmp_path, capsys, mlp_files, flag, value):
    """Before: the run was accepted and wrote a report.json that `render` and `diff` then refused."""
    model, data = mlp_files
    out = tmp_path / "reports"
    code = main(["run", str(model), "--data", str(data), "--out", str(out), flag, value, *QUICK])
    _usage_line(code, capsys.readouterr().err, flag)
    assert not out.exists()


def test_micro_arena_beyond_4_gib_is_refused_in_a_batch_file_with_its_line(tmp_path, capsys, mlp_files):
    """Before: the batch started and the model failed "at index" when its report could not be read back."""
    config = _batch_config(tmp_path, *mlp_files, extra=f"[defaults]\nmicro_arena = {2**63}\n")
    out = tmp_path / "reports"
    code = main(["batch", str(config), "--out", str(out), "--jobs", "1", "--quiet"])
    line = _usage_line(code, capsys.readouterr().err, "'micro_arena'")
    assert f"{config}:2:" in line and "4,294,967,295" in line
    assert not out.exists()


def test_batch_refuses_more_jobs_than_any_machine_runs(tmp_path, capsys, mlp_files):
    config = _batch_config(tmp_path, *mlp_files)
    out = tmp_path / "reports"
    code = main(["batch", str(config), "--out", str(out), "--jobs", str(10**30), "--quiet"])
    _usage_line(code, capsys.readouterr().err, "--jobs")
    assert not out.exists()


def test_the_api_refuses_a_micro_arena_beyond_4_gib(tmp_path, mlp_files):
    import reporter

    model, data = mlp_files
    with pytest.raises(QuantReportError) as info:
        reporter.run(str(model), str(data), out=tmp_path / "reports", micro_arena=2**63, variants=["float", "fiq"],
                     latency_runs=0)
    assert str(info.value).startswith("micro_arena must be an integer number of bytes >= 1"), info.value
    assert not (tmp_path / "reports").exists()


def test_a_report_with_a_setting_beyond_its_bounds_is_refused_by_render_and_diff_naming_it(tmp_path, capsys):
    """The reader's bound is the run's: a hand-edited arena the run would refuse is not read either."""
    data = json.loads(FIXTURE.read_text())
    data["settings"]["micro_arena"] = 2**32
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["render", str(path), "--format", "md"]) == ExitCode.FAILED  # as a figure beyond its bound
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 1 and "settings.micro_arena is 4294967296" in lines[0] and "4,294,967,295" in lines[0], lines
    assert not (tmp_path / "summary.md").exists()
    assert main(["diff", str(FIXTURE), str(path)]) == ExitCode.FAILED  # either side of a diff: the same bound
    lines = _lines(capsys.readouterr().err)
    assert len(lines) == 1 and "settings.micro_arena" in lines[0], lines


def test_the_largest_accepted_micro_arena_is_written_rendered_and_diffed(tmp_path, capsys, mlp_files):
    from reporter.core.schema import MAX_ARENA_BYTES

    model, data = mlp_files
    out = tmp_path / "reports"
    argv = ["run", str(model), "--data", str(data), "--out", str(out), "--name", "mlp", *QUICK]
    assert main([*argv, "--micro-arena", str(MAX_ARENA_BYTES + 1)]) == ExitCode.USAGE  # the bound is exact
    assert main([*argv, "--micro-arena", str(MAX_ARENA_BYTES)]) == ExitCode.OK
    report = out / "mlp" / "report.json"
    assert json.loads(report.read_text())["settings"]["micro_arena"] == MAX_ARENA_BYTES == 2**32 - 1
    capsys.readouterr()
    assert main(["render", str(report), "--format", "md"]) == ExitCode.OK
    assert (out / "mlp" / "summary.md").stat().st_size > 0
    capsys.readouterr()
    assert main(["diff", str(report), str(report), "--format", "json", "--max-accuracy-drop", "0"]) == ExitCode.OK
    diffed = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in diffed["models"]] == ["mlp"]
    assert not math.isnan(diffed["max_accuracy_drop"]) and diffed["max_accuracy_drop"] == 0
