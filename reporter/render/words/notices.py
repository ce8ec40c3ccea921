"""The words of the warnings and hints (reporter.findings.notices decides which a report calls for), by code."""

from __future__ import annotations

from typing import Optional

from reporter.core import variants
from reporter.core.errors import plain
from reporter.core import judgement as jd
from reporter.core.formatting import capital, fmt_mse, fmt_ms, fmt_number, fmt_percent, fmt_score
from reporter.findings.notices import FIX_FAILED, FIX_MEASURED, FIX_NONE, Fact
from reporter.model.findings import Notice
from reporter.model.report import MEASUREMENTS, Report
from reporter.render import kinds as kind_words
from reporter.render.words import shared_scale as shared_scale_words

BOOTSTRAP_WORDS = "a seeded bootstrap, the same resamples for every model"


def notice(report: Report, fact: Fact) -> Notice:
    return Notice(fact.code, _TEXTS[fact.code](report, fact), output=fact.output)


def worded(report: Report, facts: list[Fact]) -> list[Notice]:
    """The notices of `facts`, in order; one model's clipping outputs whose fix measured the same on each (a
    detector's boxes, classes and scores are one joined output) are said in one notice, not one each."""
    out: list[Notice] = []
    i = 0
    while i < len(facts):
        run = [facts[i]]
        while i + len(run) < len(facts) and _same_clipping(run[0], facts[i + len(run)]):
            run.append(facts[i + len(run)])
        out.append(notice(report, run[0]) if len(run) == 1 else
                   Notice(run[0].code, _outputs_clipped(report, run)))
        i += len(run)
    return out


def _same_clipping(a: Fact, b: Fact) -> bool:
    return a.code == b.code == "output_clipped" and a.subject == b.subject and \
        (a.fix_state, a.fix, a.figure, a.fix_error) == (b.fix_state, b.fix, b.figure, b.fix_error)


def nonfinite_text(report: Report, fact: Fact) -> str:
    """"The float model produced NaN or inf on 10 of 200 evaluation samples; DRQ on 10."."""
    found = [next(v for v in report.columns() if v.name == name) for name in fact.items]
    n = report.dataset.num_eval
    named = ["the float model" if v.name == variants.FLOAT else variants.short(v.name) for v in found]
    text = f"{named[0][0].upper()}{named[0][1:]} produced NaN or inf on {found[0].nonfinite_outputs:,} of {n:,}" \
           f" evaluation samples"
    return text + "".join(f"; {w} on {v.nonfinite_outputs:,}" for w, v in zip(named[1:], found[1:])) + "."


# --- warnings ---------------------------------------------------------------------------------------
def _calibration_overlap(report: Report, fact: Fact) -> str:
    return (f"Calibration used the first {report.dataset.num_calibration:,} samples of the evaluation data (no"
            " x_calib given): calibration and evaluation data overlap, so the quantized scores may be optimistic.")


def _calibration_short(report: Report, fact: Fact) -> str:
    ds = report.dataset
    where = "x_calib" if ds.calibration_source == "x_calib" else "the evaluation data"
    return (f"Asked for {fact.count:,} calibration samples, but {where} holds {ds.num_calibration:,}: FIQ and the"
            f" debugger were calibrated on those {ds.num_calibration:,}.")


def _selection_overlap(report: Report, fact: Fact) -> str:
    sel = report.recommendation.search.selection_data
    return (f"The search chose on {sel.num_samples:,} samples of x_calib that include the"
            f" {report.dataset.num_calibration:,} calibration samples (too few remained beyond them): a layer judged"
            " on the data it was calibrated on may look better than it is. Give more x_calib samples, or fewer"
            " --calibration-samples.")


def _stateful(report: Report, fact: Fact) -> str:
    return ("This model keeps state between invokes (variable tensors, as fused LSTM ops have). quant-report resets"
            " that state before every evaluation sample, but the TF Quantization Debugger does not: its per-layer"
            " numbers for stateful layers include state carried over from the previous sample, so a high RMSE/scale"
            " there can be a false alarm. Trust the measured accuracy first.")


