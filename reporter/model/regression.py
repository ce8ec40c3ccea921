"""What a regression output's figures against its targets are, as report.json stores them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reporter.model.bounds import NON_NEGATIVE, R2, figure


@dataclass(frozen=True)
class TargetError:
    """A regression output against its targets (the labels): mean absolute error, root mean squared error and R²
    (1 - residual sum of squares / the targets' sum of squares about each value's mean, over every value)."""

    mae: float = figure(NON_NEGATIVE)
    rmse: float = figure(NON_NEGATIVE)
    r2: Optional[float] = figure(R2, None)  # None when no target varies
