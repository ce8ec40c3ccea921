"""Cross-layer equalization of every channel (Nagel et al., "Data-Free Quantization", 2019) for schemes with one
scale per weight tensor: for each channel i made by a CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED (W1) and read,
directly or through ReLU, pooling and other channel-wise ops a positive factor passes, only by CONV_2D,
DEPTHWISE_CONV_2D or FULLY_CONNECTED weights (W2), with r1_i = max |W1 output channel i| and r2_i = max |W2 input
channel i|, W1[i] and its bias are divided by s_i = sqrt(r1_i * r2_i) / r2_i and W2[:, i] multiplied by it, so both
ranges become sqrt(r1_i * r2_i); repeated over the graph's pairs until the factors settle. Where a channel is made and
who reads it is reporter.convert.rungs.smoothquant's search; no data is read (the rewrite is the same function in
float up to float32 rounding, which the caller checks). Used for the per-tensor schemes' own fix
(reporter.debug.equalization), not a rung of the integer-only ladder: no target is per-tensor."""

from __future__ import annotations

import dataclasses

import numpy as np

from reporter.convert.rungs.cross_layer_equalization import EQUALIZATION
from reporter.convert.rungs.smoothquant import (SMOOTHQUANT, Consumers, channel_path, consumer_ranges,
                                                producer_ranges, rescale, source_of)
from reporter.measure import graph

KINDS = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D")
SWEEPS = 16  # passes over the pairs at most
SETTLED = 1e-3  # a pass whose every factor is within 0.1 % of 1 changes nothing worth another


def _own(g: graph.Graph, n: int, t: int) -> bool:
    """Op `n` is a depthwise or grouped convolution (its input channels' weights are
    reporter.convert.rungs.cross_layer_equalization's to read and multiply), not an ordinary one."""
    return g.kind(n) == "DEPTHWISE_CONV_2D" or (
        g.kind(n) == "CONV_2D" and SMOOTHQUANT.weight(g, n, t) is None)


def _weight(g: graph.Graph, n: int, t: int):
    return (EQUALIZATION if _own(g, n, t) else SMOOTHQUANT).weight(g, n, t)


def _multiplied(g: graph.Graph, n: int, s: np.ndarray) -> np.ndarray:
    return (EQUALIZATION if _own(g, n, g.ins(n)[0]) else SMOOTHQUANT).multiply(g, n, s)


def equalizing_factor(r1: np.ndarray, r2: np.ndarray, terminals: list, g: graph.Graph) -> np.ndarray:
    """s_i = sqrt(r1_i * r2_i) / r2_i (1 where either range is 0: nothing to balance)."""
    live = (r1 > 0) & (r2 > 0)
    return np.where(live, np.sqrt(np.where(live, r1 / np.where(live, r2, 1.0), 1.0)), 1.0)


WEIGHTED = Consumers(KINDS, _weight, _multiplied, equalizing_factor, "/equalized", EQUALIZATION.named)


def _pairs(g: graph.Graph) -> list[tuple[int, frozenset, list]]:
    """(source tensor, where its channels are divided, the weighted ops that read them) for every channel-carrying
    tensor made by weights and read only by weights."""
    acts = {g.ins(n)[0] for n in range(len(g))
            if g.kind(n) in KINDS and _weight(g, n, g.ins(n)[0]) is not None}
    found = []
    for source in sorted({source_of(g, t) for t in acts}):
        path = channel_path(g, source, WEIGHTED)
        if path is not None and any(item[0] == "w" for item in path[0]):
            found.append((source, *path))
    return found


def equalize(float_model: bytes) -> tuple[bytes, list[str]]:
    """The float model with every pair's channels equalized, and what was equalized, in words (empty, with the model
    unchanged, when no channel is made by one weighted op and read only by others)."""
    g = graph.Graph(float_model)
    pairs = _pairs(g)
    if not pairs:
        return bytes(float_model), []
    before = {source: _spread(g, plan, terminals) for source, plan, terminals in pairs}
    consumers, sweeps = WEIGHTED, 0
    for sweeps in range(1, SWEEPS + 1):
        largest = 0.0
        for _, plan, terminals in pairs:
            s = equalizing_factor(producer_ranges(g, plan), consumer_ranges(g, terminals, consumers), terminals, g)
            largest = max(largest, float(np.abs(np.log(s)).max()))
            rescale(g, plan, terminals, s, consumers)
        g.index()
        consumers = dataclasses.replace(WEIGHTED, tag="")  # the replaced constants are named once
        if largest < SETTLED:
            break
    words = [f"{len(pairs)} pair{'s' * (len(pairs) != 1)} of layers equalized in {sweeps} pass{'es' * (sweeps != 1)}"]
    for source, plan, terminals in pairs:
        (made, read), (made_now, read_now) = before[source], _spread(g, plan, terminals)
        words.append(f"{WEIGHTED.named(g.name(source))}: largest over smallest channel"
                     f" weight range {made:.3g} -> {made_now:.3g} where it is made, {read:.3g} -> {read_now:.3g}"
                     " where it is read")
    return g.bytes(), words


def _spread(g: graph.Graph, plan: frozenset, terminals: list) -> tuple[float, float]:
    """How far apart the channels' weight ranges are where a channel is made and where it is read (largest over the
    smallest non-zero)."""
    def ratio(r):
        live = r[r > 0]
        return float(live.max() / live.min()) if live.size else 1.0
    return ratio(producer_ranges(g, plan)), ratio(consumer_ranges(g, terminals, WEIGHTED))
