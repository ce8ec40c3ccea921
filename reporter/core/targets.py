"""Where the shipped model runs (--target): what each target can run, what it values, and what it adds.

- `cpu`: LiteRT on a CPU. Any scheme runs, float ops included; latency as measured here counts beside size.
- `int8`: integer-only hardware (NPUs, Edge TPU-class accelerators, TFLite Micro): every tensor int8 (int32
  bias), int8 input and output, no float op. Which models qualify is read from the measured tensor types, never
  from a variant's name; the shipped model is also run with LiteRT's reference kernels (what TFLite Micro and
  many NPUs implement), and their agreement with the default kernels is stated. Host latency says nothing of
  the device's, so size decides.
- `gpu`: a GPU delegate computes in float16 or float32: the float16 model, or float itself. Host latency is not
  the GPU's, so size decides.

Pure and typed: reporter.findings.decision reads these rules; reporter.run.settings offers the names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional

from reporter.core import judgement as jd
from reporter.core import variants

CPU, INT8, GPU = "cpu", "int8", "gpu"
TARGETS = (CPU, INT8, GPU)
DEFAULT = CPU

# Reference-kernel agreement: the evaluation samples the int8 target's model is run on with both kernel sets
# (reference kernels are slow: a convolution runs without SIMD).
REFERENCE_SAMPLES = 256


@dataclass(frozen=True)
class Target:
    name: str
    words: str  # in a sentence: "on a CPU"
    hardware: str  # after "Runs on" in a table header: "a CPU"
    adds: tuple = ()  # variants a run for this target builds besides those asked for
    timed: bool = True  # the latency measured here is the target's (a CPU's)


REGISTRY = {
    CPU: Target(CPU, "on a CPU", "a CPU"),
    INT8: Target(INT8, "on integer-only hardware", "integer-only hardware", adds=(variants.INT8_IO,), timed=False),
    GPU: Target(GPU, "on a GPU delegate", "a GPU delegate", adds=(variants.F16,), timed=False),
}



def of(name: str) -> Target:
    """The target called `name`; a CPU for a name this version does not know (a hand-edited report.json)."""
    return REGISTRY.get(name, REGISTRY[DEFAULT])


GPU_LANE = frozenset({variants.FLOAT, variants.F16})  # float16 or float32 compute


SUB_BYTE_KEYS = ("int4", "int2")  # tensor kinds counted apart (reporter.measure.structure.tensor_types)


def integer_only(tensor_types: Mapping[str, int]) -> bool:
    """A model whose every tensor is int8 or int32 (biases, shapes): no float, int16, int4, int2 or other tensor, so
    no float op and int8 input and output. Read from the measured tensor counts."""
    return bool(tensor_types.get("int8")) and not any(
        tensor_types.get(kind) for kind in ("float32", "int16", "other", *SUB_BYTE_KEYS))


def quantized(tensor_types: Mapping[str, int], weight_coverage: Optional[Mapping] = None) -> bool:
    """A model with any tensor stored in less than float32 (int8, int16, int4, int2, or weights in float16): DRQ that
    quantized no weight is float by another name. With the weights read per op type (`weight_coverage`, records
    with `.quantized`), a float16 weight counts and an "other" tensor (a recurrent loop's bool, say) does not;
    without them (reports written before), any "other" tensor counts, as float16 is counted there."""
    if any(tensor_types.get(kind) for kind in ("int8", "int16", *SUB_BYTE_KEYS)):
        return True
    if weight_coverage:
        return any(c.quantized for c in weight_coverage.values())
    return bool(tensor_types.get("other"))


def runs_on(target: str, name: str, tensor_types: Mapping[str, int]) -> bool:
    """Whether the model called `name` with these tensor types runs on `target` as built."""
    if target == INT8:
        return integer_only(tensor_types)
    if target == GPU:
        return name in GPU_LANE
    return True


def cost(target: str, size_ratio: float, latency_ms: Optional[float], fastest_ms: Optional[float]) -> float:
    """What a model that meets the accuracy target costs on `target`, against the cheapest of those that meet it:
    size in doublings over the smallest, and on a CPU latency in doublings over the fastest beyond timing noise
    (within judgement.LATENCY_SAME_RATIO, or less than judgement.LATENCY_DECISION_MIN_MS apart, it is as fast: a
    microsecond model's timings jump run to run, and a decision must not). Lower is better."""
    size = math.log2(max(size_ratio, 1.0))
    if target != CPU or latency_ms is None or not fastest_ms or latency_ms - fastest_ms < jd.LATENCY_DECISION_MIN_MS:
        return size
    slower = math.log2(max(latency_ms / fastest_ms, 1.0)) - math.log2(1.0 + jd.LATENCY_SAME_RATIO)
    return size + max(slower, 0.0)


def faster(latency_ms: Optional[float], other_ms: Optional[float]) -> bool:
    """`latency_ms` is faster than `other_ms` beyond timing noise (the rule `cost` reads)."""
    return bool(latency_ms and other_ms) and latency_ms * (1 + jd.LATENCY_SAME_RATIO) < other_ms \
        and other_ms - latency_ms >= jd.LATENCY_DECISION_MIN_MS


COST_SAME = 0.1  # costs this close (a tenth of a doubling) are a tie: the more accurate model is preferred
