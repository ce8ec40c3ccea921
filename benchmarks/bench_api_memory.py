"""Benchmark: memory of reading a tf.data.Dataset through the Python API (issue 37) as the dataset grows.

Run by hand (not in CI):
    python benchmarks/bench_api_memory.py [--sizes 10000,40000,160000] [--repeats 3]

For each size it starts fresh Python processes (TensorFlow imported first) that read a dataset of that many
28x28x1 float32 samples with integer labels, made by a generator (so that the dataset itself holds nothing), in
batches of 256:
  * api: reporter.inputs.materialize.data_source, what `reporter.run(model, dataset)` does with it (batches streamed
    into memory-mapped .npy files);
  * naive: the batches gathered in a list and concatenated (what reading "all at once" costs).
It prints, per size, the median peak resident memory added by the read (ru_maxrss after minus RSS before, MB) and
the data's own size. Aim: the api column stays flat (one batch) while the data grow 16x.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, resource, sys, tempfile
from pathlib import Path
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import tensorflow as tf
sys.path.insert(0, {root!r})
from reporter.inputs import materialize

n, mode = {n}, {mode!r}

def samples():
    rng = np.random.default_rng(0)
    for i in range(n):
        yield rng.random((28, 28, 1), dtype=np.float32), np.int64(i % 10)

spec = (tf.TensorSpec((28, 28, 1), tf.float32), tf.TensorSpec((), tf.int64))
dataset = tf.data.Dataset.from_generator(samples, output_signature=spec).batch(256)
for _ in dataset.take(1):  # the pipeline built and warmed before the baseline
    pass

def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0

before = rss_mb()
peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
with tempfile.TemporaryDirectory() as folder:
    if mode == "api":
        materialize.data_source(dataset, Path(folder))
    else:
        xs, ys = [], []
        for x, y in dataset.as_numpy_iterator():
            xs.append(x); ys.append(y)
        x, y = np.concatenate(xs), np.concatenate(ys)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
print(json.dumps({{"added_mb": max(peak, peak_before) - before, "data_mb": n * (28 * 28 * 4 + 8) / 2**20}}))
"""


def measure(n: int, mode: str) -> dict:
    code = CHILD.format(root=str(ROOT), n=n, mode=mode)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,40000,160000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'samples':>8} {'data MB':>8} {'api: added MB':>14} {'naive: added MB':>16}   (medians of {args.repeats})")
    for n in sizes:
        runs = {mode: [] for mode in ("api", "naive")}
        data_mb = 0.0
        for _ in range(args.repeats):
            for mode in runs:  # alternated, in one run
                found = measure(n, mode)
                runs[mode].append(found["added_mb"])
                data_mb = found["data_mb"]
        print(f"{n:>8,} {data_mb:>8.1f} {statistics.median(runs['api']):>14.1f} {statistics.median(runs['naive']):>16.1f}")


if __name__ == "__main__":
    main()
