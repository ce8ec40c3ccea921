"""The decision: which model to ship for the run's --target, from every model measured, and the one comparison
table it is read against.

Every model measured is an option: the variants, the recommended model (FIQ with layers in float), its layers in
a lighter scheme, and each variant's own fix. An option meets the accuracy target when it is not worse than
float beyond noise (with --max-accuracy-drop: when it loses at most that much, as the gate reads it), on the
main metric and on every other labelled output; a regression without labels reads its output error against
float's variance. Of the options that run on the target (reporter.core.targets) and meet it, the cheapest by the
target's priorities is shipped (a model the converter quantized nothing of is float by another name, never
shipped as a quantized model; on a CPU float itself ships when every quantized model costs more there, the
cheapest of them named as the runner-up): a difference the paired test calls noise is no difference, so accuracy decides
only a tie in cost. A runner-up is named when another option meets the target and trades differently (smaller,
faster, or more accurate where the shipped one loses within the allowed drop). When no quantized option for the
target meets it, float is kept on a CPU or GPU, nothing is shipped on integer-only hardware, and the closest
option and the one that would meet the target elsewhere are named.

Pure: same report, same decision. Thresholds from reporter.core.judgement, targets from reporter.core.targets.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from reporter.core import judgement as jd
from reporter.core import targets as tg
from reporter.core import variants
from reporter.core.variants import LABELS
from reporter.findings import picks as pk
from reporter.findings.basis import compare, measurable
from reporter.model import findings as mf
from reporter.model.findings import (MEETS, NO_CANDIDATE, NONE_MEETS, NOT_QUANTIZED, RUNNER_UP, SHIP, Comparison,
                                     Decision, TradeoffPoint)

if TYPE_CHECKING:  # pragma: no cover
    from reporter.model.report import Report, VariantResult


@dataclass(frozen=True)
class Option:
    """One model measured, judged against float and the target."""

    model: "VariantResult"
    vs_float: Optional[Comparison]  # the main metric (None: no main metric)
    score: Optional[float]  # oriented: higher is better (the main metric, or 1 - output MSE / float's variance)
    meets: bool  # the accuracy target
    runs: bool  # on the target, as built

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def latency(self) -> Optional[float]:
        return self.model.latency_ms.median if self.model.latency_ms else None


def target_of(report: "Report") -> str:
    """The run's --target (reports written before it were judged for a CPU)."""
    return report.settings.get("target") or tg.DEFAULT


def models(report: "Report") -> list["VariantResult"]:
    """Every model measured that could be shipped: the variants, the recommended model, its layers in a lighter
    scheme (LiteRT's own float-layer model repeats the recommended one), each variant's fix; built and sized."""
    rec = report.recommendation
    found = list(report.variants)
    if rec is not None and rec.selective is not None:
        found.append(rec.selective)
    if rec is not None:
        found += [a.model for a in rec.alternatives if a.model is not None and a.model.name != variants.ALT_FLOAT]
    found += [v.fix.model for v in report.variants if v.fix is not None and v.fix.model is not None]
    return [m for m in found if m.ok and m.size_bytes]


def options(report: "Report") -> list[Option]:
    """Every model measured, judged; empty when float (or its quality) was not measured."""
    flt = report.variant(variants.FLOAT)
    if flt is None or not flt.ok or flt.not_measured("metrics") or flt.not_measured("output_error"):
        return []  # nothing can be compared with float
    target, limit = target_of(report), report.settings.get("max_accuracy_drop")
    out = []
    for m in models(report):
        cmp, score, meets = _judged(report, m, flt, limit)
        if score is None:
            continue
        out.append(Option(m, cmp, score, meets, tg.runs_on(target, m.name, m.tensor_types)))
    return out


def _judged(report: "Report", m: "VariantResult", flt: "VariantResult",
            limit: Optional[float]) -> tuple[Optional[Comparison], Optional[float], bool]:
    """The model's comparison with float on the main metric, its oriented score, and whether it meets the
    accuracy target (float itself does)."""
    if m.metrics is not None and flt.metrics is not None and m.metrics.score is not None and measurable(report):
        cmp = compare(m.metrics, flt.metrics, variants.FLOAT) if m.name != variants.FLOAT else None
        meets = m.name == variants.FLOAT or (
            cmp is not None and cmp.p_value is not None and jd.meets_accuracy(cmp.significant, cmp.delta, limit))
        score = m.metrics.score * (1 if m.metrics.higher_is_better else -1)
        return cmp, score, meets and _heads_meet(m, flt, limit)
    if m.name == variants.FLOAT:
        return None, 1.0, True
    error = m.output_error
    if error is None or not error.float_variance:
        return None, None, False
    score = 1.0 - error.mse / error.float_variance
    return None, score, jd.within(jd.DEFAULT_TARGET_R2, score)


