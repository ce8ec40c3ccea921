"""Benchmark: the time of each integer-only repair rung (reporter.convert.repair, issue 45).

Run by hand (not in CI):
    python benchmarks/bench_repair.py [--repeats 3] [--calib 200] [--select 100]

Models: the demo's digits_cnn (its own calibration inputs) and an untrained EfficientNet-B0 (keras.applications,
weights=None, 32x32x3, ~300 ops with 16 squeeze-excite blocks) on the digits upscaled to 32x32x3 (time only: its
accuracy means nothing). Each repeat builds the whole ladder from scratch (TensorFlow already imported) and times each
rung; the medians over the repeats are printed with the float model's op count and each rung's outcome.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def digits_cnn():
    import keras
    import tensorflow as tf

    from reporter.run import demo

    model_path, data_path = demo.ensure_model("digits_cnn", say=lambda *_: None)
    model = keras.models.load_model(model_path)
    return tf.lite.TFLiteConverter.from_keras_model(model).convert(), np.load(data_path)["x_calib"].astype(np.float32)


def efficientnet():
    import keras
    import tensorflow as tf
    from sklearn.datasets import load_digits

    keras.utils.set_random_seed(0)
    model = keras.applications.EfficientNetB0(weights=None, input_shape=(32, 32, 3), classes=10)
    x = load_digits().data.reshape(-1, 8, 8) / 16.0
    x = np.repeat(np.kron(x, np.ones((4, 4)))[..., None], 3, axis=-1).astype(np.float32) * 255.0
    return tf.lite.TFLiteConverter.from_keras_model(model).convert(), x


def bench(name: str, float_model: bytes, x: np.ndarray, args) -> None:
    from reporter.convert import repair
    from reporter.measure import structure

    calib, select = x[:args.calib], x[args.calib:args.calib + args.select]
    times: dict[str, list] = {}
    outcome = {}
    for _ in range(args.repeats):
        started = time.perf_counter()
        for candidate in repair.rungs(float_model, calib, select):
            times.setdefault(candidate.rung, []).append(candidate.seconds)
            outcome[candidate.rung] = candidate.error or candidate.detail
        times.setdefault("whole ladder", []).append(time.perf_counter() - started)
    ops = sum(structure.ops(float_model).values())
    print(f"\n{name}: {ops} ops, {len(calib)} calibration and {len(select)} selection samples,"
          f" medians of {args.repeats} runs")
    for rung, values in times.items():
        print(f"  {rung:<20} {statistics.median(values):7.2f} s   {outcome.get(rung, '')[:150]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calib", type=int, default=200)
    parser.add_argument("--select", type=int, default=100)
    args = parser.parse_args()
    import tensorflow  # noqa: F401 - imported before timing: the first rung would pay for it

    import litert_quantizer.quantizer  # noqa: F401

    for name, make in (("digits_cnn", digits_cnn), ("EfficientNet-B0 32x32", efficientnet)):
        model, x = make()
        bench(name, bytes(model), x, args)


if __name__ == "__main__":
    main()
