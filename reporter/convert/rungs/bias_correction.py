"""Rung `bias_correction`: the int8 model's int32 biases patched by b <- b - E[(Q(W) - W) x] over the calibration
samples, on top of the range method chosen (reporter.convert.rungs.ranges)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from reporter.convert.rungs.base import Plain, Workspace, candidate, samples, static_int8
from reporter.convert.rungs.ranges import METHOD_WORDS, MOVING_AVERAGE, biased_ops, ranged, stats
from reporter.measure import graph


def correct_biases(float_model: bytes, int8_model: bytes, means: dict[str, np.ndarray]) -> tuple[bytes, int, float]:
    """`int8_model` with the int32 bias of each FULLY_CONNECTED / CONV_2D replaced by b - E[(Q(W) - W) x], W read from
    `float_model` (the same op by output name), Q(W) from the int8 model's weights and scales, E[x] the mean of each
    input channel over the calibration samples (`means`: float tensor name -> per-channel mean; padding is ignored).
    Returns (model, ops corrected, the largest change in bias steps); the bytes are patched in place."""
    fobj, qobj = graph.read_model(float_model), graph.read_model(int8_model)
    raw = bytearray(int8_model)
    types = graph.schema().TensorType
    fsg, qsg = fobj.subgraphs[0], qobj.subgraphs[0]
    quantized = biased_ops(qobj)
    corrected, largest = 0, 0.0
    for name, (kind, fop) in biased_ops(fobj).items():
        if name not in quantized or len(fop.inputs) < 3 or fop.inputs[2] < 0:
            continue
        w = graph.constant(fobj, int(fop.inputs[1]))
        mean = means.get(graph.tensor_name(fsg.tensors[int(fop.inputs[0])]))
        qop = quantized[name][1]
        wt, bt = qsg.tensors[int(qop.inputs[1])], qsg.tensors[int(qop.inputs[2])] if len(qop.inputs) > 2 else None
        if w is None or mean is None or bt is None or qop.inputs[2] < 0 or w.shape[-1] != mean.shape[-1]:
            continue
        if wt.type != types.INT8 or bt.type != types.INT32:
            continue
        w_view, b_view = graph.buffer_view(raw, qobj, wt.buffer), graph.buffer_view(raw, qobj, bt.buffer)
        if w_view is None or b_view is None:
            continue
        w_int = w_view.view(np.int8).reshape(w.shape)
        w_scale = np.asarray(wt.quantization.scale, np.float64).reshape((-1,) + (1,) * (w.ndim - 1))
        dw = w_int.astype(np.float64) * w_scale - w.astype(np.float64)
        shift = (dw.reshape(dw.shape[0], -1, dw.shape[-1]).sum(axis=1)) @ mean  # FC: [out, in]; conv: [out, h, w, in]
        b_scale = np.asarray(bt.quantization.scale, np.float64)
        b_int = b_view.view("<i4").astype(np.float64)
        steps = shift / b_scale
        b_view[:] = np.clip(np.round(b_int - steps), -(2 ** 31), 2 ** 31 - 1).astype("<i4").view(np.uint8)
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
