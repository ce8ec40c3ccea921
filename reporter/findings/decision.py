"""The decision: which model to ship for the run's --target, from every model measured, and the one comparison
table it is read against.

Every model measured is an option: the variants, the recommended model (FIQ with layers in float), its layers in
a lighter scheme, and each variant's own fix. Each is judged once (`judge`): its score on the report's one scale
(its main metric; an output's R² against float only in a report without one; a model whose scale was not
measured is "not measured", never judged on another), whether it meets the accuracy target by the one rule
(reporter.findings.rule.meets_target, on every labelled output), whether it runs on the target (read from its
tensor types by the target's registry entry, reporter.core.targets), and its cost there. Of the options that run
on the target and meet the accuracy target, the cheapest ships; a tie in cost (targets.COST_SAME) goes to the more
accurate beyond noise (the paired comparison), then to the smaller. A model the converter quantized nothing of is
float by another name, never shipped as a quantized model; where the target is timed (a CPU) float itself ships
when every quantized model costs more there. A runner-up is named when another option meets the target and trades
differently. When no quantized option for the target meets it, float is kept where float runs, nothing is shipped
elsewhere, and the nearest option and the one that would meet the target elsewhere are named.

The decision carries every option with its figures and why it was not chosen (`Decision.options`); report.json
keeps them, and the words, the tables, the engines' choice and the gate read them: nothing is judged twice.

Pure: same report, same decision.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Optional

from reporter.core import judgement as jd
from reporter.core import statistics
from reporter.core import targets as tg
from reporter.core import variants
from reporter.findings import picks as pk
from reporter.findings import rule as rl
from reporter.findings.basis import compare, measurable, metric_of
from reporter.measure.metrics import unpack_correct
from reporter.model import findings as mf
from reporter.model.findings import (MEETS, NO_CANDIDATE, NONE_MEETS, NOT_QUANTIZED, RUNNER_UP, SHIP, Comparison,
                                     Decision, Option, TradeoffPoint)

if TYPE_CHECKING:  # pragma: no cover
    from reporter.model.report import Report, VariantResult
    from reporter.model.variant import Latency

# The questions the run may ask while it measures, before the report exists (tests/test_architecture.py): whether a
# repair rung's model, or any model measured so far, meets the accuracy target on the target (the ladder). Whether a
# model meets it against float (the search, the blame) is asked of the `TargetRule` the run hands them. Every other
# public function here decides the report's findings (reporter.pipeline.conclude).
ASKED_WHILE_MEASURING = ("meets_on_target", "judged_on_target")


def target_of(report: "Report") -> str:
    """The run's --target (reports written before it were judged for a CPU)."""
    return tg.of(report.settings.target).name


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
    found += [r.model for r in report.repairs if r.model is not None]
    return [m for m in found if m.ok and m.size_bytes]


def judge(report: "Report") -> list[Option]:
    """Every model measured, judged once against float and the target (cost and `why` still empty); empty when
    float (or its quality) was not measured: nothing can be compared with float. Where the target has kernels of
    its own (reporter.core.targets: LiteRT's reference kernels, TFLite Micro), a quantized model's accuracy is the
    one measured there, and it runs there only when the target's tool ran or compiled it. A model whose outputs are
    NaN or inf on every sample has its scale recorded not measured (reporter.measure.measurer.NOT_FINITE): it never
    meets the target, and when float is that model nothing is judged."""
    flt = report.variant(variants.FLOAT)
    if flt is None or not flt.ok or flt.not_measured("metrics") or flt.not_measured("output_error"):
        return []
    target, limit = tg.of(report.settings.target), report.settings.max_accuracy_drop
    scale_is_metric = measurable(report)
    out = []
    for m in models(report):
        seen, cmp, score, worst, meets = _stands(m, flt, target, limit, scale_is_metric)
        hib = bool(seen.metrics.higher_is_better) if scale_is_metric and seen.metrics is not None else True
        on = m.on_target
        out.append(Option(
            name=m.name, label=label(report, m.name), score=score, standing=worst, meets=meets, runs=_runs(m, target),
            quantized=tg.quantized(m.tensor_types, m.weight_coverage), size_bytes=m.size_bytes,
            latency_ms=m.latency_ms.median if m.latency_ms else None,
            latency_p90_ms=spread(m.latency_ms) if m.latency_ms else None,
            latency_vs_float=latency_step(m, flt) if m.name != variants.FLOAT else None,
            loses=cmp is not None and jd.worse_beyond_noise(cmp.significant, cmp.delta), vs_float=cmp,
            higher_is_better=hib, output_mse=seen.output_error.mse if seen.output_error else None,
            output_variance=seen.output_error.float_variance if seen.output_error else None,
            kernels=on.kernels if on is not None else "", not_there=on.error if on is not None and not on.runs else "",
            one_class=one_class(seen.metrics), tools=on.tools if on is not None else None,
            tried=on is not None and not on.tool_failure, **target.prices(on)))
    return out


