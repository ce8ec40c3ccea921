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

CPU, INT8, GPU = "cpu", "int8", "gpu"  # the targets code names; the rest are read from the registry
DEFAULT = CPU

# Reference-kernel agreement: the evaluation samples the int8 target's model is run on with both kernel sets
# (reference kernels are slow: a convolution runs without SIMD).
REFERENCE_SAMPLES = 256

SUB_BYTE_KEYS = ("int4", "int2")  # tensor kinds counted apart (reporter.measure.structure.tensor_types)
INTEGER_KEYS = ("int8", "int16", *SUB_BYTE_KEYS)


# Ops whose int8 kernel keeps an int16 state (TFLite's int8 LSTM: int16 cell state), as the int8 specification says.
INT16_STATE_OPS = frozenset({"UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "LSTM"})


def int8_spec(tensor_types: Mapping[str, int], ops: Mapping[str, int] = {},  # noqa: B006 - read only
              op_types: Optional[Mapping[str, int]] = None) -> bool:
    """The TFLite int8 specification: int8 activations and weights, int32 biases (and ids, shapes), bool only as a
    comparison's result, no float tensor; int16 only where the int8 kernel itself requires it (an LSTM's cell state).
    Read from the tensors the ops compute with (`op_types`, where measured: an int8 LSTM's empty float32
    placeholders are no float tensor), else every tensor."""
    types = op_types if op_types else tensor_types
    if not types.get("int8") or any(types.get(kind) for kind in ("float32", "other", *SUB_BYTE_KEYS)):
        return False
    return not types.get("int16") or any(op in INT16_STATE_OPS for op in ops)


def integer_tensors(tensor_types: Mapping[str, int], ops: Mapping[str, int] = {},  # noqa: B006 - read only
                    op_types: Optional[Mapping[str, int]] = None) -> bool:
    """No float op: every tensor the ops compute with is an integer (int8 or int16 activations, int32 biases; bool
    as a comparison's result). What an NPU compiler may take whole (Vela compiles 16x8 for Ethos-U)."""
    types = op_types if op_types else tensor_types
    return bool(types.get("int8") or types.get("int16")) and not any(
        types.get(kind) for kind in ("float32", "other", *SUB_BYTE_KEYS))


def integer_only(tensor_types: Mapping[str, int]) -> bool:
    """A model whose every tensor is int8 or int32 (biases, shapes): no float, int16, int4, int2 or other tensor, so
    no float op and int8 input and output. Read from the measured tensor counts."""
    return bool(tensor_types.get("int8")) and not any(
        tensor_types.get(kind) for kind in ("float32", "int16", "other", *SUB_BYTE_KEYS))


def float_compute(tensor_types: Mapping[str, int], ops: Mapping[str, int] = {},  # noqa: B006
                  op_types: Optional[Mapping[str, int]] = None) -> bool:
    """A model a GPU delegate computes in float16 or float32: no integer tensor (int8, int16, int4, int2), so no
    hybrid or integer kernel; float16 weights (stored as "other" or dequantized) count. Read from the measured
    tensor counts, never from a variant's name (a float16 recipe qualifies as the built-in float16 does)."""
    return not any(tensor_types.get(kind) for kind in INTEGER_KEYS)


def anything(tensor_types: Mapping[str, int], ops: Mapping[str, int] = {},  # noqa: B006
             op_types: Optional[Mapping[str, int]] = None) -> bool:
    """A CPU runs every scheme LiteRT runs."""
    return True


# What a target checks a model with beyond its tensor types (`Target.check`).
NO_CHECK, REFERENCE, MICRO, VELA = "", "reference", "micro", "vela"
REFERENCE_KERNELS, MICRO_KERNELS, DEFAULT_KERNELS = "LiteRT's reference kernels", "TFLite Micro", \
    "LiteRT's default kernels"


@dataclass(frozen=True)
class Target:
    """One place a model can ship to: what it runs (read from the measured model's tensor types and ops, then
    checked with the target's own runtime or compiler where it has one), what the decision weighs there, which
    kernels its accuracy is measured on, and how the report names it."""

    name: str
    words: str  # in a sentence: "on a CPU"
    hardware: str  # after "Runs on" in a table header: "a CPU"
    runs: Callable[..., bool] = anything  # (tensor_types, ops, op_types): whether a model with these runs there
    adds: tuple = ()  # variants a run for this target builds besides those asked for
    timed: bool = True  # the latency measured here is the target's (a CPU's): it counts beside size
    kernels: str = DEFAULT_KERNELS  # what the decision's accuracy is measured on
    reference_kernels: bool = False  # the shipped model's default kernels are also compared with the reference ones
    runs_not: str = ""  # why a model that meets the accuracy target elsewhere does not run here
    check: str = NO_CHECK  # REFERENCE, MICRO or VELA: each candidate checked where it ships (reporter.run.on_target)
    tool: str = ""  # the tool that checks it, as the report names it
    int16_activations: bool = False  # its tool runs 16x8 (int16 activations): the repair ladder's last rung tries it


def _ethos(config: str) -> Target:
    npu = config.replace("ethos-u", "Ethos-U")
    return Target(config, f"on an Arm {npu} NPU", f"an {npu} (per Vela)", runs=integer_tensors, adds=(variants.INT8_IO,), timed=False,
                  kernels=REFERENCE_KERNELS, check=VELA, tool="Arm's Vela compiler", int16_activations=True,
                  runs_not=f"its float ops stay on the CPU beside the {npu}")


ETHOS_CONFIGS = ("ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256", "ethos-u65-512",
                 "ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048")
REGISTRY = {t.name: t for t in (
    Target(CPU, "on a CPU", "a CPU"),
    Target(INT8, "on integer-only hardware", "integer-only hardware (int8 spec)", runs=int8_spec,
           adds=(variants.INT8_IO,), timed=False, kernels=REFERENCE_KERNELS, reference_kernels=True, check=REFERENCE,
           tool="LiteRT's reference kernels",
           runs_not="integer-only hardware runs no float op, and int16 only where the int8 kernel needs it"),
    Target(GPU, "on a GPU delegate", "a GPU delegate", runs=float_compute, adds=(variants.F16,), timed=False,
           runs_not="a GPU delegate computes in float16 or float32 only"),
    Target("micro", "on a microcontroller (TFLite Micro)", "TFLite Micro", runs=anything, adds=(variants.INT8_IO,),
           timed=False, kernels=MICRO_KERNELS, check=MICRO, tool="TFLite Micro's interpreter", int16_activations=True,
           runs_not="TFLite Micro cannot load or run it"),
    *(_ethos(config) for config in ETHOS_CONFIGS),
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


NOT_WHOLLY_ON_NPU = 100.0  # an Ethos-U cost: a model with ops left on the CPU comes after every model wholly on the NPU


def npu_cost(npu_share: Optional[float], estimate_ms: Optional[float], fastest_ms: Optional[float]) -> float:
    """What a model costs on an Ethos-U NPU: wholly on the NPU first (the CPU fallback is what users of such hardware
    meet silently), then Vela's estimated time in doublings over the fastest."""
    whole = 0.0 if npu_share is not None and npu_share >= 1.0 else NOT_WHOLLY_ON_NPU
    if not estimate_ms or not fastest_ms:
        return whole
    return whole + math.log2(max(estimate_ms / fastest_ms, 1.0))


COST_SAME = 0.1  # costs this close (a tenth of a doubling) are a tie: the more accurate model is preferred
