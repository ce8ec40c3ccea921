"""What the recommendation reads of a run's settings: the run (reporter.run.pipeline) builds it from its
RunSettings, so that the search is typed without knowing the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class SearchOptions:
    method: str  # "search" (measured) or "rule" (the seed notebook's rmse/scale rule)
    max_accuracy_drop: Optional[float]  # the user's limit, the search's target (None: the default target)
    budget: int  # candidate models the search may build and measure
    selection_samples: int  # samples the search chooses on, at most
    calibration_samples: int  # the selection samples come after the calibration samples when enough remain
    suspect_threshold: float  # the rule: rmse/scale above this is suspect
    first_layers: int  # the rule: the first layers are suspect too
    keep_float: tuple = ()  # tensor names always kept in float (--keep-float)
    keep_float_ops: tuple = ()  # op types always kept in float (--keep-float-ops)
    primary_output: Optional[str] = None  # several outputs: the target holds for this one (None: every labelled one)
    # (model, float) -> the model meets the accuracy target: the findings' one rule, which the run hands down (the
    # search measures, it never decides that itself); None: no model is taken to meet it
    target_rule: Optional[Callable] = None