def _stands(m: "VariantResult", flt: "VariantResult", target: tg.Target, limit: Optional[float],
            scale_is_metric: bool) -> tuple["VariantResult", Optional[Comparison], Optional[float], str, bool]:
    """Model `m` as the target sees it, against float: (the model on the target's kernels, its comparison with float,
    its score on the report's scale, the standing that decides, whether it meets the accuracy target)."""
    seen = _as_target_sees(m, target)
    cmp, score, standings = _standings(seen, flt, scale_is_metric)
    if m.name == variants.FLOAT:
        return seen, cmp, score, jd.NOT_WORSE, True
    return seen, cmp, score, _worst(standings, limit), rl.meets_target(standings, limit)


@dataclass(frozen=True)
class TargetRule:
    """The run's accuracy target as the stages that measure before the report exists are handed it
    (reporter.pipeline.conclude.target_rule): called with (model, float), whether the model meets it against float by
    the decision's one rule (`judge`, as the target sees the model: whether the search runs, whether its model closed
    the gap, whether the whole model in 16x8 is worth measuring, which variants the blame fixes); `on_selection`, the
    same target on the search's selection samples; `screen`, the repair ladder's. They measure, this decides."""

    target: str = "cpu"  # the run's --target
    limit: Optional[float] = None  # --max-accuracy-drop, 0..1 of the main metric; None: within noise
    scale_is_metric: bool = True  # the report has a main metric (Report.measurable); else the output error

    @classmethod
    def of(cls, report: "Report") -> "TargetRule":
        """The rule a saved or measured report was judged by."""
        return cls(report.settings.target, report.settings.max_accuracy_drop, measurable(report))

    def __call__(self, m: "VariantResult", flt: Optional["VariantResult"]) -> bool:
        """Whether model `m` meets the accuracy target against float (False when float was not measured)."""
        if flt is None or not flt.ok or flt.not_measured("metrics") or flt.not_measured("output_error"):
            return False
        return _stands(m, flt, tg.of(self.target), self.limit, self.scale_is_metric)[-1]

    def without_limit(self) -> "TargetRule":
        """The same rule with no allowed drop: a loss, if any, within noise of float on every labelled output."""
        return dataclasses.replace(self, limit=None)

    def on_selection(self, classification: bool,
                     metric: Optional[tuple[str, float]] = None) -> tuple[rl.Acceptance, str]:
        """The acceptance on the search's selection samples and its target's words (judgement.selection_target):
        agreement with float (`classification`), the output error, or the user's metric relative to float's value
        there (`metric`: its name and that value). The allowed drop is a hard target where it reads on that scale."""
        target, text = jd.selection_target(self.limit, classification, metric)
        hard = self.limit is not None and (classification or metric is not None)
        return rl.Acceptance(target, hard, t_test=metric is not None), text

    def screen(self) -> rl.Acceptance:
        """The repair ladder's screen: each selection sample's agreement with float, paired by McNemar."""
        return rl.Acceptance()


