"""Integer-only repairs, rung (d) of issue 45: rewrites of the float model that are exact in float, then LiteRT
Quantizer's static int8 (static_wi8_ai8) of the rewritten model with its batch fixed to 1.

* layernorm_without_neg: Keras 3's LayerNormalization exports the mean subtracted as x * g + NEG(mean) * g (+ beta);
  the int8 recipes leave that NEG in float (DEQUANTIZE -> NEG -> QUANTIZE). Each NEG is folded into the ADD its
  negated value reaches through MULs (the ADD becomes a SUB: a + (-v) * g = a - v * g), or else becomes a MUL by -1.
* smoothquant: an outlier channel j (its range far beyond the other channels') of a tensor that feeds only
  FULLY_CONNECTED / BATCH_MATMUL / CONV_2D ops with constant weights (directly or through channel-wise linear ops:
  RESHAPE, MEAN over other axes, RELU, pooling) is divided by s_j = max|X_j|^0.5 / max|W_j|^0.5 where it is
  produced (a constant per-channel factor or offset, e.g. a LayerNormalization's gamma and beta, or the output
  channel's weights and bias of a FULLY_CONNECTED, CONV_2D or DEPTHWISE_CONV_2D), and the consuming weights for
  input j are multiplied by s_j. Between two convolutions this is cross-layer equalization of the one channel.

Pure builders like reporter.convert.repair: each rewrite is checked against the original float model with LiteRT on
the selection samples, each int8 model's tensor types are read from the file; a rewrite that does not apply yields a
candidate with no model and one line saying why.
"""

from __future__ import annotations

import time
from itertools import product
from typing import Iterator, Optional

import numpy as np

from reporter.convert.repair import RepairCandidate, integer_only, loads_on_reference
from reporter.convert.repair_edits import compact, read_model, static_batch, tensor_name, write_model
from reporter.measure.evaluate import as_inputs

LAYERNORM_WITHOUT_NEG, SMOOTHQUANT = "layernorm_without_neg", "smoothquant"
REWRITES = (LAYERNORM_WITHOUT_NEG, SMOOTHQUANT)
LABELS = {LAYERNORM_WITHOUT_NEG: "LiteRT static int8, LayerNormalization without NEG",
          SMOOTHQUANT: "LiteRT static int8, SmoothQuant scaling of outlier channels"}
OUTLIER_RATIO = 20.0  # a channel is an outlier when its max |value| is this many times the channels' median
ALPHA = 0.5  # SmoothQuant's migration strength: s_j = max|X_j|^ALPHA / max|W_j|^(1 - ALPHA)
TOLERANCE = 1e-4  # largest |rewritten - original| float output, relative to the output's largest |value|
CHUNK = 32
MAX_PLANS, MAX_DEPTH = 32, 24  # bounds on the search for where a channel is produced
MATMULS = ("FULLY_CONNECTED", "BATCH_MATMUL", "CONV_2D")  # ops whose constant weights take a channel's factor
PRODUCERS = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D")  # ops whose output channel j has its own weights
OUTPUT_AXIS = {"FULLY_CONNECTED": 0, "CONV_2D": 0, "DEPTHWISE_CONV_2D": -1}  # that channel's axis in the weights
POOLS = ("MEAN", "SUM", "AVERAGE_POOL_2D", "MAX_POOL_2D")
PASS = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "RELU") + POOLS  # channel-wise, positively homogeneous
ACTIVATIONS_OK = (0, 1)  # fused activation NONE, RELU


# --- flatbuffer helpers -------------------------------------------------------------------------------------------
def _schema():
    from tensorflow.lite.python import schema_py_generated as schema

    return schema




