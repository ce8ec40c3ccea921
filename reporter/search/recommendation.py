"""The recommendation, assembled: the seed rule's suspects, the search (or the rule) choosing layers to keep in
float, the chosen model built and measured on the evaluation data, the gap it closes, the rule's pick measured
beside it, and the chosen layers in lighter schemes (16x8, dynamic range) measured against it.
"""

from __future__ import annotations

import dataclasses
import traceback
from typing import Any

import numpy as np

from reporter.convert import converter as conv
from reporter.convert import litert
from reporter.core import judgement, variants
from reporter.core.errors import one_line
from reporter.debug.debugger import check_not_everything
from reporter.measure import evaluate, structure
from reporter.measure.measurer import Measurer
from reporter.model.report import Alternative, GapStatus, LayerStat, Recommendation, RuleResult, VariantResult
from reporter.search import engine as srch
from reporter.search import recommend


def recommend_for(m: Measurer, s: Any, quantizer, layers: list[LayerStat], float_model: bytes,
                  results: dict[str, VariantResult], litert_models: litert.LiteRtModels) -> tuple[list, Recommendation]:
    """The layers (with the rule's suspects marked) and the measured recommendation. `s` is the run's
    RunSettings: the rule's threshold, the search's budget and samples, forced layers and ops."""
    data, task, progress, outputs = m.data, m.task, m.progress, m.outputs
    # The seed rule reads per-layer (local) rmse/scale; a LiteRT Quantizer model has only the error
    # accumulated from the input, which would flag every layer after the first bad one: no rule then.
    local_view = quantizer.method != litert.METHOD
    if local_view:
        layers = recommend.mark_suspects(layers, s.suspect_threshold, s.first_layers)
    rule_nodes = recommend.denylist(layers)
    classification = task.classification
    y = data.y if classification else None
    gap = m.gap("fiq", s.max_accuracy_drop, "FIQ")
    all_nodes = [layer.tensor_name for layer in layers]
    base = dict(threshold=s.suspect_threshold, first_layers=s.first_layers, method=s.recommend,
                denylisted_ops=list(s.keep_float_ops), forced_nodes=list(s.keep_float),
                quantizer=quantizer.method, quantizer_note=quantizer.note)
    rule = RuleResult(s.suspect_threshold, s.first_layers, rule_nodes) if local_view else None
    gap_status = GapStatus(gap.status, gap.drop, gap.p_value, gap.drop, gap.reason)
    if gap.status == "no_gap":
        return layers, Recommendation(denylisted_nodes=[], code="", selective=None, gap=gap_status, rule=rule,
                                      summary="", **base)

    sel = recommend.selection(data, s.calibration_samples, s.selection_samples, classification)
    if sel.info.overlaps_calibration:
        progress.say(f"the search chooses on {sel.info.num_samples:,} x_calib samples that include the calibration"
                     " samples (too few remain beyond them)")
    # Several outputs: the target holds for every labelled output, or for the one --primary-output names.
    targeted = [(h.key, h.task) for h in m.heads if (h.primary if s.primary_output else h.labelled)]
    float_sel = evaluate.predict_all(float_model, sel.x) if targeted else evaluate.predict(float_model, sel.x)
    candidates = recommend.Candidates(quantizer, s.keep_float_ops, sel, float_sel, classification,
                                      task.binary_sigmoid, targeted, m.primary.key if m.heads else "", task.classes)
    pol, target_text = recommend.policy(s.max_accuracy_drop, classification, s.search_budget)
    forced = frozenset(s.keep_float)
    search_result = None
    if s.recommend == "search":
        with progress.stage("search"):
            flow = structure.dataflow(quantizer.calibrated or float_model)
            trace = srch.search(recommend.search_layers(layers, flow), candidates, pol, forced)
        chosen = recommend.in_model_order(trace.chosen.nodes, layers)
        with progress.stage("search"):
            steps = recommend.steps_on_evaluation(trace, candidates, layers, data, outputs["float"],
                                                  max(3, s.latency_runs // 10) if s.latency_runs else 0,
                                                  _step_score(m) if m.score is not None else None)
        progress.say(f"searched {trace.evaluations} candidates on {len(sel.x):,} selection samples:"
                     f" {len(chosen)} layer(s) in float ({progress.timings.get('search', trace.seconds):.1f} s)")
        search_result = recommend.search_result(trace, steps, sel, target_text, s.search_budget, layers)
    else:
        chosen = recommend.in_model_order(set(rule_nodes) | forced, layers)

    selective, size_cost = None, None
    fiq = results.get("fiq")
    if chosen or s.keep_float_ops:
        selective = _build_measured(m, "selective", chosen, all_nodes, candidates, results)
        if selective.ok and fiq is not None and fiq.ok:
            size_cost = selective.size_bytes - fiq.size_bytes
    if selective is not None and selective.ok and m.score is not None:
        found = m.drop("selective")
        gap = judgement.after_fix(gap, *(found or (None, None)), s.max_accuracy_drop, *m.words())
        gap_status = GapStatus(gap.status, gap.drop, gap.p_value, gap_status.fiq_drop, gap.reason)
    if search_result is not None and sel.heldout is not None and classification and not task.dense \
            and selective is not None and selective.ok:
        held = {k: float(np.mean(m.classes(k)[sel.heldout] == y[sel.heldout])) for k in ("float", "fiq", "selective")}
        search_result = dataclasses.replace(
            search_result, selection_data=dataclasses.replace(search_result.selection_data, heldout_accuracy=held))

    alternatives = []
    if chosen and selective is not None and selective.ok:
        schemes = litert.MIXED_SCHEMES if quantizer.method == litert.METHOD else ("float", *litert.MIXED_SCHEMES)
        alternatives = _alternatives(m, chosen, schemes, litert_models, s.keep_float_ops, results)
    if s.recommend == "search" and rule_nodes:
        rule = _measure_rule(m, rule, set(rule_nodes) | forced, all_nodes, candidates, results)
    if gap_status.status in ("gap", "open") and "int16x8" not in results:
        whole = _whole_model_16x8(m, litert_models, results)
        if whole is not None:
            results["int16x8"] = whole  # a measured trade-off the report states when no float layer closes the gap
    rec = Recommendation(
        denylisted_nodes=chosen,
        code=_reproduction_code(quantizer, chosen, s.keep_float_ops, len(data.x_calib)) if selective else "",
        summary="",  # worded by the findings
        selective=selective, size_cost_bytes=size_cost, gap=gap_status, search=search_result, rule=rule,
        alternatives=alternatives, **base,
    )
    return layers, rec


def _whole_model_16x8(m: Measurer, litert_models, results) -> VariantResult:
    """The whole model with 16-bit activations and 8-bit weights (LiteRT Quantizer), built and measured like a
    variant: when error is spread over the model, the cheaper fix than float may be a scheme, not layers."""
    name = "int16x8"
    try:
        with m.progress.stage("selective", f"{name}: the whole model in 16x8, since the gap stays open"):
            model = litert_models.build(name)
        measured = m.measure(name, model)
        return dataclasses.replace(measured, converter=litert.CONVERTER, accuracy_gap_recovered=recommend.gap_recovered(
            results.get("float"), results.get("fiq"), measured))
    except Exception as exc:  # noqa: BLE001 - record and go on
        traceback.print_exc()
        m.progress.say(f"{name} FAILED: {one_line(exc)}")
        return VariantResult(name=name, status="failed", error=one_line(exc), converter=litert.CONVERTER)


def _step_score(m: Measurer):
    """The main metric of a candidate on the evaluation data, from its primary output (or, for a user's metric
    on a model with several outputs, from all of them by name)."""
    from reporter.measure.scoring import UserScore

    def value(model: bytes, out) -> float:
        if isinstance(m.score, UserScore) and m.heads:
            outs = evaluate.predict_all(model, m.data.x)
            return m.score.value({h.name: outs[h.key] for h in m.heads})
        return m.score.value(out)
    return value


def _reproduction_code(quantizer, chosen, keep_float_ops, calibration_samples: int) -> str:
    if quantizer.method == litert.METHOD:
        return litert.reproduction_code("fiq", {n: "float" for n in chosen}, keep_float_ops, calibration_samples)
    return conv.reproduction_code(chosen, list(keep_float_ops), calibration_samples)


def _alternatives(m: Measurer, chosen, schemes, litert_models, keep_float_ops, results) -> list[Alternative]:
    """The recommended layers in 16x8 or dynamic range instead of float (LiteRT Quantizer; TF's converter
    cannot mix schemes), each built and measured like the recommended model. When TF's converter made
    the recommended model, LiteRT Quantizer's model with the same layers in float is measured too, so
    that the scheme's effect is not mistaken for the converter's."""
    found = []
    try:
        plain = litert_models.build("fiq", None, keep_float_ops)
    except Exception as exc:  # noqa: BLE001 - LiteRT Quantizer cannot quantize this model: say so, go on
        traceback.print_exc()
        return [Alternative(scheme, list(chosen), error=one_line(exc)) for scheme in schemes]
    for scheme in schemes:
        name = variants.alternative(scheme)
        try:
            with m.progress.stage("selective", f"{name}: the recommended layers in {scheme} (LiteRT Quantizer)"):
                model = litert_models.build("fiq", {n: scheme for n in chosen}, keep_float_ops)
            if model == plain:  # the scheme does not apply to these layers: nothing to measure
                found.append(Alternative(scheme, list(chosen), applicable=False))
                continue
            measured = m.measure(name, model)
            measured = dataclasses.replace(measured, converter=litert.CONVERTER, accuracy_gap_recovered=(
                recommend.gap_recovered(results.get("float"), results.get("fiq"), measured)))
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
        with m.progress.stage("selective", f"{name} model built with {len(nodes)} layer(s) in float"):
            tflite = candidates.build(nodes)
        result = m.measure(name, tflite)
    except Exception as exc:  # noqa: BLE001 - record and go on
        traceback.print_exc()
        m.progress.say(f"{name} model FAILED: {one_line(exc)}")
        return VariantResult(name=name, status="failed", error=one_line(exc))
    return dataclasses.replace(
        result, accuracy_gap_recovered=recommend.gap_recovered(results.get("float"), results.get("fiq"), result),
        converter=candidates.quantizer.converter)


def _measure_rule(m: Measurer, rule, nodes, all_nodes, candidates, results) -> RuleResult:
    """The seed rule's pick, built and measured beside the search's, for comparison."""
    measured = _build_measured(m, "rule", recommend.in_model_order(nodes, []), all_nodes, candidates, results)
    score = candidates(frozenset(nodes)).score if measured.ok else None
    return dataclasses.replace(rule, selective=measured, selection_score=score,
                               accuracy_gap_recovered=measured.accuracy_gap_recovered, error=measured.error)
