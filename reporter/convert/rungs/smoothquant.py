"""Rung `smoothquant`: an outlier channel j (its range far beyond the other channels') of a tensor that feeds only
FULLY_CONNECTED / BATCH_MATMUL / CONV_2D ops with constant weights (directly or through channel-wise linear ops:
RESHAPE, MEAN over other axes, RELU, pooling, zero padding) is divided by s_j = max|X_j|^0.5 / max|W_j|^0.5 where it
is produced (a constant per-channel factor or offset, e.g. a LayerNormalization's gamma and beta, or the output
channel's weights and bias of a FULLY_CONNECTED, CONV_2D or DEPTHWISE_CONV_2D), and the consuming weights for input j
are multiplied by s_j (between two convolutions: cross-layer equalization of the one channel; a depthwise or grouped
convolution's is reporter.convert.rungs.cross_layer_equalization's). Starts from the model without NEG
(reporter.convert.rungs.layernorm_without_neg); the rewrite, exact in float, is quantized like static_batch1."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Callable, Optional

import numpy as np

from reporter.convert.rungs.base import Plain, Workspace, candidate, exact
from reporter.convert.rungs.layernorm_without_neg import ACTIVATIONS_OK, folded, folded_words
from reporter.measure import graph, runtime

OUTLIER_RATIO = 20.0  # a channel is an outlier when its max |value| is this many times the channels' median
ALPHA = 0.5  # SmoothQuant's migration strength: s_j = max|X_j|^ALPHA / max|W_j|^(1 - ALPHA)
MAX_PLANS, MAX_DEPTH = 32, 24  # bounds on the search for where a channel is produced
MATMULS = ("FULLY_CONNECTED", "BATCH_MATMUL", "CONV_2D")  # ops whose constant weights take a channel's factor
PRODUCERS = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D")  # ops whose output channel j has its own weights
OUTPUT_AXIS = {"FULLY_CONNECTED": 0, "CONV_2D": 0, "DEPTHWISE_CONV_2D": -1}  # that channel's axis in the weights
POOLS = ("MEAN", "SUM", "AVERAGE_POOL_2D", "MAX_POOL_2D")
PADS = ("PAD", "PADV2")  # zeros added around the other axes: a channel's factor passes
PASS = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "RELU") + POOLS + PADS  # channel-wise, positively homogeneous


def _channel_ranges(model: bytes, x: dict[str, np.ndarray], tensors: set) -> dict[int, np.ndarray]:
    """Per tensor (index), max |value| of each channel (last axis) over the float model's runs on `x`."""
    ranges: dict[int, np.ndarray] = {}
    for _, kept, _ in runtime.chunks(model, x, keep=tuple(sorted(tensors))):
        for t, value in kept.items():
            if value.ndim and value.size and np.issubdtype(value.dtype, np.floating):
                m = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
                ranges[t] = np.maximum(ranges[t], m) if t in ranges else m
    return ranges


def _passes(g: graph.Graph, n: int) -> bool:
    """Op `n` maps channel j of its first input to channel j of its output, positively homogeneous per channel."""
    kind, (src, dst) = g.kind(n), (g.ins(n)[0], g.out(n))
    if kind not in PASS or g.last(src) != g.last(dst) or g.activation(n) not in ACTIVATIONS_OK:
        return False
    if kind in ("MEAN", "SUM"):
        axes = g.integers(g.ins(n)[1]) if len(g.ins(n)) > 1 else None
        rank = len(g.shape(src))
        return axes is not None and all(int(a) % rank != rank - 1 for a in np.ravel(axes))
    if kind in PADS:
        pads = g.integers(g.ins(n)[1]) if len(g.ins(n)) > 1 else None
        value = g.constant(g.ins(n)[2]) if len(g.ins(n)) > 2 and g.ins(n)[2] >= 0 else np.zeros(1)
        return pads is not None and value is not None and not np.any(value) \
            and not np.any(np.reshape(pads, (-1, 2))[-1])
    return True


