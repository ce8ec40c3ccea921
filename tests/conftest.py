"""Shared fixtures: the demo is trained and reported once per test session and reused by every test."""

import os
from pathlib import Path

import pytest

from reporter.plugins import register_builtins

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
register_builtins()  # the tests' composition root: what the command line and the API do first

DEMO_MODELS = ("digits_cnn", "digits_lstm", "breast_cancer_mlp")
FIXTURE_REPORT = Path(__file__).parent / "fixtures" / "report.json"  # a stored report: rendering tests need no run


def run_cli(model, data, out, *extra, name=None, quiet=True, latency_runs=None) -> int:
    """`quant-report run MODEL --data DATA --out OUT [--name NAME] [--quiet] [--latency-runs N] *extra`,
    in this process; returns the exit code. `extra` holds further flags as strings, e.g. "--variants",
    "float,fiq"."""
    from reporter.cli import main

    argv = ["run", str(model), "--data", str(data), "--out", str(out)]
    if name is not None:
        argv += ["--name", name]
    if quiet:
        argv.append("--quiet")
    if latency_runs is not None:
        argv += ["--latency-runs", str(latency_runs)]
    return main(argv + [str(arg) for arg in extra])


@pytest.fixture(scope="session")
def demo_cache():
    """Trained models, cached on disk across test runs: the same cache `quant-report demo` fills
    (~/.cache/quant-report, or QUANT_REPORT_CACHE), so the tests after the demo train nothing."""
    from reporter.pipeline import demo

    root = demo.cache_dir().parent
    os.environ["QUANT_REPORT_CACHE"] = str(root)  # worker processes and subprocesses share it
    return Path(root)


@pytest.fixture(scope="session")
def demo_reports(demo_cache, tmp_path_factory):
    """The output folder of one `quant-report demo` run over the three demo models."""
    from reporter.cli import main

    out = tmp_path_factory.mktemp("demo_out")
    assert main(["demo", "--out", str(out), "--quiet", "--latency-runs", "5"]) == 0
    return out


@pytest.fixture(scope="session")
def mlp_files(demo_cache):
    """The breast-cancer demo model and its data: a small, real, quickly converted model."""
    from reporter.pipeline import demo

    return demo.ensure_model("breast_cancer_mlp")


@pytest.fixture(scope="session")
def binary_sigmoid_files(demo_cache):
    """(model.keras, data.npz) of a breast-cancer MLP with one sigmoid output unit and 0/1 labels."""
    import task_fixtures

    return task_fixtures.ensure("binary_sigmoid", demo_cache)


@pytest.fixture(scope="session")
def regression_files(demo_cache):
    """(model.keras, data.npz) of a diabetes MLP with one linear output unit and float targets."""
    import task_fixtures

    return task_fixtures.ensure("regression", demo_cache)


@pytest.fixture(scope="session", name="run_cli")
def run_cli_fixture():
    """`run_cli` above, as a fixture (usable from fixtures of any scope)."""
    return run_cli


@pytest.fixture(scope="session")
def fixture_report():
    """tests/fixtures/report.json loaded as the tool loads a report (migrated, findings derived). Shared by
    the session: copy it (dataclasses.replace) rather than change it."""
    from reporter.pipeline.conclude import report_from_json

    return report_from_json(FIXTURE_REPORT.read_text())


def load_report(folder: Path):
    from reporter.pipeline.conclude import report_from_json

    return report_from_json((folder / "report.json").read_text())


def pytest_addoption(parser):
    parser.addoption("--refresh-gold", action="store_true", help="rewrite tests/gold/ from the current output")


def one_error_line(code, err: str, out: Path) -> str:
    """Bad input as a user must see it: exit code 1, one stderr line "quant-report: error: ...", no traceback,
    nothing written in `out`. Returns that line, for the test to check what it names."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1, (code, err)
    assert len(lines) == 1, err
    assert lines[0].startswith("quant-report: error: "), lines[0]
    assert "Traceback" not in err
    assert not out.exists() or not any(out.rglob("*")), sorted(str(p) for p in out.rglob("*"))
    return lines[0]


def has_word(text: str, word: str) -> bool:
    """`word` in `text` as a word of its own (not inside a longer name such as x_calib_numeric)."""
    import re

    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", text) is not None


def run_recorded(model, data, out, name: str, *flags) -> tuple:
    """A session fixture's run of the CLI: (exit code, None), or (None, the exception as text) when the run
    raised, so that each test depending on it fails with that error instead of the whole fixture erroring."""
    import traceback

    try:
        return run_cli(model, data, out, *flags, name=name), None
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: the tests report it
        return None, "".join(traceback.format_exception_only(type(exc), exc)).strip()


def measured_models(report: dict, ok_only: bool = False) -> dict:
    """{name: variant result} of every model a report.json measured and wrote as <name>.tflite: the variants
    (only the ok ones with `ok_only`), and when a fix was built the recommended (selective) model, the rule's
    model and the alternatives."""
    measured = {v["name"]: v for v in report["variants"] if not ok_only or v["status"] == "ok"}
    rec = report.get("recommendation") or {}
    if rec.get("selective"):
        measured["selective"] = rec["selective"]
    if (rec.get("rule") or {}).get("selective"):
        measured[rec["rule"]["selective"]["name"]] = rec["rule"]["selective"]
    for alt in rec.get("alternatives") or []:
        if alt.get("model") and alt["model"].get("status") == "ok":
            measured[alt["model"]["name"]] = alt["model"]
    return measured
