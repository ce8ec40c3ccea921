"""Benchmark: what the search costs, on the demo's breast-cancer MLP and on a 150+-layer MobileNetV2.

Run by hand (not in CI):
    python benchmarks/bench_search.py [--repeats 3] [--baseline-src DIR]

For each model it runs whole `quant-report run` processes (all formats), alternating, --repeats times:
  * search: the default, `--recommend search`;
  * rule: `--recommend rule` (calibrated once too, but no search);
  * baseline (with --baseline-src): the same command from another checkout of quant-report, e.g.
    `git worktree add /tmp/qr-before <commit>` for the version before the search.
It prints medians: whole-run seconds, the search's evaluations, seconds per candidate, search seconds
and the search's share of the run. Aims: the search adds under 10 % to the run, and the whole run is
no slower than before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def models(cache: Path) -> dict:
    from collapse_fixtures import ensure

    from reporter.run import demo

    return {
        "breast_cancer_mlp": demo.ensure_model("breast_cancer_mlp", say=lambda _: None),
        "mobilenet_offset": ensure("mobilenet_offset", cache),
    }


def run_once(src: Path, model: Path, data: Path, extra: list[str]) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "PYTHONPATH": str(src), "TF_CPP_MIN_LOG_LEVEL": "2"}
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "reporter", "run", str(model), "--data", str(data), "--out", out,
                        "--name", "m", "--quiet", *extra], check=True, env=env, cwd=src)
        seconds = time.perf_counter() - t0
        report = json.loads((Path(out) / "m" / "report.json").read_text())
    return seconds, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-src", type=Path, help="another checkout of quant-report to compare with")
    args = parser.parse_args()
    cache = Path(os.environ.get("QUANT_REPORT_CACHE") or Path.home() / ".cache" / "quant-report")
    os.environ["QUANT_REPORT_CACHE"] = str(cache)
    setups = {"search": (ROOT, ["--recommend", "search"]), "rule": (ROOT, ["--recommend", "rule"])}
    if args.baseline_src:
        setups["baseline"] = (args.baseline_src.resolve(), [])
    for name, (model, data) in models(cache).items():
        times: dict[str, list] = {k: [] for k in setups}
        searches = []
        for _ in range(args.repeats):
            for key, (src, extra) in setups.items():
                seconds, report = run_once(src, model, data, extra)
                times[key].append(seconds)
                rec = report.get("recommendation") or {}
                if key == "search" and rec.get("search"):
                    searches.append(rec["search"])
        print(f"\n{name}: {len(report.get('layers', []))} debugged layers")
        for key, values in times.items():
            print(f"  whole run, {key:8s}: median {statistics.median(values):6.1f} s  ({', '.join(f'{v:.1f}' for v in values)})")
        if searches:
            med = {k: statistics.median(s[k] for s in searches) for k in ("evaluations", "seconds", "seconds_per_candidate")}
            run_s = statistics.median(times["search"])
            print(f"  search: {med['evaluations']:.0f} evaluations, {med['seconds_per_candidate'] * 1000:.0f} ms per"
                  f" candidate, {med['seconds']:.2f} s = {med['seconds'] / run_s:.1%} of the whole run")
        else:
            print("  search: not run (no gap)")
        if "baseline" in times:
            ratio = statistics.median(times["search"]) / statistics.median(times["baseline"])
            print(f"  search run / baseline run: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
