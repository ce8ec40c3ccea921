"""The target tools a target's check runs (reporter.core.targets.base.Tools): TFLite Micro's interpreter over the
evaluation data, Arm's Vela compiler for an Ethos-U configuration, and LiteRT's reference kernels. Each tool runs in
a child process that ends with the call (TFLite Micro in a spawned process of its own, Vela as its command line); a
failure is that model's one-line finding, never the run's."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import re
import subprocess
import sys
import tempfile
import traceback
from importlib import metadata
from pathlib import Path
from typing import Optional

import numpy as np

from reporter.measure import evaluate, micro_causes, runtime, structure
from reporter.measure.signature import Signature
from reporter.model.hardware import CpuOp, MicroFigures, VelaFigures

MICRO_TIMEOUT_S = 1800  # the whole evaluation data through TFLite Micro, one sample at a time
VELA_TIMEOUT_S = 600
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
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        from reporter.measure import micro_child

        try:
            found = pool.submit(micro_child.run, bytes(model), feeds, outputs, arena_size).result(
                timeout=MICRO_TIMEOUT_S)
        except concurrent.futures.process.BrokenProcessPool:
            raise RuntimeError("TFLite Micro crashed running the model") from None
        except concurrent.futures.TimeoutError:
            for process in list(getattr(pool, "_processes", {}).values()):
                process.kill()
            raise RuntimeError(f"TFLite Micro did not finish within {MICRO_TIMEOUT_S} s") from None
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


def micro_run(model: bytes, x, reference_samples: int) -> tuple[dict[str, np.ndarray], MicroFigures]:
    """The model through TFLite Micro over every sample of `x` (its outputs by signature key), and its figures: the
    arena, its parity with LiteRT's reference kernels over the first `reference_samples` samples, and, where the two
    disagree beyond the kernels' own rounding, the cause found (reporter.measure.micro_causes)."""
    outputs, arena, feeds = micro_outputs(model, x, evaluate.signature(model))
    outputs = evaluate.as_predicted(model, outputs)  # read as LiteRT's runs are (a detector's outputs packed)
    part = evaluate.as_inputs(x)[:reference_samples]
    reference = reference_outputs(model, part)
    figures = micro_figures(len(next(iter(outputs.values()))), arena, reference,
                            {k: v[:reference_samples] for k, v in outputs.items()}, model)
    figures = dataclasses.replace(figures, reference_samples=len(next(iter(reference.values()))))
    if figures.disagrees:
        try:
            figures = dataclasses.replace(figures, **micro_causes.found(model, feeds, micro_raw))
        except (RuntimeError, ValueError):  # no cause found: the disagreement is said as measured
            traceback.print_exc()  # into run.log
    return outputs, figures


# --- LiteRT's reference kernels ---------------------------------------------------------------------------
def reference_outputs(model: bytes, x) -> dict[str, np.ndarray]:
    """The model's outputs (by signature key) over every sample of `x`, run by LiteRT's reference kernels."""
    return evaluate.predict_all(model, x, reference=True)


# --- Vela --------------------------------------------------------------------------------------------------
_WARNING = re.compile(r"Warning \(supported operators\) operator: (\S+), ofm: '(.*)'\s*\nReason: (.*)")
_COUNT = re.compile(r"(CPU|NPU) operators = (\d+)")


def vela(model: bytes, config: str, workdir: Path) -> VelaFigures:
    """`model` compiled by Vela for the Ethos-U `config`, in a folder under `workdir` removed afterwards: the ops on
    the NPU and those left on the CPU with Vela's reasons, SRAM and flash used, and the estimated inference time.
    Raises RuntimeError with Vela's own last line when it cannot compile the model."""
    with tempfile.TemporaryDirectory(prefix=".vela-", dir=workdir) as tmp:
        path = Path(tmp) / "model.tflite"
        path.write_bytes(model)
        out = Path(tmp) / "out"
        try:
            done = subprocess.run([sys.executable, "-m", "ethosu.vela", str(path), "--accelerator-config", config,
                                   "--output-dir", str(out)], capture_output=True, text=True,
                                  timeout=VELA_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"Vela did not finish within {VELA_TIMEOUT_S} s") from None
        text = done.stdout + "\n" + done.stderr
        summary = next(out.glob("*_summary_*.csv"), None) if out.exists() else None
        if done.returncode != 0 or summary is None:
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            raise RuntimeError(f"Vela could not compile the model: {lines[-1] if lines else 'no output'}"[:400])
        row = _summary(summary.read_text(encoding="utf-8"))
    counts = {kind: int(n) for kind, n in _COUNT.findall(text)}
    cpu = [CpuOp(op, tensor, reason.strip()) for op, tensor, reason in _WARNING.findall(text)]
    host = structure.host_tensor_names(model)  # Vela names an op by its output
    return VelaFigures(
        config=config, npu_ops=counts.get("NPU", 0), cpu_ops=counts.get("CPU", 0), cpu=cpu,
        host_ops=sum(1 for c in cpu if c.tensor in host),
        sram_kib=_number(row, "sram_memory_used"), flash_kib=_number(row, "off_chip_flash_memory_used"),
        inference_ms=_scaled(row, "inference_time", 1000.0), clock_mhz=_scaled(row, "core_clock", 1e-6),
        system_config=row.get("system_config", ""))


def _summary(text: str) -> dict[str, str]:
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(text)))
    return rows[0] if rows else {}


def _number(row: dict, key: str) -> Optional[float]:
    try:
        return float(row[key])
    except (KeyError, ValueError):
        return None


def _scaled(row: dict, key: str, factor: float) -> Optional[float]:
    value = _number(row, key)
    return value * factor if value is not None else None
