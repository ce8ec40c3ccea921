"""Data and model files are checked from their headers before they are read (an .npz bomb, a huge .keras
config, a FIFO, a truncated or lying .npy each get their own true line), and the user's data function and
metric module run behind a wall (their sys.exit is one error naming them, exit 1)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conftest import one_error_line
from reporter.core.errors import InputError
from reporter.inputs import data_loading, headers, model_loading, usercode

ROOT = Path(__file__).resolve().parents[1]
BUDGET = headers.BUDGET_ENV


def _bomb(path: Path, samples: int, features: int = 30) -> Path:
    """An .npz whose `x` (zeros, float32) decompresses to samples * features * 4 bytes from a file about a
    thousand times smaller, written in parts (the test itself never holds the array)."""
    chunk = bytes(1 << 24)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, shape, descr, itemsize in (("x", (samples, features), "<f4", 4), ("y", (samples,), "<i8", 8)):
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array_header_1_0(member, {"shape": shape, "fortran_order": False, "descr": descr})
                left = int(np.prod(shape)) * itemsize
                while left > 0:
                    member.write(chunk[:min(left, len(chunk))])
                    left -= len(chunk)
    return path


def _in_child(script: str, cwd: Path, **env) -> dict:
    """Runs `script` in a fresh Python (no TensorFlow) and returns the JSON it prints last."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                         timeout=120, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


READ_IN_CHILD = """
    import json, sys
    from reporter.core.errors import InputError
    from reporter.inputs import data_loading
    try:
        data_loading.load_data(sys.argv[-1] if len(sys.argv) > 1 else "DATA", 100)
        error = None
    except InputError as exc:
        error = str(exc)
    # VmHWM: this process image's own peak. ru_maxrss would also count the forking test worker's memory (Linux keeps
    # it across exec), which is large once the worker has loaded TensorFlow for an earlier test.
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"error": error, "peak_mb": int(hwm.split()[1]) / 1024}))
"""


def test_an_npz_bomb_is_refused_from_its_header_without_decompressing_it(tmp_path):
    """A 1 GB `x` in a 1 MB file: one line naming the file, the entry and the sizes, and the reading process
    never grows by the array (it used to decompress it whole: 21.7 s and 3.4 GB for a 2.7 GB `x`)."""
    bomb = _bomb(tmp_path / "bomb.npz", 8_500_000)
    assert bomb.stat().st_size < 20_000_000
    found = _in_child(READ_IN_CHILD.replace('"DATA"', repr(str(bomb))), tmp_path, **{BUDGET: "300000000"})
    error = found["error"] or ""
    assert error.startswith(f"{bomb}: 'x' would take 1.0 GB in memory (shape (8500000, 30), float32)"), error
    assert "over the 300.0 MB this run may use" in error and "folder of .npy files" in error
    assert found["peak_mb"] < 400, found  # reading the array would take over 1,000 MB


def test_an_npz_over_the_budget_is_one_line_from_the_cli(tmp_path, mlp_files, run_cli, capfd, monkeypatch):
    model, _ = mlp_files
    bomb = tmp_path / "big.npz"
    np.savez_compressed(bomb, x=np.zeros((20_000, 30), np.float32), y=np.zeros(20_000, np.int64))
    monkeypatch.setenv(BUDGET, "1000000")
    out = tmp_path / "out"
    code = run_cli(model, bomb, out)
    line = one_error_line(code, capfd.readouterr().err, out)
    assert f"{bomb}: 'x' would take 2.4 MB in memory (shape (20000, 30), float32), over the 1.0 MB" in line, line
    assert BUDGET in line


def test_the_data_are_checked_against_the_model_before_they_are_read(tmp_path, mlp_files, monkeypatch):
    """x with 31 features for a 30-input model: the shape error, from the header, before the budget (so before
    decompressing); and no array is read at all."""
    model = model_loading.load_model(mlp_files[0])
    data = tmp_path / "wide.npz"
    np.savez_compressed(data, x=np.zeros((20_000, 31), np.float32), y=np.zeros(20_000, np.int64))
    monkeypatch.setenv(BUDGET, "1000")
    monkeypatch.setattr(np.lib.format, "read_array", lambda *a, **k: pytest.fail("an array was read"))
    with pytest.raises(InputError) as caught:
        data_loading.load_data(str(data), 100, model=model)
    assert str(caught.value) == f"{data}: 'x' has shape (31,) per sample but the model {mlp_files[0].name} expects (30)"


def test_headers_disagreeing_are_refused_before_anything_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(np.lib.format, "read_array", lambda *a, **k: pytest.fail("an array was read"))
    np.savez(tmp_path / "counts.npz", x=np.zeros((5, 3), np.float32), y=np.zeros(4, np.int64))
    with pytest.raises(InputError, match=r"counts.npz: 'x' has 5 samples but 'y' has 4$"):
        data_loading.load_data(str(tmp_path / "counts.npz"), 2)
    np.savez(tmp_path / "calib.npz", x=np.zeros((5, 3), np.float32), y=np.zeros(5, np.int64),
             x_calib=np.zeros((2, 4), np.float32))
    with pytest.raises(InputError, match=r"'x_calib' has shape \(4,\) per sample but the evaluation data have \(3,\)"):
        data_loading.load_data(str(tmp_path / "calib.npz"), 2)


