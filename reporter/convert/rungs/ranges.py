"""Rung `ranges`: activation ranges chosen among range methods by agreement with float on the selection samples,
injected through LiteRT Quantizer's calibration result; the chosen ranges are shared with the rungs after it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.convert.rungs.base import Base, Plain, Workspace, candidate, figure, samples, static_int8
from reporter.measure import graph, runtime

# Range methods, in the order ties are settled (LiteRT's own default first: another method must do better).
MOVING_AVERAGE, MIN_MAX, MEAN_EXTREMES, P999, P9999, MSE = "moving_average", "min_max", "mean_extremes", "p99.9", \
    "p99.99", "mse"
RANGE_METHODS = (MOVING_AVERAGE, MIN_MAX, MEAN_EXTREMES, P999, P9999, MSE)
METHOD_WORDS = {MOVING_AVERAGE: "moving average (LiteRT's default)", MIN_MAX: "min-max",
                MEAN_EXTREMES: "mean of per-sample extremes", P999: "percentile 99.9", P9999: "percentile 99.99",
                MSE: "MSE-optimal clipping"}
VALUES_KEPT = 1 << 16  # activation values kept per tensor for percentiles and MSE clipping (a strided subsample)
BIASED_OPS = ("FULLY_CONNECTED", "CONV_2D")


@dataclass
class Stats:
    """Per tensor of the float model: each sample's min and max, a strided subsample of its values, and (for the
    inputs of biased ops) the mean of each channel (last axis)."""

    mins: dict
    maxs: dict
    values: dict
    channel_means: dict


def activation_stats(float_model: bytes, x: dict[str, np.ndarray], names: set, means_of: set = frozenset()) -> Stats:
    """Runs the float model keeping every tensor and reads `names` (tensor names) per sample."""
    index = {d["name"]: d["index"] for d in runtime.load(float_model).get_tensor_details()
             if d["name"] in names | set(means_of)}
    n = samples(x)
    per_sample = max(1, VALUES_KEPT // max(n, 1))
    stats = Stats({k: [] for k in index}, {k: [] for k in index}, {k: [] for k in index}, {})
    sums: dict = {}
    for _, kept, count in runtime.chunks(float_model, x, keep=tuple(index.values())):
        for name, i in index.items():
            a = kept[i]
            if not np.issubdtype(a.dtype, np.floating):
                continue
            rows = a.reshape(count, -1) if a.size and a.shape[0] == count else a.reshape(1, -1)
            if name in names:
                stats.mins[name].append(rows.min(axis=1))
                stats.maxs[name].append(rows.max(axis=1))
                stride = max(1, rows.shape[1] // per_sample)
                stats.values[name].append(rows[:, ::stride].ravel())
            if name in means_of:
                total, seen = sums.get(name, (0.0, 0))
                channels = a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)
                sums[name] = (total + channels.astype(np.float64).sum(axis=0), seen + channels.shape[0])
    for d in (stats.mins, stats.maxs, stats.values):
        for name in list(d):
            if d[name]:
                d[name] = np.concatenate(d[name])
            else:
                del d[name]
    stats.channel_means = {k: total / seen for k, (total, seen) in sums.items()}
    return stats


def stats(base: Base) -> Stats:
    """`base`'s activation statistics over its calibration samples (every calibrated tensor, and the channel means
    of the biased ops' inputs), made once."""
    def make():
        inputs = graph.input_names(base.float_model, BIASED_OPS)
        return activation_stats(base.float_model, base.calib, set(base.calibration()), inputs)
    return base.once("stats", make)


def _mse_range(values: np.ndarray, lo: float, hi: float) -> tuple[float, float]:
    """The clipping range (a shrink of [lo, hi] towards 0) that quantizes `values` to 256 steps with least error."""
    best, best_err = (lo, hi), np.inf
    for fraction in np.linspace(1.0, 0.3, 36):
        a, b = lo * fraction if lo < 0 else lo, hi * fraction if hi > 0 else hi
        scale = max(b - a, 1e-12) / 255.0
        q = np.clip(np.round((values - a) / scale), 0, 255) * scale + a
        err = float(np.mean((q - values) ** 2))
        if err < best_err:
            best, best_err = (a, b), err
    return best


