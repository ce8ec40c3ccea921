"""A model on a target's own runtime or compiler, as report.json stores it: each tool's figures record, registered
by the tool's name (the key of `OnTarget.tools`: reporter.model.variant), and decoded through this registry when a
report is read; TFLite Micro's interpreter and Arm's Vela compiler register theirs here (reporter.measure.hardware
runs them; the target plug-ins of reporter.core.targets say which target checks with which)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from reporter.model.bounds import CLOCK, COUNT, KIB, LATENCY, QUANT_STEPS, SHARE, SIZE, PartOf, figure
from reporter.model.decode import DecodeError, decode, got, key_path

FIGURES: dict[str, type] = {}  # each tool's figures record (a frozen dataclass with its bounds), by the tool's name


def register(name: str, record: type) -> None:
    """A target tool's figures record, read from report.json's `on_target.tools[name]` from now on."""
    if FIGURES.get(name, record) is not record:
        raise ValueError(f"a figures record is already registered for tool {name!r}")
    FIGURES[name] = record


def unregister(name: str) -> None:
    FIGURES.pop(name, None)


class ToolFigures(dict):
    """A model's figures by the name of the tool that measured them ({"vela": VelaFigures(...)}): each decoded
    through its registered record (bounds checked); a tool this version does not know is kept as stored."""

    @classmethod
    def decode_json(cls, value, path: str) -> "ToolFigures":
        if not isinstance(value, dict):
            raise DecodeError(path, f"expected an object, got {got(value)}")
        return cls({k: decode(FIGURES.get(k, Any), v, key_path(path, k)) for k, v in value.items()})

    @classmethod
    def record_types(cls) -> list[type]:
        """The registered records (what reporter.model.bounds.markdown walks)."""
        return list(FIGURES.values())


# report.json before the figures were kept by tool: a field of OnTarget each (`on_target.micro`, `.vela`).
_OLD_FIELDS = ("micro", "vela")


def migrated(data: dict) -> dict:
    """report.json data with every on-target record's old per-tool fields moved into its `tools` map (a copy when
    one moves; the caller's dict stays as it was)."""
    if not any(_old(d) for d in _records(data)):
        return data
    data = json.loads(json.dumps(data))
    for record in _records(data):
        if _old(record):
            tools = record.setdefault("tools", {})
            for name in _OLD_FIELDS:
                value = record.pop(name, None)
                if value is not None and isinstance(tools, dict):
                    tools[name] = value
    return data


def _old(record: dict) -> bool:
    return any(name in record for name in _OLD_FIELDS)


def _records(data):
    """Every on-target record of report.json data (`on_target` of each model, `hardware` of the decision)."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key in ("on_target", "hardware") and isinstance(value, dict):
                    yield value
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)

# TFLite Micro agrees with LiteRT's reference kernels (both implement the same integer arithmetic) on ~99.9 % of
# output values, 1-2 quantization steps apart at most; beyond these it computes something else, for a cause.
FEW_STEPS = 3
AGREEING_SHARE = 0.99


@dataclass(frozen=True)
class CpuOp:
    """An op Vela leaves on the CPU, as Vela names it, with its reason."""

    op: str  # "DEQUANTIZE"
    tensor: str  # the op's output tensor
    reason: str  # "Operation has tensor with unsupported DataType Float32 (...)"


@dataclass(frozen=True)
class VelaFigures:
    """Vela's compilation of a model for one Ethos-U configuration."""

    config: str  # "ethos-u55-128"
    npu_ops: int = figure(COUNT)
    cpu_ops: int = figure(COUNT)
    cpu: list[CpuOp] = field(default_factory=list)
    sram_kib: Optional[float] = figure(KIB, None)  # SRAM used
    flash_kib: Optional[float] = figure(KIB, None)  # off-chip flash used
    inference_ms: Optional[float] = figure(LATENCY, None)  # Vela's estimate at the configuration's clock
    clock_mhz: Optional[float] = figure(CLOCK, None)
    system_config: str = ""  # Vela's default system configuration for the accelerator
    # of the CPU ops, those the host runs anyway (a detector's postprocess group): not the network's
    host_ops: int = figure(PartOf("cpu_ops"), 0)

    @property
    def npu_share(self) -> float:
        """The share of the network's ops (the host postprocess group left out) Vela puts on the NPU."""
        total = self.npu_ops + self.cpu_ops - self.host_ops
        return self.npu_ops / total if total else 0.0


@dataclass(frozen=True)
class MicroFigures:
    """A model run by TFLite Micro's interpreter over the evaluation data."""

    samples: int = figure(COUNT)  # evaluation samples run, one invoke each
    # the tensor arena the model needed (TFLite Micro's recording allocator)
    arena_bytes: Optional[int] = figure(SIZE, None)
    # the device's arena (--micro-arena); None: not given, not limited
    arena_limit_bytes: Optional[int] = figure(SIZE, None)
    reference_samples: int = figure(COUNT, 0)  # samples compared with LiteRT's reference kernels
    identical_share: Optional[float] = figure(SHARE, None)  # share of output values equal to the reference kernels'
    # the largest difference, in steps of the output's quantization scale
    max_steps: Optional[float] = figure(QUANT_STEPS, None)
    # Why it disagrees with the reference kernels (`disagrees`), as found: buffers stored after the flatbuffer
    # (Buffer.offset), which TFLite Micro does not read; else the first op whose TFLite Micro kernel gives values
    # more than FEW_STEPS from the reference kernel's (its name, its position in execution order from 1, the steps).
    offset_buffers: int = figure(COUNT, 0)
    kernel_op: str = ""
    kernel_op_position: int = figure(COUNT, 0)
    kernel_op_steps: Optional[float] = figure(QUANT_STEPS, None)

    @property
    def arena_too_small(self) -> bool:
        """It needs more tensor arena than the device gives (--micro-arena)."""
        return self.arena_limit_bytes is not None and self.arena_bytes is not None and \
            self.arena_bytes > self.arena_limit_bytes

    @property
    def disagrees(self) -> bool:
        """Its outputs differ from the reference kernels' beyond the kernels' own rounding."""
        return (self.identical_share is not None and self.identical_share < AGREEING_SHARE) or \
            (self.max_steps is not None and self.max_steps > FEW_STEPS)


register("micro", MicroFigures)
register("vela", VelaFigures)
