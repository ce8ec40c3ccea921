"""Benchmark: the three-model demo batch with --jobs 1 and --jobs 2, and on a local Ray instance.

Run by hand (not in CI):  python benchmarks/bench_batch.py [--repeats 3] [--ray]

Prints the wall time of each run, the median per job count, the speed-up (aim: >= 1.6x on 2 cores)
and each worker's peak resident memory, as recorded in index.json. With --ray it also times
`--executor ray --jobs 2` (a local Ray started by the run) in the same alternation and prints Ray's
overhead against the local pool, in all and per model.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ray", action="store_true", help="also time --executor ray --jobs 2")
    args = parser.parse_args()

    from reporter.pipeline import demo

    entries = []
    for name in demo.MODELS:
        model, data = demo.ensure_model(name, say=lambda t: print(t, file=sys.stderr))
        entries.append(f'[[model]]\nname = "{name}"\npath = "{model}"\ndata = "{data}"\n')
    times = {1: [], 2: [], "ray": []}
    kinds = (1, 2, "ray") if args.ray else (1, 2)
    memory = {}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "demo.toml"
        config.write_text("\n".join(entries))
        for r in range(args.repeats):
            for jobs in kinds:
                out = Path(tmp) / f"out-{jobs}-{r}"
                extra = ["--jobs", "2", "--executor", "ray"] if jobs == "ray" else ["--jobs", str(jobs)]
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "reporter", "batch", str(config), "--out", str(out),
                                "--quiet", *extra], check=True)
                times[jobs].append(time.perf_counter() - t0)
                print(f"run {r + 1}, --jobs {jobs}: {times[jobs][-1]:.1f} s", flush=True)
                for row in json.loads((out / "index.json").read_text())["rows"]:
                    memory.setdefault((row["name"], jobs), []).append(row["peak_rss_mb"])
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print()
    print(f"median of {args.repeats}: --jobs 1 {one:.1f} s, --jobs 2 {two:.1f} s, speed-up {one / two:.2f}x")
    if args.ray:
        on_ray = statistics.median(times["ray"])
        n = len(demo.MODELS)
        print(f"median of {args.repeats}: --executor ray --jobs 2 {on_ray:.1f} s: {on_ray - two:+.1f} s against the"
              f" local pool with --jobs 2 ({(on_ray - two) / n:+.2f} s per model, Ray's start-up included)")
    print("peak memory per worker (MB, median):")
    for name in demo.MODELS:
        print(f"  {name:<20} jobs 1: {statistics.median(memory[(name, 1)]):7.0f}   "
              f"jobs 2: {statistics.median(memory[(name, 2)]):7.0f}"
              + (f"   ray: {statistics.median(memory[(name, 'ray')]):7.0f}" if args.ray else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
