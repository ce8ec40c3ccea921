"""The `micro` target: a microcontroller running TFLite Micro.

Every quantized model is run by TFLite Micro's own interpreter over the evaluation data: it runs there only if
TFLite Micro loads and runs it (its reason, word for word, when not), its accuracy is TFLite Micro's, and its
outputs are compared with LiteRT's reference kernels. A detector's postprocess runs there too (TFLite Micro has its
kernel; the tool writes its outputs' shapes into the file) and is the host's part of the work. TFLite Micro has
float kernels too, but a microcontroller is integer hardware in practice: the repair ladder climbs (16x8 included,
which TFLite Micro runs) when no quantized model meets the target.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from reporter.core import variants
from reporter.core.formatting import fmt_bytes
from reporter.core.targets.base import REFERENCE_SAMPLES, Check, Checked, Target, Tools

NAME = "micro"
HELP = f"{NAME} (run by TFLite Micro)"
MICRO_KERNELS = "TFLite Micro"
REFERENCE_RUNTIME = MICRO_KERNELS  # it implements LiteRT's reference kernels (reporter.core.targets.reference_kernels_run_by)
TOOL = "micro"  # its figures' key in OnTarget.tools (reporter.model.hardware.MicroFigures)


class MicroTools(Tools, Protocol):
    """The target tools with TFLite Micro's run (reporter.measure.hardware.Tools)."""

    def micro_run(self, model: bytes, x, reference_samples: int) -> tuple:
        """(outputs by signature key, MicroFigures): TFLite Micro's run, with its parity against the reference
        kernels over the first `reference_samples` samples and, where they disagree, the cause found."""


@dataclass(frozen=True)
class MicroInterpreter(Check):
    """TFLite Micro's interpreter over the evaluation data, with its parity against LiteRT's reference kernels."""

    kernels: str = MICRO_KERNELS
    key: str = TOOL
    tool: str = "TFLite Micro's interpreter"
    heading: str = "TFLite Micro"
    distributions: tuple = ("tflite-micro",)
    decides_runs: bool = True

    def run(self, model: bytes, fits: bool, x, tools: MicroTools, workdir: Path) -> Checked:
        outputs, figures = tools.micro_run(model, x, REFERENCE_SAMPLES)
        if figures.arena_too_small:  # the device's RAM, as the user gave it: the model's own need measured
            return Checked(outputs, runs=False, figures=figures,
                           error=f"it needs {fmt_bytes(figures.arena_bytes)} of tensor arena, more than the"
                                 f" {fmt_bytes(figures.arena_limit_bytes)} the device gives (--micro-arena)")
        return Checked(outputs, figures=figures)


TARGETS = (Target(NAME, "on a microcontroller (TFLite Micro)", "TFLite Micro", runs_not="TFLite Micro cannot load or"
                  " run it", adds=(variants.INT8_IO,), timed=False, check=MicroInterpreter(), integer_hardware=True,
                  int16_activations=True, inline_buffers=True, static_batch=True),)
