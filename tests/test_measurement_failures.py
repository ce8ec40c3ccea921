"""A measurement that fails is recorded as missing with its error, and the variant stays; batch timings
hold a lock so that two models are never timed at once."""

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_report

HERE = Path(__file__).parent


@contextlib.contextmanager
def _stderr_to(path):
    """fd 2 into `path` (the progress lines go to the terminal's stderr, past run.log)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "w") as f:
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@pytest.fixture(scope="module")
def broken(mlp_files, tmp_path_factory):
    """One run of the breast-cancer MLP in which DRQ's Analyzer text and metrics fail and FIQ's operator
    counts and latency fail (each only for that variant); returns (report folder, progress text)."""
    from reporter.measure import evaluate
    from reporter.measure import structure
    from reporter.measure import metrics as qmetrics
    from reporter.pipeline.stages import RunSettings, run

    stage = {"now": ""}
    real_latency, real_analyzer, real_classification = evaluate.latency_ms, structure.analyzer_text, \
        qmetrics.classification
    real_types = structure.tensor_types

    def latency(*args, **kwargs):
        if stage["now"] == "latency fiq":
            raise RuntimeError("latency exploded\nsecond line")
        return real_latency(*args, **kwargs)

    def analyzer(*args, **kwargs):
        if stage["now"] == "analyze drq":
            raise RuntimeError("analyzer exploded")
        return real_analyzer(*args, **kwargs)

    def tensor_types(*args, **kwargs):
        if stage["now"] == "analyze fiq":
            raise KeyError("no such tensor type")
        return real_types(*args, **kwargs)

    def classification(*args, **kwargs):
        if stage["now"] == "evaluate drq":
            raise ValueError("metrics exploded")
        return real_classification(*args, **kwargs)

    model, data = mlp_files
    out = tmp_path_factory.mktemp("measurement_failures")
    progress = out / "progress.txt"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evaluate, "latency_ms", latency)
        mp.setattr(structure, "analyzer_text", analyzer)
        mp.setattr(qmetrics, "classification", classification)
        mp.setattr(structure, "tensor_types", tensor_types)
        with _stderr_to(progress):
            _, folder = run(RunSettings(model=str(model), data=str(data), out=str(out / "reports"),
                                        variants=("float", "drq", "fiq"), latency_runs=3,
                                        formats=("json", "md", "html"),
                                        listener=lambda now: stage.update(now=now)))
    return folder, progress.read_text()


@pytest.mark.slow
def test_variant_stays_ok_with_what_was_measured(broken):
    folder, _ = broken
    report = load_report(folder)
    drq, fiq, flt = report.variant("drq"), report.variant("fiq"), report.variant("float")
    assert drq.ok and fiq.ok and flt.ok
    # FIQ: everything but its operator counts and latency.
    assert fiq.size_bytes > 0 and fiq.metrics is not None and fiq.metrics.accuracy > 0
    assert fiq.latency_ms is None and fiq.ops == {} and fiq.tensor_types == {}
    assert fiq.measurement_errors == {"ops": "KeyError: 'no such tensor type'",
                                      "latency": "RuntimeError: latency exploded"}
    # DRQ: size, ops, latency; no Analyzer text, no metrics.
    assert drq.size_bytes > 0 and drq.ops and drq.latency_ms is not None
    assert drq.metrics is None and drq.analyzer_text == ""
    assert drq.measurement_errors == {"analyzer": "RuntimeError: analyzer exploded",
                                      "metrics": "ValueError: metrics exploded"}
    assert flt.measurement_errors == {} and flt.latency_ms is not None
    assert not (folder / "analyzer_drq.txt").exists() and (folder / "analyzer_fiq.txt").is_file()
    # The recommendation still ran on FIQ (a measurement failure does not stop the stages after it).
    assert report.recommendation is not None and report.layers


@pytest.mark.slow
def test_errors_are_in_report_json_and_tracebacks_in_run_log(broken):
    folder, progress = broken
    raw = {v["name"]: v for v in json.loads((folder / "report.json").read_text())["variants"]}
    assert raw["fiq"]["status"] == "ok" and raw["fiq"]["latency_ms"] is None
    assert raw["fiq"]["measurement_errors"]["latency"] == "RuntimeError: latency exploded"
    assert raw["drq"]["metrics"] is None and raw["drq"]["measurement_errors"]["metrics"] == "ValueError: metrics exploded"
    assert raw["float"]["measurement_errors"] == {}
    log = (folder / "run.log").read_text()
    assert "Traceback" in log and "latency exploded" in log and "analyzer exploded" in log
    assert "fiq: latency not measured: RuntimeError: latency exploded" in progress
    assert "drq: analyzer not measured: RuntimeError: analyzer exploded" in progress


@pytest.mark.slow
def test_findings_warn_and_never_call_a_missing_value_the_same(broken, mlp_files):
    from reporter.batch.config import Gate
    from reporter.pipeline.conclude import check_gate as check

    folder = broken[0]
    report = load_report(folder)
    found = report.findings
    texts = {n.text for n in found.warnings if n.code == "measurement_failed"}
    assert texts == {"FIQ: latency not measured: RuntimeError: latency exploded",
                     "FIQ: operators and tensor types not measured: KeyError: 'no such tensor type'",
                     "DRQ: TFLite Analyzer text not measured: RuntimeError: analyzer exploded",
                     "DRQ: accuracy and metrics not measured: ValueError: metrics exploded"}
    fiq, drq = found.variant("fiq"), found.variant("drq")
    assert fiq.latency_ms is None and fiq.latency_ratio is None and not fiq.slower
    assert fiq.not_measured["latency"] == "RuntimeError: latency exploded"
    # FIQ's metrics were measured: its direction is the exact McNemar test of its .tflite against float's, run here
    import numpy as np
    from scipy.stats import binomtest

    from independent import predictions

    arrays = np.load(mlp_files[1])
    right = {name: predictions((folder / f"{name}.tflite").read_bytes(), arrays["x"]) == arrays["y"]
             for name in ("float", "fiq")}
    float_only, fiq_only = int(np.sum(right["float"] & ~right["fiq"])), int(np.sum(~right["float"] & right["fiq"]))
    p = binomtest(fiq_only, float_only + fiq_only, 0.5).pvalue if float_only + fiq_only else 1.0
    expected = "same" if p >= 0.05 else ("worse" if float_only > fiq_only else "better")
    assert fiq.accuracy == pytest.approx(float(np.mean(right["fiq"])), abs=1e-12)
    assert fiq.direction == expected, (float_only, fiq_only, p)
    assert drq.ok and drq.direction == "not_measured" and drq.accuracy is None
    assert "accuracy not measured (ValueError: metrics exploded)" in drq.verdict
    # The gate on a variant whose accuracy was not measured fails, and says why.
    gate = check(report, Gate(max_accuracy_drop=0.5, variant="drq"))
    assert not gate.passed and "drq accuracy was not measured (ValueError: metrics exploded)" in gate.message
    assert check(report, Gate(max_accuracy_drop=0.9, variant="fiq")).passed
    assert (folder / "summary.md").is_file()


def _panel_row(html: str, label: str) -> str:
    table = html.split('<table id="headline">', 1)[1].split("</table>", 1)[0]
    return next(row for row in table.split("<tr") if f">{label}</th>" in row)


@pytest.mark.slow
def test_html_and_markdown_say_not_measured_with_the_error(broken):
    folder, _ = broken
    html = (folder / "report.html").read_text()
    md = (folder / "summary.md").read_text()
    fiq_row = _panel_row(html, "FIQ")
    assert "not measured" in fiq_row and "same" not in fiq_row and "slower" not in fiq_row
    drq_row = _panel_row(html, "DRQ")
    assert drq_row.count("not measured") >= 2 and "ValueError: metrics exploded" in drq_row
    assert "FIQ: latency not measured: RuntimeError: latency exploded" in html
    assert "DRQ: TFLite Analyzer text not measured: RuntimeError: analyzer exploded" in html
    assert "Analyzer text not measured: RuntimeError: analyzer exploded" in html.split('id="appendix"')[1]
    assert 'href="analyzer_drq.txt"' not in html
    # The structure tables: FIQ's latency cells say so, not a dash or a zero.
    size_latency = html.split('<table id="size-latency">', 1)[1].split("</table>", 1)[0]
    latency_row = next(r for r in size_latency.split("<tr>") if "Latency, median" in r)
    assert latency_row.count("not measured") == 1
    # FIQ's tensor counts are not zeros.
    tensors = html.split('<table id="tensor-types">', 1)[1].split("</table>", 1)[0]
    assert tensors.count("not measured") == 6  # one per row, in FIQ's column only
    before_after = html.split('<table id="before-after">', 1)[1].split("</table>", 1)[0]
    assert next(r for r in before_after.split("<tr>") if "Float32 tensors" in r).count("not measured") == 1
    metrics = html.split('<table id="metrics">', 1)[1].split("</table>", 1)[0]
    accuracy_row = next(r for r in metrics.split("<tr>") if "<th>Accuracy</th>" in r)
    assert accuracy_row.count("not measured") == 1
    # Markdown: the panel and the size/latency table, then the warnings with the errors.
    assert re.search(r"^\| FIQ \| [^|]+ \| not measured \|$", md, re.M), md
    assert re.search(r"^\| DRQ \| not measured \| +\| not measured: ValueError: metrics exploded \|", md, re.M), md
    assert "> **Warning:** FIQ: latency not measured: RuntimeError: latency exploded" in md
    assert "> **Warning:** DRQ: accuracy and metrics not measured: ValueError: metrics exploded" in md


@pytest.mark.slow
def test_batch_index_row_says_not_measured(broken):
    from reporter.batch.worker import Outcome
    from reporter.batch.index import IndexView, _row

    folder, _ = broken
    row = _row(folder.parent, Outcome(folder.name, "ok", folder.name), None)
    assert row.not_measured == {"drq": {"analyzer": "RuntimeError: analyzer exploded",
                                        "metrics": "ValueError: metrics exploded"},
                                "fiq": {"ops": "KeyError: 'no such tensor type'",
                                        "latency": "RuntimeError: latency exploded"}}
    assert "drq" not in row.accuracy and "fiq" not in row.latency_ms
    cells = next(c for c in IndexView(_FakeIndex([row])).rows)
    assert cells["accuracy"][1] == "not measured"  # float, drq, fiq, selective
    assert cells["accuracy"][2] != "not measured" and cells["latency"] == "not measured"


class _FakeIndex:
    def __init__(self, rows):
        self.rows = rows
        self.gate = None


@pytest.mark.slow
def test_latency_runs_zero_skips_timing_cleanly(mlp_files, tmp_path):
    from reporter.pipeline.stages import RunSettings, run

    model, data = mlp_files
    report, folder = run(RunSettings(model=str(model), data=str(data), out=str(tmp_path), variants=("float",),
                                     latency_runs=0, formats=("json", "md"), quiet=True))
    flt = report.variant("float")
    assert flt.ok and flt.latency_ms is None and flt.measurement_errors == {} and flt.metrics is not None
    assert [n.code for n in report.findings.warnings if n.code == "measurement_failed"] == []
    assert "latency_skipped" in [n.code for n in report.findings.hints]
    md = (folder / "summary.md").read_text()
    assert re.search(r"^\| Float \| [^|]+ \| not measured \|$", md, re.M), md
    assert md.count("latency runs were set to 0") == 1, md  # said once, as a note, not again under the table


def test_latency_needs_a_run():
    from reporter.measure import evaluate

    with pytest.raises(ValueError, match="at least one timed run"):
        evaluate.latency_ms(b"", None, runs=0)


def test_old_version_3_files_without_the_new_fields_still_read():
    from reporter.model.report import SCHEMA_VERSION, Report
    from reporter.pipeline.conclude import with_findings

    data = json.loads((HERE / "fixtures" / "report_v3.json").read_text())
    for v in data["variants"]:
        del v["measurement_errors"]
    for v in data["findings"]["variants"]:
        del v["not_measured"]
    data["recommendation"]["selective"].pop("measurement_errors")
    data["recommendation"]["rule"]["selective"].pop("measurement_errors")
    report = with_findings(Report.from_dict(data))
    assert report.schema_version == SCHEMA_VERSION
    assert report.variants and all(v.measurement_errors == {} for v in report.variants)
    assert report.findings.variants and all(f.not_measured == {} for f in report.findings.variants)


def _fixture_data(fixture_report) -> dict:
    """tests/fixtures/report.json as a fresh dict, to edit before building a Report from it."""
    return json.loads(fixture_report.to_json())


def test_float_without_metrics_renders_and_nothing_is_compared(fixture_report):
    """The reference's accuracy missing: no gap, no comparison, every format still renders."""
    from reporter.render import formats as render
    from reporter.model.report import Report
    from reporter.pipeline.conclude import with_findings

    data = _fixture_data(fixture_report)
    data.pop("findings")
    flt = data["variants"][0]
    assert flt["name"] == "float"
    flt["metrics"] = None
    flt["measurement_errors"] = {"metrics": "ValueError: metrics exploded"}
    report = with_findings(Report.from_dict(data))
    found = report.findings
    assert found.gap.status == "not_measurable" and "float's accuracy was not measured" in found.gap.reason
    assert found.variant("float").direction == "not_measured"
    assert found.variant("fiq").vs_float is None
    html = render.render(report, "html").decode()
    md = render.render(report, "md").decode()
    assert "Float: accuracy and metrics not measured: ValueError: metrics exploded" in html
    assert "float not measured" in html and "float not measured" in md
    assert "| Float | not measured |" in md


