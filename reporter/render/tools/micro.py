"""TFLite Micro's figures (reporter.model.hardware.MicroFigures) in the views and the words: the samples it ran, the
tensor arena, its parity with LiteRT's reference kernels and the cause where they differ, the models that need more
arena than the device gives, and TFLite Micro's reasons in the user's terms."""

from __future__ import annotations

import re

from reporter.core.formatting import fmt_bytes, fmt_percent
from reporter.core.targets import micro as target
from reporter.render.tools.words import SOURCE, ToolWords, fine_share, grouped, register

_INTERNAL = re.compile(r"->|kTfLite|[!=]=")  # a kernel's check as its C++ source spells it
_NODE = re.compile(r"Node (\w+) \(number (\d+)\) failed to (?:prepare|invoke) with status \d+")
_MISSING = re.compile(r"Didn't find op for builtin opcode '(\w+)'")
_HYBRID = "Hybrid models are not supported"


def cause(mc) -> str:
    """Why TFLite Micro's outputs differ from LiteRT's reference kernels', as its check found it; "" when they agree
    or no cause was found."""
    if not mc.disagrees:
        return ""
    if mc.offset_buffers:
        n = mc.offset_buffers
        return (f"TFLite Micro does not read the {n} weight buffer{'s' if n != 1 else ''} the file stores after the"
                f" model (offset buffers) and computes on uninitialized memory; write the file with its buffers inline")
    if mc.kernel_op:
        return (f"TFLite Micro's {mc.kernel_op} kernel (op {mc.kernel_op_position} of the graph) computes values up"
                f" to {mc.kernel_op_steps:g} quantization steps from the reference kernel's on the same inputs")
    return ""


def arena_clause(small: list) -> str:
    """The models that need more tensor arena than the device gives (--micro-arena), said once: "4 models need more
    tensor arena than the 97.7 KB the device gives (--micro-arena): from 118.4 KB (Integer only (int8 I/O)) to
    234.8 KB (16x8)"."""
    low = min(small, key=lambda o: o.tools[target.TOOL].arena_bytes)
    high = max(small, key=lambda o: o.tools[target.TOOL].arena_bytes)
    lo, hi = low.tools[target.TOOL], high.tools[target.TOOL]
    need = f"{fmt_bytes(lo.arena_bytes)}" if lo.arena_bytes == hi.arena_bytes else \
        f"from {fmt_bytes(lo.arena_bytes)} ({low.label}) to {fmt_bytes(hi.arena_bytes)} ({high.label})"
    who = small[0].label if len(small) == 1 else f"{len(small)} models"
    return (f"{who} need{'s' if len(small) == 1 else ''} more tensor arena than the"
            f" {fmt_bytes(lo.arena_limit_bytes)} the device gives (--micro-arena): {need}")


class MicroWords(ToolWords):
    def cell(self, m) -> str:
        parts = [f"{m.samples:,} samples"]
        if m.arena_bytes is not None:
            parts.append(f"arena {fmt_bytes(m.arena_bytes)}")
        if m.identical_share is not None:
            parts.append(f"{fmt_percent(m.identical_share)} of values equal to LiteRT's reference kernels"
                         + (f", largest difference {m.max_steps:g} steps" if m.max_steps else ""))
        said = cause(m)
        return ", ".join(parts) + (f": {said}" if said else "")

    def shipped(self, mc) -> str:
        text = f"TFLite Micro runs it on all {mc.samples:,} evaluation samples"
        if mc.arena_bytes is not None:
            text += f" with a {fmt_bytes(mc.arena_bytes)} tensor arena"
        if mc.identical_share is not None:
            text += (f"; its outputs equal LiteRT's reference kernels' on {fine_share(mc.identical_share)} of values"
                     f" over {mc.reference_samples:,} samples")
            if mc.max_steps:
                text += f" (largest difference {mc.max_steps:g} quantization step{'s' if mc.max_steps != 1 else ''})"
        said = cause(mc)
        return text + (f": {said}" if said else "") + "."

    def judged(self, options) -> str:
        """" On TFLite Micro, FIQ (1.0 % of its output values equal to LiteRT's reference kernels'): <cause>." for
        the models TFLite Micro computes otherwise than the reference kernels, for a cause its check found."""
        ran = [(o, o.tools[target.TOOL]) for o in options if o.tools and o.tools.get(target.TOOL) is not None]
        pairs = [(f"{o.label} ({fmt_percent(m.identical_share)} of its output values equal to LiteRT's reference"
                  f" kernels')", cause(m)) for o, m in ran if cause(m)]
        return "".join(f" On TFLite Micro, {said}." for said in grouped(pairs))

    def kept_off(self, options) -> tuple[set, list[str]]:
        small = [o for o in options if o.not_there and o.tools and o.tools.get(target.TOOL) is not None
                 and o.tools[target.TOOL].arena_too_small]
        return {o.name for o in small}, ([arena_clause(small)] if small else [])

    def reason(self, text: str) -> str:
        """What TFLite Micro refuses named by the op, never its source files, node numbers or an exception's class."""
        if _HYBRID in text:
            return ("TFLite Micro does not run hybrid models (int8 weights computed in float, as dynamic range makes"
                    " them)")
        missing = _MISSING.search(text)
        if missing:
            return f"TFLite Micro has no {missing.group(1)} kernel"
        node = _NODE.search(text)
        if node:
            said = SOURCE.sub("", text[:node.start()]).strip(" ;.")  # the kernel's own message, when it has words
            return (f"TFLite Micro's {node.group(1)} kernel refuses op {int(node.group(2)) + 1} of the graph"
                    + (f" ({said})" if said and not _INTERNAL.search(said) else ""))
        return ""


WORDS = register(target.TOOL, MicroWords())
