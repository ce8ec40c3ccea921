"""Arm's Vela compiler for an Ethos-U configuration, read from the files it writes for programs.

Vela compiles a model into `<name>_vela.tflite` (the ops it put on the NPU fused into `ethos-u` custom ops, the
others left as they were, for the CPU) and `<name>_summary_<system config>.csv` (SRAM, flash, cycles, the estimated
time). The ops on each side are counted from the compiled model, the figures read from the CSV by column name: a
missing column raises, naming Vela and its version, instead of reading as 0. Vela writes the reason it leaves an op
on the CPU only as a warning on its output (no file carries it); those lines are joined to the compiled model's CPU
ops by output tensor name, and an op without one says so."""

from __future__ import annotations

import csv
import io
import re
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Optional

from reporter.measure import graph, structure
from reporter.model.hardware import CpuOp, VelaFigures

VELA_TIMEOUT_S = 600
NPU_OP = "ethos-u"  # the custom op Vela fuses what runs on the NPU into
# The summary's columns read (Vela's stats_writer names them; its memory areas are Sram and OffChipFlash).
COLUMNS = ("inference_time", "sram_memory_used", "off_chip_flash_memory_used", "core_clock", "system_config")
NO_REASON = "Vela gave no reason"
# "Warning (supported operators) operator: SOFTMAX, ofm: 'name'" then "Reason: ...": Vela's words for a CPU op
_WARNING = re.compile(r"operator: (\S+), ofm: '(.*)'\s*\nReason: (.*)")


class ToolOutputError(RuntimeError):
    """A tool wrote its output without a field quant-report reads (another version words it differently)."""


def version() -> str:
    try:
        return metadata.version("ethos-u-vela")
    except metadata.PackageNotFoundError:
        return "not installed"


def compile_model(model: bytes, config: str, workdir: Path) -> VelaFigures:
    """`model` compiled by Vela for the Ethos-U `config`, in a folder under `workdir` removed afterwards. Raises
    RuntimeError with Vela's own last line when it cannot compile the model."""
    from reporter.core import children

    # Absolute paths: a folder named like an option ("-o", from --out=-o) is never read as one by Vela's parser.
    with tempfile.TemporaryDirectory(prefix=".vela-", dir=Path(workdir).resolve()) as tmp:
        path = Path(tmp).resolve() / "model.tflite"
        path.write_bytes(model)
        out = Path(tmp) / "out"
        done = children.run_command(["-m", "ethosu.vela", str(path), "--accelerator-config", config,
                                     "--output-dir", str(out)], timeout=VELA_TIMEOUT_S, what="Vela")
        summary = next(out.glob("*_summary_*.csv"), None) if out.exists() else None
        compiled = next(out.glob("*_vela.tflite"), None) if out.exists() else None
        if done.returncode != 0 or summary is None or compiled is None:
            lines = [line.strip() for line in done.output.splitlines() if line.strip()]
            raise RuntimeError(f"Vela could not compile the model: {lines[-1] if lines else 'no output'}"[:400])
        return figures(model, compiled.read_bytes(), summary.read_text(encoding="utf-8"), done.output, config)


def figures(model: bytes, compiled: bytes, summary_csv: str, output: str, config: str) -> VelaFigures:
    """Vela's figures from what it wrote: the ops of `model` on the NPU and on the CPU (from the compiled model), the
    CPU ops' reasons (from its `output`), SRAM, flash and the estimated time (from its summary CSV)."""
    row = summary(summary_csv)
    cpu_tensors = cpu_op_outputs(compiled)
    reasons = {tensor: (op, reason.strip()) for op, tensor, reason in _WARNING.findall(output)}
    by_output = _ops_by_output(model)
    cpu = [CpuOp(reasons.get(t, (by_output.get(t, "?"), ""))[0] or by_output.get(t, "?"), t,
                 reasons[t][1] if t in reasons else NO_REASON) for t in cpu_tensors]
    total = len(by_output) if by_output else len(cpu)
    host = structure.host_tensor_names(model)  # Vela names an op by its output
    return VelaFigures(
        config=config, npu_ops=max(total - len(cpu), 0), cpu_ops=len(cpu), cpu=cpu,
        host_ops=sum(1 for c in cpu if c.tensor in host),
        sram_kib=_number(row, "sram_memory_used"), flash_kib=_number(row, "off_chip_flash_memory_used"),
        inference_ms=_number(row, "inference_time") * 1000.0, clock_mhz=_number(row, "core_clock") * 1e-6,
        system_config=row["system_config"])


def summary(text: str) -> dict[str, str]:
    """The first row of Vela's summary CSV by column name; raises ToolOutputError naming Vela's version and the
    columns it lacks."""
    rows = list(csv.DictReader(io.StringIO(text)))
    missing = [c for c in COLUMNS if not rows or c not in rows[0]]
    if missing:
        raise ToolOutputError(f"Vela {version()}'s summary CSV has no {', '.join(missing)} column"
                              f"{'s' if len(missing) > 1 else ''} (a Vela version quant-report does not read)")
    return rows[0]


def cpu_op_outputs(compiled: bytes) -> list[str]:
    """The first output tensor of each op Vela left for the CPU (every op of the compiled model but its NPU ops)."""
    return [output for name, output in graph.op_outputs(compiled) if name != NPU_OP]


def _ops_by_output(model: bytes) -> dict[str, str]:
    """The model's ops by their first output tensor's name."""
    return {output: name for name, output in graph.op_outputs(model)}


def _number(row: dict, key: str) -> Optional[float]:
    try:
        return float(row[key])
    except ValueError:
        raise ToolOutputError(f"Vela {version()}'s summary CSV holds {row[key]!r} as {key}, not a number") from None