def test_recommended_model_without_metrics_is_not_called_a_fix(fixture_report):
    from reporter.render import formats as render
    from reporter.model.report import Report
    from reporter.pipeline.conclude import with_findings

    data = _fixture_data(fixture_report)
    data.pop("findings")
    sel = data["recommendation"]["selective"]
    sel["metrics"], sel["accuracy_gap_recovered"] = None, None
    sel["measurement_errors"] = {"metrics": "ValueError: metrics exploded"}
    report = with_findings(Report.from_dict(data))
    found = report.findings
    assert found.fix.status == "measured" and found.fix.share_of_gap is None
    assert "the recommended model's accuracy was not measured: ValueError: metrics exploded" in " ".join(found.headline)
    assert "wins back" not in " ".join(found.headline)
    md = render.render(report, "md").decode()
    assert "| FIQ with 2 ops in float | not measured |" in md  # not measured, so not the model to ship (not bold)
    render.render(report, "html")


# --- batch: one model timed at a time ------------------------------------------------------------------
class _CountingLock:
    def __init__(self):
        self.entered = self.exited = 0
        self.held = False

    def __enter__(self):
        assert not self.held
        self.entered += 1
        self.held = True
        return self

    def __exit__(self, *exc):
        self.exited += 1
        self.held = False
        return False