def _heads_meet(m: "VariantResult", flt: "VariantResult", limit: Optional[float]) -> bool:
    """Every labelled output of a model with several meets the accuracy target too."""
    for name, head in m.heads.items():
        ref = flt.heads.get(name)
        if head.metrics is None or ref is None or ref.metrics is None or m.name == variants.FLOAT:
            continue
        cmp = compare(head.metrics, ref.metrics, variants.FLOAT)
        if cmp.p_value is not None and not jd.meets_accuracy(cmp.significant, cmp.delta, limit):
            return False
    return True


def decide(report: "Report") -> Optional[Decision]:
    """The model to ship for the run's target; None when float was not measured or nothing can be compared."""
    target = target_of(report)
    found = options(report)
    if not found:
        return None
    flt = next(o for o in found if o.name == variants.FLOAT)
    lane = [o for o in found if o.runs and o.name != variants.FLOAT and tg.quantized(o.model.tensor_types, o.model.weight_coverage)]
    meeting = [o for o in lane if o.meets]
    if meeting:
        best = _cheapest(target, meeting)
        if target == tg.CPU and _cheapest(target, [*meeting, flt]) is flt:  # every quantized model costs more here
            return _decision(report, target, flt, mf.FLOAT_CHEAPER, best, len(lane))
        return _decision(report, target, best, MEETS, _runner_up(target, best, meeting), len(lane))
    closest = max(lane, key=lambda o: (o.score, -o.model.size_bytes)) if lane else None
    elsewhere = [o for o in found if o.meets and not o.runs and tg.quantized(o.model.tensor_types, o.model.weight_coverage)]
    would = _cheapest(tg.CPU, elsewhere) if elsewhere else None
    keep = flt if tg.runs_on(target, variants.FLOAT, flt.model.tensor_types) else None
    decision = _decision(report, target, keep, NONE_MEETS if lane else NO_CANDIDATE, closest, len(lane))
    return dataclasses.replace(decision, would_meet=would.name if would else "")


def engines(report: "Report") -> list[mf.EngineChoice]:
    """Of each scheme both engines built, the better in its lane by the decision's own rule: of two that meet the
    accuracy target the cheaper for the target, else the one that meets it, else the nearer to float."""
    target = target_of(report)
    judged = {o.name: o for o in options(report)}
    found = []
    for pair in report.engines:
        a, b = judged.get(pair.tf), judged.get(pair.litert)
        better, why = None, ""
        if a is not None and b is not None and a.score is not None and b.score is not None:
            meeting = [o for o in (a, b) if o.meets]
            if len(meeting) == 2:
                better, why = _cheapest(target, meeting), mf.ENGINE_CHEAPER
            elif meeting:
                better, why = meeting[0], mf.ENGINE_ONLY_MEETS
            else:
                better, why = max((a, b), key=lambda o: (o.score, -o.model.size_bytes)), mf.ENGINE_NEARER
        found.append(mf.EngineChoice(pair.scheme, pair.tf, pair.litert, better.name if better else "", why))
    return found


def _decision(report: "Report", target: str, ship: Optional[Option], why: str, runner: Optional[Option],
              candidates: int) -> Decision:
    model = ship.model if ship is not None else None
    return Decision(
        target=target, variant=model.name if model else "", label=label(report, model.name) if model else "",
        meets_target=why in (MEETS, mf.FLOAT_CHEAPER), why=why, runner_up=runner.name if runner else "",
        runner_up_label=label(report, runner.name) if runner else "", file=f"{model.name}.tflite" if model else "",
        reference_agreement=model.reference_kernels if model is not None and target == tg.INT8 else None,
        candidates=candidates)


def vs_float(report: "Report", decision: Decision) -> Optional[Comparison]:
    """The comparison with float of the model the gate by target reads: the shipped one when it meets the target,
    else the target's closest."""
    name = decision.variant if decision.meets_target else decision.runner_up
    return next((o.vs_float for o in options(report) if o.name == name), None)