def method_ranges(stats_: Stats, method: str) -> dict[str, tuple[float, float]]:
    """Tensor name -> (min, max) by `method` (any of RANGE_METHODS but the moving average, LiteRT's own)."""
    ranges = {}
    for name, mins in stats_.mins.items():
        maxs, values = stats_.maxs[name], stats_.values[name]
        if method == MIN_MAX:
            lo, hi = float(mins.min()), float(maxs.max())
        elif method == MEAN_EXTREMES:
            lo, hi = float(mins.mean()), float(maxs.mean())
        elif method in (P999, P9999):
            q = 99.9 if method == P999 else 99.99
            lo, hi = float(np.percentile(values, 100 - q)), float(np.percentile(values, q))
        elif method == MSE:
            lo, hi = _mse_range(values.astype(np.float64), float(mins.min()), float(maxs.max()))
        else:
            raise ValueError(f"unknown range method {method!r}")
        ranges[name] = (lo, hi) if hi > lo else (lo, lo + 1e-6)
    return ranges


def edited(calibration: dict, ranges: dict[str, tuple[float, float]]) -> dict:
    """LiteRT Quantizer's calibration result with the given tensors' min/max replaced (array shapes kept)."""
    out = {}
    for name, qsv in calibration.items():
        qsv = dict(qsv)
        if name in ranges and "min" in qsv and "max" in qsv:
            lo, hi = ranges[name]
            qsv["min"] = np.full_like(np.asarray(qsv["min"], np.float32), lo)
            qsv["max"] = np.full_like(np.asarray(qsv["max"], np.float32), hi)
        out[name] = qsv
    return out


def chosen(base: Base, methods: tuple) -> tuple[str, dict, str]:
    """(range method, its calibration, the figures in words), by agreement with float on `base`'s selection samples;
    ties go to the method listed first."""
    def make():
        kinds = base.reference()[1]
        calibrations = [base.calibration() if method == MOVING_AVERAGE else edited(
            base.calibration(), method_ranges(stats(base), method)) for method in methods]
        scored = list(zip(methods, calibrations, base.scores(calibrations)))
        best = max(scored, key=lambda s: s[2])
        others = ", ".join(f"{METHOD_WORDS[m]} {figure(v, kinds)}" for m, _, v in scored if m != best[0])
        return best[0], best[1], (f"range method: {METHOD_WORDS[best[0]]}, chosen on {samples(base.select)}"
                                  f" selection samples (agreement with float {figure(best[2], kinds)}; {others})")
    return base.once("chosen", make)


def ranged(data: Workspace, base: Base) -> tuple[str, dict, str]:
    """The range method chosen on `base` (LiteRT's default where the range rung is not built or cannot choose)."""
    if data.options.wants(RUNG.code) and samples(data.select):
        return chosen(base, data.options.methods or RANGE_METHODS)
    return MOVING_AVERAGE, base.calibration(), f"ranges: {METHOD_WORDS[MOVING_AVERAGE]}"


class Ranges(Plain):
    code, label = "ranges", "LiteRT static int8, activation ranges chosen by measurement"

    def applies(self, model: bytes, data: Workspace) -> Optional[str]:
        if not samples(data.select):
            return "no selection samples to choose a range method on"
        if ranged(data, data.base)[0] == MOVING_AVERAGE:
            return "LiteRT's default ranges agree with float best: the model is the static batch-1 one"
        return None

    def measured(self, model: bytes, data: Workspace) -> str:
        return ranged(data, data.base)[2] if samples(data.select) else ""

    def build(self, model: bytes, data: Workspace):
        _, calibration, words = ranged(data, data.base)
        return candidate(self, detail=words, model=static_int8(data.base.batch1()[0], calibration))


RUNG = Ranges()
