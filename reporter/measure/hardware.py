"""The target tools a target's check runs (reporter.core.targets.base.Tools): TFLite Micro's interpreter over the
evaluation data, Arm's Vela compiler for an Ethos-U configuration, and LiteRT's reference kernels. Each tool runs in
a child process that ends with the call (reporter.core.children: TFLite Micro in a spawned process of its own, Vela
as its command line); a failure is that model's one-line finding, never the run's."""

from __future__ import annotations

import dataclasses
import traceback
from importlib import metadata
from pathlib import Path
from typing import Optional

import numpy as np

from reporter.measure import evaluate, micro_causes, runtime, structure
from reporter.measure.signature import Signature
from reporter.model.hardware import MicroFigures, VelaFigures

MICRO_TIMEOUT_S = 1800  # the whole evaluation data through TFLite Micro, one sample at a time
TOOLS = {"tflite-micro": "tflite_micro", "ethos-u-vela": "ethos-u-vela"}


def versions() -> dict[str, str]:
    """The versions of the target tools installed, for the report's metadata."""
    found = {}
    for name in TOOLS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


# --- TFLite Micro ------------------------------------------------------------------------------------------
def micro_outputs(model: bytes, x, signature: Signature) -> tuple[dict[str, np.ndarray], Optional[int], list]:
    """The model's outputs (dequantized, one row per sample, by signature key) over every sample of `x` run by
    TFLite Micro, the tensor arena it needed, and the inputs it was fed (one array per input, in the model's input
    order and dtype). Raises RuntimeError with TFLite Micro's own reason when it cannot load or run the model (a
    hybrid DRQ model, an op its resolver lacks, a crash)."""
    x = evaluate.as_inputs(x)
    order_in, order_out = _positions(model, signature)
    feeds = [runtime.to_port(x[p.key] if len(signature.inputs) > 1 or len(x.arrays) > 1 else x.single(), p)
             for p in order_in]
    found = micro_raw(model, feeds, len(order_out))
    outputs = {p.key: runtime.from_port(np.asarray(arr).reshape(len(arr), -1) if arr.ndim > 1 else arr, p)
               .reshape((len(arr), *np.asarray(arr).shape[1:]))
               for p, arr in zip(order_out, found["outputs"])}
    return outputs, found["arena_bytes"], feeds


def micro_raw(model: bytes, feeds: list, outputs: int, arena_size: Optional[int] = None) -> dict:
    """`feeds` (one array per input, in the model's input order and dtype) through TFLite Micro in a spawned process
    of its own, in a tensor arena of `arena_size` bytes (None: TFLite Micro's default): {"outputs": the first
    `outputs` graph outputs, raw, "arena_bytes"}. Raises RuntimeError with TFLite Micro's own reason when it cannot
    load or run the model."""
    from reporter.core import children
    from reporter.measure import micro_child

    try:
        found = children.run_once(micro_child.run, bytes(model), feeds, outputs, arena_size, timeout=MICRO_TIMEOUT_S,
                                  what="TFLite Micro")
    except children.Crashed as crash:
        raise RuntimeError(f"TFLite Micro crashed running the model ({crash.how})") from None
    if "error" in found:
        raise RuntimeError(found["error"])
    return found


def _positions(model: bytes, signature: Signature) -> tuple[list, list]:
    """The signature's ports in the subgraph's input and output order (the positions TFLite Micro reads)."""
    it = runtime.load(model)
    by_index_in = {p.index: p for p in signature.inputs}
    by_index_out = {p.index: p for p in signature.outputs}
    return ([by_index_in[d["index"]] for d in it.get_input_details()],
            [by_index_out[d["index"]] for d in it.get_output_details()])


def parity(a: dict[str, np.ndarray], b: dict[str, np.ndarray], model: bytes) -> tuple[float, float]:
    """How two runs' outputs agree: the share of output values that are the same, and the largest difference in
    steps of each output's quantization scale (1 for a float output)."""
    steps = {key: value[2] for key, value in evaluate.integer_output_ranges(model).items()}
    same = total = 0
    largest = 0.0
    for key, first in a.items():
        second = b[key][:len(first)]
        first = first[:len(second)]
        # one row per sample: LiteRT's runs flatten each sample's output, TFLite Micro's keep its shape
        first, second = first.reshape(len(first), -1), second.reshape(len(second), -1)
        step = steps.get(key, 0.0)
        diff = np.abs(first.astype(np.float64) - second.astype(np.float64))
        same += int(np.sum(diff == 0))
        total += diff.size
        if diff.size:
            largest = max(largest, float(np.nanmax(diff)) / (step or 1.0))
    return (same / total if total else 1.0), round(largest, 3)


