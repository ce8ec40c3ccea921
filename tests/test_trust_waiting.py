"""A data function that takes long is seen waiting ("still waiting (N s)") and, with --data-timeout, stopped
with one line naming it (issue 47, point 6)."""

import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from reporter.core import waiting
from reporter.core.errors import InputError
from reporter.inputs.usercode import call_function

ROOT = Path(__file__).resolve().parents[1]
MUST = "a data function must return its arrays"

SLOW = '''
import time
import numpy as np

def slow():
    time.sleep(float(open(__file__ + ".seconds").read()))
    return {"x": np.zeros((4, 3), np.float32), "y": np.zeros(4, np.int64)}

def forever():
    while True:
        time.sleep(0.05)

def stubborn():
    """Swallows whatever stops it, then carries on."""
    try:
        while True:
            time.sleep(0.05)
    except BaseException:
        time.sleep(0.3)
        return {"x": np.zeros((4, 3), np.float32), "y": np.zeros(4, np.int64)}
'''


@pytest.fixture
def code_dir(tmp_path):
    (tmp_path / "userdata.py").write_text(SLOW)
    (tmp_path / "userdata.py.seconds").write_text("0.8")
    return tmp_path


def test_a_slow_data_function_is_seen_waiting_and_its_data_kept(code_dir, monkeypatch):
    monkeypatch.setattr(waiting, "STILL_WAITING_EVERY", 0.2)
    lines = []
    result = call_function("userdata:slow", str(code_dir), "data", MUST, say=lines.append, timeout=30)
    assert np.array_equal(result["x"], np.zeros((4, 3)))
    assert "quant-report waits up to 30 s, --data-timeout" in lines[0]
    waits = [line for line in lines if line.startswith("still waiting")]
    assert len(waits) >= 2, lines
    assert all(re.fullmatch(r"still waiting for the data function userdata:slow \(\d+ s\)", w) for w in waits), waits
    time.sleep(0.5)
    assert len(lines) == 1 + len(waits)  # the line stops with the call


@pytest.mark.parametrize("function", ["forever", "stubborn"])
def test_a_data_function_past_its_limit_is_stopped_with_one_line(code_dir, function):
    import signal

    before = signal.getsignal(signal.SIGALRM)
    t0 = time.monotonic()
    with pytest.raises(InputError) as caught:
        call_function(f"userdata:{function}", str(code_dir), "data", MUST, say=None, timeout=0.5)
    assert time.monotonic() - t0 < 5
    assert str(caught.value) == f"userdata:{function}: the data function did not return within 0.5 s (--data-timeout)"
    assert signal.getsignal(signal.SIGALRM) == before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.slow
def test_run_with_data_timeout_fails_in_one_line_and_writes_nothing(mlp_files, code_dir, tmp_path):
    model, _ = mlp_files
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "reporter", "run", str(model), "--data", "userdata:forever", "--data-timeout", "1",
         "--out", str(out)], cwd=code_dir, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "quant-report: error: userdata:forever: the data function did not return within 1 s (--data-timeout)")
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_a_data_timeout_that_is_not_a_positive_number_is_a_usage_error(value, capsys):
    from reporter.cli import main

    assert main(["run", "m.keras", "--data", "userdata:slow", "--data-timeout", value, "--out", "o"]) == 2
    assert "--data-timeout" in capsys.readouterr().err
