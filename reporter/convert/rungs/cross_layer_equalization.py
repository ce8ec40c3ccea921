"""Rung `cross_layer_equalization`: an outlier channel (its range far beyond the other channels') of a tensor that
feeds only DEPTHWISE_CONV_2D or grouped CONV_2D ops (directly or through ReLU, pooling, zero padding and other
channel-wise ops a positive factor passes; not ReLU6, which clips) is divided by a power of two where it is produced
(the output channel's weights and bias of a CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED, or a constant per-channel
factor or offset) and the consumers' weights for that channel are multiplied by it: cross-layer equalization (Nagel et
al., "Data-Free Quantization", 2019) of the outlier channels, with reporter.convert.rungs.smoothquant's search for
where a channel is made. Powers of two keep the rewrite bit-exact in float. Starts from SmoothQuant's rewrite (the
model without NEG, its matmul-fed outliers already scaled), which it quantizes like static_batch1."""

from __future__ import annotations

from typing import Optional

import numpy as np

from reporter.convert.rungs.base import Plain, Workspace, candidate
from reporter.convert.rungs.smoothquant import Consumers, smoothquant_factor, quantized, smooth, smoothed
from reporter.measure import graph
from reporter.model.report import layer_of

KINDS = ("DEPTHWISE_CONV_2D", "CONV_2D")  # a CONV_2D only when grouped (an ordinary one is SmoothQuant's)


def _groups(g: graph.Graph, n: int, t: int) -> int:
    """How many groups op `n`'s input channels (of activation `t`) fall in: each group meets its own outputs."""
    w, channels = g.constant(g.ins(n)[1]), g.last(t)
    if w is None or w.ndim != 4 or channels <= 0:
        return 0
    if g.kind(n) == "DEPTHWISE_CONV_2D":  # [1, kh, kw, channels * multiplier]
        return channels if w.shape[-1] % channels == 0 else 0
    per_group = w.shape[-1]  # CONV_2D: [outputs, kh, kw, channels / groups]
    groups = channels // per_group if channels % per_group == 0 else 0
    return groups if groups > 1 and w.shape[0] % groups == 0 else 0


def _weight(g: graph.Graph, n: int, t: int) -> Optional[np.ndarray]:
    """Op `n`'s constant weights as [outputs, channels] per input channel of activation `t`, or None."""
    ins = g.ins(n)
    if len(ins) < 2 or ins[0] != t or ins[1] == t or not _groups(g, n, t):
        return None
    w, channels = g.constant(ins[1]), g.last(t)
    if g.kind(n) == "DEPTHWISE_CONV_2D":  # output channel c * multiplier + k reads input channel c
        return np.moveaxis(w.reshape(-1, channels, w.shape[-1] // channels), 1, -1).reshape(-1, channels)
    grouped = w.reshape(_groups(g, n, t), -1, w.shape[-1])  # [groups, outputs of a group * kh * kw, its channels]
    return np.moveaxis(grouped, 0, 1).reshape(-1, channels)


def _multiplied(g: graph.Graph, n: int, s: np.ndarray) -> np.ndarray:
    """Op `n`'s weights with those reading input channel j multiplied by s_j."""
    w = g.constant(g.ins(n)[1])
    if g.kind(n) == "DEPTHWISE_CONV_2D":
        return w * np.repeat(s, w.shape[-1] // len(s)).reshape(1, 1, 1, -1)
    groups = len(s) // w.shape[-1]
    return (w.reshape(groups, -1, w.shape[-1]) * s.reshape(groups, 1, -1)).reshape(w.shape)


def _factor(x_max: np.ndarray, w_max: np.ndarray, terminals: list, g: graph.Graph) -> np.ndarray:
    """Each channel's power of two. Where each input channel has weights of its own (a depthwise convolution, or groups
    of one channel; int8 scales those per channel, so they take any factor without loss), the channel is brought to
    the median channel's range: 2^round(log2(max|X_j| / median)); where a group's channels share an output's weight
    scale, SmoothQuant's split of the range, rounded to a power of two."""
    own = all(g.kind(n) == "DEPTHWISE_CONV_2D" or g.constant(g.ins(n)[1]).shape[-1] == 1 for n, _ in terminals)
    live = x_max[x_max > 0]
    s = x_max / max(float(np.median(live)) if live.size else 1.0, 1e-12) if own else \
        smoothquant_factor(x_max, w_max, terminals, g)
    return np.exp2(np.round(np.log2(np.clip(s, 1e-30, 1e30))))  # only the outliers' (s > 0) are used


def _named(tensor: str) -> str:
    """A tensor in the user's terms: the output of the Keras layer its name comes from, else its name."""
    layer = layer_of(tensor)
    return f"layer {layer}'s output" if layer else tensor


EQUALIZATION = Consumers(KINDS, _weight, _multiplied, _factor, "/equalized", _named)
FAILED = "the equalized float model could not be measured on the calibration samples with LiteRT"


def equalized(data: Workspace) -> tuple[Optional[bytes], list[str]]:
    """The equalization of SmoothQuant's rewrite, made once, and what it scaled, in words (empty: nothing); no model
    when it could not be made (said in the words)."""
    def make():
        try:
            return smooth(smoothed(data)[0], data.base.calib, EQUALIZATION)
        except (ValueError, RuntimeError, KeyError, IndexError):  # said in the user's terms, not the library's
            return None, [FAILED]
    return data.once("cross_layer_equalization", make)


class CrossLayerEqualization(Plain):
    code, label = "cross_layer_equalization", "LiteRT static int8, cross-layer equalization of outlier channels"
    exact = True

    def applies(self, model: bytes, data: Workspace) -> Optional[str]:
        if not equalized(data)[1]:
            return "no outlier channel feeding a DEPTHWISE_CONV_2D or grouped CONV_2D through channel-wise ops"
        return None

    def build(self, model: bytes, data: Workspace):
        rewritten, done = equalized(data)
        if rewritten is None:
            return candidate(self, error=done[0])
        try:
            return quantized(self, model, data, rewritten, smoothed(data)[1] + done)
        except (ValueError, RuntimeError, KeyError, IndexError):
            return candidate(self, error="LiteRT Quantizer could not quantize the equalized float model")


RUNG = CrossLayerEqualization()