def _classes_missing(report: Report, fact: Fact) -> str:
    k, missing = report.model.num_classes, fact.items
    shown = ", ".join(map(str, missing[:10])) + (" …" if len(missing) > 10 else "")
    return (f"The evaluation data has no samples of {len(missing)} of the model's {k} classes ({shown}): macro"
            f" precision, recall, F1 and balanced accuracy average over the {k - len(missing)} classes present.")


def _variant_failed(report: Report, fact: Fact) -> str:
    v = next(v for v in report.columns() if v.name == fact.subject)
    return f"{variants.short(v.name)} failed: {plain(v.error)}"


def _measurement_failed(report: Report, fact: Fact) -> str:
    v = next(v for v in report.columns() if v.name == fact.subject)
    return (f"{variants.short(v.name)}: {MEASUREMENTS.get(fact.detail, fact.detail)} not measured:"
            f" {v.measurement_errors[fact.detail]}")


def _nonfinite_outputs(report: Report, fact: Fact) -> str:
    how = ("Those samples count as wrong (they predict no class); errors against float leave them out."
           if report.model.num_classes else "Errors against float leave those samples out.")
    return f"{nonfinite_text(report, fact)} {how}"


def _output_clipped(report: Report, fact: Fact) -> str:
    clip = report.variant(fact.subject).clipped_outputs[fact.detail]
    what = f"{fact.detail} ({clip.part})" if clip.part else fact.detail
    return (f"{variants.short(fact.subject)}'s {clip.dtype} output {what} holds only {clip.low:.4g} to"
            f" {clip.high:.4g}: {fmt_percent(clip.share)} of float's output values on the evaluation data lie"
            f" beyond it and clip.{_class_ids(report, clip)} No layer kept in float changes that;"
            f" only the output's range does (an int16 or float output): {_output_fix_words(fact)}.")


def _outputs_clipped(report: Report, facts: list[Fact]) -> str:
    """Several outputs of one model clip, and the fix measured the same on each: one sentence names them all."""
    v = report.variant(facts[0].subject)
    parts, ids = [], ""
    for fact in facts:
        clip = v.clipped_outputs[fact.detail]
        what = f"{fact.detail} ({clip.part})" if clip.part else fact.detail
        parts.append(f"{what} holds only {clip.low:.4g} to {clip.high:.4g} ({fmt_percent(clip.share)} beyond it)")
        ids += _class_ids(report, clip)
    dtypes = sorted({v.clipped_outputs[f.detail].dtype for f in facts})
    return (f"{variants.short(v.name)}'s {'/'.join(dtypes)} outputs clip float's output values on the evaluation"
            f" data: {'; '.join(parts)}.{ids} No layer kept in float changes that; only the outputs' range does (int16"
            f" or float outputs): {_output_fix_words(facts[0], on='')}.")


def _class_ids(report: Report, clip) -> str:
    """What the model's task kind says of a clipping output (a detector's class ids read rounded: its words,
    reporter.render.kinds); "" for a kind that says nothing."""
    view = kind_words.of(report.model.task_kind.name)
    return view.clipped(clip, report.model.num_classes) if view is not None and view.clipped else ""


def _output_fix_words(fact: Fact, on: Optional[str] = None) -> str:
    """What FIQ with the op making this output in float measured on this output (`on`: " on output_1" by default;
    "" where one sentence names several outputs whose figures are the same), against FIQ on it (the figures
    reporter.findings.notices chose: the output's own, never another output's)."""
    label = variants.LABELS[variants.OUTPUT_FLOAT]
    on = f" on {fact.output}" if on is None else on
    if fact.fix_state == FIX_FAILED:
        return f"{label} could not be built: {plain(fact.fix_error)}"
    if fact.fix_state != FIX_MEASURED:
        return "this run did not measure one" if fact.fix_state == FIX_NONE else \
            f"{label} was built; its quality{on} was not measured"
    fix, own = fact.fix, fact.figure
    if fix.score is not None:
        return (f"{label} measured {fmt_score(fix.score, fix.share)}{on} against FIQ's"
                f" {fmt_score(own.score, own.share)}")
    if fix.mse is not None:
        return (f"{label} measured output {fmt_mse(fix.mse, fix.variance)}{on} against float, FIQ"
                f" {fmt_mse(own.mse, own.variance)}")
    return (f"{label} kept float's class{on} for {fmt_percent(fix.agreement)} of the samples, FIQ for"
            f" {fmt_percent(own.agreement)}")