class _Graph:
    """The main subgraph of a model object with its producers and consumers, and edits on it."""

    def __init__(self, model: bytes):
        self.obj = read_model(model)
        self.sg = self.obj.subgraphs[0]
        codes = {v: k for k, v in vars(_schema().BuiltinOperator).items() if not k.startswith("_")}
        self.kinds = [codes.get(max(c.builtinCode, c.deprecatedBuiltinCode), "") for c in self.obj.operatorCodes]
        self.index()

    def index(self):
        self.producer, self.consumers = {}, {}
        for n, op in enumerate(self.sg.operators):
            for i in op.outputs:
                self.producer[int(i)] = n
            for pos, i in enumerate(op.inputs):
                if i >= 0:
                    self.consumers.setdefault(int(i), []).append((n, pos))

    def kind(self, n: int) -> str:
        return self.kinds[self.sg.operators[n].opcodeIndex]

    def ins(self, n: int) -> list[int]:
        return [int(i) for i in self.sg.operators[n].inputs]

    def out(self, n: int) -> int:
        return int(self.sg.operators[n].outputs[0])

    def shape(self, t: int) -> list[int]:
        return [int(d) for d in self.sg.tensors[t].shape] if self.sg.tensors[t].shape is not None else []

    def last(self, t: int) -> int:
        shape = self.shape(t)
        return shape[-1] if shape else 1

    def constant(self, t: int) -> Optional[np.ndarray]:
        tensor = self.sg.tensors[t]
        data = self.obj.buffers[tensor.buffer].data if 0 < tensor.buffer < len(self.obj.buffers) else None
        if data is None or len(data) == 0 or tensor.type != _schema().TensorType.FLOAT32:
            return None
        return np.frombuffer(bytes(np.asarray(data, np.uint8)), np.float32).reshape(self.shape(t)).copy()

    def integers(self, t: int) -> Optional[np.ndarray]:
        tensor = self.sg.tensors[t]
        if not self.is_constant(t) or tensor.type != _schema().TensorType.INT32:
            return None
        return np.frombuffer(bytes(np.asarray(self.obj.buffers[tensor.buffer].data, np.uint8)), np.int32)

    def is_constant(self, t: int) -> bool:
        tensor = self.sg.tensors[t]
        data = self.obj.buffers[tensor.buffer].data if 0 < tensor.buffer < len(self.obj.buffers) else None
        return data is not None and len(data) > 0

    def activation(self, n: int) -> int:
        return int(getattr(self.sg.operators[n].builtinOptions, "fusedActivationFunction", 0) or 0)

    def replace_input(self, n: int, pos: int, array: np.ndarray, suffix: str) -> None:
        """Op `n` reads a new float32 constant tensor `array` at input `pos` (the old tensor stays for other ops)."""
        schema, old = _schema(), self.sg.tensors[self.ins(n)[pos]]
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(np.ascontiguousarray(array, np.float32).tobytes(), np.uint8)
        self.obj.buffers.append(buffer)
        tensor = schema.TensorT()
        tensor.shape = np.array(array.shape, np.int32)
        tensor.type, tensor.buffer = schema.TensorType.FLOAT32, len(self.obj.buffers) - 1
        tensor.name = (tensor_name(old) + suffix).encode()
        self.sg.tensors.append(tensor)
        self.sg.operators[n].inputs[pos] = len(self.sg.tensors) - 1

    def opcode(self, kind: str) -> int:
        schema = _schema()
        code = getattr(schema.BuiltinOperator, kind)
        for n, c in enumerate(self.obj.operatorCodes):
            if max(c.builtinCode, c.deprecatedBuiltinCode) == code:
                return n
        new = schema.OperatorCodeT()
        new.builtinCode, new.deprecatedBuiltinCode, new.version = code, min(code, 127), 1
        self.obj.operatorCodes.append(new)
        self.kinds.append(kind)
        return len(self.obj.operatorCodes) - 1

    def bytes(self) -> bytes:
        """The edited model: tensors no op uses dropped, and the buffers of the constants an edit replaced emptied."""
        compact(self.obj)
        self.index()
        return write_model(self.obj)


