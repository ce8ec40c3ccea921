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
from typing import Callable, Mapping, Optional

from reporter.core import variants

CPU, INT8, GPU = "cpu", "int8", "gpu"
DEFAULT = CPU

# Reference-kernel agreement: the evaluation samples the int8 target's model is run on with both kernel sets
# (reference kernels are slow: a convolution runs without SIMD).
REFERENCE_SAMPLES = 256

SUB_BYTE_KEYS = ("int4", "int2")  # tensor kinds counted apart (reporter.measure.structure.tensor_types)
INTEGER_KEYS = ("int8", "int16", *SUB_BYTE_KEYS)


def integer_only(tensor_types: Mapping[str, int]) -> bool:
    """A model whose every tensor is int8 or int32 (biases, shapes): no float, int16, int4, int2 or other tensor, so
    no float op and int8 input and output. Read from the measured tensor counts."""
    return bool(tensor_types.get("int8")) and not any(
        tensor_types.get(kind) for kind in ("float32", "int16", "other", *SUB_BYTE_KEYS))


def float_compute(tensor_types: Mapping[str, int]) -> bool:
    """A model a GPU delegate computes in float16 or float32: no integer tensor (int8, int16, int4, int2), so no
    hybrid or integer kernel; float16 weights (stored as "other" or dequantized) count. Read from the measured
    tensor counts, never from a variant's name (a float16 recipe qualifies as the built-in float16 does)."""
    return not any(tensor_types.get(kind) for kind in INTEGER_KEYS)


def anything(tensor_types: Mapping[str, int]) -> bool:
    """A CPU runs every scheme LiteRT runs."""
    return True


@dataclass(frozen=True)
class Target:
    """One place a model can ship to: what it runs (read from the measured model's tensor types), what the
    decision weighs there, which kernels its accuracy is measured on, and how the report names it."""

    name: str
    words: str  # in a sentence: "on a CPU"
    hardware: str  # after "Runs on" in a table header: "a CPU"
    runs: Callable[[Mapping[str, int]], bool] = anything  # whether a model with these tensor types runs there
    adds: tuple = ()  # variants a run for this target builds besides those asked for
    timed: bool = True  # the latency measured here is the target's (a CPU's): it counts beside size
    kernels: str = "LiteRT's default kernels"  # what its accuracy is measured on
    reference_kernels: bool = False  # the shipped model is also run on LiteRT's reference kernels
    runs_not: str = ""  # why a model that meets the accuracy target elsewhere does not run here


REGISTRY = {t.name: t for t in (
    Target(CPU, "on a CPU", "a CPU"),
    Target(INT8, "on integer-only hardware", "integer-only hardware", runs=integer_only, adds=(variants.INT8_IO,),
           timed=False, reference_kernels=True, runs_not="integer-only hardware runs no float or int16 op"),
    Target(GPU, "on a GPU delegate", "a GPU delegate", runs=float_compute, adds=(variants.F16,), timed=False,
           runs_not="a GPU delegate computes in float16 or float32 only"),
)}
TARGETS = tuple(REGISTRY)


def of(name: Optional[str]) -> Target:
    """The target called `name`; a CPU for None (reports written before --target) or a name this version does not
    know (a hand-edited report.json)."""
    return REGISTRY.get(name or DEFAULT, REGISTRY[DEFAULT])


def quantized(tensor_types: Mapping[str, int], weight_coverage: Optional[Mapping] = None) -> bool:
    """A model with any tensor stored in less than float32 (int8, int16, int4, int2, or weights in float16): DRQ that
    quantized no weight is float by another name. With the weights read per op type (`weight_coverage`, records
    with `.quantized`), a float16 weight counts and an "other" tensor (a recurrent loop's bool, say) does not;
    without them (reports written before), any "other" tensor counts, as float16 is counted there."""
    if any(tensor_types.get(kind) for kind in INTEGER_KEYS):
        return True
    if weight_coverage:
        return any(c.quantized for c in weight_coverage.values())
    return bool(tensor_types.get("other"))


def cost(target: str, size_ratio: float, slower_ratio: Optional[float]) -> float:
    """What a model that meets the accuracy target costs on `target`, against the cheapest of those that meet it:
    size in doublings over the smallest, and where the target is timed, latency in doublings over the fastest when
    it is slower beyond timing noise (`slower_ratio`: its median over the fastest's; None when it is not slower
    beyond noise, judgement.faster). Lower is better."""
    size = math.log2(max(size_ratio, 1.0))
    if not of(target).timed or not slower_ratio:
        return size
    return size + math.log2(max(slower_ratio, 1.0))


COST_SAME = 0.1  # costs this close (a tenth of a doubling) are a tie: the more accurate model is preferred
