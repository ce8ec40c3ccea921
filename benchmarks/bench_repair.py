"""Benchmark: the time of each integer-only repair rung (reporter.convert.rungs, issue 45).

Run by hand (not in CI):
    python benchmarks/bench_repair.py [--repeats 3] [--calib 200] [--select 100]

Models: the demo's digits_cnn (its own calibration inputs) and an untrained EfficientNet-B0 (keras.applications,
weights=None, 32x32x3, ~300 ops with 16 squeeze-excite blocks) on the digits upscaled to 32x32x3 (time only: its
accuracy means nothing). Each repeat builds the whole ladder from scratch (TensorFlow already imported) and times each
rung; the medians over the repeats are printed with the float model's op count and each rung's outcome.

`--share` measures the issue's goal instead (the whole ladder at most 30 % of the run): an EfficientNet-B0 trained on
the digits (32x32x3, 30 epochs, ~2.5 min on 2 cores, cached under ~/.cache/quant-report/bench-repair) with one channel
of block1a's output scaled by 1000 and the next convolution's weights for it divided by 1000 (float unchanged; int8
collapses, and only the last rung, SmoothQuant's scaling between the two convolutions, repairs it: every rung is built,
the ladder's worst case).
`quant-report run --target int8` runs on it `--repeats` times; the ladder's seconds and its share of the run's stage
times (report.json's timings_s) are printed, medians.
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

    from reporter.pipeline import demo

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
    from reporter.convert import rungs
    from reporter.measure import structure

    calib, select = x[:args.calib], x[args.calib:args.calib + args.select]
    times: dict[str, list] = {}
    outcome = {}
    for _ in range(args.repeats):
        started = time.perf_counter()
        for candidate in rungs.candidates(float_model, calib, select):
            times.setdefault(candidate.rung, []).append(candidate.seconds)
            outcome[candidate.rung] = candidate.error or candidate.detail
        times.setdefault("whole ladder", []).append(time.perf_counter() - started)
    ops = sum(structure.ops(float_model).values())
    print(f"\n{name}: {ops} ops, {len(calib)} calibration and {len(select)} selection samples,"
          f" medians of {args.repeats} runs")
    for rung, values in times.items():
        print(f"  {rung:<20} {statistics.median(values):7.2f} s   {outcome.get(rung, '')[:150]}")


def outlier_efficientnet() -> tuple[Path, Path]:
    """(model.keras, data.npz) of the trained EfficientNet-B0 with its ×1000 channel, built once and cached."""
    import keras
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    folder = Path.home() / ".cache" / "quant-report" / "bench-repair"
    model_path, data_path = folder / "efficientnet_outlier.keras", folder / "data.npz"
    if model_path.exists() and data_path.exists():
        return model_path, data_path
    folder.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(0)
    digits = load_digits()
    x = np.repeat(np.kron(digits.data.reshape(-1, 8, 8) / 16.0, np.ones((4, 4)))[..., None], 3, axis=-1) * 255.0
    x_tr, x_te, y_tr, y_te = train_test_split(x.astype(np.float32), digits.target, test_size=0.3, random_state=0,
                                              stratify=digits.target)
    model = keras.applications.EfficientNetB0(weights=None, input_shape=(32, 32, 3), classes=10)
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
    model.fit(x_tr, y_tr, epochs=30, batch_size=32, verbose=0)
    bn, consumer = model.get_layer("block1a_project_bn"), model.get_layer("block2a_expand_conv")
    gamma, beta, mean, var = bn.get_weights()
    gamma[0], beta[0] = gamma[0] * 1000.0, beta[0] * 1000.0
    bn.set_weights([gamma, beta, mean, var])
    kernel, *rest = consumer.get_weights()
    kernel[:, :, 0, :] /= 1000.0
    consumer.set_weights([kernel, *rest])
    np.savez(data_path, x=x_te, y=y_te, x_calib=x_tr)
    model.save(model_path)
    return model_path, data_path


def share(args) -> None:
    import json
    import subprocess
    import tempfile

    model, data = outlier_efficientnet()
    ladder, shares, runs = [], [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "reporter", "run", str(model), "--data", str(data), "--out", out,
                            "--name", "eff", "--target", "int8", "--formats", "json", "--quiet"], check=True)
            runs.append(time.perf_counter() - started)
            report = json.loads((Path(out) / "eff" / "report.json").read_text())
        stages = report["timings_s"]
        ladder.append(stages.get("repair", 0.0))
        shares.append(stages.get("repair", 0.0) / sum(stages.values()))
        tried = [f"{r['rung']} ({r['status']})" for r in report.get("repairs") or [] if r["status"] != "not_tried"]
        shipped = report["findings"]["decision"]["variant"] or "nothing"
    print(f"EfficientNet-B0 with a x1000 channel, --target int8, medians of {args.repeats} runs:"
          f" whole run {statistics.median(runs):.1f} s (wall, with imports), ladder {statistics.median(ladder):.1f} s,"
          f" {statistics.median(shares) * 100:.0f} % of the run's stages (goal: at most 30 %); rungs: {', '.join(tried)};"
          f" shipped: {shipped}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calib", type=int, default=200)
    parser.add_argument("--select", type=int, default=100)
    parser.add_argument("--share", action="store_true", help="the ladder's share of a whole --target int8 run")
    args = parser.parse_args()
    if args.share:
        return share(args)
    import tensorflow  # noqa: F401 - imported before timing: the first rung would pay for it

    import litert_quantizer.quantizer  # noqa: F401

    for name, make in (("digits_cnn", digits_cnn), ("EfficientNet-B0 32x32", efficientnet)):
        model, x = make()
        bench(name, bytes(model), x, args)


if __name__ == "__main__":
    main()