class OnTarget(NamedTuple):
    """A model as the decision judges it for the run's target."""

    meets: bool  # it meets the accuracy target (for the whole decision: the model shipped meets it)
    runs: bool  # it runs on the target (for the whole decision: a model is shipped)


def meets_on_target(report: "Report", name: str = "") -> Optional[OnTarget]:
    """The repair ladder's one question (reporter.pipeline.repairs), asked of the report measured so far: whether model
    `name` meets the accuracy target and runs on the run's target, as the decision judges it; without `name`,
    whether the decision ships a model that meets it there. None when nothing can be judged (or `name` was not
    measured)."""
    if not name:
        decision = decide(report)
        return OnTarget(decision.meets_target, bool(decision.variant)) if decision is not None else None
    return next((found for n, found in judged_on_target(report) if n == name), None)


def judged_on_target(report: "Report") -> list[tuple[str, OnTarget]]:
    """Every model of the report measured so far, as the decision judges it for the run's target (`judge`, in its
    order): the ladder's first floor is the ones that run there and miss."""
    return [(o.name, OnTarget(o.meets, o.runs)) for o in judge(report)]


def latency_step(m: "VariantResult", ref: Optional["VariantResult"]) -> Optional[int]:
    """`m`'s latency against `ref`'s by the timing-noise rule the decision's cost reads (judgement.latency_step, each
    model's spread told only from enough timed runs); None when either was not timed."""
    a, b = m.latency_ms, ref.latency_ms if ref is not None else None
    if a is None or b is None:
        return None
    if m.name != variants.FLOAT and not tg.quantized(m.tensor_types, m.weight_coverage):
        return 0  # nothing quantized: float by another name, never "faster" than float by timing noise
    return jd.latency_step(a.median, spread(a), b.median, spread(b))


def spread(lat: "Latency") -> Optional[float]:
    """A timed latency's spread as the timing-noise rule reads it (judgement.timing_spread: None, no claim, for too
    few runs or a model under this host's timing floor)."""
    return jd.timing_spread(lat.median, lat.p90, lat.runs, lat.overhead)


def one_class(metrics) -> Optional[int]:
    """The class a model answers whatever its input (judgement.degenerate): it predicts that class for at least
    judgement.DEGENERATE_SHARE of the samples (dense outputs: positions; its confusion matrix's column totals) and
    the other classes far less often than the labels hold them (its row totals). None when it predicts several as
    the labels do (a faithful model of imbalanced data included), or was not measured as a classifier."""
    shares = class_shares(metrics)
    if shares is None:
        return None
    predicted, labelled = shares
    label = max(range(len(predicted)), key=lambda j: (predicted[j], -j))
    return label if jd.degenerate(predicted[label], labelled[label]) else None


def class_shares(metrics) -> Optional[tuple[list[float], list[float]]]:
    """(each class's share of the predictions, its share of the labels), from the confusion matrix (rows: the
    labels, columns: the predictions; over positions for a dense output); None without one of two classes or more."""
    cm = metrics.confusion_matrix if metrics is not None else None
    if not cm or len(cm[0]) < 2:
        return None
    n = sum(sum(row) for row in cm)
    if not n:
        return None
    return [sum(row[j] for row in cm) / n for j in range(len(cm[0]))], [sum(row) / n for row in cm]


def _float_degenerate(report: "Report", flt: Option) -> bool:
    """Float itself answers one class whatever its input (`one_class`: far more often than the labels hold it), or a
    regression's float output does not vary: nothing measured against it means anything, the data are the likely
    cause."""
    if flt.one_class is not None:
        return True
    v = report.variant(variants.FLOAT)
    return not report.measurable() and any(
        m.output_error is not None and m.output_error.float_variance is not None and
        not jd.nonzero(m.output_error.float_variance) for m in models(report) if m.name != variants.FLOAT) \
        and v is not None


