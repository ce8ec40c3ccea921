"""The trade-off over every quantized model measured: the Pareto front over size, latency and the main metric,
and three named picks a reader can take without reading the table.

- **most accurate**: the best main metric (the smaller model on a tie);
- **smallest meeting the target**: the smallest model not worse than float beyond noise (or the allowed drop);
- **balanced**: of the front's models that meet the target (all of the front when none does), the one closest
  to the ideal of smallest, fastest and most accurate: size and latency counted in doublings over the best
  measured (a 2x bigger or slower model is one unit away, whichever size it starts from), the metric as a
  share of the spread between the best and the worst model.

Pure and typed: the points come from the findings (reporter.findings.derive), the judgement of "meets the
target" too; this module only ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from reporter.core import pareto

MOST_ACCURATE = "most accurate"
BALANCED = "balanced"
SMALLEST = "smallest meeting the target"
PICKS = (MOST_ACCURATE, BALANCED, SMALLEST)


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


def picks(points: list[Point]) -> dict[str, str]:
    """Pick name -> the name of the point picked; a pick with nothing to pick is left out."""
    if not points:
        return {}
    out = {MOST_ACCURATE: min(points, key=lambda p: (-p.score, p.size_bytes, p.name)).name}
    meeting = [p for p in points if p.meets_target]
    if meeting:
        out[SMALLEST] = min(meeting, key=lambda p: (p.size_bytes, -p.score, p.name)).name
    on_front = [p for p, flag in zip(points, front(points)) if flag]
    pool = [p for p in on_front if p.meets_target] or on_front
    out[BALANCED] = min(pool, key=lambda p: (_distance(p, points), p.size_bytes, p.name)).name
    return out


def _distance(p: Point, points: list[Point]) -> float:
    """Distance from the ideal corner: size and latency as doublings over the smallest and fastest model measured
    (2x bigger or slower counts 1), the metric as a share of the spread between the best and worst model."""
    terms = [math.log2(p.size_bytes / min(q.size_bytes for q in points))]
    if all(q.latency_ms for q in points):
        terms.append(math.log2(p.latency_ms / min(q.latency_ms for q in points)))
    best, worst = max(q.score for q in points), min(q.score for q in points)
    terms.append((best - p.score) / (best - worst) if best > worst else 0.0)
    return math.sqrt(sum(t * t for t in terms))
