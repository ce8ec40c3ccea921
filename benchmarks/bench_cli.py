"""How fast the command line refuses bad input: the checks run before TensorFlow is imported.

    python benchmarks/bench_cli.py [--runs 5]

Times `quant-report run` (a fresh interpreter each time, as a user runs it) on a missing model, CSV
data, a file given as --out and a mistyped flag, and for comparison the time to import TensorFlow;
prints the median of each and the exit code. Target: every bad-input case under one second.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _time(argv, cwd, runs):
    times, code = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        code = proc.returncode
    return statistics.median(times), code, (proc.stderr.strip().splitlines() or [""])[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cli = [sys.executable, "-m", "reporter"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "model.keras").write_bytes(b"PK\x03\x04")
        (tmp / "data.csv").write_text("x,y\n1,0\n")
        (tmp / "afile").write_text("")
        import numpy as np

        np.savez(tmp / "data.npz", x=np.zeros((2, 3), np.float32), y=np.array([0, 1]))
        cases = {
            "missing model": cli + ["run", "nosuch.keras", "--data", "data.csv"],
            "CSV as DATA": cli + ["run", "model.keras", "--data", "data.csv"],
            "a file as --out": cli + ["run", "model.keras", "--data", "data.npz", "--out", "afile/x"],
            "mistyped flag": cli + ["run", "model.keras", "--data", "d.npz", "--calibraton-samples", "5"],
            "import tensorflow (reference)": [sys.executable, "-c", "import tensorflow"],
        }
        print(f"{'case':32} {'median s':>9} {'exit':>5}  last line")
        for name, argv in cases.items():
            median, code, last = _time(argv, tmp, args.runs)
            print(f"{name:32} {median:9.2f} {code:5d}  {last[:90]}")


if __name__ == "__main__":
    main()