def _as_target_sees(m: "VariantResult", target: tg.Target) -> "VariantResult":
    """The model with its quality as measured on the target's kernels (its `on_target` record: the main metric, the
    error against float and the targets, every output of several), where the target has kernels of its own and the
    model was checked there; float, and every model on a target without kernels of its own, as measured."""
    if not target.checked or m.name == variants.FLOAT or m.on_target is None:
        return m
    on = m.on_target
    errors = dict(m.measurement_errors)
    missing = [key for key, own, there in (("metrics", m.metrics, on.metrics),
                                           ("output_error", m.output_error, on.output_error))
               if own is not None and there is None]  # measured on the default kernels, not there: why
    if on.metrics is None and on.output_error is None and not missing:
        missing = ["output_error"]
    errors.update({key: on.error or "not measured on the target" for key in missing})
    return dataclasses.replace(m, metrics=on.metrics, output_error=on.output_error, target_error=on.target_error,
                               measurement_errors=errors, heads=on.heads)


def _runs(m: "VariantResult", target: tg.Target) -> bool:
    """Whether the model runs on the target as built: its tensor types and ops fit the target, and where the target
    has a tool of its own (TFLite Micro, Vela) that tool ran or compiled it. Float is the reference, never checked
    there: it runs on a target whose tensor-type rule admits it and that has no tool of its own."""
    if not target.runs(m.tensor_types, m.ops, m.op_tensor_types):
        return False
    if target.tool_decides:
        return m.name != variants.FLOAT and m.on_target is not None and m.on_target.runs
    return True


def _standings(m: "VariantResult", flt: "VariantResult",
               scale_is_metric: bool) -> tuple[Optional[Comparison], Optional[float], list[rl.Standing]]:
    """The model's comparison with float on the main metric, its score on the report's scale, and how it stands on
    every labelled output (none when its scale was not measured)."""
    if scale_is_metric:
        if m.not_measured("metrics") or m.metrics is None or m.metrics.score is None or flt.metrics is None:
            return None, None, []
        if m.name == variants.FLOAT:
            return None, m.metrics.score, [rl.Standing(0.0)]
        cmp = compare(m.metrics, flt.metrics, variants.FLOAT)
        if cmp.measure == mf.OTHER_METRICS:  # judged by another metric than float: not on this report's scale
            return None, None, []
        return cmp, m.metrics.score, [rl.Standing(-cmp.delta, cmp.p_value)] + _head_standings(m, flt)
    if m.name == variants.FLOAT:
        return None, 1.0, [rl.Standing(r2=1.0)]
    error = m.output_error
    if m.not_measured("output_error") or error is None or not error.float_variance:
        return None, None, []
    r2 = 1.0 - error.mse / error.float_variance
    return None, r2, [rl.Standing(r2=r2)] + _head_standings(m, flt)


def _head_standings(m: "VariantResult", flt: "VariantResult") -> list[rl.Standing]:
    """How the model stands on every labelled output of a model with several, against float's: a class-score output
    by its paired comparison (its accuracy's, or its kind's own main metric's, reporter.measure.measurer), a
    regression output with targets by its R² against float's output. Outputs without labels decide nothing."""
    out = []
    for name, head in m.heads.items():
        ref = flt.heads.get(name)
        if ref is None:
            continue
        if head.metrics is not None and ref.metrics is not None:
            cmp = compare(head.metrics, ref.metrics, variants.FLOAT)
            out.append(rl.Standing(-cmp.delta, cmp.p_value))
        elif head.target_error is not None:  # labelled, as a regression: how close it stays to float's output
            out.append(rl.Standing(r2=_r2(head.output_error)))
    return out


def _r2(error) -> Optional[float]:
    """1 - output MSE / float's output variance; None when not measured, or float's output does not vary (1 when
    the output equals float's)."""
    if error is None:
        return None
    if not error.float_variance:
        return 1.0 if not jd.nonzero(error.mse) else None
    return 1.0 - error.mse / error.float_variance


