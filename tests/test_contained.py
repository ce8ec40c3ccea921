"""Native crashes contained (issue 34, point 2): the calibration runs in a spawned child, so a segfault there
fails FIQ, not the run; the report is still written with float and DRQ measured."""

import json
import os
import signal

import numpy as np
import pytest

import independent
from conftest import run_cli
from reporter.convert import contained


def test_signal_names():
    assert contained.signal_name(-int(signal.SIGSEGV)) == "SIGSEGV"
    assert contained.signal_name(-int(signal.SIGABRT)) == "SIGABRT"
    assert contained.signal_name(1) == "exit code 1"


def test_child_crash_is_named_and_error_is_not_a_crash(monkeypatch):
    monkeypatch.setenv(contained.CRASH_ENV, "boom")  # the documented test hook, for a step named "boom"
    child = contained.Child()
    try:
        assert child.call("ok", os.getpid) != os.getpid()  # it runs in another process
        with pytest.raises(contained.ContainedError, match="ValueError"):
            child.call("ok", int, "not a number")
        assert child.call("ok", int, "7") == 7  # an ordinary error leaves the child usable
        with pytest.raises(contained.NativeCrash) as crash:
            child.call("boom", os.getpid)
        assert crash.value.how == "SIGSEGV"
        assert "boom crashed (SIGSEGV)" in str(crash.value)
        assert crash.value.tail[0].startswith("Fatal Python error: Segmentation fault")
        assert crash.value.tail[1].startswith("contained.py:")  # the innermost frame, its file's name only
        with pytest.raises(contained.NativeCrash):  # dead: every later call says so
            child.call("ok", os.getpid)
    finally:
        child.close()


def _own_priority():
    import threading

    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_work_behind_the_run_takes_the_lowest_priority_and_leaves_the_child_as_it_was():
    """LiteRT Quantizer's calibration runs in the child `behind` the search (issue 67): on a thread of nice 19, its
    result and its errors passed back as any step's; the child's own steps keep their priority."""
    child = contained.Child()
    try:
        before = child.call("ok", _own_priority)
        assert child.call("behind", contained.behind, _own_priority) == contained.LOWEST_PRIORITY > before
        assert child.call("ok", _own_priority) == before
        with pytest.raises(contained.ContainedError, match="ValueError"):
            child.call("behind", contained.behind, int, "not a number")
        assert child.call("behind", contained.behind, int, "7") == 7
    finally:
        child.close()


@pytest.fixture(scope="module")
def crashed_run(mlp_files, tmp_path_factory):
    model, data = mlp_files
    out = tmp_path_factory.mktemp("crashed")
    mp = pytest.MonkeyPatch()
    mp.setenv(contained.CRASH_ENV, contained.CALIBRATE)
    try:
        code = run_cli(model, data, out, "--variants", "float,drq,fiq,int16x8", name="mlp", latency_runs=2)
    finally:
        mp.undo()
    return code, out, model, data


@pytest.mark.slow
def test_calibration_crash_still_writes_the_report(crashed_run):
    code, out, _, data = crashed_run
    assert code == 0  # README: a failed variant is recorded, the run reports (no gate set)
    folder = out / "mlp"
    report = json.loads((folder / "report.json").read_text())
    by_name = {v["name"]: v for v in report["variants"]}
    fiq = by_name["fiq"]
    assert fiq["status"] == "failed"
    assert "calibration crashed (SIGSEGV)" in fiq["error"]
    said = " ".join(report["findings"]["headline"])  # in the user's terms: no exception class name in a sentence
    assert "calibration crashed (SIGSEGV)" in said and "NativeCrash" not in said, said
    assert not (folder / "fiq.tflite").exists()
    assert "Fatal Python error: Segmentation fault" in (folder / "run.log").read_text()  # the child's log kept
    assert [p.name for p in out.iterdir()] == ["mlp"]  # no .mlp.partial-* staging folder left
    arrays = np.load(data)
    assert report["debugger_error"] and "SIGSEGV" in report["debugger_error"]  # the debugger needs the calibration
    # float and DRQ measured; 16x8 (TF's converter calibrates it too) converted in a child of its own; each right
    # against LiteRT + scikit-learn on the written file
    for name in ("float", "drq", "int16x8"):
        assert by_name[name]["status"] == "ok"
        truth = independent.accuracy((folder / f"{name}.tflite").read_bytes(), arrays["x"], arrays["y"])
        assert by_name[name]["metrics"]["accuracy"] == pytest.approx(truth, abs=1e-9)


