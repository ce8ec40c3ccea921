"""How a change against float reads in the report's tables and sentences: the step an arrow draws for a count, a
size or a metric, and the ratios that read as no change or as a percentage. Display only, from
reporter.core.judgement's thresholds (read when called, so that the legend and the arrows follow them); what a change
means (beyond noise, faster, meeting the target) is decided in reporter.findings and read from its records."""

from __future__ import annotations

from typing import Optional

from reporter.core import judgement as jd


def count_step(value: Optional[float], ref: Optional[float], same_ratio: float = 0.0) -> Optional[int]:
    """A count, size or latency against float's: 0 the same (or within `same_ratio` of it), +1 / -1
    higher / lower, +2 / -2 more than judgement.COUNT_BIG_RATIO times higher / lower (or from / to zero); None
    when either is missing."""
    if value is None or ref is None:
        return None
    if value == ref or (ref and abs(value - ref) <= same_ratio * abs(ref)):
        return 0
    up = value > ref
    lo, hi = (ref, value) if up else (value, ref)
    step = 2 if lo <= 0 or hi / lo > jd.COUNT_BIG_RATIO else 1
    return step if up else -step


def metric_step(value: Optional[float], ref: Optional[float]) -> Optional[int]:
    """A metric (0..1) against float's: 0 within judgement.METRIC_SAME_POINTS, +1 / -1 up to
    judgement.METRIC_BIG_POINTS higher / lower, +2 / -2 beyond; None when either is missing."""
    if value is None or ref is None:
        return None
    points = (value - ref) * 100.0
    if abs(points) <= jd.METRIC_SAME_POINTS:
        return 0
    step = 2 if abs(points) > jd.METRIC_BIG_POINTS else 1
    return step if points > 0 else -step


def same_ratio(ratio: float, tolerance: float = 0.0) -> bool:
    """A ratio against float that reads as no change: within `tolerance` of 1, and never finer than
    judgement.SAME_RATIO."""
    return abs(ratio - 1) <= max(tolerance, jd.SAME_RATIO)


def ratio_in_percent(ratio: float) -> bool:
    """A size ratio close enough to 1 to be worded as a percentage rather than "1.0x"."""
    return abs(ratio - 1) < jd.PERCENT_RATIO
