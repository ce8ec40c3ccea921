"""Running TFLite models with the LiteRT interpreter: batched outputs and single-sample latency."""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np

from reporter.measure.signature import Inputs, Port, Signature, by_position, read

# Input bytes per invoke: one invoke for a typical evaluation set, bounded memory for a large one.
BATCH_BYTES = 32 * 1024 * 1024


def _interpreter(model: bytes, num_threads=None, reference: bool = False):
    """LiteRT's interpreter; `reference`: its reference kernels (BUILTIN_REF, what TFLite Micro and many NPUs
    implement) instead of the default optimized ones."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    if reference:
        return Interpreter(model_content=model, num_threads=1,
                           experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    return Interpreter(model_content=model, num_threads=num_threads)


def signature(model: bytes, input_names=None, output_names=None) -> Signature:
    """The model's inputs and outputs by name (reporter.measure.signature.read)."""
    return read(_interpreter(model), input_names, output_names)


def as_inputs(x) -> Inputs:
    """`x` as Inputs: a single array is the one input of a one-input model."""
    if isinstance(x, Inputs):
        return x
    if isinstance(x, dict):
        return Inputs(x)
    return Inputs({"": np.asarray(x)})


def positional(x, model: bytes) -> list[np.ndarray]:
    """`x`'s arrays in the order of `model`'s inputs, matched by name through its signature (what the
    Quantization Debugger, which feeds inputs by position, needs)."""
    return by_position(as_inputs(x), _interpreter(model))


def _feed(x: Inputs, ports) -> dict:
    """Which array goes into which input port: by name, or the one array into the one input."""
    if len(ports) == 1 and len(x.arrays) == 1:
        return {ports[0].index: x.single()}
    missing = [p.key for p in ports if p.key not in x.arrays]
    if missing:
        raise ValueError(f"no data for input(s) {', '.join(missing)} (data for: {', '.join(x.names)})")
    return {p.index: x[p.key] for p in ports}


def _to_port(x: np.ndarray, port: Port) -> np.ndarray:
    """Data as the input takes it: quantized with its scale and zero point for a quantized input, as they
    are for an integer input (ids), cast to its float type otherwise."""
    dtype = np.dtype(port.dtype)
    if port.quantized:
        info = np.iinfo(dtype)
        return np.clip(np.round(x / port.scale + port.zero_point), info.min, info.max).astype(dtype)
    return x.astype(dtype)


def _dequantize(y: np.ndarray, port: Port) -> np.ndarray:
    if not port.quantized:
        return y.astype(np.float32)
    return ((y.astype(np.float32) - port.zero_point) * port.scale).astype(np.float32)


def _only_output(sig: Signature) -> Port:
    if len(sig.outputs) != 1:
        raise ValueError(f"the model has {len(sig.outputs)} outputs; quant-report measures one")
    return sig.outputs[0]


def predict(model: bytes, x) -> np.ndarray:
    """Raw outputs (dequantized to float, one row per sample) of a one-output model for every sample of `x`
    (Inputs, or one array for a one-input model), fed by name and run in large batches."""
    return _run(model, x, only=True)[""]


def predict_all(model: bytes, x, reference: bool = False) -> dict[str, np.ndarray]:
    """Every output of the model, by signature output name, for every sample of `x` (see `predict`); with
    `reference`, run by LiteRT's reference kernels."""
    return _run(model, x, only=False, reference=reference)


def _run(model: bytes, x, only: bool, reference: bool = False) -> dict[str, np.ndarray]:
    """The outputs ({"": the one output} when `only`).

    Models with a fixed batch dimension (like a tf_keras LSTM built with batch_size=1) cannot be
    resized; they run one sample per invoke.
    """
    x = as_inputs(x)
    it = _interpreter(model, num_threads=os.cpu_count(), reference=reference)
    sig = read(it)
    ports = list(sig.inputs)
    feed = _feed(x, ports)
    out_ports = [_only_output(sig)] if only else list(sig.outputs)
    fixed_batch = any(len(p.shape) > 0 and p.shape[0] != -1 for p in ports)
    sample_bytes = max(1, sum(int(np.prod(a.shape[1:])) for a in feed.values()) * 4)
    batch = int(ports[0].shape[0]) if fixed_batch else max(1, BATCH_BYTES // sample_bytes)
    n_all = len(x)
    current = min(batch, n_all) if not fixed_batch else batch
    if not fixed_batch:
        for p in ports:
            it.resize_tensor_input(p.index, [current, *feed[p.index].shape[1:]])
    it.allocate_tensors()
    results: dict[int, list] = {p.index: [] for p in out_ports}
    for start in range(0, n_all, batch):
        n = min(batch, n_all - start)
        if not fixed_batch and n != current:
            for p in ports:
                it.resize_tensor_input(p.index, [n, *feed[p.index].shape[1:]])
            it.allocate_tensors()
            current = n
        # Recurrent ops keep their state in variable tensors that outlive an invoke: without a
        # reset, each sample would start from the previous sample's state.
        it.reset_all_variables()
        for p in ports:
            chunk = feed[p.index][start : start + batch]
            if fixed_batch and n < batch:
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], batch - n, axis=0)])
            it.set_tensor(p.index, _to_port(chunk, p))
        it.invoke()
        for p in out_ports:
            results[p.index].append(_dequantize(it.get_tensor(p.index), p)[:n])
    return {("" if only else p.key): np.concatenate(results[p.index]).reshape(n_all, -1) for p in out_ports}