def _debugger_failed(report: Report, fact: Fact) -> str:
    return f"The quantization debugger failed: {plain(report.debugger_error)}"


def _target_not_met(report: Report, fact: Fact) -> str:
    search = report.recommendation.search
    return f"The search stopped before its target ({search.target_text}): {search.stop_reason}."


# --- hints ------------------------------------------------------------------------------------------
def _task(report: Report, fact: Fact) -> str:
    model = report.model
    return f"Measured as {model.task_kind.words} ({model.task_reason})."


def _keras_twin(report: Report, fact: Fact) -> str:
    model = report.model
    return (f"Converted through a tf_keras twin (batch 1), because Keras 3 recurrent layers do not convert: largest"
            f" output difference against the Keras 3 model {model.twin_max_abs_difference:.2g} on"
            f" {model.twin_samples:,} samples.")


def _quantization_aware(report: Report, fact: Fact) -> str:
    return (f"The model is quantization-aware ({fact.count} fake-quant QUANTIZE/DEQUANTIZE pair"
            f"{'s' if fact.count != 1 else ''} in its float conversion): \"float\" is its fake-quant graph run in float;"
            " the QAT int8 model is TensorFlow's conversion with Optimize.DEFAULT, as tfmot's guide converts it (the"
            " DRQ settings), and with a representative dataset too (the FIQ settings). Quantization-aware training is"
            " the remedy the seeds name when post-training quantization fails"
            + (_qat_against_ptq(report, fact) if fact.items else
               "; give the float model it was trained from (--base-model) to compare it with post-training"
               " quantization on the same data") + ".")


def _qat_against_ptq(report: Report, fact: Fact) -> str:
    """"; on the same data: QAT int8 91.3 %, post-training FIQ of the base model 90.1 %, base float 91.0 %"."""
    metric, share = report.metric()
    named = [(variants.QAT_LABELS[variants.DRQ].split(" (")[0], report.variant(variants.DRQ))]
    named += [(variants.BASE_LABELS[name], report.variant(name)) for name in fact.items]
    said = [f"{label[:1].lower()}{label[1:]} {fmt_score(v.metrics.score, share)}" if label != "QAT int8" else
            f"{label} {fmt_score(v.metrics.score, share)}" for label, v in named
            if v is not None and v.ok and v.metrics is not None and v.metrics.score is not None]
    return f"; measured on the same data ({metric}): " + ", ".join(said)


def _tflite_changed(report: Report, fact: Fact) -> str:
    return f"The .tflite file was changed so it can be quantized: {'; '.join(report.model.input_changes)}."


def _labels_as_classes(report: Report, fact: Fact) -> str:
    return f"{report.model.label_note}."


def _user_metric(report: Report, fact: Fact) -> str:
    main = report.variant(variants.FLOAT).metrics.main
    way = "higher is better" if main.higher_is_better else "lower is better (--metric-mode min)"
    if getattr(main, "per_sample", False):
        return (f"Every verdict, gap, gate and fix reads your metric {main.name} ({report.settings.metric},"
                f" {way}): the mean of the value it returned for each sample; two models are compared by a paired"
                f" t-test over those values, and its interval resamples whole samples ({BOOTSTRAP_WORDS}).")
    if getattr(main, "blocks", None):
        return (f"Every verdict, gap, gate and fix reads your metric {main.name} ({report.settings.metric},"
                f" {way}): its value on every sample; it was also called on each of {main.blocks} blocks of the"
                " samples (the same seeded blocks for every model), and its intervals and paired t-tests read those"
                " blocks' values (batch means).")
    return (f"Every verdict, gap, gate and fix reads your metric {main.name} ({report.settings.metric},"
            f" {way}); its intervals and paired tests resample whole samples ({BOOTSTRAP_WORDS}).")


