"""Benchmark: what the search costs and what it wins, fixture by fixture: the demo's breast-cancer MLP,
the four collapse fixtures (one a 150+-layer MobileNetV2), the region fixtures (tests/region_fixtures.py,
when that module exists) and an EfficientNetB0 whose FIQ loss is spread over many layers.

Run by hand (not in CI):
    python benchmarks/bench_search.py [--repeats 3] [--baseline-src DIR] [--models a,b,...]

For each model it runs whole `quant-report run` processes (all formats), alternating, --repeats times:
  * search: the default, `--recommend search`;
  * rule: `--recommend rule` (calibrated once too, but no search);
  * baseline (with --baseline-src): the same command from another checkout of quant-report, e.g.
    `git worktree add /tmp/qr-before <commit>` for the version before the search.
It prints medians: whole-run seconds, the search's evaluations, seconds per candidate, search seconds
and the search's share of the run, the share of the float-to-FIQ accuracy gap the recommendation wins
back (and what the rmse/scale rule would), and the recommendation's summary; then one table over all
models. Aims: the search adds under 10 % to the run, and the whole run is no slower than before.
Fixtures not yet cached are built first (the EfficientNet takes about 2 minutes on 2 cores).
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


def _region_fixtures():
    """tests/region_fixtures.py, or None when it does not exist (yet)."""
    try:
        import region_fixtures
    except ModuleNotFoundError as e:
        if e.name != "region_fixtures":
            raise
        return None
    return region_fixtures


def available() -> dict:
    """Fixture name -> a function of the cache root returning (model, data), in the table's order."""
    import collapse_fixtures
    import efficientnet_fixture

    from reporter.pipeline import demo

    found = {"breast_cancer_mlp": lambda cache: demo.ensure_model("breast_cancer_mlp", say=lambda _: None)}
    for module in (collapse_fixtures, _region_fixtures(), efficientnet_fixture):
        for name in getattr(module, "FIXTURES", ()):
            found[name] = lambda cache, module=module, name=name: module.ensure(name, cache)
    return found


def run_once(src: Path, model: Path, data: Path, extra: list[str]) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "PYTHONPATH": str(src), "TF_CPP_MIN_LOG_LEVEL": "2"}
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "reporter", "run", str(model), "--data", str(data), "--out", out,
                        "--name", "m", "--quiet", *extra], check=True, env=env, cwd=src)
        seconds = time.perf_counter() - t0
        report = json.loads((Path(out) / "m" / "report.json").read_text())
    return seconds, report


def _pct(value) -> str:
    return "-" if value is None else f"{value:.0%}"


def bench(name: str, model: Path, data: Path, setups: dict, repeats: int) -> dict:
    """Runs every setup `repeats` times on one model, prints its block and returns its table row."""
    times: dict[str, list] = {k: [] for k in setups}
    searches, totals, search_report = [], [], {}
    for _ in range(repeats):
        for key, (src, extra) in setups.items():
            seconds, report = run_once(src, model, data, extra)
            times[key].append(seconds)
            if key == "search":
                search_report = report
                totals.append(sum((report.get("timings_s") or {}).values()))
                rec = report.get("recommendation") or {}
                if rec.get("search"):
                    searches.append(rec["search"])
    rec = search_report.get("recommendation") or {}
    run_s = statistics.median(times["search"])
    row = {"model": name, "layers": len(search_report.get("layers", [])), "run_s": run_s,
           "timings_s": statistics.median(totals) if totals else None,
           "recovered": (rec.get("selective") or {}).get("accuracy_gap_recovered"),
           "rule_recovered": (rec.get("rule") or {}).get("accuracy_gap_recovered"),
           "float_layers": len(rec.get("denylisted_nodes") or []), "method": rec.get("method", "-"),
           "gap": (rec.get("gap") or {}).get("fiq_drop"), "gap_status": (rec.get("gap") or {}).get("status", ""),
           "gap_reason": (rec.get("gap") or {}).get("reason", ""),
           "summary": rec.get("summary") or "(no recommendation)",
           "evaluations": None, "per_candidate_s": None, "search_s": None, "share": None}
    print(f"\n{name}: {row['layers']} debugged layers")
    for key, values in times.items():
        print(f"  whole run, {key:8s}: median {statistics.median(values):6.1f} s  ({', '.join(f'{v:.1f}' for v in values)})")
    if row["timings_s"] is not None:
        stages = search_report.get("timings_s") or {}
        top = ", ".join(f"{k} {v:.1f}" for k, v in sorted(stages.items(), key=lambda kv: -kv[1])[:5])
        print(f"  stages (timings_s, last search run): {row['timings_s']:.1f} s in all; {top}")
    if searches:
        med = {k: statistics.median(s[k] for s in searches) for k in ("evaluations", "seconds", "seconds_per_candidate")}
        row.update(evaluations=med["evaluations"], per_candidate_s=med["seconds_per_candidate"],
                   search_s=med["seconds"], share=med["seconds"] / run_s)
        print(f"  search: {med['evaluations']:.0f} evaluations, {med['seconds_per_candidate'] * 1000:.0f} ms per"
              f" candidate, {med['seconds']:.2f} s = {row['share']:.1%} of the whole run")
    else:
        print("  search: not run (no gap)")
    fiq_drop = "" if row["gap"] is None else f"FIQ {-row['gap'] * 100:+.1f} points against float; "
    print(f"  float-to-FIQ gap: {fiq_drop}{row['gap_status'] or 'not reported'}"
          f"{': ' + row['gap_reason'] if row['gap_reason'] else ''}")
    print(f"  gap recovered: {_pct(row['recovered'])} with {row['float_layers']} float layers ({row['method']});"
          f" the rule would recover {_pct(row['rule_recovered'])}")
    print(f"  summary: {row['summary']}")
    if "baseline" in times:
        ratio = run_s / statistics.median(times["baseline"])
        print(f"  search run / baseline run: {ratio:.2f}x")
    return row