def _weight(g: graph.Graph, n: int, t: int) -> Optional[np.ndarray]:
    """Op `n`'s constant weight, as [outputs, channels] per input channel of activation `t`, or None."""
    ins = g.ins(n)
    if len(ins) < 2 or ins[0] != t or ins[1] == t:
        return None
    w = g.constant(ins[1])
    if w is None or w.ndim < 2:
        return None
    if g.kind(n) == "FULLY_CONNECTED":
        return w if w.ndim == 2 else None
    if g.kind(n) == "CONV_2D":  # [outputs, kh, kw, channels]; a grouped convolution's channels do not all meet
        return w.reshape(-1, w.shape[-1]) if w.ndim == 4 and w.shape[-1] == g.last(t) else None
    if g.option(n, "adjX"):
        return None
    w = np.swapaxes(w, -1, -2) if g.option(n, "adjY") else w  # [..., channels, outputs]
    return np.moveaxis(w, -2, -1).reshape(-1, w.shape[-2])


def _consumers_through(g: graph.Graph, source: int, consumers: "Consumers") -> Optional[tuple[list, list, set]]:
    """(pass-through ops, (consuming op, its activation tensor), the tensors divided with `source`) reached from
    `source`, or None when some consumer is neither (or a model output is)."""
    outputs = g.outputs()
    passing, terminals, todo = [], [], [source]
    forward = {source}
    while todo:
        t = todo.pop()
        if t in outputs or not g.consumers.get(t):
            return None
        for n, _ in g.consumers[t]:
            if g.kind(n) in consumers.kinds and consumers.weight(g, n, t) is not None:
                terminals.append((n, t))
            elif g.ins(n)[0] == t and _passes(g, n) and t not in g.ins(n)[1:]:
                passing.append(n)
                todo.append(g.out(n))
                forward.add(g.out(n))
            else:
                return None
    return passing, terminals, forward


def _plans(g: graph.Graph, t: int, channels: int, depth: int = 0) -> list[frozenset]:
    """Ways to divide channel j of tensor `t` by s where it is produced: sets of ("t", tensor) to be divided,
    ("c", op, input) constants and ("w", op) output-channel weights and bias (a PRODUCERS op) to divide."""
    n = g.producer.get(t)
    if n is None or depth > MAX_DEPTH or g.last(t) != channels or g.activation(n) not in ACTIVATIONS_OK:
        return []
    kind, ins, me = g.kind(n), g.ins(n), frozenset({("t", t)})
    if kind in PRODUCERS:
        w = g.constant(ins[1]) if len(ins) > 1 else None
        bias_ok = len(ins) < 3 or ins[2] < 0 or g.constant(ins[2]) is not None
        shaped = w is not None and w.ndim == (2 if kind == "FULLY_CONNECTED" else 4) \
            and w.shape[OUTPUT_AXIS[kind]] == channels
        return [me | {("w", n)}] if shaped and bias_ok else []
    if kind in PASS:
        return [me | p for p in _plans(g, ins[0], channels, depth + 1)] if _passes(g, n) else []
    options = []
    for pos, i in enumerate(ins):
        if g.is_constant(i):
            c = g.constant(i)
            options.append([frozenset({("c", n, pos)})] if c is not None and g.last(i) == channels else [])
        elif g.last(i) == channels:
            options.append(_plans(g, i, channels, depth + 1))
        else:
            options.append([])
    if kind in ("ADD", "SUB"):
        found = [me.union(*combo) for combo in product(*options)] if all(options) else []
    elif kind == "MUL":
        ordered = [o for pos, o in enumerate(options) if g.is_constant(ins[pos])] + [
            o for pos, o in enumerate(options) if not g.is_constant(ins[pos])]  # a constant factor first
        found = [me | p for alternatives in ordered for p in alternatives]
    else:
        found = []
    return sorted(set(found), key=lambda p: (len(p), sorted(p)))[:MAX_PLANS]


def _closed(g: graph.Graph, plan: frozenset, reached: tuple) -> bool:
    """Every divided tensor is read only where the division is accounted for."""
    divided = {item[1] for item in plan if item[0] == "t"}
    region = {g.producer[t] for t in divided}
    passing, terminals, forward = reached
    ahead = set(passing) | {n for n, _ in terminals}
    outputs = g.outputs()
    for t in divided:
        if t in outputs:
            return False
        for n, _ in g.consumers.get(t, []):
            if n in ahead and t in forward:
                continue
            if n not in region:
                return False
    for n in region:
        kind, ins = g.kind(n), g.ins(n)
        hit = [i in divided or ("c", n, pos) in plan for pos, i in enumerate(ins)]
        if kind == "MUL" and sum(hit) != 1:
            return False
        if kind in ("ADD", "SUB") and not all(hit):
            return False
    return True


