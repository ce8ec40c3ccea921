"""Benchmark: the whole `quant-report run` against the bare seed-notebook calls, as whole processes.

Run by hand (not in CI):
    python benchmarks/bench_speed.py [--repeats 3] [--models breast_cancer_mlp,mobilenet_offset]

For a small model (the demo's breast-cancer MLP) and a 155-layer MobileNetV2 (the tests' collapse
fixture), it alternates, --repeats times:
  * bare: a fresh Python process making the seed notebook's TensorFlow calls (convert float, DRQ and
    FIQ; evaluate each one sample per invoke; run the debugger; convert and evaluate the selective
    model), as in benchmarks/bench_pipeline.py;
  * tool: a fresh `quant-report run` process with every format (html, pdf, md, json).
It prints medians of the wall times, the ratio tool/bare measured in the same run, the tool's
per-stage times (from report.json) and each process's peak memory. Aims (issue 11): at most 0.6x on
the 100+-layer model and 1.0x on the MLP; peak memory no higher than before (about 1.1 GB).
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

BARE = (
    "import sys; sys.path.insert(0, {bench!r}); from pathlib import Path; "
    "from bench_pipeline import bare_notebook; bare_notebook(Path({model!r}), Path({data!r}))"
)


def _models(names) -> dict:
    from reporter.run import demo

    found = {}
    for name in names:
        if name in demo.MODELS:
            found[name] = demo.ensure_model(name, say=lambda _: None)
        else:
            from collapse_fixtures import ensure

            found[name] = ensure(name, demo.cache_dir().parent)
    return found


def _timed(argv, src=None) -> tuple[float, float]:
    """Wall seconds and peak memory (MB) of one child process (`src`: run that checkout's reporter)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **({"PYTHONPATH": str(src)} if src else {})}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=src or None, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(map(str, argv))}\n{proc.stderr.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default="breast_cancer_mlp,mobilenet_offset")
    parser.add_argument("--also-formats", default="json,md",
                        help="also time the tool with only these formats ('' to skip)")
    parser.add_argument("--baseline-src", help="another checkout (git worktree add DIR COMMIT) timed as 'before'")
    args = parser.parse_args()
    models = _models(args.models.split(","))
    results = {name: {"bare": [], "tool": [], "bare_mb": [], "tool_mb": [], "stages": [], "before": [], "some": []}
               for name in models}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for name, (model, data) in models.items():
                code = BARE.format(bench=str(ROOT / "benchmarks"), model=str(model), data=str(data))
                seconds, mb = _timed([sys.executable, "-c", code])
                results[name]["bare"].append(seconds)
                results[name]["bare_mb"].append(mb)
                out = Path(tmp) / f"run{r}"
                seconds, mb = _timed([sys.executable, "-m", "reporter", "run", str(model), "--data", str(data),
                                      "--out", str(out), "--name", name, "--quiet"])
                results[name]["tool"].append(seconds)
                results[name]["tool_mb"].append(mb)
                results[name]["stages"].append(json.loads((out / name / "report.json").read_text())["timings_s"])
                if args.also_formats:
                    some, _ = _timed([sys.executable, "-m", "reporter", "run", str(model), "--data", str(data),
                                      "--out", str(Path(tmp) / f"some{r}"), "--name", name, "--quiet",
                                      "--formats", args.also_formats])
                    results[name]["some"].append(some)
                if args.baseline_src:
                    before, _ = _timed([sys.executable, "-m", "reporter", "run", str(model), "--data", str(data),
                                        "--out", str(Path(tmp) / f"before{r}"), "--name", name, "--quiet"],
                                       src=args.baseline_src)
                    results[name]["before"].append(before)
                print(f"run {r + 1}/{args.repeats} {name}: bare {results[name]['bare'][-1]:.1f} s,"
                      f" tool {seconds:.1f} s", file=sys.stderr)

    med = statistics.median
    print(f"medians of {args.repeats} alternating runs, whole processes, all formats; seconds")
    print(f"{'model':<20}{'bare':>8}{'tool':>8}{'ratio':>8}{'bare MB':>9}{'tool MB':>9}   tool stages")
    for name, res in results.items():
        keys = list(res["stages"][0])
        stages = ", ".join(f"{k} {med(s.get(k, 0.0) for s in res['stages']):.2f}" for k in keys)
        b, t = med(res["bare"]), med(res["tool"])
        print(f"{name:<20}{b:8.2f}{t:8.2f}{t / b:7.2f}x{med(res['bare_mb']):9.0f}{med(res['tool_mb']):9.0f}   {stages}")
        if res["some"]:
            print(f"{'':<20}only {args.also_formats}: {med(res['some']):.2f} s ({med(res['some']) / b:.2f}x bare)")
        if res["before"]:
            print(f"{'':<20}before this change: {med(res['before']):.2f} s ({med(res['before']) / b:.2f}x bare)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