def _worst(standings: list[rl.Standing], limit: Optional[float]) -> str:
    """The standing that decides: the first that misses the target, else the main metric's."""
    found = [rl.standing(s, limit) for s in standings]
    if not found:
        return jd.NOT_MEASURED
    return next((w for w in found if w not in jd.MEETING), found[0])


def decide(report: "Report") -> Optional[Decision]:
    """The model to ship for the run's target, with every option judged; None when float was not measured or
    nothing can be compared."""
    target = target_of(report)
    found = judge(report)
    if not found:
        return None
    flt = next(o for o in found if o.name == variants.FLOAT)
    if _float_degenerate(report, flt):  # said first, and nothing ships: no comparison with float means anything
        decision = _decision(report, found, target, None, mf.FLOAT_DEGENERATE, None)
        return dataclasses.replace(decision, degenerate_class=flt.one_class)
    lane = [o for o in found if o.runs and o.name != variants.FLOAT and o.quantized and o.score is not None]
    pool = [o for o in found if o.runs and o.meets and (o.quantized or o.name == variants.FLOAT)]
    costs = _costs(target, pool)
    found = [dataclasses.replace(o, cost=costs.get(o.name)) for o in found]
    by_name = {o.name: o for o in found}
    # a model answering one class for every sample is never the one to ship, nor the one float is kept against
    meeting = [by_name[o.name] for o in lane if o.meets and o.one_class is None]
    flt = by_name[variants.FLOAT]
    if meeting:
        best = _cheapest(report, meeting)
        if tg.of(target).timed and flt.runs and _cheapest(report, [*meeting, flt]) is flt:
            return _decision(report, found, target, flt, mf.FLOAT_CHEAPER, best)
        return _decision(report, found, target, best, MEETS, _runner_up(report, target, best, meeting))
    sound = [by_name[o.name] for o in lane if o.one_class is None]  # one answering one class is no runner-up
    closest = max(sound, key=lambda o: (_oriented(o), -o.size_bytes)) if sound else None
    elsewhere = [o for o in found if o.meets and not o.runs and o.quantized]
    would = _cheapest(report, elsewhere) if elsewhere else None
    keep = flt if flt.runs else None
    decision = _decision(report, found, target, keep, NONE_MEETS if lane else NO_CANDIDATE, closest)
    return dataclasses.replace(decision, would_meet=would.name if would else "",
                               would_meet_label=would.label if would else "")


def _oriented(o: Option) -> float:
    return o.score * (1 if o.higher_is_better else -1)


def engines(report: "Report", decision: Optional[Decision]) -> list[mf.EngineChoice]:
    """Of each scheme both engines built, the better in its lane by the decision's own rule, read from its judged
    options: of two that meet the accuracy target the cheaper for the target (a tie in cost: the more accurate
    beyond noise, then the smaller), else the one that meets it, else the more accurate beyond noise; a tie when
    nothing tells them apart."""
    target = target_of(report)
    judged = {o.name: o for o in decision.options} if decision is not None else {}
    found = []
    for pair in report.engines:
        a, b = judged.get(pair.tf), judged.get(pair.litert)
        better, why = None, ""
        if a is not None and b is not None and a.score is not None and b.score is not None:
            meeting = [o for o in (a, b) if o.meets]
            if len(meeting) == 2:
                costs = _costs(target, meeting)
                better = _cheapest(report, meeting, costs)
                other = b if better is a else a
                tied = abs(costs[a.name] - costs[b.name]) <= tg.COST_SAME and not _better(report, better, other) \
                    and better.size_bytes == other.size_bytes
                better, why = (None, mf.ENGINE_TIE) if tied else (better, mf.ENGINE_CHEAPER)
            elif meeting:
                better, why = meeting[0], mf.ENGINE_ONLY_MEETS
            elif _better(report, a, b) or _better(report, b, a):
                better, why = (a if _better(report, a, b) else b), mf.ENGINE_NEARER
            else:
                why = mf.ENGINE_TIE
        found.append(mf.EngineChoice(pair.scheme, pair.tf, pair.litert, better.name if better else "", why))
    return found


