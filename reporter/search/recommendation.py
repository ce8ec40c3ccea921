"""The recommendation, assembled: the seed rule's suspects, the search (or the rule) choosing layers to keep in
float, the chosen model built and measured on the evaluation data, the gap it closes, the rule's pick measured
beside it, and the chosen layers in lighter schemes (16x8, dynamic range) measured against it.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from typing import Callable, Optional

import numpy as np

from reporter.convert import converter as conv
from reporter.convert import litert
from reporter.core import judgement, targets, variants
from reporter.core.errors import one_line
from reporter.debug.debugger import check_not_everything
from reporter.measure import cost, evaluate, structure
from reporter.measure.measurer import Measurer
from reporter.measure.scoring import UserScore
from reporter.model.report import (Alternative, GapStatus, LayerStat, Recommendation, RuleResult, SearchCost,
                                   VariantResult)
from reporter.search import engine as srch
from reporter.search import budget, recommend
from reporter.model.settings import Settings
from reporter.core.variants import SEARCH_METHOD

@dataclasses.dataclass(frozen=True)
class Asked:
    """What the run asks of the search: its settings as report.json records them (the rule's threshold, the search's
    method, budget and samples, forced layers and ops); `target_rule`, the findings' one rule of the accuracy target,
    which the run hands down (recommend.TargetRule: whether a measured model meets it against float, and the
    acceptance on the selection samples; the search measures, it never decides that itself); and `helper`, a second
    process with TensorFlow that builds the search's next candidates meanwhile (the run's side converter, else its
    contained child: the transformer's search 0.74 -> 0.69 s; None: none); `chosen`, told once the recommended model
    is built and measured, before its alternatives are: the layers (as the report lists them), the tensors that model
    keeps in float, the rule's threshold and that model's measurement (None: none built); the run starts drawing
    charts then (None: nobody is told)."""

    settings: Settings
    target_rule: recommend.TargetRule
    helper: Optional[object] = None
    chosen: Optional[Callable[[list, list, float, Optional[VariantResult]], None]] = None


def recommend_for(m: Measurer, asked: Asked, quantizer: recommend.Quantizer, layers: list[LayerStat],
                  results: dict[str, VariantResult], litert_models: litert.LiteRtModels
                  ) -> tuple[list, Recommendation]:
    """The layers (with the rule's suspects marked) and the measured recommendation for what the run `asked`;
    `quantizer` builds FIQ with chosen layers in float from the run's float model."""
    data, task, progress = m.data, m.task, m.progress
    options = asked.settings
    target_rule = asked.target_rule
    float_model = quantizer.float_model
    # The seed rule reads per-layer (local) rmse/scale; a LiteRT Quantizer model has only the error
    # accumulated from the input, which would flag every layer after the first bad one: no rule then.
    local_view = quantizer.method != litert.METHOD
    if local_view:
        layers = recommend.mark_suspects(layers, options.suspect_threshold, options.first_layers)
    rule_nodes = recommend.denylist(layers)
    classification = task.classification
    y = data.y if classification else None
    flt = results.get(variants.FLOAT)
    all_nodes = [layer.tensor_name for layer in layers]
    base = dict(threshold=options.suspect_threshold, first_layers=options.first_layers, method=options.recommend,
                denylisted_ops=list(options.keep_float_ops), forced_nodes=list(options.keep_float),
                quantizer=quantizer.method, quantizer_note=quantizer.note)
    rule = RuleResult(options.suspect_threshold, options.first_layers, rule_nodes) if local_view else None
    gap_status = _gap(m, variants.FIQ, target_rule(results[variants.FIQ], flt))
    if gap_status.status == "no_gap":
        return layers, Recommendation(denylisted_nodes=[], code="", selective=None, gap=gap_status, rule=rule,
                                      summary="", **base)

    # Several outputs: the target holds for every labelled output, or for the one --primary-output names.
    targeted = [(h.key, h.task) for h in m.heads if (h.primary if options.primary_output else h.labelled)]
    user = m.score if isinstance(m.score, UserScore) else None
    stand = recommend.stand_in(task, targeted, m.fallback is not None, user is not None)
    try:
        sel, candidates, pol, target_text = _stand_in(m, asked, quantizer, targeted, stand)
    except recommend.MetricFailed as exc:
        stand = _without_metric(m, exc)
        sel, candidates, pol, target_text = _stand_in(m, asked, quantizer, targeted, stand)
    if sel.info.overlaps_calibration:
        progress.say(f"the search chooses on {sel.info.num_samples:,} x_calib samples that include the calibration"
                     " samples (too few remain beyond them)")
    forced = frozenset(options.keep_float)
    search_result = None
    if options.recommend == SEARCH_METHOD:
        with progress.stage("search"):
            t0 = time.perf_counter()
            flow = structure.dataflow(quantizer.calibrated or float_model)
            try:
                candidates, pol, cost = _fitted(m, options, candidates, forced, pol)
                trace = srch.search(recommend.search_layers(layers, flow), candidates, pol, forced)
            except recommend.MetricFailed as exc:  # the search again, on the output error
                candidates.settle()
                stand = _without_metric(m, exc)
                sel, candidates, pol, target_text = _stand_in(m, asked, quantizer, targeted, stand)
                candidates, pol, cost = _fitted(m, options, candidates, forced, pol)
                trace = srch.search(recommend.search_layers(layers, flow), candidates, pol, forced)
            finally:
                candidates.settle()
            sel = candidates.sel
            trace.cost = cost
            trace.seconds = time.perf_counter() - t0  # with sizing the selection data (FIQ scored there, once)
        chosen = recommend.in_model_order(trace.chosen.nodes, layers)
        with progress.stage("search"):
            steps = recommend.steps_on_evaluation(trace, candidates, layers, m)
        progress.say(f"searched {trace.evaluations} candidates on {len(sel.x):,} selection samples:"
                     f" {len(chosen)} layer(s) in float ({progress.timings.get('search', trace.seconds):.1f} s)")
        if trace.spread:
            progress.say(trace.stop_reason)
        sel = dataclasses.replace(sel, info=recommend.on_evaluation(m, candidates.scoring, trace.steps[0].evaluation,
                                                                   sel, pol.accept, forced))
        search_result = recommend.search_result(trace, steps, sel, target_text, options.search_budget, layers)
    else:
        chosen = recommend.in_model_order(set(rule_nodes) | forced, layers)

    selective, size_cost = None, None
    fiq = results.get(variants.FIQ)
    if chosen or options.keep_float_ops:
        selective = _build_measured(m, variants.SELECTIVE, chosen, all_nodes, candidates, results)
        if selective.ok and fiq is not None and fiq.ok:
            size_cost = selective.size_bytes - fiq.size_bytes
    if asked.chosen is not None:
        asked.chosen(layers, chosen if selective is not None else [], options.suspect_threshold, selective)
    if selective is not None and selective.ok and gap_status.status == "gap":
        fixed = _gap(m, variants.SELECTIVE, target_rule(selective, flt))
        if fixed.status != "not_measurable":
            gap_status = dataclasses.replace(fixed, status="recovered" if fixed.status == "no_gap" else "open",
                                             fiq_drop=gap_status.fiq_drop)
    if search_result is not None and sel.heldout is not None and classification and task.kind.sample_correct \
            and selective is not None and selective.ok:
        held = {k: float(np.mean(m.classes(k)[sel.heldout] == y[sel.heldout]))
                for k in (variants.FLOAT, variants.FIQ, variants.SELECTIVE)}
        search_result = dataclasses.replace(
            search_result, selection_data=dataclasses.replace(search_result.selection_data, heldout_accuracy=held))

    alternatives = []
    if chosen and selective is not None and selective.ok:
        # LiteRT Quantizer's FIQ with the layers in float is the recommended model itself: no alternative then.
        schemes = litert.MIXED_SCHEMES if quantizer.method == litert.METHOD else tuple(variants.ALTERNATIVES)
        alternatives = _alternatives(m, chosen, schemes, litert_models, options.keep_float_ops, results)
    if options.recommend == SEARCH_METHOD and rule_nodes:
        rule = _measure_rule(m, rule, set(rule_nodes) | forced, all_nodes, candidates, results)
    if gap_status.status in ("gap", "open") and variants.INT16X8 not in results \
            and not any(target_rule(v, flt) for v in _other_quantized(results)):
        # the whole model in 16x8 (slow int16 kernels on a CPU, no integer-only model) only when no other quantized
        # variant already meets the accuracy target
        whole = _whole_model_16x8(m, litert_models, results)
        if whole is not None:
            # a measured trade-off the report states when no float layer closes the gap
            results[variants.INT16X8] = whole
    rec = Recommendation(
        denylisted_nodes=chosen,
        code=_reproduction_code(quantizer, chosen, options.keep_float_ops, len(data.x_calib)) if selective else "",
        summary="",  # worded by the findings
        selective=selective, size_cost_bytes=size_cost, gap=gap_status, search=search_result, rule=rule,
        alternatives=alternatives, **base,
    )
    return layers, rec


def _stand_in(m: Measurer, asked: Asked, quantizer: recommend.Quantizer, targeted: list,
              stand: str) -> tuple[recommend.Selection, recommend.Candidates, srch.Policy, str]:
    """The selection samples, the candidates scored there by what the search reads for the accuracy target (`stand`,
    recommend.stand_in: the task's agreement, the user's metric on labelled evaluation samples, or the output error),
    the search's policy (the acceptance the run's target rule gives there) and its target's words.
    recommend.MetricFailed when the user's metric fails there."""
    options, helper = asked.settings, asked.helper
    task, float_model, metric = m.task, quantizer.float_model, None
    if stand == recommend.METRIC:  # the metric's labels and meta arrays are the evaluation data's
        targeted = []
        words = f"your metric {m.score.name} on labelled evaluation samples, relative to float's value there"
    else:
        words = recommend.AGREEMENT_WORDS if stand == recommend.AGREEMENT else recommend.VARIANCE_WORDS
    sel = recommend.selection(m.data, options.calibration_samples, options.selection_samples, task.classification,
                              words, labelled=stand == recommend.METRIC)
    names = {h.key: h.name for h in m.heads} if stand == recommend.METRIC else {}
    float_sel = evaluate.predict_all(float_model, sel.x) if targeted or names else evaluate.predict(float_model, sel.x)
    sel = dataclasses.replace(sel, float_out=float_sel)
    part = m.score.subset(sel.chosen) if stand == recommend.METRIC else None
    scoring = recommend.Scoring(task, tuple(targeted), m.primary.key if m.heads else "", part,
                                tuple(names.items()), agreement=stand == recommend.AGREEMENT, stand=stand)
    candidates = recommend.Candidates(quantizer, options.keep_float_ops, sel, scoring).beside(helper)
    if part is not None:
        metric = (m.score.name, candidates.score.reference)
    pol, target_text = recommend.policy(asked.target_rule, stand == recommend.AGREEMENT, options.search_budget, metric)
    return sel, candidates, pol, target_text


def _fitted(m: Measurer, options: Settings, candidates: recommend.Candidates, forced: frozenset,
            pol: srch.Policy) -> tuple[recommend.Candidates, srch.Policy, SearchCost]:
    """The candidates on selection data sized to the question (`_sized`) when the budget holds it, and the policy
    with the budget the search may spend (reporter.search.budget)."""
    progress = m.progress
    sized, why = _sized(m, options, candidates, forced, pol.target)
    cost = _budget(m, options, sized, forced)
    if sized is not candidates and not judgement.grow_within_budget(cost.candidates):
        progress.say(f"the selection samples are not grown to {len(sized.sel.x):,}: the search's budget"
                     f" would hold {cost.candidates} candidates on them (--search-share {cost.share:g})")
        cost = _budget(m, options, candidates, forced)
    else:
        candidates = sized
        if why:
            progress.say(why)
    if cost.candidates < pol.budget:
        pol = dataclasses.replace(pol, budget=cost.candidates, budget_words=(
            f"the budget (--search-share {cost.share:g}: {cost.candidates} candidate"
            f"{'s' if cost.candidates != 1 else ''} at an estimated"
            f" {cost.candidate_seconds:.2g} s each, against the bare seed calls' estimated"
            f" {cost.bare_seconds:.0f} s)"))
    return candidates, pol, cost


def _without_metric(m: Measurer, exc: Exception) -> str:
    """The user's metric failed on the search's samples: said, and the search reads the output error instead."""
    traceback.print_exc()  # into run.log
    m.progress.say(f"--metric {m.score.name} failed on the search's selection samples: {exc} (traceback in run.log);"
                   " the search chooses on the output error against float's instead")
    return recommend.VARIANCE


def _budget(m: Measurer, options: Settings, candidates: recommend.Candidates, forced: frozenset) -> SearchCost:
    """The search's budget (reporter.search.budget), estimated from FIQ's file (with the forced layers in float), the
    float model's ops and the sample counts, before the search starts."""
    fiq = candidates.build(forced)
    found = budget.budget(cost.work(fiq), cost.work(candidates.quantizer.float_model).ops, options.search_share,
                          len(m.data.x), options.calibration_samples, len(candidates.sel.x))
    return SearchCost(options.search_share, round(found.bare_s, 3), round(found.candidate_s, 4), found.candidates())


def _sized(m: Measurer, options: Settings, candidates: recommend.Candidates, forced: frozenset,
           target: float) -> tuple[recommend.Candidates, str]:
    """The candidates on selection data sized to the question: when the gap from FIQ to the search's `target` on the
    selection samples is near what they can detect, on every x_calib sample (recommend.grown), float's outputs on
    them computed again; and the sentence that says so ("" when they are not grown)."""
    sel = candidates.sel
    more = recommend.grown(m.data, sel, options.calibration_samples, options.selection_samples,
                           target - candidates(forced).score)
    if more is None:
        return candidates, ""
    float_model = candidates.quantizer.float_model
    float_out = evaluate.predict_all(float_model, more.x) if candidates.heads else \
        evaluate.predict(float_model, more.x)
    return candidates.on(dataclasses.replace(more, float_out=float_out)), (
        f"the gap to the target on {len(sel.x):,} selection samples is near what they can show: the search chooses on"
        f" every x_calib sample beyond the calibration samples, {more.info.num_samples:,}")


def _gap(m: Measurer, name: str, meets: bool) -> GapStatus:
    """Model `name`'s drop from float on the main metric and its paired test, as measured, with whether it meets the
    accuracy target (`meets`: the findings' rule said so): a gap when it does not; not measurable without the main
    metric. reporter.render.words word it from these figures."""
    found = m.drop(name)
    if found is None:
        return GapStatus("not_measurable")
    drop, p = found
    return GapStatus("no_gap" if meets else "gap", drop, p, drop)


def _other_quantized(results: dict) -> list[VariantResult]:
    """The built variants other than float and FIQ that store anything below float32."""
    return [v for name, v in results.items() if name not in (variants.FLOAT, variants.FIQ) and v.ok
            and targets.quantized(v.tensor_types, v.weight_coverage)]


def _whole_model_16x8(m: Measurer, litert_models, results) -> VariantResult:
    """The whole model with 16-bit activations and 8-bit weights (LiteRT Quantizer), built and measured like a
    variant: when error is spread over the model, the cheaper fix than float may be a scheme, not layers."""
    name = variants.INT16X8
    try:
        with m.progress.stage(variants.SELECTIVE, f"{name}: the whole model in 16x8, since the gap stays open"):
            model = litert_models.build(name)
        measured = m.measure(name, model)
        return dataclasses.replace(measured, converter=litert.CONVERTER, accuracy_gap_recovered=recommend.gap_recovered(
            results.get(variants.FLOAT), results.get(variants.FIQ), measured))
    except Exception as exc:  # noqa: BLE001 - record and go on
        traceback.print_exc()
        m.progress.say(f"{name} FAILED: {one_line(exc)}")
        return VariantResult(name=name, status="failed", error=one_line(exc), converter=litert.CONVERTER)


def _reproduction_code(quantizer, chosen, keep_float_ops, calibration_samples: int) -> str:
    if quantizer.method == litert.METHOD:
        in_float = {n: variants.FLOAT for n in chosen}
        return litert.reproduction_code(variants.FIQ, in_float, keep_float_ops, calibration_samples)
    return conv.reproduction_code(chosen, list(keep_float_ops), calibration_samples)


def _alternatives(m: Measurer, chosen, schemes, litert_models, keep_float_ops, results) -> list[Alternative]:
    """The recommended layers in 16x8 or dynamic range instead of float (LiteRT Quantizer; TF's converter
    cannot mix schemes), each built and measured like the recommended model. When TF's converter made
    the recommended model, LiteRT Quantizer's model with the same layers in float is measured too, so
    that the scheme's effect is not mistaken for the converter's."""
    found = []
    try:
        plain = litert_models.build(variants.FIQ, None, keep_float_ops)
    except Exception as exc:  # noqa: BLE001 - LiteRT Quantizer cannot quantize this model: say so, go on
        traceback.print_exc()
        return [Alternative(scheme, list(chosen), error=one_line(exc)) for scheme in schemes]
    for scheme in schemes:
        name = variants.alternative(scheme)
        try:
            with m.progress.stage(variants.SELECTIVE, f"{name}: the recommended layers in {scheme} (LiteRT Quantizer)"):
                model = litert_models.build(variants.FIQ, {n: scheme for n in chosen}, keep_float_ops)
            if model == plain:  # the scheme does not apply to these layers: nothing to measure
                found.append(Alternative(scheme, list(chosen), applicable=False))
                continue
            measured = m.measure(name, model)
            measured = dataclasses.replace(measured, converter=litert.CONVERTER, accuracy_gap_recovered=(
                recommend.gap_recovered(results.get(variants.FLOAT), results.get(variants.FIQ), measured)))
            found.append(Alternative(scheme, list(chosen), measured))
        except Exception as exc:  # noqa: BLE001 - record and go on
            traceback.print_exc()
            m.progress.say(f"{name} FAILED: {one_line(exc)}")
            found.append(Alternative(scheme, list(chosen), error=one_line(exc)))
    return found


def _build_measured(m: Measurer, name, nodes, all_nodes, candidates, results) -> VariantResult:
    """Builds the FIQ model with `nodes` in float and measures it like every variant."""
    why_not = check_not_everything(nodes, all_nodes)
    if why_not:
        return VariantResult(name=name, status="failed", error=why_not)
    try:
        with m.progress.stage(variants.SELECTIVE, f"{name} model built with {len(nodes)} layer(s) in float"):
            tflite = candidates.build(nodes)
        result = m.measure(name, tflite)
    except Exception as exc:  # noqa: BLE001 - record and go on
        traceback.print_exc()
        m.progress.say(f"{name} model FAILED: {one_line(exc)}")
        return VariantResult(name=name, status="failed", error=one_line(exc))
    recovered = recommend.gap_recovered(results.get(variants.FLOAT), results.get(variants.FIQ), result)
    return dataclasses.replace(result, accuracy_gap_recovered=recovered, converter=candidates.quantizer.converter)


def _measure_rule(m: Measurer, rule, nodes, all_nodes, candidates, results) -> RuleResult:
    """The seed rule's pick, built and measured beside the search's, for comparison."""
    measured = _build_measured(m, variants.RULE, recommend.in_model_order(nodes, []), all_nodes, candidates, results)
    try:
        score = candidates(frozenset(nodes)).score if measured.ok else None
    except recommend.MetricFailed:  # the user's metric fails on this model's selection outputs: no score there
        traceback.print_exc()
        score = None
    return dataclasses.replace(rule, selective=measured, selection_score=score,
                               accuracy_gap_recovered=measured.accuracy_gap_recovered, error=measured.error)