def _scale_channels(g: graph.Graph, plan: frozenset, s: np.ndarray, tag: str) -> None:
    for item in sorted(plan, key=lambda i: (i[0], i[1:])):
        if item[0] == "c":
            _, n, pos = item
            g.replace_input(n, pos, g.constant(g.ins(n)[pos]) / s, tag)
        elif item[0] == "w":
            n = item[1]
            ins = g.ins(n)
            w = g.constant(ins[1])
            g.replace_input(n, 1, w / _along(s, w.ndim, OUTPUT_AXIS[g.kind(n)]), tag)
            if len(ins) > 2 and ins[2] >= 0:
                g.replace_input(n, 2, g.constant(ins[2]) / s, tag)


def _along(s: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """`s` shaped to multiply a weight array of `ndim` dimensions along `axis`."""
    shape = [1] * ndim
    shape[axis] = len(s)
    return s.reshape(shape)


def _multiplied(g: graph.Graph, n: int, s: np.ndarray) -> np.ndarray:
    """Matmul `n`'s weights with those for input channel j multiplied by s_j."""
    w = g.constant(g.ins(n)[1])
    if g.kind(n) in ("FULLY_CONNECTED", "CONV_2D"):  # input channels last
        return w * _along(s, w.ndim, -1)
    adj_y = bool(g.option(n, "adjY"))
    return w * (s[None, :] if adj_y else s[:, None])


def smoothquant_factor(x_max: np.ndarray, w_max: np.ndarray, terminals: list, g: graph.Graph) -> np.ndarray:
    """SmoothQuant's s_j = max|X_j|^ALPHA / max|W_j|^(1 - ALPHA): the range split between activation and weights."""
    return x_max ** ALPHA / w_max ** (1 - ALPHA)


@dataclass(frozen=True)
class Consumers:
    """The ops whose constant weights take an outlier channel's factor, and how: `weight(g, n, t)`, op n's weights as
    [outputs, channels] per input channel of activation t (None: not such an op's input); `multiply(g, n, s)`, its
    weights with input channel j's multiplied by s_j; `factor(x_max, w_max, terminals, g)`, each channel's s (only the
    outliers' are used); `tag`, the suffix of the replaced constants' names; `named`, a divided tensor in words, from
    its name."""

    kinds: tuple
    weight: Callable
    multiply: Callable
    factor: Callable
    tag: str
    named: Callable[[str], str] = str


SMOOTHQUANT = Consumers(MATMULS, _weight, _multiplied, smoothquant_factor, "/smoothquant")


def source_of(g: graph.Graph, t: int) -> int:
    """The tensor whose channels activation `t` carries through channel-wise ops (ReLU, pooling, ...): where they are
    made."""
    while g.producer.get(t) is not None and _passes(g, g.producer[t]):
        t = g.ins(g.producer[t])[0]
    return t


def channel_path(g: graph.Graph, source: int, consumers: Consumers) -> Optional[tuple[frozenset, list]]:
    """How channel j of tensor `source` can be divided where it is made and multiplied back in `consumers`' weights:
    (the plan: what is divided, see `_plans`; the consuming ops, each as (op, its activation tensor)), or None when
    some reader of the channel is neither a consumer nor a channel-wise op, or it is divided nowhere exactly."""
    reached = _consumers_through(g, source, consumers)
    if reached is None:
        return None
    plan = next((p for p in _plans(g, source, g.last(source)) if _closed(g, p, reached)), None)
    return None if plan is None else (plan, reached[1])


def consumer_ranges(g: graph.Graph, terminals: list, consumers: Consumers) -> np.ndarray:
    """max |W[:, j]| of each input channel j over the consuming ops' weights."""
    return np.max([np.abs(consumers.weight(g, n, t)).max(axis=0) for n, t in terminals], axis=0)


def producer_ranges(g: graph.Graph, plan: frozenset) -> Optional[np.ndarray]:
    """max |W[j]| of each output channel j over the weights of the ops a plan divides (None: it divides no op's
    weights, only constants)."""
    found = []
    for item in plan:
        if item[0] == "w":
            w = np.abs(g.constant(g.ins(item[1])[1]))
            axis = OUTPUT_AXIS[g.kind(item[1])]
            found.append(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1).max(axis=1))
    return np.max(found, axis=0) if found else None


def rescale(g: graph.Graph, plan: frozenset, terminals: list, s: np.ndarray, consumers: Consumers) -> None:
    """Channel j divided by s_j where it is made (`plan`) and multiplied by s_j in the consumers' weights: the same
    function in float."""
    _scale_channels(g, plan, s, consumers.tag)
    for n, _ in terminals:
        g.replace_input(n, 1, consumers.multiply(g, n, s), consumers.tag)