def _decision(report: "Report", found: list[Option], target: str, ship: Optional[Option], why: str,
              runner: Optional[Option]) -> Decision:
    candidates = sum(o.runs and o.quantized and o.name != variants.FLOAT and o.score is not None for o in found)
    name = ship.name if ship is not None else ""
    model = report.variant(name) if name else None
    if model is None and name:
        model = next((m for m in models(report) if m.name == name), None)
    options = [dataclasses.replace(o, why=_why_not(o, ship, runner), latency_vs_ship=_latency_vs(o, ship))
               for o in found]
    return Decision(
        target=target, variant=name, label=ship.label if ship else "",
        meets_target=why in (MEETS, mf.FLOAT_CHEAPER), why=why, runner_up=runner.name if runner else "",
        runner_up_label=runner.label if runner else "", file=f"{name}.tflite" if name else "",
        reference_agreement=model.reference_kernels if model is not None and tg.of(target).reference_kernels
        else None, candidates=candidates, options=options,
        hardware=model.on_target if model is not None and tg.of(target).checked else None,
        input_transform=next((r.input_transform for r in report.repairs if r.model is not None
                              and r.model.name == name), None))


def _latency_vs(o: Option, ship: Optional[Option]) -> Optional[int]:
    """`o`'s latency against the shipped model's (judgement.latency_step); None when either was not timed."""
    if ship is None:
        return None
    return jd.latency_step(o.latency_ms, o.latency_p90_ms, ship.latency_ms, ship.latency_p90_ms)


def _why_not(o: Option, ship: Optional[Option], runner: Optional[Option]) -> str:
    """Why `o` is not the model shipped ("" when it is)."""
    if ship is not None and o.name == ship.name:
        return ""
    if runner is not None and o.name == runner.name and o.meets and o.runs:
        return mf.OPT_RUNNER_UP
    if o.name == variants.FLOAT:
        return mf.OPT_REFERENCE
    if not o.runs:
        return mf.OPT_NOT_ON_TARGET
    if o.score is None:
        return mf.OPT_NOT_MEASURED
    if not o.quantized:
        return mf.OPT_NOT_QUANTIZED
    if not o.meets:
        return mf.OPT_DOES_NOT_MEET
    if ship is None or ship.cost is None or o.cost is None or o.cost > ship.cost + tg.COST_SAME:
        return mf.OPT_COSTS_MORE
    return mf.OPT_TIE_LARGER if o.size_bytes >= ship.size_bytes else mf.OPT_TIE_LESS_ACCURATE


def vs_float(decision: Decision) -> Optional[Comparison]:
    """The comparison with float of the model the gate by target reads: the shipped one when it meets the target,
    else the target's closest."""
    name = decision.variant if decision.meets_target else decision.runner_up
    found = decision.option(name)
    return found.vs_float if found is not None else None


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
    rung = variants.repaired_by(name)
    if rung:
        return next((r.label for r in report.repairs if r.rung == rung), rung)
    if report.model.fake_quant_pairs and name in variants.QAT_LABELS:
        return variants.QAT_LABELS[name]
    if name in variants.BASE_LABELS:
        return variants.BASE_LABELS[name]
    return variants.get(name).label


def _costs(target: str, pool: list[Option]) -> dict[str, float]:
    """Each option's cost on `target` against the cheapest of `pool`, by the target's own priorities (Target.costs:
    on an Ethos-U NPU, a model wholly on the NPU first, then Vela's estimated time; elsewhere size over the smallest
    and, where the target is timed, latency over the fastest when slower beyond timing noise)."""
    return tg.of(target).costs(pool)