def micro_figures(samples: int, arena: Optional[int], reference: Optional[dict], outputs: dict,
                  model: bytes) -> MicroFigures:
    share, steps = parity(outputs, reference, model) if reference is not None else (None, None)
    return MicroFigures(samples=samples, arena_bytes=arena, reference_samples=samples if reference else 0,
                        identical_share=share, max_steps=steps)


def micro_run(model: bytes, x, reference_samples: int, arena_limit: Optional[int] = None
              ) -> tuple[dict[str, np.ndarray], MicroFigures]:
    """The model through TFLite Micro over every sample of `x` (every output by signature key, one flattened row per
    sample as `reference_outputs` gives them), and its figures: the arena it needed (run in an arena large enough for
    any model here, the device's `arena_limit` recorded beside it), its parity with LiteRT's reference kernels over
    the first `reference_samples` samples, and, where the two disagree beyond the kernels' own rounding, the cause
    found (reporter.measure.micro_causes)."""
    outputs, arena, feeds = micro_outputs(model, x, evaluate.signature(model))
    # every output read as LiteRT's runs give it: one flattened row per sample, a detector's outputs packed
    outputs = evaluate.as_predicted(model, {key: value.reshape(len(value), -1) for key, value in outputs.items()})
    part = evaluate.as_inputs(x)[:reference_samples]
    reference = reference_outputs(model, part)
    figures = micro_figures(len(next(iter(outputs.values()))), arena, reference,
                            {k: v[:reference_samples] for k, v in outputs.items()}, model)
    figures = dataclasses.replace(figures, reference_samples=len(next(iter(reference.values()))),
                                  arena_limit_bytes=arena_limit)
    if figures.disagrees:
        try:
            figures = dataclasses.replace(figures, **micro_causes.found(model, feeds, micro_raw))
        except (RuntimeError, ValueError):  # no cause found: the disagreement is said as measured
            traceback.print_exc()  # into run.log
    return outputs, figures


@dataclasses.dataclass(frozen=True)
class Tools:
    """The target tools (reporter.core.targets.base.Tools) with the run's device settings: the tensor arena the
    microcontroller gives (--micro-arena)."""

    micro_arena: Optional[int] = None

    @classmethod
    def of(cls, settings) -> "Tools":
        """The tools with the device as the user gave it (the run's settings)."""
        return cls(micro_arena=getattr(settings, "micro_arena", None))

    def reference_outputs(self, model: bytes, x) -> dict:
        return reference_outputs(model, x)

    def micro_run(self, model: bytes, x, reference_samples: int) -> tuple:
        return micro_run(model, x, reference_samples, self.micro_arena)

    def vela(self, model: bytes, config: str, workdir: Path):
        return vela(model, config, workdir)


# --- LiteRT's reference kernels ---------------------------------------------------------------------------
REFERENCE_RUNS_KEPT = 4  # the last runs on the reference kernels kept, by model and inputs
_REFERENCE_RUNS: list = []  # (model digest, inputs digest, outputs)


def reference_outputs(model: bytes, x) -> dict[str, np.ndarray]:
    """The model's outputs (by signature key) over every sample of `x`, run by LiteRT's reference kernels. The last
    few runs are kept (by the digests of the model and of the inputs): an int8 target's candidate is run there once,
    for its agreement with the default kernels (reporter.measure.kernels) and for its check on the target."""
    import hashlib

    inputs = evaluate.as_inputs(x)
    digest = hashlib.sha256()
    for name in sorted(inputs.arrays):
        array = np.ascontiguousarray(inputs.arrays[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(memoryview(array).cast("B"))
    key = (hashlib.sha256(model).digest(), digest.digest())
    for found_key, outputs in _REFERENCE_RUNS:
        if found_key == key:
            return outputs
    outputs = evaluate.predict_all(model, x, reference=True)
    _REFERENCE_RUNS.append((key, outputs))
    del _REFERENCE_RUNS[:-REFERENCE_RUNS_KEPT]
    return outputs


# --- Vela ---------------------------------------------------------------------------------------------------
def vela(model: bytes, config: str, workdir: Path) -> VelaFigures:
    """`model` compiled by Vela for the Ethos-U `config` (reporter.measure.vela: read from the files Vela writes)."""
    from reporter.measure import vela as vela_tool

    return vela_tool.compile_model(model, config, workdir)