def smooth(float_model: bytes, x_calib, consumers: Consumers = SMOOTHQUANT) -> tuple[bytes, list[str]]:
    """The float model with its outlier channels that feed `consumers` (by default matmuls) moved into the consumers'
    weights (the same function in float), and what was scaled, in words; no change (and an empty list) when there is
    no such channel. `x_calib`: Inputs, a dict input name -> array, or the one array of a one-input model."""
    g = graph.Graph(float_model)
    data = runtime.keyed(x_calib, runtime.signature_names(float_model)[1])
    acts = {g.ins(n)[0] for n in range(len(g)) if g.kind(n) in consumers.kinds
            and consumers.weight(g, n, g.ins(n)[0]) is not None}
    if not acts:  # nothing to measure: no float run over the calibration samples
        return bytes(float_model), []
    ranges = _channel_ranges(float_model, data, acts)
    sources = {}
    for t in acts:
        r = ranges.get(t)
        if r is None or r.size < 2 or not (r > OUTLIER_RATIO * max(float(np.median(r)), 1e-12)).any():
            continue
        sources[source_of(g, t)] = True
    words = []
    for source in sorted(sources):
        found = channel_path(g, source, consumers)
        if found is None:
            continue
        plan, terminals = found
        channels = g.last(source)
        x_max = np.max([ranges[t] for _, t in terminals if t in ranges], axis=0)
        w_max = consumer_ranges(g, terminals, consumers)
        outliers = (x_max > OUTLIER_RATIO * max(float(np.median(x_max)), 1e-12)) & (w_max > 0)
        if not outliers.any():
            continue
        s = np.ones(channels, np.float64)
        s[outliers] = consumers.factor(x_max, w_max, terminals, g)[outliers]
        rescale(g, plan, terminals, s, consumers)
        g.index()
        where = ", ".join(sorted({g.kind(i[1]) for i in plan if i[0] in "cw"}))
        words.append(f"channel{'s' * int(outliers.sum() != 1)} {', '.join(map(str, np.flatnonzero(outliers)))} of"
                     f" {consumers.named(g.name(source))}"
                     f" (max |x| {', '.join(f'{v:.4g}' for v in x_max[outliers])}"
                     f" against a median of {float(np.median(x_max)):.3g}) divided by s =" 
                     f" {', '.join(f'{v:.4g}' for v in s[outliers])} at the constants of its {where}, the weights of"
                     f" {len(terminals)} {'/'.join(sorted({g.kind(n) for n, _ in terminals}))} multiplied")
    return (g.bytes() if words else bytes(float_model)), words


def smoothed(data: Workspace) -> tuple[bytes, list[str]]:
    """`smooth` of the workspace's model without NEG, made once (cross-layer equalization starts from it)."""
    return data.once("smoothquant", lambda: smooth(folded(data)[0], data.base.calib))


def quantized(rung, model: bytes, data: Workspace, rewritten: bytes, done: list[str]):
    """`rung`'s candidate from `rewritten` (`done` says what was scaled, after any NEG folded): checked exact in float
    against `model`, then quantized like static_batch1."""
    negs = folded(data)[1]
    what = "; ".join(done) + (f"; {folded_words(negs)}" if negs else "")
    error, words = exact(model, rewritten, data.select, what)
    if error:
        return candidate(rung, detail=words, error=error)
    return candidate(rung, model=data.rewrite(rewritten).plain(), rewritten=rewritten,
                     detail=f"{words}; LiteRT static int8 (batch fixed to 1)")


class SmoothQuant(Plain):
    code, label = "smoothquant", "LiteRT static int8, SmoothQuant scaling of outlier channels"
    exact = True

    def applies(self, model: bytes, data: Workspace) -> Optional[str]:
        if not smoothed(data)[1]:
            return "no outlier channel feeding a FULLY_CONNECTED, BATCH_MATMUL or CONV_2D through channel-wise ops"
        return None

    def build(self, model: bytes, data: Workspace):
        return quantized(self, model, data, *smoothed(data))

    def prefetch(self, model: bytes, data: Workspace) -> None:
        rewritten, done = smoothed(data)  # made once: its build reads the same
        if done:
            data.prefetch(rewritten)


RUNG = SmoothQuant()