def _user_metric_failed(report: Report, fact: Fact) -> str:
    return (f"Your metric ({report.settings.metric}) was not used: it failed, or gave every model the same value"
            f" (see run.log), so the report reads {report.metric()[0]} instead.")


def _bootstrap(report: Report, fact: Fact) -> str:
    name = report.metric()[0]  # mean IoU, a mask's mask IoU, a detector's mAP@0.5
    return (f"{capital(name)} is not a mean over samples: its intervals and paired tests resample whole"
            f" images ({BOOTSTRAP_WORDS}), never {report.model.task_kind.unit}.")


def _latency_skipped(report: Report, fact: Fact) -> str:
    return "Latency was not measured: latency runs were set to 0."


def _latency_floor(report: Report, fact: Fact) -> str:
    _, floor, overhead = fact.items
    who = "Every model here runs" if fact.count == fact.items[0] else f"{fact.count} of {fact.items[0]} models run"
    return (f"{who} in under {fmt_ms(floor)} per sample on this host ({jd.TIMING_FLOOR_FACTOR} times an empty invoke,"
            f" {fmt_ms(overhead)}): too fast to tell apart here, so their latencies are shown but none is called"
            " faster or slower.")


def _rule_false_alarm(report: Report, fact: Fact) -> str:
    worst, n = fact.layer, fact.count
    return (f"The rmse/scale rule flags {n} layer{'s' if n != 1 else ''} (worst: {worst.op_name} at"
            f" {worst.rmse_over_scale:.3g}), but FIQ loses no accuracy beyond noise, so keeping"
            f" {'it' if n == 1 else 'them'} in float is not needed.")


def _wide_range(report: Report, fact: Fact) -> str:
    widest = fact.layer
    return (f"Layer {widest.index} ({widest.op_name}) has by far the widest range ({fmt_number(widest.range)}) but"
            f" an RMSE/scale of {widest.rmse_over_scale:.3f}, so the rule does not flag it. A wide range spreads the"
            " 256 int8 steps thinly; if the selective model does not recover the whole gap, try keeping this layer"
            f" in float too (for example with --first-layers {widest.index + 1}) or use --recommend search.")


def _primary_output(report: Report, fact: Fact) -> str:
    chosen = report.settings.primary_output
    return (f"The model has {len(report.model.outputs)} outputs; the main numbers are about output {fact.subject}"
            f" ({'--primary-output' if chosen else 'the first with labels'}), and every output is in the per-output"
            " table.")


def _unlabelled_output(report: Report, fact: Fact) -> str:
    return f"Output {fact.subject} has no labels (no y_{fact.subject}): it is compared with float's output only."


_TEXTS = {
    "calibration_overlap": _calibration_overlap, "calibration_short": _calibration_short,
    "selection_overlap": _selection_overlap, "stateful": _stateful, "classes_missing": _classes_missing,
    "variant_failed": _variant_failed, "measurement_failed": _measurement_failed,
    "nonfinite_outputs": _nonfinite_outputs, "output_clipped": _output_clipped, "debugger_failed": _debugger_failed,
    "shared_scale": shared_scale_words.text,
    "target_not_met": _target_not_met,
    "keras_twin": _keras_twin, "task": _task, "labels_as_classes": _labels_as_classes, "user_metric": _user_metric,
    "user_metric_failed": _user_metric_failed, "bootstrap": _bootstrap, "latency_skipped": _latency_skipped,
    "latency_floor": _latency_floor,
    "rule_false_alarm": _rule_false_alarm, "wide_range": _wide_range, "primary_output": _primary_output,
    "unlabelled_output": _unlabelled_output, "tflite_changed": _tflite_changed,
    "quantization_aware": _quantization_aware,
}