def _cheapest(report: "Report", pool: list[Option], costs: Optional[dict[str, float]] = None) -> Option:
    """The cheapest option by the target's priorities; a tie in cost (within targets.COST_SAME) goes to the more
    accurate model beyond noise (`_better`: the paired comparison), then to the smaller, then the report's order."""
    costs = costs if costs is not None else _costs(target_of(report), pool)
    low = min(costs[o.name] for o in pool)
    tied = sorted((o for o in pool if costs[o.name] <= low + tg.COST_SAME), key=lambda o: o.size_bytes)
    best = tied[0]
    for o in tied[1:]:
        if _better(report, o, best):
            best = o
    return best


def _better(report: "Report", a: Option, b: Option) -> bool:
    """`a` is more accurate than `b` beyond noise: `b` loses to float beyond noise and `a` does not; or, both on
    the same side, the paired test between the two (exact McNemar on the samples each got right, where stored)
    says so. Without a paired test between them, within noise of each other is a tie."""
    la, lb = a.loses, b.loses
    if la != lb:
        return lb
    ma, mb = _model(report, a.name), _model(report, b.name)
    if ma is None or mb is None or ma.metrics is None or mb.metrics is None or ma.metrics.main is not None:
        return False
    n = report.dataset.num_eval
    ra, rb = unpack_correct(ma.metrics.correct_bits, n), unpack_correct(mb.metrics.correct_bits, n)
    if ra is None or rb is None:
        return False
    return bool(ra.sum() > rb.sum()) and jd.significant(statistics.mcnemar_p(ra, rb))


def _model(report: "Report", name: str) -> Optional["VariantResult"]:
    return next((m for m in models(report) if m.name == name), None)


def _runner_up(report: "Report", target: str, ship: Option, pool: list[Option]) -> Optional[Option]:
    """The cheapest other option that trades differently: smaller, faster beyond timing noise (where the target
    times), or not worse than float beyond noise where the shipped one is (within the allowed drop)."""
    timed = tg.of(target).timed

    def differs(o: Option) -> bool:
        if o.size_bytes < ship.size_bytes:
            return True
        if timed and jd.faster(o.latency_ms, o.latency_p90_ms, ship.latency_ms, ship.latency_p90_ms):
            return True
        return ship.loses and not o.loses

    others = [o for o in pool if o is not ship and o.one_class is None and differs(o)]
    if not others:
        return None
    costs = _costs(target, pool)
    return min(others, key=lambda o: (costs[o.name], o.size_bytes))


def table(report: "Report", decision: Optional[Decision]) -> list[TradeoffPoint]:
    """The one comparison table, read from the decision's judged options: every model measured on the main metric
    (float first, as the reference), with whether it runs on the target and meets the accuracy target, the Pareto
    front over size, latency and the metric, and what the decision names it. Empty when fewer than two models can
    be compared."""
    if decision is None or not measurable(report):
        return []
    found = [o for o in decision.options if o.score is not None]
    if len(found) < 2:
        return []
    points = [pk.Point(o.name, o.size_bytes, o.latency_ms, _oriented(o), o.meets) for o in found]
    roles = {decision.variant: SHIP, decision.runner_up: RUNNER_UP}
    roles.update({o.name: NOT_QUANTIZED for o in found if o.name != variants.FLOAT and not o.quantized})
    share = metric_of(report)[1]
    return [TradeoffPoint(
        name=o.name, label=o.label, score=o.score, score_text="", vs_float=o.vs_float,
        size_bytes=o.size_bytes, latency_ms=o.latency_ms, meets_target=o.meets, pareto=on_front,
        picks=[roles[o.name]] if o.name in roles and o.name else [],
        chosen=o.name == decision.variant, runs_on_target=o.runs if o.tried or not _own_tool(report) else None,
        why=o.why, share=share)
        for o, on_front in zip(found, pk.front(points))]


def _own_tool(report: "Report") -> bool:
    """The run's target says itself whether a model runs there (Target.tool_says_runs)."""
    return tg.of(report.settings.target).tool_says_runs
