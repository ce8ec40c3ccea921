"""A full disk or a file-size limit is named as what it is, with the file, never as a broken model."""

import errno
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from reporter.core.errors import storage_problem


def test_storage_problems_are_read_from_os_errors_and_tensorflow_text():
    full = storage_problem(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/out/m/report.pdf"))
    assert str(full) == "/out/m/report.pdf: cannot write: no space left on the device"
    # TensorFlow's file writer reports "PATH; File too large" in its own exception type, the OSError lost
    tf_like = RuntimeError(f"/out/.m.partial-1/sm/saved_model.pb.tmp9; {os.strerror(errno.EFBIG)}")
    wrapped = TypeError("'NoneType' object is not callable")
    wrapped.__context__ = tf_like  # what a failed fallback raises while handling the export's error
    assert str(storage_problem(wrapped)).startswith("/out/.m.partial-1/sm/saved_model.pb.tmp9: cannot write: file too large")
    assert storage_problem(ValueError("shapes differ")) is None


def test_a_path_inside_the_staging_folder_is_named_by_the_report_folder_it_becomes(tmp_path, monkeypatch):
    from reporter.core.files import as_the_user_knows, staged_folder

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    with staged_folder(tmp_path / "reports", "digits") as folder:
        internal = folder / ".savedmodel-x1" / "saved_model.pb.tmp9"
        assert as_the_user_knows(str(internal), "reports", "digits") == str(Path("reports") / "digits")
        assert as_the_user_knows(str(folder / "report.pdf"), "reports", "digits") == str(
            Path("reports") / "digits" / "report.pdf")
    assert as_the_user_knows(str(tmp_path / "tmp" / "q-1" / "m.tflite"), "reports", "digits") == (
        f"the temporary folder {tmp_path / 'tmp'} (TMPDIR)")
    assert as_the_user_knows("/elsewhere/x.npz", "reports", "digits") == "/elsewhere/x.npz"


def _limit_file_size(kib: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (kib * 1024, kib * 1024))
    return apply


@pytest.mark.slow
@pytest.mark.parametrize("kib", [40, 120])  # 40 KiB: the SavedModel export fails; 120 KiB: a report file does
def test_a_file_size_limit_is_named_and_leaves_nothing(mlp_files, tmp_path, kib):
    model, data = mlp_files
    out = tmp_path / "out"
    out.mkdir()
    (out / "earlier.txt").write_text("the user's file")
    proc = subprocess.run(
        [sys.executable, "-m", "reporter", "run", str(model), "--data", str(data), "--out", str(out),
         "--variants", "float,drq,fiq", "--quiet"],
        capture_output=True, text=True, preexec_fn=_limit_file_size(kib), timeout=300)
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("quant-report: error:")]
    assert len(lines) == 1, proc.stderr
    assert "cannot write: file too large" in lines[0]
    assert "does not convert" not in lines[0] and "NoneType" not in lines[0]
    # named by the folder the user gave (the report folder it would have become), not by an internal temp file
    assert lines[0].startswith(f"quant-report: error: {out / 'breast_cancer_mlp'}"), lines[0]
    assert ".partial-" not in lines[0] and ".tmp" not in lines[0], lines[0]
    assert sorted(p.name for p in out.iterdir()) == ["earlier.txt"]  # no half-written report, the user's file kept
