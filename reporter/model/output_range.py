"""What an integer output's range cuts off of float's values, as report.json stores it."""

from __future__ import annotations

from dataclasses import dataclass

from reporter.model.bounds import SHARE, figure


@dataclass(frozen=True)
class ClippedOutput:
    """An output made by an integer tensor (FIQ's int8 output before its DEQUANTIZE) whose range cannot hold all
    of float's values on the evaluation data: those values clip, whatever layers are kept in float."""

    share: float = figure(SHARE)  # share of float's output values (every sample, every position) beyond the range
    low: float  # the real values the integer tensor can hold
    high: float
    dtype: str  # "int8" or "int16"
    part: str = ""  # what the output is when a task kind reads several outputs as one: a detector's "classes"
