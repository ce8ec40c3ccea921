"""Vela's figures (reporter.model.hardware.VelaFigures) in the views and the words: the ops it puts on the NPU and
those it leaves on the CPU with their reasons, SRAM, flash and the estimated time."""

from __future__ import annotations

from reporter.core.formatting import fmt_ms, fmt_percent
from reporter.core.targets import ethos_u as target
from reporter.render.tools.words import ToolWords, register


class VelaWords(ToolWords):
    def cell(self, v) -> str:
        network = " network" if v.host_ops else ""
        parts = [f"{v.npu_ops} of {v.npu_ops + v.cpu_ops - v.host_ops}{network} ops on the NPU"
                 f" ({fmt_percent(v.npu_share, 0)})"]
        if v.inference_ms is not None:
            parts.append(f"est. {fmt_ms(v.inference_ms)}")
        if v.sram_kib is not None:
            parts.append(f"SRAM {v.sram_kib:,.1f} KiB")
        if v.flash_kib is not None:
            parts.append(f"flash {v.flash_kib:,.1f} KiB")
        return ", ".join(parts)

    def rows(self, v) -> list[str]:
        return [f"{c.op}: {c.reason}" for c in v.cpu]

    def shipped(self, v) -> str:
        where = (f"all {v.npu_ops} of its ops on the NPU" if not v.cpu_ops else
                 f"all {v.npu_ops} of the network's ops on the NPU and leaves the host's {v.host_ops} on the CPU ("
                 + ", ".join(c.op for c in v.cpu) + ")" if v.host_ops == v.cpu_ops else
                 f"{v.npu_ops} of {v.npu_ops + v.cpu_ops} ops on the NPU and leaves {v.cpu_ops} on the CPU ("
                 + "; ".join(f"{c.op}: {c.reason}" for c in v.cpu[:3]) + ")")
        figures = [f"an estimated {fmt_ms(v.inference_ms)} per inference" + (
            f" at {v.clock_mhz:g} MHz" if v.clock_mhz else "")] if v.inference_ms is not None else []
        if v.sram_kib is not None:
            figures.append(f"{v.sram_kib:,.1f} KiB SRAM")
        if v.flash_kib is not None:
            figures.append(f"{v.flash_kib:,.1f} KiB flash")
        return f"Vela puts {where}" + (f": {', '.join(figures)}" if figures else "") + "."


WORDS = register(target.TOOL, VelaWords())
