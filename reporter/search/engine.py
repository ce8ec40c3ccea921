"""The search: the fewest layers to keep in float, found by measuring candidate models.

Pure Python over an `evaluate(nodes)` function (the pipeline's builds and runs a quantized model on
the selection data), so that the algorithm is tested without TensorFlow.

1. Moves. Keeping one layer in float fixes the error that layer makes ("layer" move). Keeping a
   tensor in float needs its producer and every consumer in float together ("tensor" move): that is
   what fixes a wide-range tensor, where keeping either side alone does nothing. A wide range can run
   along a chain of tensors (an outlier channel in a residual stream): a "region" move keeps the
   connected wide-range layers and their consumers together. Error spread over a whole architecture
   needs "group" moves: every op of one type (the LOGISTIC/MUL of swish and squeeze-excite), or a
   contiguous block of the graph (Polygraphy's bisection over the layer order, NNCF's groups).
2. Rank the moves from the debugger's evidence (local rmse/scale, the jump of the propagated error,
   range), then measure the regions and groups and the best single moves alone where the budget allows,
   and order by measured effect. On a large model the compact moves (at most a tenth of the layers) with the
   strongest evidence are measured first. When none reaches the target or wins back half of the way to it
   (nor do the helpful ones together: judgement.compact_cause), the search looks beyond the cap
   (`look_beyond`): the debugger's chains of wide-range ops as units (an outlier channel carried through
   residual adds), then regions along the graph's order, bisected as Polygraphy's `debug precision` does
   (the first and the last half of the ops; in a half that helps, the shortest prefix or suffix that still
   does). The best of them that wins back half of the way is kept and the search goes on from it, even when
   it misses the target. Only when chains and regions were measured and none helped is FIQ's loss spread
   across the network: the search stops with no layer chosen. What was measured is the record `BeyondCompact`.
3. Add moves in that order until the target is met, or until more float layers stop helping.
4. Drop what is not needed, halves of the kept layers first, then smaller parts, then one layer at a
   time (delta debugging), until removing any one kept layer hurts (beyond noise, or below the target).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

import numpy as np

from reporter.core import judgement, variants
from reporter.core.pareto import front
from reporter.model.report import RMSE_OVER_SCALE_IDEAL, BeyondCompact, SearchCost, TriedSet


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
    kind: str  # "layer", "tensor", "region", "group" (every op of a type), "block" (contiguous layers), or
    # beyond the compact cap "prefix" / "suffix" (the first or last ops in the graph's order)
    anchor: str  # the layer (or the producer of the tensor) the move is about
    prior: float  # evidence, in multiples of normal (1 = nothing unusual)
    label: str = ""  # how the report names it: "region a … b (7 ops)", "every LOGISTIC (16 ops)", "block 2/4 ..."


@dataclass(frozen=True)
class Evaluation:
    """One candidate model measured on the selection data."""

    nodes: frozenset
    # agreement with float, the user's metric relative to float's (recommend.MetricScorer), or 1 - MSE / variance for
    # a regression output without a metric
    score: float
    per_sample: np.ndarray  # each sample's figure, higher is better as `score`: bool (agrees with float) or float
    # (share of positions that agree, the metric's value per sample or per block, or minus the squared error)
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
    spread: bool = False  # no compact set, chain nor region is the loss's cause: the search stopped after measuring them
    beyond: Optional[BeyondCompact] = None  # a large model: the compact sets, chains and regions measured
    out_of_budget: bool = False  # a candidate the search asked for was not measured: the budget was spent
    cost: Optional[SearchCost] = None  # the budget as estimated before the search (reporter.search.budget)


class Acceptance(Protocol):
    """What the search asks of the accuracy target on its selection samples: reporter.findings.rule.Acceptance, which
    the run hands it (the search measures and orders candidates; whether one reaches the target, is worse or better
    than another beyond noise, may replace the current set or be recommended instead, is decided there)."""

    target: float  # the selection score to reach (higher is better, 1: as float)

    def reached(self, score: float) -> bool: ...

    def worse(self, candidate: np.ndarray, reference: np.ndarray) -> bool: ...

    def better(self, candidate: np.ndarray, reference: np.ndarray) -> bool: ...

    def keeps(self, candidate: Evaluation, current: Evaluation, reference: Evaluation, best: Evaluation,
              start: Evaluation) -> bool: ...

    def instead(self, candidate: Evaluation, top: Evaluation, start: Evaluation, cut_short: bool) -> bool: ...


@dataclass(frozen=True)
class Policy:
    accept: Acceptance  # the findings' acceptance on the selection samples (reporter.findings.rule.Acceptance)
    budget: int = 60  # candidate models built and measured, at most
    patience: int = 4  # additions in a row without a gain before the search stops adding
    budget_words: str = "the budget"  # how the stop reasons name what bounds `budget` ("the budget (--search-share …)")

    @property
    def target(self) -> float:
        """The selection score to reach."""
        return self.accept.target


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


BLOCKS = 4  # contiguous blocks of the layer order measured as group moves (and halves)
MIN_GROUP = 2  # an op type with at least this many layers is a group move


def region_moves(layers: list[Layer]) -> list[Move]:
    """Connected regions of wide-range layers, grown through producers and consumers while the range stays
    wide (at least judgement.WIDE_RANGE_FACTOR times the median), each with every consumer of its layers: a wide
    tensor only stays exact when its producer and all its consumers are float. Only regions of two or more wide
    layers (a single one is a tensor move already)."""
    by_name = {layer.name: layer for layer in layers}
    index = {layer.name: i for i, layer in enumerate(layers)}
    ranges = sorted(layer.range for layer in layers if layer.range > 0)
    median = judgement.positive_floor(ranges[len(ranges) // 2] if ranges else 1.0)
    wide = {layer.name for layer in layers if layer.range >= judgement.WIDE_RANGE_FACTOR * median}
    seen, out = set(), []
    for layer in layers:
        if layer.name not in wide or layer.name in seen:
            continue
        component, todo = set(), [layer.name]
        while todo:
            name = todo.pop()
            if name in component:
                continue
            component.add(name)
            node = by_name[name]
            todo += [n for n in (*node.inputs, *node.consumers) if n in wide and n not in component]
        seen |= component
        if len(component) < 2:
            continue
        nodes = set(component)
        for name in component:
            nodes |= {c for c in by_name[name].consumers if c in by_name}
        ordered = sorted(nodes, key=index.get)
        prior = max(by_name[n].range for n in component) / median
        out.append(Move(frozenset(nodes), "region", ordered[0], prior,
                        f"region {_short(ordered[0], 40)} … {_short(ordered[-1], 40)} ({len(nodes)} ops)"))
    return out


def group_moves(layers: list[Layer]) -> list[Move]:
    """Every op of one type (with at least MIN_GROUP layers and some evidence of error), and the layers cut into
    BLOCKS contiguous blocks and two halves in model order: moves for error spread over the whole model."""
    out = []
    by_op: dict[str, list[Layer]] = {}
    for layer in layers:
        by_op.setdefault(layer.op, []).append(layer)
    for op, members in by_op.items():
        if len(members) < MIN_GROUP or len(members) == len(layers):
            continue
        prior = max(m.local for m in members) / RMSE_OVER_SCALE_IDEAL
        out.append(Move(frozenset(m.name for m in members), "group", members[0].name, prior,
                        f"every {op} ({len(members)} ops)"))
    n = len(layers)
    if n >= 2 * BLOCKS:
        cuts = [(i * n // BLOCKS, (i + 1) * n // BLOCKS, f"block {i + 1}/{BLOCKS}") for i in range(BLOCKS)]
        cuts += [(0, n // 2, "first half"), (n // 2, n, "second half")]
        for lo, hi, what in cuts:
            part = layers[lo:hi]
            prior = max(layer.local for layer in part) / RMSE_OVER_SCALE_IDEAL
            out.append(Move(frozenset(layer.name for layer in part), "block", part[0].name, prior,
                            f"{what}: {_short(part[0].name, 40)} … {_short(part[-1].name, 40)} ({len(part)} ops)"))
    return out


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
        if trace.evaluations >= policy.budget:
            trace.out_of_budget = True
            return None
        if all_nodes and all_nodes <= nodes:
            return None  # nothing would stay quantized
        trace.evaluations += 1
        seen[nodes] = evaluate(nodes)
        return seen[nodes]

    accept = policy.accept

    def ahead(node_sets) -> None:
        """Says which candidates the next probes measure, in order, to an `evaluate` that can build ahead."""
        hint = getattr(evaluate, "ahead", None)
        if hint is not None:
            hint([frozenset(n) | forced for n in node_sets if (frozenset(n) | forced) not in seen])

    start = measure(frozenset())
    trace.steps.append(Step(start, variants.FIQ, "FIQ" + (" with the forced layers" if forced else ""), True))
    if accept.reached(start.score):
        return _finish(trace, start, True, "FIQ already meets the target", t0)

    # Measure moves alone, with at most a third of the budget: the regions and groups first (few, and the only
    # moves that fix a chain or spread-out error), then the single moves with the best evidence.
    singles = moves(layers)
    wide = region_moves(layers) + sorted(group_moves(layers), key=lambda m: -m.prior)
    ranked = wide + singles
    probes: dict[Move, Evaluation] = {}

    def probe(move: Move) -> Optional[Evaluation]:
        ev = measure(move.nodes)
        if ev is not None and move not in probes:
            probes[move] = ev
            trace.steps.append(Step(ev, "probe", _change("+", move), False))
        return ev

    limit = judgement.compact_limit(len(layers))
    if limit is not None:
        # A large model: the compact moves with the strongest evidence first; none of them the loss's cause (nor
        # the helpful ones together) means a loss spread across the network, and the search stops here.
        compact = [m for m in ranked if len(m.nodes - forced) <= limit]
        first = [m for m in compact if m.kind in ("region", "group")][: judgement.SPREAD_GROUP_PROBES]
        first += [m for m in compact if m not in first][: judgement.SPREAD_PROBES - len(first)]
        ahead([m.nodes for m in first])
        for move in first:
            probe(move)

        def together(nodes: frozenset) -> Optional[Evaluation]:
            ev = measure(nodes)
            if ev is not None:
                trace.steps.append(Step(ev, "probe", f"+ the helpful compact moves together ({len(nodes)} layers)",
                                        False))
            return ev

        compact = BeyondCompact(len(layers), limit, len(trace.steps) - 1, "compact")
        if probes and not _compact_cause(probes, start, policy.target, limit, together):
            found, compact = look_beyond(layers, probe, start, accept, compact, ahead)
            trace.beyond = compact
            if not found:
                trace.spread = compact.outcome == "spread"
                reason = ("FIQ's loss is spread across the network: no compact set, chain of wide-range ops or region"
                          " along the graph's order reaches the target or wins back"
                          f" {judgement.SPREAD_RECOVER_SHARE:.0%} of the way to it") if trace.spread else \
                    f"{policy.budget_words} ran out before the chains and regions beyond the compact sets were measured"
                return _finish(trace, start, False, reason, t0)
            ranked = found + [m for m in ranked if m not in found]  # no more probes: the found set leads
        else:
            trace.beyond = compact
    if trace.beyond is None or trace.beyond.outcome == "compact":
        ahead([m.nodes for m in ranked[: max(0, policy.budget // 3)]])
        for move in ranked[: max(0, policy.budget // 3)]:
            probe(move)
    gain = {m: ev.score - start.score for m, ev in probes.items()}
    lead = ranked[:1] if trace.beyond is not None and trace.beyond.outcome != "compact" else []
    rank = {m: i for i, m in enumerate(ranked)}
    order = lead + sorted((m for m in probes if m not in lead),
                          key=lambda m: (-gain[m], len(m.nodes), rank.get(m, len(rank))))
    order += [m for m in ranked if m not in probes and m not in lead]

    # Add moves until the target is met or more float layers stop helping.
    current, best, idle, reason = start, start, 0, ""
    for move in order:
        nodes = current.nodes | move.nodes
        if nodes == current.nodes:
            continue
        if policy.budget - trace.evaluations <= _check_cost(len(nodes - forced)):
            # keep enough budget to check every kept layer: an unchecked layer may be one that never helps
            reason = f"{policy.budget_words} ran out (the rest was kept to check each float layer)"
            trace.out_of_budget = True
            break
        ev = measure(nodes)
        if ev is None:
            reason = f"{policy.budget_words} ran out" if trace.evaluations >= policy.budget else reason
            if trace.evaluations >= policy.budget:
                break
            continue
        trace.steps.append(Step(ev, "add", _change("+", move), True))
        current = ev
        if not judgement.within(ev.score, best.score):
            improved = accept.better(ev.per_sample, best.per_sample)
            best = ev
            idle = 0 if improved else idle + 1
        else:
            idle += 1
        if accept.reached(best.score):
            reason = "the target is met"
            break
        if idle >= policy.patience:
            reason = f"{policy.patience} more moves in a row did not help"
            break
    else:
        reason = reason or "every candidate move was tried"

    # Drop what is not needed: halves of the kept layers first, then smaller parts (in model order, so a region
    # is cut into contiguous pieces), then one layer at a time, least promising first, until each is needed.
    reference = best
    current = best
    index = {layer.name: i for i, layer in enumerate(layers)}

    chunk = max(1, len(current.nodes - forced) // 2)
    while current.nodes - forced:
        kept = sorted(current.nodes - forced, key=lambda n: index.get(n, 0))
        if chunk == 1:
            added_order = [n for s in trace.steps if s.phase == "add" for n in sorted(s.evaluation.nodes)]
            kept.sort(key=lambda n: -added_order.index(n) if n in added_order else 0)
        parts = [kept[i:i + chunk] for i in range(0, len(kept), chunk)] if chunk < len(kept) else \
            ([kept[: len(kept) // 2], kept[len(kept) // 2:]] if len(kept) > 1 else [kept])
        dropped = False
        for part in parts:
            ev = measure(current.nodes - set(part))
            if ev is None:
                continue
            # a layer stays only if the selection data show it is needed (the findings' acceptance decides)
            ok = accept.keeps(ev, current, reference, best, start)
            what = f"− {_short(part[0])}" if len(part) == 1 else \
                f"− {len(part)} layers: {_short(part[0], 40)} … {_short(part[-1], 40)}"
            trace.steps.append(Step(ev, "drop", what, ok))
            if ok:
                current, dropped = ev, True
                break
        if chunk == 1 and not dropped:
            break
        before = chunk
        chunk = min(chunk, max(1, len(current.nodes - forced) // 2)) if dropped else max(1, chunk // 2)
        if chunk == 1 and before > 1:
            # One layer at a time, each judged against the model the parts left (within noise of the best, or it
            # would not have been accepted): against the best itself, a layer that helps within noise only would
            # stay whenever the parts already cost a few samples.
            reference = current
    instead = _best_measured(list(seen.values()), current, start, forced, policy, trace.out_of_budget)
    if instead is not None:
        layers_kept = len(instead.nodes - forced)
        trace.steps.append(Step(instead, "check", f"the best set measured ({layers_kept} layers), kept", True))
        current = instead
        reason = (f"{reason}; " if reason else "") + (
            f"the best set measured is kept ({layers_kept} layers): the set the drops left was worse beyond noise on"
            " the selection samples")
    for node in sorted(current.nodes - forced):
        ev = seen.get(current.nodes - {node})
        if ev is not None:
            trace.necessity[node] = current.score - ev.score
    if instead is None and accept.reached(best.score) and not accept.reached(current.score):
        reason = ("the target was reached with more layers in float, but what the dropped ones added was within"
                  " noise on the selection samples")
    return _finish(trace, current, accept.reached(current.score), reason, t0)


def _best_measured(measured: list[Evaluation], chosen: Evaluation, start: Evaluation, forced: frozenset,
                   policy: Policy, cut_short: bool) -> Optional[Evaluation]:
    """The set to recommend instead of `chosen` (the drops' result), or None to keep it: every set the search measured
    is compared on the same selection samples by the one acceptance rule the drops use, against the best set measured
    (it meets the target; or it keeps judgement.KEEP_GAIN_SHARE of what that one won back over FIQ, and, when the budget
    cut the search short (`cut_short`), it is not worse than that one beyond noise: the drops were not finished), then
    by cost (fewest float layers, smallest file). Drops that, judged one step at a time, give away the fix of a set
    measured on the way (a region beyond the compact cap, a probe), or a search stopped by its budget, never ship a set
    worse than one the search measured. After finished drops, a gain within noise stays no need. Which sets are
    acceptable is the findings' acceptance's (`Acceptance.instead`); the search orders them."""
    accept = policy.accept
    sets = [ev for ev in measured if ev.nodes - forced and ev.nodes != start.nodes]
    if not sets or accept.reached(chosen.score):
        return None

    def order(ev: Evaluation) -> tuple:
        return tuple(sorted(ev.nodes))

    top = max(sets, key=lambda ev: (accept.reached(ev.score), ev.score, -len(ev.nodes), order(ev)))

    def acceptable(ev: Evaluation) -> bool:
        return accept.instead(ev, top, start, cut_short)

    if acceptable(chosen):
        return None
    return min((ev for ev in sets if acceptable(ev)),
               key=lambda ev: (len(ev.nodes - forced), ev.size_bytes, -ev.score, order(ev)))


def _compact_cause(probes: dict, start: Evaluation, target: float, limit: int,
                   measure: Callable[[frozenset], Optional[Evaluation]]) -> bool:
    """Whether a compact set (at most `limit` layers) is the loss's cause (judgement.compact_cause): one of the
    compact moves measured alone (`probes`), or, when none is alone, the ones that helped taken together, best first
    while the set stays compact (one more candidate)."""
    def cause(ev: Optional[Evaluation]) -> bool:
        return ev is not None and judgement.compact_cause(ev.score, start.score, target)

    if any(cause(ev) for ev in probes.values()):
        return True
    union: frozenset = frozenset()
    helped = [m for m in sorted(probes, key=lambda m: -probes[m].score) if probes[m].score > start.score]
    for move in helped:
        if len(union | move.nodes) <= limit:
            union |= move.nodes
    if not union or any(union == m.nodes for m in helped):
        return False
    return cause(measure(union))


def look_beyond(layers: list[Layer], probe: Callable[[Move], Optional[Evaluation]], start: Evaluation,
                accept: Acceptance, compact: BeyondCompact,
                ahead: Callable[[list], None] = lambda node_sets: None) -> tuple[list[Move], BeyondCompact]:
    """Sets beyond the compact cap, measured alone by `probe` before a loss is called spread out: the chains of
    wide-range ops (region_moves, the widest first, at most judgement.SPREAD_CHAIN_PROBES), then the first and the
    last half of the ops in the graph's order and, in each half that is a cause (judgement.compact_cause), the
    shortest prefix or suffix that still is one, found by bisection (at most judgement.spread_region_probes).
    Returns the causes, the best first (meets the target, then fewest ops, then score), and the record; `ahead` is
    told the sets measured before the bisection, in order; `accept`, the findings' acceptance, whether a set reaches
    the target."""
    target = accept.target

    def cause(ev: Evaluation) -> bool:
        return judgement.compact_cause(ev.score, start.score, target)

    tried: list[tuple[Move, Evaluation]] = []

    def measured(move: Move) -> Optional[Evaluation]:
        ev = probe(move)
        if ev is not None:
            tried.append((move, ev))
        return ev

    chains = sorted(region_moves(layers), key=lambda m: -m.prior)
    half = max(1, int(judgement.SPREAD_REGION_MAX_SHARE * len(layers) + judgement.TOLERANCE))
    ahead([m.nodes for m in chains[: judgement.SPREAD_CHAIN_PROBES]] +
          [_ordered_region(layers, side, half).nodes for side in ("prefix", "suffix")])
    for move in chains[: judgement.SPREAD_CHAIN_PROBES]:
        measured(move)
    n_chains = len(tried)
    halves = {side: measured(_ordered_region(layers, side, half)) for side in ("prefix", "suffix")}
    for side, ev in halves.items():
        low, high = 0, half  # bisection: `high` ops in float are a cause, `low` are not (none: FIQ)
        while ev is not None and cause(ev) and high - low > 1:
            mid = (low + high) // 2
            at_mid = measured(_ordered_region(layers, side, mid))
            if at_mid is None:
                break
            low, high = (low, mid) if cause(at_mid) else (mid, high)
    causes = sorted(((m, ev) for m, ev in tried if cause(ev)),
                    key=lambda me: (not accept.reached(me[1].score), len(me[0].nodes), -me[1].score))
    best = causes[0] if causes else max(tried, key=lambda me: me[1].score, default=None)
    if causes:
        outcome = "chain" if best[0].kind == "region" else "region"
    else:
        all_measured = n_chains == min(len(chains), judgement.SPREAD_CHAIN_PROBES) and None not in halves.values()
        outcome = "spread" if all_measured else "unmeasured"
    record = dataclasses.replace(
        compact, outcome=outcome, chains_found=len(chains), chains=n_chains, regions=len(tried) - n_chains,
        best=_tried(best, layers, start, accept, cause) if best is not None else None)
    return [m for m, _ in causes], record


def _ordered_region(layers: list[Layer], side: str, k: int) -> Move:
    """The first (`side` "prefix") or the last ("suffix") `k` debugged ops in the graph's order."""
    part = layers[:k] if side == "prefix" else layers[len(layers) - k:]
    where = "first" if side == "prefix" else "last"
    return Move(frozenset(layer.name for layer in part), side, part[0].name, 0.0,
                f"the {where} {k} ops: {_short(part[0].name, 40)} … {_short(part[-1].name, 40)}")


def _tried(found: tuple, layers: list[Layer], start: Evaluation, accept: Acceptance,
           cause: Callable[[Evaluation], bool]) -> TriedSet:
    """The record of one set measured beyond the compact ones."""
    move, ev = found
    target = accept.target
    ordered = [layer.name for layer in layers if layer.name in move.nodes]
    won = (ev.score - start.score) / (target - start.score) if judgement.nonzero(target - start.score) else 1.0
    cut = (ev.score - start.score) / (1.0 - start.score) if judgement.nonzero(1.0 - start.score) else 0.0
    kind = "chain" if move.kind == "region" else move.kind
    return TriedSet(kind, len(move.nodes), ordered[0] if ordered else move.anchor, ordered[-1] if ordered else "",
                    float(ev.score), float(won), float(cut), cause(ev), accept.reached(ev.score))


def _check_cost(kept: int) -> int:
    """Evaluations to keep for the drop phase after adding up to `kept` layers: one per layer for a few; for a
    large region or group, what cutting it by halves down to a few needed layers costs (about 2 log2 n) and
    checking those one by one."""
    if kept <= 8:
        return kept
    return 8 + 2 * int(np.ceil(np.log2(kept)))


def pareto(points: list[tuple[float, float]]) -> list[bool]:
    """For (cost, quality) points: True where no other point is at most as costly and better, or
    cheaper and as good (the one front, reporter.core.pareto, with quality negated into a cost)."""
    return front([(cost, -quality) for cost, quality in points])


def _finish(trace: Trace, chosen: Evaluation, met: bool, reason: str, t0: float) -> Trace:
    trace.chosen = chosen
    trace.target_met = met
    trace.stop_reason = reason
    trace.seconds = time.perf_counter() - t0
    return trace


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit // 2 - 1] + "…" + name[-(limit // 2):]


def _change(sign: str, move: Move) -> str:
    if move.label:
        return f"{sign} {move.label}"
    what = "tensor of" if move.kind == "tensor" else "layer"
    return f"{sign} {what} {_short(move.anchor)}" + (f" ({len(move.nodes)} layers)" if len(move.nodes) > 1 else "")