# Held around every timing when set: the batch runner's workers share one, so that at most one model is
# timed at a time across them (their other stages still run meanwhile). None in a single `run`.
_timing_lock = None


def set_timing_lock(lock):
    """Makes `latency_ms` hold `lock` (a context manager) while it times; None removes it. Returns the
    lock that was set before."""
    global _timing_lock
    previous, _timing_lock = _timing_lock, lock
    return previous


def latency_ms(model: bytes, sample, runs: int = 50, warmup: int = 5) -> tuple[float, float, int]:
    """Median and p90 milliseconds of one single-sample invoke, single-threaded, after warm-up.

    The warm-up and the timed invokes run under the timing lock when one is set (set_timing_lock).
    """
    if runs < 1:
        raise ValueError(f"latency needs at least one timed run, not {runs}")
    it = _interpreter(model, num_threads=1)
    sample = as_inputs(sample)
    ports = list(read(it).inputs)
    feed = _feed(sample, ports)
    for p in ports:
        if len(p.shape) > 0 and p.shape[0] == -1:
            it.resize_tensor_input(p.index, [1, *feed[p.index].shape[1:]])
    it.allocate_tensors()
    for p in ports:
        it.set_tensor(p.index, _to_port(feed[p.index][:1], p))
    lock = _timing_lock
    with lock if lock is not None else contextlib.nullcontext():
        for _ in range(warmup):
            it.invoke()
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            it.invoke()
            times.append((time.perf_counter() - t0) * 1000.0)
    return float(np.median(times)), float(np.percentile(times, 90)), runs


def _integer_outputs(model: bytes) -> dict[str, dict]:
    """Each output (by signature key) made by an integer tensor: that tensor's details. The output itself when it
    is int8/int16, else the input of the DEQUANTIZE that makes it; outputs made in float are left out."""
    interpreter = _interpreter(model)
    sig = signature(model)
    tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    makers = {}
    for op in interpreter._get_ops_details():  # noqa: SLF001 - the only way to read which op makes a tensor
        for out in op["outputs"]:
            makers[int(out)] = op
    found = {}
    for port in sig.outputs:
        tensor = tensors.get(port.index)
        op = makers.get(port.index)
        if tensor is not None and np.dtype(tensor["dtype"]) == np.float32 and op is not None \
                and op["op_name"] == "DEQUANTIZE":
            tensor = tensors.get(int(op["inputs"][0]))
        if tensor is not None and np.dtype(tensor["dtype"]) in (np.int8, np.int16):
            found[port.key] = tensor
    return found


def integer_output_ranges(model: bytes) -> dict[str, tuple[float, float, float, str]]:
    """Each output (by signature key) made by an integer tensor: the real values it can hold and its step,
    (low, high, scale, dtype name)."""
    ranges = {}
    for key, tensor in _integer_outputs(model).items():
        scale, zero = tensor["quantization"]
        if not scale:
            continue
        info = np.iinfo(np.dtype(tensor["dtype"]))
        ranges[key] = (float((info.min - zero) * scale), float((info.max - zero) * scale), float(scale),
                       np.dtype(tensor["dtype"]).name)
    return ranges


def integer_output_names(model: bytes, keys) -> list[str]:
    """For the outputs `keys` (signature keys) made by an integer tensor, the names by which the op that makes each
    may be known: the output tensor's own name (a DEQUANTIZE keeps the float model's name) and the integer
    tensor's, in that order."""
    found = _integer_outputs(model)
    tensors = {t["index"]: t["name"] for t in _interpreter(model).get_tensor_details()}
    ports = {p.key: p for p in signature(model).outputs}
    names = []
    for key in keys:
        if key in found and key in ports:
            names += [n for n in (tensors.get(ports[key].index), found[key]["name"]) if n and n not in names]
    return names


def clipped_share(values: np.ndarray, low: float, high: float, step: float) -> float:
    """The share of `values` (finite ones) that an integer output with range [low, high] clips by more than
    rounding does: beyond it by more than half a `step` and more than CLIP_MARGIN of the range (a softmax's
    int8 output stops at 0.996, one step short of 1.0: that is rounding, not clipping)."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return 0.0
    margin = max(step / 2, CLIP_MARGIN * (high - low))
    return float(np.mean((values < low - margin) | (values > high + margin)))


CLIP_MARGIN = 0.01  # a value beyond an integer output's range by less than this share of the range is not clipped
