"""Benchmark: `quant-report run` against the bare TensorFlow calls of the seed notebook.

Run by hand (not in CI):  python benchmarks/bench_pipeline.py [--repeats 3]

For each demo model it times
  * bare: the notebook's calls only: convert float, DRQ and FIQ; evaluate each one sample per invoke;
    run the debugger and dump its statistics; convert and evaluate the selective model;
  * tool: the whole `run` (which also saves files, runs the Analyzer and measures latency),
    with its per-stage timings;
  * evaluation alone: batched LiteRT evaluation against the notebook's per-sample loop.
Figures are medians over --repeats runs. Aims: tool within 1.3x of bare; batched >= 5x faster.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def bare_notebook(model_path: Path, data_path: Path) -> float:
    """The seed notebook's workflow, with no extras; returns seconds."""
    import numpy as np
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    t0 = time.perf_counter()
    if model_path.suffix == ".h5":
        import tf_keras

        model = tf_keras.models.load_model(model_path, compile=False)
    else:
        import keras

        model = keras.saving.load_model(model_path, compile=False)
    d = np.load(data_path)
    x, y, x_calib = d["x"].astype(np.float32), d["y"], d["x_calib"][:100].astype(np.float32)

    def rep():
        for i in range(len(x_calib)):
            yield [x_calib[i : i + 1]]

    def evaluate(content):
        it = Interpreter(model_content=content)
        it.allocate_tensors()
        i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
        preds = []
        for k in range(len(x)):
            it.reset_all_variables()
            it.set_tensor(i, x[k : k + 1])
            it.invoke()
            preds.append(it.get_tensor(o).argmax())
        return float(np.mean(np.array(preds) == y))

    def converter(optimize, calibrate):
        c = tf.lite.TFLiteConverter.from_keras_model(model)
        if optimize:
            c.optimizations = [tf.lite.Optimize.DEFAULT]
        if calibrate:
            c.representative_dataset = rep
        return c

    for optimize, calibrate in ((False, False), (True, False), (True, True)):
        evaluate(converter(optimize, calibrate).convert())
    debugger = tf.lite.experimental.QuantizationDebugger(converter=converter(True, True), debug_dataset=rep)
    debugger.run()
    buf = io.StringIO()
    debugger.layer_statistics_dump(buf)
    import pandas as pd

    stats = pd.read_csv(io.StringIO(buf.getvalue()))
    stats["rmse/scale"] = np.sqrt(stats["mean_squared_error"]) / stats["scale"]
    suspects = list(stats[stats["rmse/scale"] > 0.7]["tensor_name"])
    if suspects:
        options = tf.lite.experimental.QuantizationDebugOptions(denylisted_nodes=suspects)
        selective = tf.lite.experimental.QuantizationDebugger(
            converter=converter(True, True), debug_dataset=rep, debug_options=options
        ).get_nondebug_quantized_model()
        evaluate(selective)
    return time.perf_counter() - t0


def tool_run(model_path: Path, data_path: Path, out: Path) -> tuple[float, dict]:
    from reporter.pipeline.stages import RunSettings, run

    t0 = time.perf_counter()
    report, _ = run(RunSettings(model=str(model_path), data=str(data_path), out=str(out), quiet=True))
    return time.perf_counter() - t0, report.timings_s


def eval_speed(tflite: Path, x) -> tuple[float, float]:
    """Seconds to evaluate `x` batched (the tool) and one sample per invoke (the notebook).

    Both timings include making the interpreter, as the notebook's eval_tflite does.
    """
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from reporter.measure.evaluate import predict

    content = tflite.read_bytes()
    t0 = time.perf_counter()
    predict(content, x)
    batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    it = Interpreter(model_content=content)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    for k in range(len(x)):
        it.set_tensor(i, x[k : k + 1].astype(np.float32))
        it.invoke()
        it.get_tensor(o)
    return batched, time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import numpy as np

    from reporter.pipeline import demo
    from reporter.core.progress import Progress

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "bench.log"
        quiet = Progress("bench", quiet=True)
        for name in demo.MODELS:
            with quiet.capture(log):
                model_path, data_path = demo.ensure_model(name, say=lambda t: None)
                # Warm up TensorFlow's lazy imports and tracing machinery once per model.
                bare_notebook(model_path, data_path)
                bare = [bare_notebook(model_path, data_path) for _ in range(args.repeats)]
                tool, stages = [], []
                for r in range(args.repeats):
                    seconds, timings = tool_run(model_path, data_path, Path(tmp) / f"out{r}")
                    tool.append(seconds)
                    stages.append(timings)
                x = np.load(data_path)["x"]
                speeds = {}
                for n in (2_000, 20_000):  # the evaluation set repeated to n samples
                    x_big = np.concatenate([x] * (n // len(x) + 1))[:n]
                    fiq = Path(tmp) / "out0" / name / "fiq.tflite"
                    speeds[n] = [eval_speed(fiq, x_big) for _ in range(args.repeats)]
            rows.append((name, bare, tool, stages, speeds))

    print(f"median of {args.repeats} runs each; seconds")
    print(f"{'model':<20}{'bare':>8}{'tool':>8}{'ratio':>8}   per-stage (tool)")
    for name, bare, tool, stages, _ in rows:
        b, t = statistics.median(bare), statistics.median(tool)
        keys = sorted({k for s in stages for k in s})
        per = ", ".join(f"{k} {statistics.median(s.get(k, 0) for s in stages):.2f}" for k in keys)
        print(f"{name:<20}{b:8.2f}{t:8.2f}{t / b:7.2f}x   {per}")
    print()
    print(f"{'model':<20}{'samples':>8}{'batched':>10}{'loop':>10}{'speed-up':>10}   (FIQ model)")
    for name, _, _, _, speeds in rows:
        for n, runs in speeds.items():
            batched = statistics.median(s[0] for s in runs)
            loop = statistics.median(s[1] for s in runs)
            print(f"{name:<20}{n:8d}{batched:10.4f}{loop:10.4f}{loop / batched:9.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
