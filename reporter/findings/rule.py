"""The accuracy target's one rule: how a model stands against its reference (float, or a diff's BASE) on one output,
on the report's one scale, and whether it meets the target on every labelled output. The decision, the gap, the
blamed variant's fix, every gate and the rule the run hands to the search and the blame read it, and nothing else
decides whether a model meets the accuracy target (the thresholds and the standings' names are
reporter.core.judgement's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from reporter.core import judgement as jd


@dataclass(frozen=True)
class Standing:
    """A model against its reference on one output, on the report's scale: the main metric's drop with its paired
    test, or, in a report without a main metric, its output's R² against float's output."""

    drop: Optional[float] = None  # reference minus the model on the main metric, oriented: positive is worse
    p_value: Optional[float] = None  # the paired test of that drop; None: not tested
    r2: Optional[float] = None  # 1 - output MSE / float's output variance (only where there is no main metric)


def standing(s: Standing, limit: Optional[float]) -> str:
    """How `s` stands against the accuracy target (judgement.NOT_WORSE ... LOSES). With --max-accuracy-drop (`limit`,
    0..1 of the main metric) a drop of at most the limit meets it and a larger one does not, whatever the noise (the
    user named the loss they accept); without, a drop within noise meets it and one beyond noise, or untested, does
    not."""
    if s.drop is None:
        if s.r2 is None:
            return jd.NOT_MEASURED
        return jd.CLOSE if jd.within(jd.DEFAULT_TARGET_R2, s.r2) else jd.LOSES
    if s.drop <= 0:
        return jd.NOT_WORSE
    if limit is not None:
        return jd.ALLOWED if jd.within(s.drop, limit) else jd.LOSES
    if s.p_value is not None and not jd.significant(s.p_value):
        return jd.NOISE
    return jd.LOSES


def meets_target(standings: Iterable[Standing], limit: Optional[float]) -> bool:
    """The one rule: a model meets the accuracy target when it stands within it on every labelled output (the main
    metric's first); nothing measured meets nothing."""
    found = list(standings)
    return bool(found) and all(standing(s, limit) in jd.MEETING for s in found)