@pytest.mark.slow
def test_latency_is_timed_under_the_timing_lock(broken, monkeypatch):
    from reporter.measure import evaluate, runtime

    model = (broken[0] / "float.tflite").read_bytes()
    lock = _CountingLock()
    invokes = []
    real = runtime.load

    class Watched:
        def __init__(self, it):
            self._it = it

        def __getattr__(self, name):
            return getattr(self._it, name)

        def invoke(self):
            invokes.append(lock.held)
            self._it.invoke()

    monkeypatch.setattr(runtime, "load", lambda *a, **k: Watched(real(*a, **k)))
    import numpy as np

    sample = np.zeros((1, 30), np.float32)
    assert evaluate.set_timing_lock(lock) is None
    try:
        median, p90, runs = evaluate.latency_ms(model, sample, runs=4, warmup=2)
    finally:
        assert evaluate.set_timing_lock(None) is lock
    assert runs == 4 and median > 0
    assert (lock.entered, lock.exited, lock.held) == (1, 1, False)
    assert invokes == [True] * 6  # warm-up and timed invokes, all under the lock
    evaluate.latency_ms(model, sample, runs=2, warmup=1)  # no lock set: a single `run` times freely
    assert lock.entered == 1


def test_file_lock_excludes_other_processes(tmp_path):
    from reporter.batch.worker import FileLock

    path = tmp_path / ".timing.lock"
    probe = ("import fcntl, os, sys\n"
             "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)\n")
    with FileLock(path):
        assert subprocess.run([sys.executable, "-c", probe, str(path)]).returncode == 3
    assert subprocess.run([sys.executable, "-c", probe, str(path)]).returncode == 0


def test_batch_note_on_how_latency_was_timed(fixture_report):
    from reporter.batch.runner import latency_timing_note
    from reporter.model.report import Report
    from reporter.pipeline.conclude import with_findings
    from reporter.render.view import ReportView

    note = latency_timing_note(3)
    assert note.startswith("one model timed at a time across 3 worker processes")
    data = _fixture_data(fixture_report)
    data["settings"]["latency_timing"] = note
    legend = dict(ReportView(with_findings(Report.from_dict(data))).legend)
    assert legend["Latency"].endswith("One model timed at a time across 3 worker processes; the other workers'"
                                      " conversions and evaluations may run on other cores meanwhile.")
