"""Recommendation: which layers to keep in float, and what doing so achieved."""

from __future__ import annotations

import dataclasses
from typing import Optional

from reporter.report import LayerStat, VariantResult


def mark_suspects(layers: list[LayerStat], threshold: float, first_layers: int) -> list[LayerStat]:
    """Marks layers whose rmse/scale exceeds `threshold`, and the first `first_layers` layers."""
    marked = []
    for layer in layers:
        reasons = []
        if layer.rmse_over_scale > threshold:
            reasons.append(f"rmse/scale {layer.rmse_over_scale:.3g} > {threshold:g}")
        if layer.index < first_layers:
            reasons.append(f"one of the first {first_layers} layers")
        marked.append(dataclasses.replace(layer, suspect=bool(reasons), reasons=reasons))
    return marked


def denylist(layers: list[LayerStat]) -> list[str]:
    """Tensor names of the suspect layers, in model order, without repeats."""
    return list(dict.fromkeys(layer.tensor_name for layer in layers if layer.suspect))


def gap_recovered(float_v: VariantResult, fiq_v: VariantResult, selective_v: VariantResult) -> Optional[float]:
    """Share of the float-to-FIQ accuracy gap that the selective model wins back (1.0 = all of it).

    None when there is no gap to recover (FIQ is as good as float) or no accuracy to compare.
    """
    accs = [v.metrics.accuracy if v and v.ok and v.metrics else None for v in (float_v, fiq_v, selective_v)]
    if None in accs:
        return None
    f, q, s = accs
    if f - q <= 0:
        return None
    return (s - q) / (f - q)


def summary(n_suspects: int, threshold: float, selective: Optional[VariantResult], size_cost: Optional[int]) -> str:
    """One sentence on what the recommendation found and achieved."""
    if n_suspects == 0:
        return f"No layer has rmse/scale above {threshold:g}: nothing to keep in float, no selective model built."
    layers = "1 suspect layer" if n_suspects == 1 else f"{n_suspects} suspect layers"
    if selective is None or not selective.ok:
        return f"{layers} found; the selective model could not be built or measured."
    gap = selective.accuracy_gap_recovered
    if gap is None:
        cost = f" It would cost {size_cost:+,} bytes against FIQ." if size_cost is not None else ""
        return (
            f"The debugger flags {layers}, but FIQ is as accurate as float on this data, so there is no gap"
            f" to recover: keeping the flagged layers in float is not needed.{cost}"
        )
    return (
        f"Leaving {layers} in float recovers {gap:.0%} of the float-to-FIQ accuracy gap"
        f" at {size_cost:+,} bytes against FIQ."
    )