def label(report: "Report", name: str) -> str:
    """How the decision names a model: the registry's label, or what the model keeps out of int8 ("FIQ with 2
    ops in float", "FIQ with 2 ops in dynamic range", "DRQ with its blamed layers in float")."""
    rec = report.recommendation
    kept = len(rec.denylisted_nodes) if rec is not None else 0
    ops = f"{kept} op{'s' if kept != 1 else ''}"
    if name == variants.SELECTIVE and kept:
        return f"FIQ with {ops} in float"
    scheme = next((s for s, alt in variants.ALTERNATIVES.items() if alt == name), None)
    if scheme is not None and kept:
        return f"FIQ with {ops} in {variants.SCHEME_WORDS.get(scheme, scheme)}"
    fixed = variants.fixed_by(name)
    if fixed:
        return f"{variants.short(fixed)} with its blamed layers in float"
    return variants.get(name).label


def _costs(target: str, pool: list[Option]) -> dict[str, float]:
    small = min(o.model.size_bytes for o in pool)
    timed = [o.latency for o in pool if o.latency]
    fast = min(timed) if len(timed) == len(pool) and timed else None
    return {o.name: tg.cost(target, o.model.size_bytes / small, o.latency, fast) for o in pool}


def _cheapest(target: str, pool: list[Option]) -> Option:
    """The cheapest option by the target's priorities; a tie in cost (within targets.COST_SAME) goes to the
    faster model where the target is timed and it is faster beyond timing noise (targets.faster), else to the
    smaller, then the report's order (accuracy differences among options that all meet the target
    are within what the target allows)."""
    costs = _costs(target, pool)
    low = min(costs.values())
    tied = [o for o in pool if costs[o.name] <= low + tg.COST_SAME]
    smallest = min(tied, key=lambda o: o.model.size_bytes)
    timed = [o for o in tied if o.latency]
    if tg.of(target).timed and len(timed) == len(tied):
        fastest = min(timed, key=lambda o: o.latency)
        if tg.faster(fastest.latency, smallest.latency):
            return fastest
    return smallest


def _runner_up(target: str, ship: Option, pool: list[Option]) -> Optional[Option]:
    """The cheapest other option that trades differently: smaller, faster beyond timing noise (where the target
    times), or not worse than float beyond noise where the shipped one is (within the allowed drop)."""
    timed = tg.of(target).timed

    def differs(o: Option) -> bool:
        if o.model.size_bytes < ship.model.size_bytes:
            return True
        if timed and tg.faster(o.latency, ship.latency):
            return True
        return _loses(ship) and not _loses(o)

    others = [o for o in pool if o is not ship and differs(o)]
    if not others:
        return None
    costs = _costs(target, pool)
    return min(others, key=lambda o: (costs[o.name], o.model.size_bytes))


def _loses(o: Option) -> bool:
    return o.vs_float is not None and jd.worse_beyond_noise(o.vs_float.significant, o.vs_float.delta)


def table(report: "Report", decision: Optional[Decision]) -> list[TradeoffPoint]:
    """The one comparison table: every model measured on the main metric (float first, as the reference), with
    whether it runs on the target and meets the accuracy target, the Pareto front over size, latency and the
    metric, and what the decision names it. Empty when fewer than two models can be compared."""
    if not measurable(report):
        return []
    found = [o for o in options(report) if o.model.metrics is not None and o.model.metrics.score is not None]
    if len(found) < 2:
        return []
    points = [pk.Point(o.name, o.model.size_bytes, o.latency, o.score, o.meets) for o in found]
    roles = {decision.variant: SHIP, decision.runner_up: RUNNER_UP} if decision is not None else {}
    roles.update({o.name: NOT_QUANTIZED for o in found if o.name != variants.FLOAT
                  and not tg.quantized(o.model.tensor_types, o.model.weight_coverage)})
    return [TradeoffPoint(
        name=o.name, label=label(report, o.name), score=o.model.metrics.score, score_text="", vs_float=o.vs_float,
        size_bytes=o.model.size_bytes, latency_ms=o.latency, meets_target=o.meets, pareto=on_front,
        picks=[roles[o.name]] if o.name in roles and o.name else [],
        chosen=decision is not None and o.name == decision.variant, runs_on_target=o.runs,
        share=o.model.metrics.share)
        for o, on_front in zip(found, pk.front(points))]