# --- LayerNormalization without NEG -------------------------------------------------------------------------------
def _fold_neg(g: _Graph, n: int) -> str:
    """Removes NEG op `n` (its output read un-negated): the ADD its value reaches through single-consumer MULs becomes
    a SUB (or a SUB an ADD); else the NEG becomes a MUL by -1. Returns how, in words."""
    schema = _schema()
    source, value = g.ins(n)[0], g.out(n)
    t, chain = value, []
    while len(g.consumers.get(t, [])) == 1 and t not in [int(i) for i in g.sg.outputs]:
        user, pos = g.consumers[t][0]
        kind = g.kind(user)
        if kind == "MUL":
            chain.append(user)
            t = g.out(user)
            continue
        if kind in ("ADD", "SUB") and (kind == "ADD" or pos == 1) and g.activation(user) in ACTIVATIONS_OK:
            op = g.sg.operators[user]
            a = g.ins(user)[1 - pos]
            flipped = "SUB" if kind == "ADD" else "ADD"
            options = schema.SubOptionsT() if flipped == "SUB" else schema.AddOptionsT()
            options.fusedActivationFunction = g.activation(user)
            op.opcodeIndex = g.opcode(flipped)
            op.builtinOptionsType = getattr(schema.BuiltinOptions, f"{flipped[0]}{flipped[1:].lower()}Options")
            op.builtinOptions = options
            op.inputs = np.array([a, t], np.int32)
            for user_op, pos_in in g.consumers[value]:
                g.sg.operators[user_op].inputs[pos_in] = source
            g.sg.operators.pop(n)
            g.index()
            return f"NEG->{'MUL->' * len(chain)}{kind} as {flipped}"
        break
    minus_one = g.sg.operators[n]
    minus_one.opcodeIndex = g.opcode("MUL")
    minus_one.builtinOptionsType, minus_one.builtinOptions = schema.BuiltinOptions.MulOptions, schema.MulOptionsT()
    minus_one.inputs = np.array([source, source], np.int32)
    g.replace_input(n, 1, np.array([-1.0], np.float32), "/minus_one")
    g.index()
    return "NEG as MUL by -1"


def without_neg(float_model: bytes) -> tuple[bytes, list[str]]:
    """The float model with every NEG folded away (the same function in float), and how each went."""
    g = _Graph(float_model)
    done = []  # float NEGs only: an integer NEG (shape arithmetic) is no float island
    while True:
        negs = [n for n in range(len(g.sg.operators)) if g.kind(n) == "NEG"
                and g.sg.tensors[g.out(n)].type == _schema().TensorType.FLOAT32]
        if not negs:
            break
        done.append(_fold_neg(g, negs[0]))
    return (g.bytes() if done else bytes(float_model)), done


# --- runs ---------------------------------------------------------------------------------------------------------
def _signature(model: bytes) -> tuple[str, list[str]]:
    from ai_edge_litert.interpreter import Interpreter

    signatures = Interpreter(model_content=model).get_signature_list()
    if not signatures:
        raise ValueError("the model has no signature (LiteRT Quantizer calibrates through one)")
    key = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
    return key, list(signatures[key]["inputs"])


def _keyed(x, names: list[str]) -> dict[str, np.ndarray]:
    x = as_inputs(x)
    arrays = {names[0]: x.single()} if len(x.arrays) == 1 and len(names) == 1 else {n: x[n] for n in names}
    return {k: a if np.issubdtype(a.dtype, np.integer) else a.astype(np.float32) for k, a in arrays.items()}


def _runs(model: bytes, x: dict[str, np.ndarray], keep: tuple = ()):
    """Yields (outputs by name, {tensor index: value} for `keep`, samples) per chunk of a float model's run."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model, experimental_preserve_all_tensors=bool(keep))
    key, _ = _signature(model)
    runner = it.get_signature_runner(key)
    batched = all(len(d["shape_signature"]) and d["shape_signature"][0] == -1
                  for d in runner.get_input_details().values())
    step, n = (CHUNK if batched else 1), len(next(iter(x.values())))
    for start in range(0, n, step):
        got = runner(**{k: a[start:start + step] for k, a in x.items()})
        yield got, {t: np.array(it.get_tensor(t)) for t in keep}, min(step, n - start)


def float_difference(original: bytes, rewritten: bytes, x) -> float:
    """Largest |rewritten - original| over the outputs on `x`, relative to the outputs' largest |value| (LiteRT)."""
    names = _signature(original)[1]
    data = _keyed(x, names)
    a = [np.concatenate([v.reshape(len(v), -1) for _, v in sorted(o.items())], 1) for o, _, _ in _runs(original, data)]
    b = [np.concatenate([v.reshape(len(v), -1) for _, v in sorted(o.items())], 1) for o, _, _ in _runs(rewritten, data)]
    a, b = np.concatenate(a), np.concatenate(b)
    return float(np.abs(a - b).max() / max(float(np.abs(a).max()), 1e-12))


