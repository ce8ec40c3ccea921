"""Running TFLite models through reporter.measure.runtime: batched outputs, single-sample latency, integer outputs."""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Optional

import numpy as np

from reporter.measure import graph, graph_edits, runtime
from reporter.measure.signature import Port, Signature, by_position, read


def signature(model: bytes, input_names=None, output_names=None, joined: bool = False) -> Signature:
    """The model's inputs and outputs by name (reporter.measure.signature.read); with `joined`, outputs that a task
    kind reads as one (a detector's four) as the one port that stands for them, as `predict` gives them."""
    sig = read(runtime.load(model), input_names, output_names)
    found = _joined(model, sig) if joined else None
    return sig if found is None else Signature(sig.key, sig.inputs, (found.port,))


def _joined(model: bytes, sig: Signature):
    """How a registered task kind reads the outputs of `model` as one (reporter.measure.kinds.base.Joined: a
    detector's four postprocess outputs; a raw YOLO output with the input's size its pixel boxes are divided by), or
    None."""
    if not sig.outputs:
        return None
    from reporter.core import tasks

    return next((j for j in (kind.joins(model, sig) for kind in tasks.kinds()) if j is not None), None)


as_inputs = runtime.as_inputs


def positional(x, model: bytes) -> list[np.ndarray]:
    """`x`'s arrays in the order of `model`'s inputs, matched by name through its signature (what the
    Quantization Debugger, which feeds inputs by position, needs)."""
    return by_position(as_inputs(x), runtime.load(model))


def _only_output(sig: Signature) -> Port:
    if len(sig.outputs) != 1:
        raise ValueError(f"the model has {len(sig.outputs)} outputs; quant-report measures one")
    return sig.outputs[0]


def joined_outputs(model: bytes, outputs: dict) -> Optional[np.ndarray]:
    """Outputs of `model` by signature key from another runtime (TFLite Micro) read as one, as `predict` gives
    them for a model whose outputs a task kind reads so (a detector's); None for any other model."""
    sig = read(runtime.load(model))
    found = _joined(model, sig)
    if found is None or not all(p.key in outputs for p in sig.outputs):
        return None
    return found.pack({p.index: np.asarray(outputs[p.key]).reshape(len(outputs[p.key]), -1) for p in sig.outputs})


def predict(model: bytes, x, reference: bool = False) -> np.ndarray:
    """Raw outputs (dequantized to float, one row per sample) of a one-output model for every sample of `x`
    (Inputs, or one array for a one-input model), fed by name and run in large batches; a model whose outputs a
    task kind reads as one (a detector's) gives them packed into one row per sample."""
    return _run(model, x, only=True, reference=reference)[""]


def predict_all(model: bytes, x, reference: bool = False) -> dict[str, np.ndarray]:
    """Every output of the model, by signature output name, for every sample of `x` (see `predict`); with
    `reference`, run by LiteRT's reference kernels."""
    return _run(model, x, only=False, reference=reference)


def _run(model: bytes, x, only: bool, reference: bool = False) -> dict[str, np.ndarray]:
    """The outputs ({"": the one output} when `only`), by reporter.measure.runtime.run."""
    sig = read(runtime.load(model))
    joined = _joined(model, sig)
    out_ports = [_only_output(sig)] if only and joined is None else list(sig.outputs)
    found = runtime.run(model, as_inputs(x), sig.inputs, out_ports, reference=reference)
    if joined is not None:
        return {"" if only else joined.port.key: joined.pack(found)}
    return {("" if only else p.key): found[p.index] for p in out_ports}


def as_predicted(model: bytes, by_key: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of another runtime's run (by signature key, one entry per sample) as `predict_all` gives them: one
    flattened row per sample, and a detector's several outputs packed into one by its task kind."""
    sig = read(runtime.load(model))
    joined = _joined(model, sig)
    if joined is None:
        return by_key
    rows = {p.index: np.asarray(by_key[p.key]).reshape(len(by_key[p.key]), -1) for p in sig.outputs}
    return {joined.port.key: joined.pack(rows)}


# Held around every timing when set: the batch runner's workers share one, so that at most one model is
# timed at a time across them (their other stages still run meanwhile). None in a single `run`.
_timing_lock = None


def set_timing_lock(lock):
    """Makes `latency_ms` hold `lock` (a context manager) while it times; None removes it. Returns the
    lock that was set before."""
    global _timing_lock
    previous, _timing_lock = _timing_lock, lock
    return previous


@functools.lru_cache(maxsize=1)
def timing_overhead_ms(runs: int = 200) -> float:
    """The median of an empty invoke on this host (a model of one ADD on one float), timed as `latency_ms` times a
    model: what the interpreter and the timer cost whatever the model (judgement.timing_floor). Once per process."""
    return latency_ms(graph_edits.one_add_model(), np.zeros((1, 1), np.float32), runs=runs)[0]


def latency_ms(model: bytes, sample, runs: int = 50, warmup: int = 5) -> tuple[float, float, int]:
    """Median and p90 milliseconds of one single-sample invoke, single-threaded, after warm-up.

    The warm-up and the timed invokes run under the timing lock when one is set (set_timing_lock).
    """
    if runs < 1:
        raise ValueError(f"latency needs at least one timed run, not {runs}")
    it = runtime.load(model, num_threads=1)
    sample = as_inputs(sample)
    ports = list(read(it).inputs)
    feed = runtime.feed(sample, ports)
    for p in ports:
        if len(p.shape) > 0 and p.shape[0] == -1:
            it.resize_tensor_input(p.index, [1, *feed[p.index].shape[1:]])
    it.allocate_tensors()
    for p in ports:
        it.set_tensor(p.index, runtime.to_port(feed[p.index][:1], p))
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
    interpreter = runtime.load(model)
    sig = signature(model)
    tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    makers = {}
    for op in graph.op_details(model):
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
    tensors = {t["index"]: t["name"] for t in runtime.load(model).get_tensor_details()}
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