@pytest.mark.slow
def test_calibrating_in_the_child_gives_the_same_fiq_bytes(crashed_run):
    """The FIQ model calibrated in the child is byte for byte the one calibrated in this process."""
    from reporter.convert.quantize import FiqQuantizer

    _, out, _, data = crashed_run
    float_model = (out / "mlp" / "float.tflite").read_bytes()
    x_calib = np.load(data)["x_calib"].astype(np.float32)
    here = FiqQuantizer(None, x_calib, float_model=float_model)
    child = contained.Child()
    try:
        there = FiqQuantizer(None, x_calib, float_model=float_model, child=child)
    finally:
        child.close()
    assert here.calibrated_from == there.calibrated_from == "float model"
    assert there.quantize([]) == here.quantize([])


@pytest.mark.slow
def test_the_debugger_runs_in_the_child_and_its_crash_is_contained(crashed_run, monkeypatch):
    """The debugger's per-layer table from the child equals the one made in this process; a debugger that dies
    of SIGSEGV there raises NativeCrash naming it (the run then records the debugger as failed)."""
    from reporter.convert.quantize import FiqQuantizer
    from reporter.debug import debugger

    _, out, _, data = crashed_run
    float_model = (out / "mlp" / "float.tflite").read_bytes()
    x_calib = np.load(data)["x_calib"].astype(np.float32)
    here = FiqQuantizer(None, x_calib, float_model=float_model)
    layers_here, csv_here = debugger.layer_statistics(here, x_calib)
    monkeypatch.setenv(contained.CRASH_ENV, contained.DEBUG)
    child = contained.Child()
    try:
        there = FiqQuantizer(None, x_calib, float_model=float_model, child=child)
        assert there.child is child
        with pytest.raises(contained.NativeCrash, match=r"debugger crashed \(SIGSEGV\)"):
            debugger.layer_statistics(there, x_calib)
        assert there.child is None  # dead: nothing more is sent there
    finally:
        child.close()
    monkeypatch.delenv(contained.CRASH_ENV)
    child = contained.Child()
    try:
        there = FiqQuantizer(None, x_calib, float_model=float_model, child=child)
        layers_there, csv_there = debugger.layer_statistics(there, x_calib)
        # The whole-model view by a helper (the run's side process; here the child's own), the local one in the
        # child: the same table; a helper that fails hands its view back to the child.
        started = []
        beside = debugger.Beside(child.helper(), lambda: started.append(1))
        _, csv_beside = debugger.layer_statistics(there, x_calib, beside)
        _, csv_handed_back = debugger.layer_statistics(there, x_calib, debugger.Beside(_FailingHelper()))
    finally:
        child.close()
    assert csv_there == csv_here and len(layers_there) == len(layers_here) > 0
    assert csv_beside == csv_here and csv_handed_back == csv_here and started == [1]


class _FailingHelper:
    """A helper whose every call fails (a side process that died)."""

    def call(self, fn, *args):
        import concurrent.futures

        future = concurrent.futures.Future()
        future.set_exception(RuntimeError("the side process died"))
        return future


def test_a_dead_batch_workers_log_keeps_what_its_run_wrote(tmp_path):
    """A worker killed by a signal (outside a contained step): its run wrote into the staging folder's run.log;
    the model's log in the batch keeps that text."""
    from reporter.batch.worker import Job, outcome

    staged = tmp_path / ".gru.partial-abcd1234"
    staged.mkdir()
    (staged / "run.log").write_text("converted float\nFatal Python error: Segmentation fault\n")
    log = tmp_path / "logs" / "gru.log"
    log.parent.mkdir()
    log.write_text("")
    job = Job(name="gru", model="m.keras", data="d.npz", out=str(tmp_path), shown=("m", "d"), options={},
              fingerprint="", log=str(log), config_dir=str(tmp_path))
    result = outcome(job, None, -int(signal.SIGSEGV), "calibrate", tmp_path)
    assert result.status == "failed" and "SIGSEGV" in result.error
    assert result.log == "logs/gru.log"
    assert "Fatal Python error: Segmentation fault" in log.read_text()