def _channel_ranges(model: bytes, x: dict[str, np.ndarray], tensors: set) -> dict[int, np.ndarray]:
    """Per tensor (index), max |value| of each channel (last axis) over the float model's runs on `x`."""
    ranges: dict[int, np.ndarray] = {}
    for _, kept, _ in _runs(model, x, tuple(sorted(tensors))):
        for t, value in kept.items():
            if value.ndim and value.size and np.issubdtype(value.dtype, np.floating):
                m = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
                ranges[t] = np.maximum(ranges[t], m) if t in ranges else m
    return ranges


# --- SmoothQuant --------------------------------------------------------------------------------------------------
def _passes(g: _Graph, n: int) -> bool:
    """Op `n` maps channel j of its first input to channel j of its output, positively homogeneous per channel."""
    kind, (src, dst) = g.kind(n), (g.ins(n)[0], g.out(n))
    if kind not in PASS or g.last(src) != g.last(dst) or g.activation(n) not in ACTIVATIONS_OK:
        return False
    if kind in ("MEAN", "SUM"):
        axes = g.integers(g.ins(n)[1]) if len(g.ins(n)) > 1 else None
        rank = len(g.shape(src))
        return axes is not None and all(int(a) % rank != rank - 1 for a in np.ravel(axes))
    return True


def _weight(g: _Graph, n: int, t: int) -> Optional[np.ndarray]:
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
    options = g.sg.operators[n].builtinOptions
    if getattr(options, "adjX", False):
        return None
    w = np.swapaxes(w, -1, -2) if getattr(options, "adjY", False) else w  # [..., channels, outputs]
    return np.moveaxis(w, -2, -1).reshape(-1, w.shape[-2])


def _consumers_through(g: _Graph, source: int) -> Optional[tuple[list, list, set]]:
    """(pass-through ops, (matmul op, its activation tensor), the tensors divided with `source`) reached from
    `source`, or None when some consumer is neither (or a model output is)."""
    outputs = {int(i) for i in g.sg.outputs}
    passing, terminals, todo = [], [], [source]
    forward = {source}
    while todo:
        t = todo.pop()
        if t in outputs or not g.consumers.get(t):
            return None
        for n, _ in g.consumers[t]:
            if g.kind(n) in MATMULS and _weight(g, n, t) is not None:
                terminals.append((n, t))
            elif g.ins(n)[0] == t and _passes(g, n) and t not in g.ins(n)[1:]:
                passing.append(n)
                todo.append(g.out(n))
                forward.add(g.out(n))
            else:
                return None
    return passing, terminals, forward


def _plans(g: _Graph, t: int, channels: int, depth: int = 0) -> list[frozenset]:
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


def _closed(g: _Graph, plan: frozenset, reached: tuple) -> bool:
    """Every divided tensor is read only where the division is accounted for."""
    divided = {item[1] for item in plan if item[0] == "t"}
    region = {g.producer[t] for t in divided}
    passing, terminals, forward = reached
    ahead = set(passing) | {n for n, _ in terminals}
    outputs = {int(i) for i in g.sg.outputs}
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


