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
per-stage times (from report.json) and each process's peak memory. Aims (issue 26): at most 0.5x on
the 100+-layer model with every format, 1.0x on the MLP with html,md,json.

Then (unless --no-eval) each variant's evaluation time in the tool (reporter.measure.evaluate.predict)
against the bare batched LiteRT invoke on the same data (aim: at most 1.2x), and (unless --memory '') the
peak anonymous memory of `quant-report run` on a folder of memory-mapped .npy files of 10k, 50k and 100k
32x32x3 images (aim: flat in the number of samples).
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
    from reporter.pipeline import demo

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
    parser.add_argument("--no-eval", action="store_true", help="skip the evaluation-against-bare-invoke table")
    parser.add_argument("--memory", default="10000,50000,100000",
                        help="sample counts for the peak-memory table ('' to skip)")
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

    _report_runs(args, results)
    if not args.no_eval:
        _evaluation_vs_bare(models, args.repeats)
    if args.memory:
        _memory_table([int(n) for n in args.memory.split(",")])
    return 0


def _report_runs(args, results):
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


def _bare_batched(model: bytes, x) -> None:
    """The bare LiteRT call: one interpreter, the whole set in one invoke (both cores)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model, num_threads=os.cpu_count())
    detail = it.get_input_details()[0]
    it.resize_tensor_input(detail["index"], list(x.shape))
    it.allocate_tensors()
    it.set_tensor(detail["index"], x.astype(detail["dtype"]))
    it.invoke()
    it.get_tensor(it.get_output_details()[0]["index"])


def _evaluation_vs_bare(models, repeats):
    """Each variant's evaluation (the tool's batched predict) against the bare batched invoke, alternating."""
    import numpy as np

    from reporter.measure import evaluate

    print("\nevaluation per variant: the tool's predict against one bare batched invoke, same data; medians, seconds")
    print(f"{'model':<20}{'variant':<10}{'samples':>8}{'bare':>8}{'tool':>8}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (model, data) in models.items():
            out = Path(tmp) / name
            subprocess.run([sys.executable, "-m", "reporter", "run", str(model), "--data", str(data), "--out", str(out),
                            "--name", name, "--quiet", "--formats", "json", "--latency-runs", "0"],
                           check=True, capture_output=True)
            x = np.load(data)["x"].astype(np.float32)
            for variant in ("float", "drq", "fiq"):
                tflite = (out / name / f"{variant}.tflite").read_bytes()
                bare, tool = [], []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    _bare_batched(tflite, x)
                    bare.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    evaluate.predict(tflite, x)
                    tool.append(time.perf_counter() - t0)
                b, t = statistics.median(bare), statistics.median(tool)
                print(f"{name:<20}{variant:<10}{len(x):>8}{b:8.3f}{t:8.3f}{t / b:7.2f}x")


MEMORY_MODEL = """
import sys, keras
inp = keras.Input((32, 32, 3))
h = keras.layers.Conv2D(16, 3, activation="relu")(inp)
h = keras.layers.MaxPooling2D()(h)
h = keras.layers.Conv2D(32, 3, activation="relu")(h)
h = keras.layers.GlobalAveragePooling2D()(h)
keras.Model(inp, keras.layers.Dense(10, activation="softmax")(h)).save(sys.argv[1])
"""


def _peak_anon_mb(argv) -> tuple[float, float]:
    """Wall seconds and the peak anonymous resident memory (RssAnon, sampled every 20 ms) of a child process:
    pages of a memory-mapped data file do not count, the arrays the tool makes do."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peak = 0
    while proc.poll() is None:
        try:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.02)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{proc.stderr.read().decode()[-2000:]}")
    return time.perf_counter() - t0, peak / 1024.0


def _memory_table(counts):
    """Peak anonymous memory of `run` on memory-mapped .npy folders of growing size."""
    import numpy as np

    print("\npeak anonymous memory of quant-report run on a folder of .npy files (x.npy float32 32x32x3)")
    print(f"{'samples':>9}{'x.npy MB':>10}{'peak MB':>9}{'wall s':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "cnn.keras"
        subprocess.run([sys.executable, "-c", MEMORY_MODEL, str(model)], check=True, capture_output=True)
        rng = np.random.default_rng(0)
        for n in counts:
            folder = Path(tmp) / f"data{n}"
            folder.mkdir()
            x = np.lib.format.open_memmap(folder / "x.npy", mode="w+", dtype=np.float32, shape=(n, 32, 32, 3))
            for start in range(0, n, 5000):
                x[start:start + 5000] = rng.random((min(5000, n - start), 32, 32, 3), dtype=np.float32)
            x.flush()
            del x
            np.save(folder / "y.npy", rng.integers(0, 10, n))
            seconds, peak = _peak_anon_mb([sys.executable, "-m", "reporter", "run", str(model), "--data", str(folder),
                                           "--out", str(Path(tmp) / "out"), "--name", f"n{n}", "--quiet",
                                           "--formats", "json", "--latency-runs", "0"])
            print(f"{n:>9}{(folder / 'x.npy').stat().st_size / 2**20:10.0f}{peak:9.0f}{seconds:8.1f}")


if __name__ == "__main__":
    sys.exit(main())
