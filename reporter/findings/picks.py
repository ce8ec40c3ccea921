"""The comparison table's Pareto front over size, latency and the main metric: which models no other model
beats on every axis at once. (The model to ship is reporter.findings.decision's: by the target, not by a
weighing of the metric against cost, since a difference within noise is no difference.)

Pure and typed: the points come from reporter.findings.decision; this module only marks the front.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reporter.core import pareto

@dataclass(frozen=True)
class Point:
    name: str
    size_bytes: int
    latency_ms: Optional[float]  # None: not timed (the front then reads size and the metric only)
    score: float  # oriented: higher is better
    meets_target: bool


def front(points: list[Point]) -> list[bool]:
    """For each point, whether no other point is smaller, faster and better at once (reporter.core.pareto);
    latency counts only when every point was timed."""
    timed = all(p.latency_ms is not None for p in points)
    return pareto.front([(p.size_bytes, -p.score) + ((p.latency_ms,) if timed else ()) for p in points])
