"""The Pareto front: the one rule for which models no other beats on every axis at once.

The search marks its candidates with it (size against selection score, reporter.search.engine), the findings
the quantized models measured (size, latency and the main metric, reporter.findings.picks), and the plots draw it.
"""

from __future__ import annotations

from typing import Sequence


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """`a` is at most `b` on every axis and lower on one (every axis is a cost: lower is better)."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def front(points: Sequence[Sequence[float]]) -> list[bool]:
    """For each point (its costs, lower is better on every axis: a score enters negated), whether no other
    point dominates it."""
    return [not any(dominates(o, p) for j, o in enumerate(points) if j != i) for i, p in enumerate(points)]
