"""What runs where, read from a model's measured tensor types and ops: the rules the target plug-ins choose from.

Pure and typed: counts of tensor kinds ("int8", "float32", "other", ...: reporter.measure.structure.tensor_types)
in, a yes or no out; never a variant's name.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

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


# The ops integer-only hardware leaves to the host CPU beside it (an NPU compiler leaves them on the host; a
# microcontroller runtime may have a kernel), with the DEQUANTIZE ops feeding them and the QUANTIZE/DEQUANTIZE ops
# carrying their outputs on; the network before them is what must be integer-only. A task kind declares its own
# (`add_host_ops`: a detector's postprocess); filled in place, so every reader holds the one set.
HOST_OPS: set[str] = set()


def add_host_ops(*ops: str) -> None:
    """Ops (by name, a custom op by its custom code) that the host CPU runs beside integer-only hardware."""
    HOST_OPS.update(ops)

PASS_THROUGH = frozenset({"QUANTIZE", "DEQUANTIZE"})  # ops that keep their input's shape (and its role)


def host_group(ops: Sequence[tuple[str, Sequence[int], Sequence[int]]]) -> list[int]:
    """The positions in `ops` ((op name, input tensors, output tensors) in execution order) of the ops that run on
    the host CPU: each HOST_OPS op, the DEQUANTIZE ops whose every reader is one, and the QUANTIZE/DEQUANTIZE ops
    reading a host op's output. [] for a model without a host op."""
    hosts = {n for n, (name, _, _) in enumerate(ops) if name in HOST_OPS}
    if not hosts:
        return []
    readers: dict[int, set] = {}
    for n, (_, ins, _) in enumerate(ops):
        for t in ins:
            readers.setdefault(int(t), set()).add(n)
    group = set(hosts)
    for n, (name, _, outs) in enumerate(ops):
        if name == "DEQUANTIZE" and all(readers.get(int(t)) and readers[int(t)] <= hosts for t in outs):
            group.add(n)
    made = {int(t) for n in hosts for t in ops[n][2]}
    for n, (name, ins, outs) in enumerate(ops):  # in execution order: a chain after the op is followed
        if name in PASS_THROUGH and ins and int(ins[0]) in made:
            group.add(n)
            made |= {int(t) for t in outs}
    return sorted(group)


def on_host(host_ops: Mapping[str, int]) -> str:
    """"the postprocess (TFLite_Detection_PostProcess) runs on the host CPU", with the ops carrying it; "" for
    none."""
    named = [op for op in host_ops if op in HOST_OPS]
    if not named:
        return ""
    rest = [f"{n} {op}" for op, n in host_ops.items() if op not in HOST_OPS]
    return (f"the postprocess ({', '.join(named)}) runs on the host CPU"
            + (f" (with {' and '.join(rest)} op{'s' * (sum(host_ops.values()) - len(named) != 1)})" if rest else ""))
