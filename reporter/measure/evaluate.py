"""Running TFLite models with the LiteRT interpreter: batched outputs and single-sample latency."""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np

# Input bytes per invoke: one invoke for a typical evaluation set, bounded memory for a large one.
BATCH_BYTES = 32 * 1024 * 1024


def _interpreter(model: bytes, num_threads=None):
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_content=model, num_threads=num_threads)


def io_counts(model: bytes) -> tuple[int, int]:
    """How many inputs and outputs the model has."""
    it = _interpreter(model)
    return len(it.get_input_details()), len(it.get_output_details())


def io_shapes(model: bytes) -> tuple[list[int], list[int]]:
    """The input shape signature (-1 for dynamic dimensions) and output shape of the model."""
    it = _interpreter(model)
    inp = it.get_input_details()[0]
    out = it.get_output_details()[0]
    in_sig = inp.get("shape_signature")
    if in_sig is None or len(in_sig) == 0:
        in_sig = inp["shape"]
    return [int(d) for d in in_sig], [int(d) for d in out["shape"]]


def _quantize(x: np.ndarray, detail: dict) -> np.ndarray:
    """Inputs of an integer-input model must be quantized with its scale and zero point."""
    dtype = detail["dtype"]
    if not np.issubdtype(dtype, np.integer):
        return x.astype(dtype)
    scale, zero = detail["quantization"]
    info = np.iinfo(dtype)
    return np.clip(np.round(x / scale + zero), info.min, info.max).astype(dtype)


def _dequantize(y: np.ndarray, detail: dict) -> np.ndarray:
    if not np.issubdtype(y.dtype, np.integer):
        return y.astype(np.float32)
    scale, zero = detail["quantization"]
    return ((y.astype(np.float32) - zero) * scale).astype(np.float32)


def predict(model: bytes, x: np.ndarray) -> np.ndarray:
    """Raw outputs (dequantized to float) for every sample of `x`, run in large batches.

    Models with a fixed batch dimension (like a tf_keras LSTM built with batch_size=1) cannot be
    resized; they run one sample per invoke.
    """
    it = _interpreter(model, num_threads=os.cpu_count())
    inp = it.get_input_details()[0]
    sig = inp.get("shape_signature")
    fixed_batch = sig is not None and len(sig) > 0 and sig[0] != -1
    sample_bytes = max(1, int(np.prod(x.shape[1:])) * 4)
    batch = int(inp["shape"][0]) if fixed_batch else max(1, BATCH_BYTES // sample_bytes)
    if not fixed_batch:
        it.resize_tensor_input(inp["index"], [min(batch, len(x)), *x.shape[1:]])
    it.allocate_tensors()
    out_detail = it.get_output_details()[0]
    current = min(batch, len(x)) if not fixed_batch else batch
    results = []
    for start in range(0, len(x), batch):
        chunk = x[start : start + batch]
        n = len(chunk)
        if fixed_batch and n < batch:
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], batch - n, axis=0)])
        elif not fixed_batch and n != current:
            it.resize_tensor_input(inp["index"], [n, *x.shape[1:]])
            it.allocate_tensors()
            current = n
        # Recurrent ops keep their state in variable tensors that outlive an invoke: without a
        # reset, each sample would start from the previous sample's state.
        it.reset_all_variables()
        it.set_tensor(inp["index"], _quantize(chunk, inp))
        it.invoke()
        results.append(_dequantize(it.get_tensor(out_detail["index"]), out_detail)[:n])
    return np.concatenate(results).reshape(len(x), -1)


# Held around every timing when set: the batch runner's workers share one, so that at most one model is
# timed at a time across them (their other stages still run meanwhile). None in a single `run`.
_timing_lock = None


def set_timing_lock(lock):
    """Makes `latency_ms` hold `lock` (a context manager) while it times; None removes it. Returns the
    lock that was set before."""
    global _timing_lock
    previous, _timing_lock = _timing_lock, lock
    return previous


def latency_ms(model: bytes, sample: np.ndarray, runs: int = 50, warmup: int = 5) -> tuple[float, float, int]:
    """Median and p90 milliseconds of one single-sample invoke, single-threaded, after warm-up.

    The warm-up and the timed invokes run under the timing lock when one is set (set_timing_lock).
    """
    if runs < 1:
        raise ValueError(f"latency needs at least one timed run, not {runs}")
    it = _interpreter(model, num_threads=1)
    inp = it.get_input_details()[0]
    sig = inp.get("shape_signature")
    if sig is not None and len(sig) > 0 and sig[0] == -1:
        it.resize_tensor_input(inp["index"], [1, *sample.shape[1:]])
    it.allocate_tensors()
    it.set_tensor(inp["index"], _quantize(sample[:1], inp))
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