def table(rows: list[dict]) -> None:
    def num(value, fmt):
        return "-" if value is None else format(value, fmt)

    header = (f"{'model':24s} {'layers':>6s} {'evals':>5s} {'s/cand':>7s} {'search s':>8s} {'run s':>7s}"
              f" {'stages s':>8s} {'share':>6s} {'gap pts':>7s} {'recovered':>9s} {'rule':>5s} {'float':>5s}")
    print("\n" + header + "\n" + "-" * len(header))
    for r in rows:
        print(f"{r['model']:24s} {r['layers']:6d} {num(r['evaluations'], '5.0f')} {num(r['per_candidate_s'], '7.3f')}"
              f" {num(r['search_s'], '8.2f')} {r['run_s']:7.1f} {num(r['timings_s'], '8.1f')}"
              f" {num(r['share'], '6.1%')} {num(None if r['gap'] is None else r['gap'] * 100, '7.1f')}"
              f" {_pct(r['recovered']):>9s} {_pct(r['rule_recovered']):>5s}"
              f" {r['float_layers']:5d}")
    print("\nlayers: debugged layers; evals, s/cand, search s: the search's evaluations, seconds per candidate and"
          " seconds; run s: wall seconds of the whole `quant-report run` (median); stages s: the sum of its"
          " timings_s; share: search s / run s; gap pts: accuracy points FIQ loses against float;"
          " recovered (- when no selective model was recommended): share of the float-to-FIQ accuracy gap the"
          " recommendation wins back; rule: what the rmse/scale rule would; float: layers kept in float.")
    for r in rows:
        print(f"  {r['model']}: {r['summary']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline-src", type=Path, help="another checkout of quant-report to compare with")
    parser.add_argument("--models", help="comma-separated fixture names (default: all); --models list shows them")
    args = parser.parse_args()
    cache = Path(os.environ.get("QUANT_REPORT_CACHE") or Path.home() / ".cache" / "quant-report")
    os.environ["QUANT_REPORT_CACHE"] = str(cache)
    fixtures = available()
    if args.models == "list":
        print("\n".join(fixtures))
        return 0
    names = [n.strip() for n in args.models.split(",") if n.strip()] if args.models else list(fixtures)
    unknown = [n for n in names if n not in fixtures]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(fixtures)}")
    setups = {"search": (ROOT, ["--recommend", "search"]), "rule": (ROOT, ["--recommend", "rule"])}
    if args.baseline_src:
        setups["baseline"] = (args.baseline_src.resolve(), [])
    rows = []
    for name in names:
        t0 = time.perf_counter()
        model, data = fixtures[name](cache)
        if time.perf_counter() - t0 > 1:
            print(f"\n{name}: built in {time.perf_counter() - t0:.0f} s ({model.parent})")
        rows.append(bench(name, model, data, setups, args.repeats))
    table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
