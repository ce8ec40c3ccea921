"""Rung `bias_correction`: the int8 model's int32 biases patched by b <- b - E[(Q(W) - W) x] over the calibration
samples, on top of the range method chosen (reporter.convert.rungs.ranges)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from reporter.convert.rungs.base import Plain, Workspace, candidate, samples, static_int8
from reporter.convert.rungs.ranges import BIASED_OPS, METHOD_WORDS, MOVING_AVERAGE, ranged, stats
from reporter.measure import graph_edits


def correct_biases(float_model: bytes, int8_model: bytes, means: dict[str, np.ndarray]) -> tuple[bytes, int, float]:
    """`int8_model` with the int32 bias of each FULLY_CONNECTED / CONV_2D replaced by b - E[(Q(W) - W) x], W read from
    `float_model` (the same op by output name), Q(W) from the int8 model's weights and scales, E[x] the mean of each
    input channel over the calibration samples (`means`: float tensor name -> per-channel mean; padding is ignored).
    Returns (model, ops corrected, the largest change in bias steps); the bytes are patched in place."""
    raw, layers = graph_edits.quantized_layers(float_model, int8_model, BIASED_OPS)
    corrected, largest = 0, 0.0
    for layer in layers:
        w, mean = layer.weight, means.get(layer.input)
        if mean is None or w.shape[-1] != mean.shape[-1]:
            continue
        w_int = layer.weight_codes.view(np.int8).reshape(w.shape)
        w_scale = layer.weight_scale.reshape((-1,) + (1,) * (w.ndim - 1))
        dw = w_int.astype(np.float64) * w_scale - w.astype(np.float64)
        shift = (dw.reshape(dw.shape[0], -1, dw.shape[-1]).sum(axis=1)) @ mean  # FC: [out, in]; conv: [out, h, w, in]
        b_int = layer.bias_codes.view("<i4").astype(np.float64)
        steps = shift / layer.bias_scale
        layer.bias_codes[:] = np.clip(np.round(b_int - steps), -(2 ** 31), 2 ** 31 - 1).astype("<i4").view(np.uint8)
        corrected += 1
        largest = max(largest, float(np.abs(steps).max()) if steps.size else 0.0)
    return bytes(raw), corrected, largest  # patched in place: the file keeps its layout


class BiasCorrection(Plain):
    code, label = "bias_correction", "LiteRT static int8 with bias correction"

    def _corrected(self, data: Workspace) -> tuple[bytes, int, float, str]:
        def make():
            base = data.base
            method, calibration, _ = ranged(data, base)
            quantized = base.plain() if method == MOVING_AVERAGE else static_int8(base.batch1()[0], calibration)
            return (*correct_biases(base.batch1()[0], quantized, stats(base).channel_means), method)
        return data.once(self.code, make)

    def applies(self, model: bytes, data: Workspace) -> Optional[str]:
        if not self._corrected(data)[1]:
            return "no FULLY_CONNECTED or CONV_2D with a bias to correct"
        return None

    def build(self, model: bytes, data: Workspace):
        corrected_model, corrected, largest, method = self._corrected(data)
        return candidate(self, model=corrected_model, detail=(
            f"{corrected} bias{'es' * (corrected != 1)} corrected by E[(Q(W) - W) x] on {samples(data.base.calib)}"
            f" calibration samples (largest change {largest:.1f} bias steps); ranges by {METHOD_WORDS[method]}"))


RUNG = BiasCorrection()