def _npy_folder(tmp_path: Path, x_bytes: bytes) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    np.save(folder / "y.npy", np.zeros(5, np.int64))
    (folder / "x.npy").write_bytes(x_bytes)
    return folder


def _npy_bytes(a, **kw) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, a, **kw)
    return buffer.getvalue()


GOOD = _npy_bytes(np.zeros((5, 3), np.float32))


@pytest.mark.parametrize("x_bytes,message", [
    (GOOD[:-12], "truncated (or its header is wrong): the header declares shape (5, 3), float32 (60 bytes), but the"
                 " file holds 48 bytes of data"),
    (GOOD.replace(b"(5, 3)", b"(9, 3)"), "truncated (or its header is wrong): the header declares shape (9, 3), float32"
                                         " (108 bytes), but the file holds 60 bytes"),
    (b"x,y\n1,2\n" * 20, "not an .npy file (it does not begin with numpy's .npy signature)"),
    (GOOD.replace(b"'descr'", b"'dexcr'"), "its .npy header is damaged (Header does not contain the correct keys"),
    (GOOD.replace(b"(5, 3)", b"(5,-3)"), "its .npy header is damaged (negative dimension in shape (5, -3))"),
    (_npy_bytes(np.array([{"a": 1}] * 5, dtype=object), allow_pickle=True), "holds Python objects (saved with pickle)"),
], ids=["truncated", "lying-header", "not-npy", "damaged-header", "negative-shape", "objects"])
def test_each_broken_npy_file_gets_its_own_true_message(tmp_path, x_bytes, message):
    folder = _npy_folder(tmp_path, x_bytes)
    with pytest.raises(InputError) as caught:
        data_loading.load_data(str(folder), 2)
    assert str(caught.value).startswith(f"{folder / 'x.npy'}: {message}"), str(caught.value)
    if "pickle" not in message:
        assert "pickle" not in str(caught.value)


def test_an_npz_entry_that_is_not_an_array_or_is_cut_short_is_named(tmp_path):
    with zipfile.ZipFile(tmp_path / "text.npz", "w") as archive:
        archive.writestr("x.npy", "hello, not an array")
        archive.writestr("y.npy", _npy_bytes(np.zeros(5, np.int64)))
    with pytest.raises(InputError, match=r"text.npz: array 'x': not an .npy file"):
        data_loading.load_data(str(tmp_path / "text.npz"), 2)
    with zipfile.ZipFile(tmp_path / "short.npz", "w") as archive:
        archive.writestr("x.npy", GOOD[:-12])
        archive.writestr("y.npy", _npy_bytes(np.zeros(5, np.int64)))
    with pytest.raises(InputError, match=r"short.npz: array 'x': truncated \(or its header is wrong\)"):
        data_loading.load_data(str(tmp_path / "short.npz"), 2)


FIFO_CLI = """
    import json, subprocess, sys
    run = subprocess.run([sys.executable, "-m", "reporter", "run", MODEL, "--data", DATA, "--out", "out", "--quiet"],
                         capture_output=True, text=True, timeout=60)
    print(json.dumps({"code": run.returncode, "err": run.stderr}))
"""


@pytest.mark.parametrize("where", ["x.npy in a folder", "DATA itself"])
def test_a_fifo_as_data_is_refused_without_blocking(tmp_path, mlp_files, where):
    """A FIFO would block the first read forever: only regular files are opened (timeouts here stop a hang
    from hanging the suite; they time nothing)."""
    if where == "DATA itself":
        data = fifo = tmp_path / "data.npz"
    else:
        data = tmp_path / "data"
        data.mkdir()
        np.save(data / "y.npy", np.zeros(5, np.int64))
        fifo = data / "x.npy"
    os.mkfifo(fifo)
    found = _in_child(FIFO_CLI.replace("MODEL", repr(str(mlp_files[0]))).replace("DATA", repr(str(data))), tmp_path)
    line = one_error_line(found["code"], found["err"], tmp_path / "out")
    assert line == f"quant-report: error: {fifo}: a FIFO (named pipe): quant-report reads data only from regular files"
    if where == "x.npy in a folder":  # and load_data itself, for callers that skip the CLI's checks
        found = _in_child(READ_IN_CHILD.replace('"DATA"', repr(str(data))), tmp_path)
        assert found["error"].startswith(f"{fifo}: a FIFO"), found