def _scale_channels(g: _Graph, plan: frozenset, s: np.ndarray) -> None:
    for item in sorted(plan, key=lambda i: (i[0], i[1:])):
        if item[0] == "c":
            _, n, pos = item
            g.replace_input(n, pos, g.constant(g.ins(n)[pos]) / s, "/smoothquant")
        elif item[0] == "w":
            n = item[1]
            ins = g.ins(n)
            w = g.constant(ins[1])
            g.replace_input(n, 1, w / _along(s, w.ndim, OUTPUT_AXIS[g.kind(n)]), "/smoothquant")
            if len(ins) > 2 and ins[2] >= 0:
                g.replace_input(n, 2, g.constant(ins[2]) / s, "/smoothquant")


def _along(s: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """`s` shaped to multiply a weight array of `ndim` dimensions along `axis`."""
    shape = [1] * ndim
    shape[axis] = len(s)
    return s.reshape(shape)


def _scale_weights(g: _Graph, terminals: list, s: np.ndarray) -> None:
    for n, _ in terminals:
        w = g.constant(g.ins(n)[1])
        if g.kind(n) in ("FULLY_CONNECTED", "CONV_2D"):  # input channels last
            w = w * _along(s, w.ndim, -1)
        else:
            adj_y = bool(getattr(g.sg.operators[n].builtinOptions, "adjY", False))
            w = w * (s[None, :] if adj_y else s[:, None])
        g.replace_input(n, 1, w, "/smoothquant")


def smooth(float_model: bytes, x_calib) -> tuple[bytes, list[str]]:
    """The float model with its outlier channels that feed matmuls moved into the matmuls' weights (the same function
    in float), and what was scaled, in words; no change (and an empty list) when there is no such channel."""
    g = _Graph(float_model)
    data = _keyed(x_calib, _signature(float_model)[1])
    acts = {g.ins(n)[0] for n in range(len(g.sg.operators)) if g.kind(n) in MATMULS and _weight(g, n, g.ins(n)[0])
            is not None}
    ranges = _channel_ranges(float_model, data, acts)
    sources = {}
    for t in acts:
        r = ranges.get(t)
        if r is None or r.size < 2 or not (r > OUTLIER_RATIO * max(float(np.median(r)), 1e-12)).any():
            continue
        while g.producer.get(t) is not None and _passes(g, g.producer[t]):
            t = g.ins(g.producer[t])[0]
        sources[t] = True
    words = []
    for source in sorted(sources):
        reached = _consumers_through(g, source)
        if reached is None:
            continue
        terminals = reached[1]
        channels = g.last(source)
        x_max = np.max([ranges[t] for _, t in terminals if t in ranges], axis=0)
        w_max = np.max([np.abs(_weight(g, n, t)).max(axis=0) for n, t in terminals], axis=0)
        outliers = (x_max > OUTLIER_RATIO * max(float(np.median(x_max)), 1e-12)) & (w_max > 0)
        plan = next((p for p in _plans(g, source, channels) if _closed(g, p, reached)), None)
        if plan is None or not outliers.any():
            continue
        s = np.ones(channels, np.float64)
        s[outliers] = x_max[outliers] ** ALPHA / w_max[outliers] ** (1 - ALPHA)
        _scale_channels(g, plan, s)
        _scale_weights(g, terminals, s)
        g.index()
        where = ", ".join(sorted({g.kind(i[1]) for i in plan if i[0] in "cw"}))
        words.append(f"channel{'s' * int(outliers.sum() != 1)} {', '.join(map(str, np.flatnonzero(outliers)))} of"
                     f" {tensor_name(g.sg.tensors[source])} (max |x| {', '.join(f'{v:.4g}' for v in x_max[outliers])}"
                     f" against a median of {float(np.median(x_max)):.3g}) divided by s =" 
                     f" {', '.join(f'{v:.4g}' for v in s[outliers])} at the constants of its {where}, the weights of"
                     f" {len(terminals)} {'/'.join(sorted({g.kind(n) for n, _ in terminals}))} multiplied")
    return (g.bytes() if words else bytes(float_model)), words


# --- int8 ---------------------------------------------------------------------------------------------------------
def static_int8(float_model: bytes, x_calib) -> bytes:
    """LiteRT Quantizer's static_wi8_ai8 of the float model with its batch fixed to 1, calibrated on `x_calib`
    (one sample per batch, keyed by signature and input name)."""
    from litert_quantizer import quantizer, recipe

    model = static_batch(float_model)[0]
    key, names = _signature(model)
    data = _keyed(x_calib, names)
    samples = len(next(iter(data.values())))
    q = quantizer.Quantizer(model, recipe.static_wi8_ai8())
    calibration = q.calibrate({key: [{k: a[i:i + 1] for k, a in data.items()} for i in range(samples)]})
    return bytes(q.quantize(calibration, enable_progress_report=False).quantized_model)


def _candidate(rung: str, started: float, model: Optional[bytes] = None, detail: str = "",
               error: str = "", applies: bool = True) -> RepairCandidate:
    if model is not None and not error:
        error = integer_only(model) or loads_on_reference(model)
        model = None if error else model
    return RepairCandidate(rung, LABELS[rung], detail=detail, model=model, error=error, applies=applies,
                           seconds=time.perf_counter() - started)


def _exact(original: bytes, rewritten: bytes, x_select, what: str) -> tuple[str, str]:
    """(error, words): the rewrite checked against the original float model on the selection samples."""
    difference = float_difference(original, rewritten, x_select)
    words = f"{what}; largest float difference {difference:.2g} of the output's range on the selection samples"
    if not difference <= TOLERANCE:
        return f"the rewrite is not exact in float (largest difference {difference:.2g} of the output's range)", words
    return "", words


def _layernorm(float_model: bytes, x_calib, x_select, started: float) -> RepairCandidate:
    rewritten, done = without_neg(float_model)
    if not done:
        return _candidate(LAYERNORM_WITHOUT_NEG, started, applies=False, error="no NEG in the model")
    kinds = sorted(set(done))
    error, words = _exact(float_model, rewritten, x_select, f"{len(done)} NEG op{'s' * (len(done) != 1)} folded"
                          f" ({'; '.join(f'{done.count(k)} {k}' for k in kinds)})")
    if error:
        return _candidate(LAYERNORM_WITHOUT_NEG, started, detail=words, error=error)
    return _candidate(LAYERNORM_WITHOUT_NEG, started, static_int8(rewritten, x_calib),
                      f"{words}; LiteRT static int8 (batch fixed to 1)")


def _smoothquant(float_model: bytes, x_calib, x_select, started: float) -> RepairCandidate:
    base, negs = without_neg(float_model)
    rewritten, done = smooth(base, x_calib)
    if not done:
        return _candidate(SMOOTHQUANT, started, applies=False, error="no outlier channel feeding a FULLY_CONNECTED,"
                          " BATCH_MATMUL or CONV_2D through channel-wise ops")
    what = "; ".join(done) + (f"; {len(negs)} NEG op{'s' * (len(negs) != 1)} folded" if negs else "")
    error, words = _exact(float_model, rewritten, x_select, what)
    if error:
        return _candidate(SMOOTHQUANT, started, detail=words, error=error)
    return _candidate(SMOOTHQUANT, started, static_int8(rewritten, x_calib), f"{words}; LiteRT static int8 (batch"
                      " fixed to 1)")


BUILDERS = {LAYERNORM_WITHOUT_NEG: _layernorm, SMOOTHQUANT: _smoothquant}


def rewrite_candidates(float_model: bytes, x_calib, x_select) -> Iterator[RepairCandidate]:
    """Rung (d)'s candidates, each built when asked for: the model without NEG, then with SmoothQuant scaling (and
    without NEG). `x_calib`, `x_select`: Inputs, a dict input name -> array, or the one array of a one-input model.
    A rewrite that fails yields a candidate with its error instead of raising."""
    for rung in REWRITES:
        started = time.perf_counter()
        try:
            candidate = BUILDERS[rung](bytes(float_model), x_calib, x_select, started)
        except (ValueError, RuntimeError, KeyError, IndexError) as exc:
            line = (str(exc).strip().splitlines() or [""])[0]
            candidate = _candidate(rung, started, error=f"{type(exc).__name__}: {line}")
        yield candidate
