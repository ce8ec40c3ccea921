"""Benchmark: the search on a loss spread over a 300-op model (issue 35): how much of the run it takes, and the
whole run against the bare seed-notebook calls.

Run by hand (not in CI):
    python benchmarks/bench_spread.py [--repeats 3] [--baseline-src DIR] [--formats html,pdf,md,json]

On tests/efficientnet_fixture.py's efficientnet_digits (a Keras EfficientNetB0, ~300 TFLite ops, FIQ loses a few
points spread over many layers; built and cached first, about 2 minutes) it alternates, --repeats times:
  * bare: a fresh Python process making the seed notebook's TensorFlow calls (benchmarks/bench_pipeline.py's
    bare_notebook: convert float, DRQ and FIQ, evaluate each one sample per invoke, run the debugger, convert
    and evaluate the selective model), as benchmarks/bench_speed.py times them;
  * tool: a fresh `quant-report run` process (every format unless --formats);
  * before (with --baseline-src): the same command from another checkout, e.g. `git archive <commit> | tar -x
    -C DIR`, for the version before a change.
It prints medians: the whole run's seconds, the search's own seconds (recommendation.search.seconds) and the
"search" stage (timings_s, which also scores the steps on the evaluation data), their share of the run, the
search's evaluations, the run against the bare calls, and the stages that take the time.
Aims (issue 35): the search at most a fifth of the run; the run at most 0.7x the bare calls.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench_speed import BARE, _timed  # noqa: E402 - the bare calls and the child-process timing, shared

SEARCH_SHARE_AIM = 0.2
RATIO_AIM = 0.7


def tool_run(model: Path, data: Path, out: Path, formats: str, src=None) -> dict:
    """One `quant-report run`: its wall seconds and what report.json says of the search and the stages."""
    argv = [sys.executable, "-m", "reporter", "run", str(model), "--data", str(data), "--out", str(out),
            "--name", "m", "--quiet"] + (["--formats", formats] if formats else [])
    seconds = _timed(argv, src)[0]
    report = json.loads((out / "m" / "report.json").read_text())
    rec = report.get("recommendation") or {}
    search = rec.get("search") or {}
    sel = search.get("selection_data") or {}
    return {"run_s": seconds, "timings_s": report.get("timings_s") or {}, "layers": len(report.get("layers", [])),
            "search_s": search.get("seconds"), "evaluations": search.get("evaluations"),
            "spread": search.get("spread"), "stop_reason": search.get("stop_reason", ""),
            "float_layers": len(rec.get("denylisted_nodes") or []), "selection_samples": sel.get("num_samples"),
            "grown_from": sel.get("grown_from"), "gap": (rec.get("gap") or {}).get("fiq_drop"),
            "gap_status": (rec.get("gap") or {}).get("status")}


def _med(runs: list[dict], key: str):
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def summary(label: str, runs: list[dict], bare: float) -> None:
    run_s, search_s = _med(runs, "run_s"), _med(runs, "search_s")
    stage = statistics.median(r["timings_s"].get("search", 0.0) for r in runs)
    last = runs[-1]
    each = ", ".join(f"{r['run_s']:.1f}" for r in runs)
    print(f"\n{label}: {last['layers']} debugged layers; whole runs {each} s")
    print(f"  run            {run_s:7.1f} s   {run_s / bare:5.2f}x the bare calls ({bare:.1f} s)"
          f"  [aim <= {RATIO_AIM}x]")
    if search_s is not None:
        print(f"  search         {search_s:7.1f} s   {search_s / run_s:5.1%} of the run"
              f"  [aim <= {SEARCH_SHARE_AIM:.0%}]; {_med(runs, 'evaluations'):.0f} evaluations")
    print(f"  search stage   {stage:7.1f} s   {stage / run_s:5.1%} of the run (the search and its steps on the"
          " evaluation data)")
    keys = list(last["timings_s"])
    stages = {k: statistics.median(r["timings_s"].get(k, 0.0) for r in runs) for k in keys}
    top = sorted(stages.items(), key=lambda kv: -kv[1])
    print(f"  stages (median s, {sum(stages.values()):.1f} in all): " + ", ".join(f"{k} {v:.1f}" for k, v in top))
    print(f"  outside the stages (start-up, imports, rendering, writing): {run_s - sum(stages.values()):.1f} s")
    gap = "" if last["gap"] is None else f"FIQ {-last['gap'] * 100:+.1f} points against float, "
    print(f"  gap: {gap}{last['gap_status']}; {last['float_layers']} layer(s) kept in float;"
          f" spread: {last['spread']}; selection samples: {last['selection_samples']}"
          + (f" (grown from {last['grown_from']})" if last["grown_from"] else ""))
    print(f"  the search stopped: {last['stop_reason']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--src", type=Path, default=ROOT, help="the checkout of quant-report timed (default: this one)")
    parser.add_argument("--baseline-src", type=Path, help="another checkout of quant-report, timed as 'before'")
    parser.add_argument("--formats", default="", help="the tool's --formats (default: every format)")
    parser.add_argument("--no-bare", action="store_true", help="skip the bare calls (the ratio is then not shown)")
    args = parser.parse_args()
    import efficientnet_fixture

    cache = Path(os.environ.get("QUANT_REPORT_CACHE") or Path.home() / ".cache" / "quant-report")
    t0 = time.perf_counter()
    model, data = efficientnet_fixture.ensure("efficientnet_digits", cache)
    if time.perf_counter() - t0 > 1:
        print(f"efficientnet_digits built in {time.perf_counter() - t0:.0f} s ({model.parent})")
    bare, tool, before = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            if not args.no_bare:
                code = BARE.format(bench=str(ROOT / "benchmarks"), model=str(model), data=str(data))
                bare.append(_timed([sys.executable, "-c", code])[0])
            tool.append(tool_run(model, data, Path(tmp) / f"run{r}", args.formats, args.src.resolve()))
            if args.baseline_src:
                before.append(tool_run(model, data, Path(tmp) / f"before{r}", args.formats,
                                       args.baseline_src.resolve()))
            print(f"repeat {r + 1}/{args.repeats}: bare {bare[-1] if bare else float('nan'):.1f} s, tool"
                  f" {tool[-1]['run_s']:.1f} s" + (f", before {before[-1]['run_s']:.1f} s" if before else ""),
                  file=sys.stderr, flush=True)
    b = statistics.median(bare) if bare else float("nan")
    print(f"medians of {args.repeats} alternating runs, whole processes"
          f" ({args.formats or 'every format'}); bare seed calls {b:.1f} s")
    summary(f"tool ({args.src})", tool, b)
    if before:
        summary(f"before ({args.baseline_src})", before, b)
    return 0


if __name__ == "__main__":
    sys.exit(main())
