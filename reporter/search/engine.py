"""The search: the fewest layers to keep in float, found by measuring candidate models.

Pure Python over an `evaluate(nodes)` function (the pipeline's builds and runs a quantized model on
the selection data), so that the algorithm is tested without TensorFlow.

1. Moves. Keeping one layer in float fixes the error that layer makes ("layer" move). Keeping a
   tensor in float needs its producer and every consumer in float together ("tensor" move): that is
   what fixes a wide-range tensor, where keeping either side alone does nothing.
2. Rank the moves from the debugger's evidence (local rmse/scale, the jump of the propagated error,
   range), then measure each move alone where the budget allows, and order by measured effect.
3. Add moves in that order until the target is met, or until more float layers stop helping.
4. Drop every kept layer whose removal does not hurt (beyond noise, or below the target), and
   repeat until each remaining layer is needed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from reporter.core import judgement
from reporter.model.report import RMSE_OVER_SCALE_IDEAL


@dataclass(frozen=True)
class Layer:
    """What the search knows of one debugged layer (its name is its output tensor's)."""

    name: str
    op: str
    local: float  # rmse/scale, per-layer verify
    propagated: Optional[float]  # rmse/scale, whole-model verify
    range: float
    inputs: tuple = ()  # names of debugged layers that feed this one
    consumers: tuple = ()  # names of debugged layers this one feeds


@dataclass(frozen=True)
class Move:
    nodes: frozenset
    kind: str  # "layer" or "tensor"
    anchor: str  # the layer (or the producer of the tensor) the move is about
    prior: float  # evidence, in multiples of normal (1 = nothing unusual)


@dataclass(frozen=True)
class Evaluation:
    """One candidate model measured on the selection data."""

    nodes: frozenset
    score: float  # agreement with float, or 1 - MSE / variance for a regression output
    per_sample: np.ndarray  # bool (agrees with float) or float (squared error)
    size_bytes: int


@dataclass(frozen=True)
class Step:
    evaluation: Evaluation
    phase: str  # "fiq", "probe", "add", "drop", "check"
    change: str  # what was added or removed, for the report
    accepted: bool  # the search moved on from here (a rejected drop is kept for the record)


@dataclass
class Trace:
    steps: list = field(default_factory=list)
    chosen: Optional[Evaluation] = None
    evaluations: int = 0
    seconds: float = 0.0
    target: float = 1.0
    target_met: bool = False
    stop_reason: str = ""
    necessity: dict = field(default_factory=dict)  # node -> selection score lost when it is dropped


@dataclass(frozen=True)
class Policy:
    target: float  # selection score to reach
    target_is_hard: bool  # a user's --max-accuracy-drop: layers may be dropped while it still holds
    budget: int = 60  # candidate models built and measured, at most
    patience: int = 4  # additions in a row without a gain before the search stops adding
    higher_is_better: bool = True


def moves(layers: list[Layer]) -> list[Move]:
    """Every layer move and tensor move, best evidence first."""
    by_name = {layer.name: layer for layer in layers}
    ranges = sorted(layer.range for layer in layers if layer.range > 0)
    median_range = ranges[len(ranges) // 2] if ranges else 1.0
    out = []
    for layer in layers:
        local = layer.local / RMSE_OVER_SCALE_IDEAL
        jump = 1.0
        if layer.propagated is not None:
            before = [by_name[n].propagated or 0.0 for n in layer.inputs if n in by_name] or [0.0]
            jump = layer.propagated / max(max(before), RMSE_OVER_SCALE_IDEAL)
        out.append(Move(frozenset({layer.name}), "layer", layer.name, max(local, jump)))
        if layer.consumers:
            wide = layer.range / judgement.positive_floor(median_range)
            worst_consumer = max(by_name[c].local for c in layer.consumers) / RMSE_OVER_SCALE_IDEAL
            out.append(Move(frozenset({layer.name, *layer.consumers}), "tensor", layer.name,
                            max(wide, worst_consumer) * (1.0 if wide > 2 else 0.5)))
    index = {layer.name: i for i, layer in enumerate(layers)}
    return sorted(out, key=lambda m: (-m.prior, len(m.nodes), index[m.anchor]))


def search(layers: list[Layer], evaluate: Callable[[frozenset], Evaluation], policy: Policy,
           forced: frozenset = frozenset()) -> Trace:
    """Runs the search; `forced` nodes are in float in every candidate (the user's --keep-float)."""
    t0 = time.perf_counter()
    trace = Trace(target=policy.target)
    all_nodes = frozenset(layer.name for layer in layers)
    seen: dict[frozenset, Evaluation] = {}

    def measure(nodes: frozenset) -> Optional[Evaluation]:
        nodes = frozenset(nodes) | forced
        if nodes in seen:
            return seen[nodes]
        if trace.evaluations >= policy.budget or (all_nodes and all_nodes <= nodes):
            return None  # out of budget, or nothing would stay quantized
        trace.evaluations += 1
        seen[nodes] = evaluate(nodes)
        return seen[nodes]

    def meets(ev: Evaluation) -> bool:
        return judgement.within(policy.target, ev.score)

    def worse(a: Evaluation, b: Evaluation) -> bool:
        return judgement.paired_worse(a.per_sample, b.per_sample, policy.higher_is_better)

    def better(a: Evaluation, b: Evaluation) -> bool:
        return judgement.paired_better(a.per_sample, b.per_sample, policy.higher_is_better)

    start = measure(frozenset())
    trace.steps.append(Step(start, "fiq", "FIQ" + (" with the forced layers" if forced else ""), True))
    if meets(start):
        return _finish(trace, start, True, "FIQ already meets the target", t0)

    # Measure moves alone, best evidence first, with at most a third of the budget.
    ranked = moves(layers)
    probes = {}
    for move in ranked[: max(0, policy.budget // 3)]:
        ev = measure(move.nodes)
        if ev is None:
            continue
        probes[move] = ev
        trace.steps.append(Step(ev, "probe", _change("+", move), False))
    gain = {m: ev.score - start.score for m, ev in probes.items()}
    order = sorted(probes, key=lambda m: (-gain[m], len(m.nodes), ranked.index(m)))
    order += [m for m in ranked if m not in probes]

    # Add moves until the target is met or more float layers stop helping.
    current, best, idle, reason = start, start, 0, ""
    for move in order:
        nodes = current.nodes | move.nodes
        if nodes == current.nodes:
            continue
        if policy.budget - trace.evaluations <= len(nodes - forced):
            # keep enough budget to check every kept layer: an unchecked layer may be one that never helps
            reason = "the budget ran out (the rest was kept to check each float layer)"
            break
        ev = measure(nodes)
        if ev is None:
            reason = "the budget ran out" if trace.evaluations >= policy.budget else reason
            if trace.evaluations >= policy.budget:
                break
            continue
        trace.steps.append(Step(ev, "add", _change("+", move), True))
        current = ev
        if not judgement.within(ev.score, best.score):
            improved = better(ev, best)
            best = ev
            idle = 0 if improved else idle + 1
        else:
            idle += 1
        if meets(best):
            reason = "the target is met"
            break
        if idle >= policy.patience:
            reason = f"{policy.patience} more moves in a row did not help"
            break
    else:
        reason = reason or "every candidate move was tried"

    # Drop every layer that is not needed, least promising first, until each one is needed.
    reference = best
    current = best
    changed = True
    while changed:
        changed = False
        added_order = [n for s in trace.steps if s.phase == "add" for n in sorted(s.evaluation.nodes)]
        for node in sorted(current.nodes - forced, key=lambda n: -added_order.index(n) if n in added_order else 0):
            ev = measure(current.nodes - {node})
            if ev is None:
                continue
            if policy.target_is_hard and meets(reference):  # a user's hard target allows any loss above it
                ok = meets(ev)
            else:  # a layer stays only if the selection data show it is needed beyond noise, even when
                # dropping it leaves the default target just missed: a gain within noise is not a need
                ok = not worse(ev, current) and not worse(ev, reference)
            trace.steps.append(Step(ev, "drop", f"− {_short(node)}", ok))
            if ok:
                current, changed = ev, True
                break
    for node in sorted(current.nodes - forced):
        ev = seen.get(current.nodes - {node})
        if ev is not None:
            trace.necessity[node] = current.score - ev.score
    if meets(reference) and not meets(current):
        reason = ("the target was reached with more layers in float, but what the dropped ones added was within"
                  " noise on the selection samples")
    return _finish(trace, current, meets(current), reason, t0)


def pareto(points: list[tuple[float, float]]) -> list[bool]:
    """For (cost, quality) points: True where no other point is at most as costly and better, or
    cheaper and as good."""
    flags = []
    for i, (cost, q) in enumerate(points):
        dominated = any((c <= cost and v > q) or (c < cost and v >= q) for j, (c, v) in enumerate(points) if j != i)
        flags.append(not dominated)
    return flags


def _finish(trace: Trace, chosen: Evaluation, met: bool, reason: str, t0: float) -> Trace:
    trace.chosen = chosen
    trace.target_met = met
    trace.stop_reason = reason
    trace.seconds = time.perf_counter() - t0
    return trace


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit // 2 - 1] + "…" + name[-(limit // 2):]


def _change(sign: str, move: Move) -> str:
    what = "tensor of" if move.kind == "tensor" else "layer"
    return f"{sign} {what} {_short(move.anchor)}" + (f" ({len(move.nodes)} layers)" if len(move.nodes) > 1 else "")