def _huge_config_keras(source: Path, target: Path, extra: dict) -> Path:
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as copy:
        for info in original.infolist():
            copy.writestr(info.filename, original.read(info) + extra.get(info.filename, b""))
        for name, content in extra.items():
            if name not in original.namelist():
                copy.writestr(name, content)
    return target


@pytest.mark.parametrize("member,content,words", [
    ("config.json", b" " * (65 * 1024 * 1024), "its config.json is 68.2 MB (a Keras model's is a few hundred KB; refused above 64.0 MB)"),
    ("assets/blob.bin", bytes(20_000_000), "its member assets/blob.bin declares 20.0 MB but stores"),
], ids=["huge-config", "bomb-member"])
def test_a_keras_archive_too_large_inside_is_refused_before_keras_parses_it(tmp_path, mlp_files, monkeypatch,
                                                                           member, content, words):
    import keras

    monkeypatch.setenv(BUDGET, "10000000")  # the bomb floor follows the budget when that is lower
    bad = _huge_config_keras(mlp_files[0], tmp_path / "model.keras", {member: content})
    assert bad.stat().st_size < 2_000_000
    monkeypatch.setattr(keras.saving, "load_model", lambda *a, **k: pytest.fail("Keras parsed the archive"))
    with pytest.raises(InputError) as caught:
        model_loading.load_model(bad)
    assert str(caught.value).startswith(f"{bad}: {words}"), str(caught.value)


def test_a_memory_error_while_reading_the_data_names_the_data(tmp_path, mlp_files, run_cli, capfd, monkeypatch):
    """It used to read "model.keras: unexpected MemoryError"."""
    def no_memory(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(np.lib.format, "read_array", no_memory)
    out = tmp_path / "out"
    code = run_cli(mlp_files[0], mlp_files[1], out)
    line = one_error_line(code, capfd.readouterr().err, out)
    assert line.startswith(f"quant-report: error: {mlp_files[1]}: array 'x' "), line
    assert "does not fit in memory" in line and str(mlp_files[0]) not in line


EXIT_MODULE = """
import sys

def load():
    sys.exit(3)

def interrupt():
    raise KeyboardInterrupt

def nothing():
    sys.exit(0)
"""


@pytest.mark.parametrize("function,said", [("load", "called sys.exit(3)"), ("nothing", "called sys.exit(0)"),
                                           ("interrupt", "raised KeyboardInterrupt")])
def test_a_data_function_that_exits_is_one_error_naming_it(tmp_path, mlp_files, run_cli, capfd, monkeypatch,
                                                           function, said):
    """sys.exit(3) used to end quant-report with exit 3 (a failed gate) and sys.exit(0) with exit 0 and nothing
    written."""
    (tmp_path / "exiting_data.py").write_text(EXIT_MODULE)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    code = run_cli(mlp_files[0], f"exiting_data:{function}", out)
    line = one_error_line(code, capfd.readouterr().err, out)
    assert line == (f"quant-report: error: exiting_data:{function}: the data function {said}; a data function must"
                    " return its arrays (a mapping with 'x' and 'y')")


def test_data_sys_exit_is_announced_then_refused(tmp_path, mlp_files, run_cli, capfd):
    """`--data sys:exit`: any callable is behind the wall; the call is announced first, so a data function
    that never returns is seen being waited for."""
    out = tmp_path / "out"
    code = run_cli(mlp_files[0], "sys:exit", out, name="m", quiet=False)
    lines = [x for x in capfd.readouterr().err.splitlines() if x.strip()]
    assert code == 1, lines
    calling = next(i for i, x in enumerate(lines) if x.startswith("[m] calling the data function sys:exit"))
    assert lines[-1] == ("quant-report: error: sys:exit: the data function called sys.exit(); a data function must"
                         " return its arrays (a mapping with 'x' and 'y')")
    assert calling == len(lines) - 2, lines
    assert not out.exists() or not any(out.rglob("*"))


def test_a_metric_module_that_exits_while_loading_is_one_error(tmp_path):
    from reporter.inputs import metric

    (tmp_path / "exiting_metric.py").write_text("import sys\nsys.exit(2)\ndef f(y_true, y_pred):\n    return 1.0\n")
    spec = f"{tmp_path / 'exiting_metric.py'}:f"
    with pytest.raises(InputError) as caught:
        metric.load(spec)
    assert str(caught.value) == (f"{spec}: the metric module {tmp_path / 'exiting_metric.py'} called sys.exit(2);"
                                 " loading a metric module must only define f(y_true, y_pred)")


def test_a_real_interrupt_passes_through_the_wall():
    """Ctrl-C (or a SIGTERM handler's exception) while user code runs is not the user's code exiting."""
    # Python's own Ctrl-C handler, as in a terminal (a library an earlier test in this worker loaded, such as Ray's,
    # may have left SIGINT ignored)
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with usercode.wall("mod:f", "the data function", "it must return"):
                signal.raise_signal(signal.SIGINT)
                for _ in range(1000):  # the handler runs between bytecodes
                    pass
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, saved)
