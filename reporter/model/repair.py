"""The integer-only repair ladder as report.json stores it: each rung tried (cheapest first) for an integer-only
target when no integer-only model met the accuracy target, the model it built, measured like every model, and why
the ladder stopped (reporter.pipeline.repairs runs it; reporter.convert.rungs builds each rung's model)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from reporter.model.bounds import COUNT, SECONDS, figure
from reporter.model.variant import VariantResult

# What became of a rung (`RepairRung.status`).
MEETS, MISSES, FAILED, NOT_ON_TARGET, NOT_TRIED = "meets", "misses", "failed", "not_on_target", "not_tried"
DOES_NOT_APPLY = "does_not_apply"  # nothing for the rung to change in this model (no NEG, no bias, no outlier ...)
SCREENED = "screened"  # built, but on the selection samples no closer to float than a rung measured to miss: not
# measured on the evaluation data nor on the target (RepairRung.screen says what was measured)


@dataclass(frozen=True)
class Screen:
    """A rung's model measured on the selection samples before the evaluation data: its agreement with float there
    (reporter.convert.rungs.base.agreement: a share of samples, or minus a relative MSE), and the best agreement of a
    rung that was measured on the evaluation data and missed the target (`against`, its code)."""

    samples: int = figure(COUNT)
    agreement: float
    against: str
    against_agreement: float
    words: str  # the two figures as the report says them ("10.2 %", "relative MSE 0.41")


@dataclass(frozen=True)
class InputTransform:
    """What the host does to an input before the model reads it (the input's normalization moved off the model):
    x' = (x - subtract) / divide, per feature."""

    input: str
    subtract: list[float] = field(default_factory=list)
    divide: list[float] = field(default_factory=list)

    def apply(self, x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """`x` (input name -> array) as the host feeds the model: the input standardized (computed in float64, given
        as float32), the others as they are. A one-input `x` is standardized whatever its input is called."""
        key = self.input if self.input in x else next(iter(x))
        return {k: ((v - np.asarray(self.subtract)) / np.asarray(self.divide)).astype(np.float32) if k == key else v
                for k, v in x.items()}


@dataclass(frozen=True)
class RepairRung:
    rung: str  # "static_batch1", "ranges", "bias_correction", "host_normalization", ...
    label: str  # "LiteRT static int8, static batch of 1"
    status: str  # MEETS, MISSES, FAILED, DOES_NOT_APPLY, NOT_ON_TARGET or NOT_TRIED (the ladder stopped before it)
    detail: str = ""  # what the rung chose ("range method: mean of per-sample extremes ...")
    model: Optional[VariantResult] = None  # built and measured (on the target's kernels too)
    error: str = ""  # why it could not be built, or does not apply
    input_transform: Optional[InputTransform] = None
    seconds: float = figure(SECONDS, 0.0)  # to build
    screen: Optional[Screen] = None  # measured on the selection samples first (every rung after the first built)
