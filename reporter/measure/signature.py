"""A TFLite model's inputs and outputs by name: its signature, matched to the names the user knows.

TFLite lists a signature's inputs sorted by name, not in the Keras order, and the interpreter's
`get_output_details()` order is neither; Keras 3 names signature outputs `output_0`, `output_1`, ... in
the Keras output order. Position is a trap: every tensor here is found by name, through the signature.

Outputs are listed in the model's own order: Keras 3's `output_<i>` numbering, else the order of the subgraph's
outputs list (what `get_output_details()` gives; a signature quant-report builds for a file without one follows
it too), never the tensor indices (a converter or a hand-edited file may number them in any order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from reporter.model.data import Inputs

_OUTPUT_N = re.compile(r"output_(\d+)$")


def by_position(x: Inputs, interpreter) -> list:
    """`x`'s arrays in the order of `interpreter.get_input_details()`, matched by name through its
    signature (what the Quantization Debugger, which feeds by position, needs)."""
    if len(x.arrays) == 1:
        return [x.single()]
    by_index = {p.index: p.key for p in read(interpreter).inputs}
    return [x.arrays[by_index[int(d["index"])]] for d in interpreter.get_input_details()]


@dataclass(frozen=True)
class Port:
    """One input or output of a model."""

    name: str  # the user's name: the Keras input or output name (a float .tflite: the signature's name)
    key: str  # the signature's name for it
    index: int  # the interpreter's tensor index
    shape: tuple  # the shape signature: -1 marks a dynamic dimension
    dtype: str  # numpy dtype name: "float32", "int32", "int8", ...
    scale: float = 0.0
    zero_point: int = 0
    allocated: tuple = ()  # the shape the interpreter allocated (dynamic dimensions as 1)
    # A port that stands for several outputs read as one (a detector's four postprocess outputs, packed by its
    # task kind): what the kind needs to read them, as (name, value) pairs; () for a tensor of the model.
    attributes: tuple = ()

    @property
    def size(self) -> int:
        """Values per sample (e.g. the number of output units)."""
        shape = self.allocated or self.shape
        return int(np.prod(shape[1:])) if len(shape) > 1 else 1

    @property
    def quantized(self) -> bool:
        """An integer tensor that stands for real numbers (int8/uint8/int16 with a scale): its values are
        quantized on the way in and dequantized on the way out. Token or category ids are not."""
        return np.issubdtype(np.dtype(self.dtype), np.integer) and self.scale != 0.0

    @property
    def integer(self) -> bool:
        """An integer input that takes integers as they are (ids), not quantized real numbers."""
        return np.issubdtype(np.dtype(self.dtype), np.integer) and not self.quantized


@dataclass(frozen=True)
class Signature:
    key: str  # "serving_default", or "" for a model without signatures
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]

    def input_names(self) -> list[str]:
        return [p.name for p in self.inputs]

    def output_names(self) -> list[str]:
        return [p.name for p in self.outputs]


def _port(name: str, key: str, d: dict) -> Port:
    shape = d.get("shape_signature")
    if shape is None or len(shape) == 0:
        shape = d["shape"]
    scale, zero = d.get("quantization", (0.0, 0))
    return Port(name, key, int(d["index"]), tuple(int(s) for s in shape), np.dtype(d["dtype"]).name,
                float(scale), int(zero), tuple(int(s) for s in d["shape"]))


def read(interpreter, input_names: Optional[Sequence[str]] = None,
         output_names: Optional[Sequence[str]] = None) -> Signature:
    """The signature of a LiteRT `interpreter`, with each port named as the user knows it.

    `input_names` / `output_names`: the Keras model's names, in Keras order (None: the signature's own
    names). Inputs are matched by name; outputs by name, or, when the signature calls them `output_<i>`,
    through their Keras order. Raises ValueError when names do not match.
    """
    signatures = interpreter.get_signature_list()
    if not signatures:  # an old model without signatures: the interpreter's tensor names, in its order
        ins = tuple(_port(d["name"], d["name"], d) for d in interpreter.get_input_details())
        outs = tuple(_port(d["name"], d["name"], d) for d in interpreter.get_output_details())
        return Signature("", ins, outs)
    key = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
    runner = interpreter.get_signature_runner(key)
    in_details, out_details = runner.get_input_details(), runner.get_output_details()
    inputs = _match_inputs(in_details, input_names)
    order = [int(d["index"]) for d in interpreter.get_output_details()]
    outputs = _match_outputs(out_details, output_names, order)
    return Signature(key, inputs, outputs)


def _match_inputs(details: dict, names: Optional[Sequence[str]]) -> tuple[Port, ...]:
    if not names:
        return tuple(_port(k, k, d) for k, d in sorted(details.items(), key=lambda kv: kv[1]["index"]))
    if len(names) == len(details) == 1:  # one input: whatever either side calls it
        (k, d), = details.items()
        return (_port(names[0], k, d),)
    missing = [n for n in names if n not in details]
    if missing or len(names) != len(details):
        raise ValueError(f"the model's inputs are named {', '.join(names)} but its TFLite signature has"
                         f" {', '.join(sorted(details))}")
    return tuple(_port(n, n, details[n]) for n in names)


def _match_outputs(details: dict, names: Optional[Sequence[str]], order: Sequence[int] = ()) -> tuple[Port, ...]:
    """`order`: the subgraph's output tensor indices, in its outputs list's order."""
    numbered = {k: int(m.group(1)) for k in details if (m := _OUTPUT_N.match(k))}
    place = {index: i for i, index in enumerate(order)}

    def own(k):
        index = int(details[k]["index"])
        return numbered.get(k, 1 << 30), place.get(index, len(place)), index

    in_order = sorted(details, key=own)
    if not names:
        return tuple(_port(k, k, details[k]) for k in in_order)
    if len(names) != len(details):
        raise ValueError(f"the model has {len(names)} outputs ({', '.join(names)}) but its TFLite signature has"
                         f" {len(details)} ({', '.join(sorted(details))})")
    if set(names) == set(details):
        return tuple(_port(n, n, details[n]) for n in names)
    if len(details) == 1:
        (k, d), = details.items()
        return (_port(names[0], k, d),)
    if len(numbered) == len(details):  # Keras 3: output_0, output_1, ... in the Keras output order
        return tuple(_port(n, k, details[k]) for n, k in zip(names, in_order))
    raise ValueError(f"cannot match the model's outputs ({', '.join(names)}) to its TFLite signature's"
                     f" ({', '.join(sorted(details))})")


def check_shapes(signature: Signature, output_shapes: dict[str, tuple]) -> None:
    """Checks that each output matched through its order has the shape the Keras model gives it
    (`output_shapes`: name -> shape without the batch dimension); raises ValueError naming the output."""
    for port in signature.outputs:
        want = output_shapes.get(port.name)
        if want is None:
            continue
        got = port.shape[1:]
        if len(got) != len(want) or any(g not in (-1, w) and w not in (-1, None) for g, w in zip(got, want)):
            raise ValueError(f"output {port.name!r} has shape {tuple(want)} in the Keras model but its TFLite"
                             f" signature output {port.key!r} has {tuple(got)}")
