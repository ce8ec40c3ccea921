"""The `ethos-u*` targets: an Arm Ethos-U NPU in each of Vela's configurations.

Every quantized model is compiled by Arm's Vela compiler for the configuration (a model with float ops too: Vela
names the ops it leaves on the CPU); it runs there only when it is integer-only (int8, or 16x8: Vela compiles int16
activations) and Vela puts ops on the NPU. A detector's postprocess group (reporter.core.targets.rules.host_group)
is the host's: Vela leaves it on the Cortex-M, and a model whose only CPU ops are that group runs on the NPU for the
network. Its accuracy is measured on LiteRT's reference kernels. A model wholly on the NPU comes first, then Vela's
estimated time decides; the repair ladder climbs when no integer-only model meets the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol, Sequence, cast

from reporter.core import variants
from reporter.core.errors import one_line
from reporter.core.targets.base import Check, Checked, Priced, Target, Tools
from reporter.core.targets.rules import integer_tensors, on_host

# Vela's accelerator configurations (`vela --accelerator-config`): one --target each.
CONFIGS = ("ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256", "ethos-u65-512",
           "ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048")
HELP = f"{CONFIGS[2]} and Vela's other Ethos-U configurations (compiled by Vela)"
NOT_WHOLLY_ON_NPU = 100.0  # a model with ops left on the CPU comes after every model wholly on the NPU
TOOL = "vela"  # its figures' key in OnTarget.tools (reporter.model.hardware.VelaFigures)


class VelaTools(Tools, Protocol):
    """The target tools with Vela's compilation (reporter.measure.hardware.Tools)."""

    def vela(self, model: bytes, config: str, workdir: Path) -> object:
        """Vela's compilation (VelaFigures) for the Ethos-U `config`."""


@dataclass(frozen=True)
class VelaCompiler(Check):
    """LiteRT's reference kernels for the accuracy, and Vela's compilation for the configuration: a model Vela cannot
    compile, one it puts no op of on the NPU, and one that is not integer-only (its float ops stay on the CPU) do not
    run there, with the ops Vela leaves on the CPU named as Vela names them."""

    config: str = ""
    key: str = TOOL
    tool: str = "Arm's Vela compiler"
    heading: str = "Vela"
    distributions: tuple = ("ethos-u-vela",)
    decides_runs: bool = True
    checks_unfit: bool = True  # Vela still compiles it: it names the ops it leaves on the CPU

    def run(self, model: bytes, fits: bool, x, tools: VelaTools, workdir: Path) -> Checked:
        outputs = tools.reference_outputs(model, x)
        try:
            figures = tools.vela(model, self.config, workdir)
        except RuntimeError as exc:
            return Checked(outputs, runs=False, error=one_line(exc))
        if fits and figures.npu_ops:
            return Checked(outputs, figures=figures)
        named = ", ".join(c.op for c in figures.cpu) or "none named"
        why = "float ops" if not fits else "Vela put no op on the NPU"
        total = figures.npu_ops + figures.cpu_ops
        return Checked(outputs, runs=False, figures=figures,
                       error=f"{why}: Vela leaves {figures.cpu_ops} of {total} ops on the CPU ({named})")

    def prices(self, on) -> dict:
        """Its share of ops on the NPU and, where it runs, Vela's estimated time (Priced's npu_share, estimate_ms)."""
        v = self.figures(on)
        return dict(npu_share=v.npu_share if v is not None else None,
                    estimate_ms=v.inference_ms if v is not None and on.runs else None)

    def said(self, on) -> str:
        v = self.figures(on)
        if v is not None and on.runs:
            host = on_host(getattr(on, "host_ops", {}))
            if v.host_ops and host:
                return (f"compiled by Vela: {v.npu_ops} of {v.npu_ops + v.cpu_ops - v.host_ops} network ops on the"
                        f" NPU; {host} ({v.host_ops} ops Vela leaves on the CPU)")
            return f"compiled by Vela: {v.npu_ops} of {v.npu_ops + v.cpu_ops} ops on the NPU"
        return super().said(on)


class NpuPriced(Priced, Protocol):
    """What an Ethos-U target prices a model by (reporter.model.findings.Option: `VelaCompiler.prices`' figures)."""

    npu_share: Optional[float]
    estimate_ms: Optional[float]


def npu_cost(npu_share: Optional[float], estimate_ms: Optional[float], fastest_ms: Optional[float]) -> float:
    """What a model costs on an Ethos-U NPU: wholly on the NPU first (the CPU fallback is what users of such hardware
    meet silently), then Vela's estimated time in doublings over the fastest."""
    whole = 0.0 if npu_share is not None and npu_share >= 1.0 else NOT_WHOLLY_ON_NPU
    if not estimate_ms or not fastest_ms:
        return whole
    return whole + math.log2(max(estimate_ms / fastest_ms, 1.0))


@dataclass(frozen=True)
class EthosU(Target):
    """An Ethos-U configuration: priced by Vela's compilation, not by size."""

    def costs(self, pool: Sequence[Priced]) -> dict[str, float]:
        pool = cast(Sequence[NpuPriced], pool)  # the decision's options carry `prices`' figures
        known = [o.estimate_ms for o in pool if o.estimate_ms]
        fastest = min(known) if known else None
        return {o.name: npu_cost(o.npu_share, o.estimate_ms, fastest) for o in pool}


def _ethos(config: str) -> Target:
    npu = config.replace("ethos-u", "Ethos-U")
    return EthosU(config, f"on an Arm {npu} NPU", f"an {npu} (per Vela)", runs=integer_tensors,
                  runs_not=f"its float ops stay on the CPU beside the {npu}", adds=(variants.INT8_IO,), timed=False,
                  check=VelaCompiler(config=config), integer_hardware=True, int16_activations=True,
                  static_batch=True)


TARGETS = tuple(_ethos(config) for config in CONFIGS)
