"""The pipeline: one model and its data in, every stage in order, report.json and artifacts out."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import math
import time
import traceback
from pathlib import Path

import numpy as np

from reporter import __version__
from reporter.convert import converter as conv
from reporter.debug import blame
from reporter.debug import debugger
from reporter.measure import evaluate
from reporter.findings import derive as findings
from reporter.run import inputs
from reporter.core import judgement
from reporter.convert import litert
from reporter.search import recommend
from reporter.render import formats as render
from reporter.measure import structure
from reporter.measure import metrics as qmetrics
from reporter.search import engine as srch
from reporter.convert.quantize import FiqQuantizer
from reporter.measure.task import Task
from reporter.core.errors import InputError, QuantReportError, RenderError, one_line
from reporter.core.files import folder_name, staged_folder
from reporter.run.settings import RunSettings  # noqa: F401 - where callers have always found it
from reporter.run.progress import Progress
from reporter.model.report import (SCHEMA_VERSION, Alternative, DatasetInfo, GapStatus, Latency, ModelInfo, Recommendation, Report,
                             RuleResult, VariantResult)


def ordered_variants(variants) -> tuple:
    """Float first (it is every comparison's reference), then the rest in the canonical order
    (`RunSettings.check` has refused unknown names)."""
    wanted = set(variants) | {"float"}
    return tuple(v for v in conv.ALL_VARIANTS if v in wanted)


def run(settings: RunSettings) -> tuple[Report, Path]:
    """Runs every stage for one model and writes DIR/NAME/; returns the report and that folder.

    Raises InputError (nothing written) when the model or data cannot be used.
    """
    settings.check()
    variants = ordered_variants(settings.variants)
    name = settings.display_name
    progress = Progress(name, quiet=settings.quiet, listener=settings.listener)
    with staged_folder(settings.out, name) as folder:
        try:
            with progress.capture(folder / "run.log"):
                report = _run_in(folder, settings, variants, progress)
                report = findings.attach(report)
            with progress.stage("render", f"rendered {', '.join(settings.formats)}"):
                written, render_errors = render.write_reports(report, folder, settings.formats)
            for fmt, error in render_errors.items():
                progress.say(f"could not render {fmt}: {error}")
                with open(folder / "run.log", "a", encoding="utf-8") as log:
                    log.write(f"quant-report: could not render {fmt}: {error}\n")
        except BaseException:
            if settings.failure_log and (folder / "run.log").exists():
                with open(settings.failure_log, "ab") as log:
                    log.write((folder / "run.log").read_bytes())
            raise
    final = Path(settings.out) / folder_name(name)
    if written:
        progress.say("written: " + ", ".join(str(final / p.name) for p in written))
    if render_errors:  # the report was measured and the other formats kept, but the run did not fully work
        raise RenderError(final, render_errors)
    return report, final


def _run_in(folder: Path, s: RunSettings, variants: tuple, progress: Progress) -> Report:
    import tensorflow as tf  # imported here so that its start-up chatter lands in run.log

    with progress.stage("load", "model and data loaded"):
        model = inputs.load_model(s.model)
        data = inputs.load_data(s.data, s.calibration_samples)
    try:
        return _run_loaded(folder, s, variants, progress, model, data, tf)
    finally:  # the SavedModel exported once for the conversions (batch workers exit without atexit)
        getattr(model.make_converter, "cleanup", lambda: None)()


def _run_loaded(folder: Path, s: RunSettings, variants: tuple, progress: Progress, model, data, tf) -> Report:
    name = s.display_name
    if model.is_tflite:
        float_model = model.tflite
    else:
        with progress.stage("convert", detail="float"):
            try:
                float_model = conv.convert(model.make_converter, "float", data.x_calib)
            except Exception as exc:  # noqa: BLE001 - the converter raises many kinds
                raise _conversion_error(model.path, exc) from exc
    n_in, n_out = evaluate.io_counts(float_model)
    if (n_in, n_out) != (1, 1):
        raise InputError(model.path, f"the model has {n_in} input(s) and {n_out} output(s); quant-report measures"
                                     " models with one input and one output")
    in_shape, out_shape = evaluate.io_shapes(float_model)
    num_outputs = int(np.prod(out_shape[1:])) if len(out_shape) > 1 else 1
    num_classes = inputs.check_fit(data, in_shape, num_outputs, model.path)
    # A classifier with one output unit is a sigmoid head: class 1 when the output is at least 0.5.
    task = Task(num_classes, binary_sigmoid=num_classes is not None and num_outputs == 1)

    litert_models = _LiteRtModels(float_model, data.x_calib)
    quantizer, calibration_error = None, None
    if "fiq" in variants:
        try:
            with progress.stage("calibrate", "calibrated once (FIQ, debugger, search)"):
                if model.is_tflite:
                    quantizer = litert_models.quantizer()
                    quantizer.calibration()
                else:
                    quantizer = FiqQuantizer(model.make_converter, data.x_calib, float_model=float_model)
        except Exception as exc:  # noqa: BLE001 - FIQ is then recorded as failed, the rest goes on
            traceback.print_exc()
            calibration_error = one_line(exc)
            progress.say(f"calibration FAILED: {calibration_error}")
        if quantizer is not None:
            _check_forced(quantizer, float_model, s, model.path)

    results: dict[str, VariantResult] = {}
    outputs: dict[str, np.ndarray] = {}
    for variant in variants:
        build, converter = None, conv.CONVERTER
        if variant == "float":
            build = lambda: float_model  # noqa: E731
            converter = "given" if model.is_tflite else conv.CONVERTER
        elif variant == "fiq" and quantizer is not None:
            build = lambda: quantizer.quantize([])  # noqa: E731
            converter = quantizer.converter
        elif model.is_tflite or variant in litert.ONLY_LITERT:
            build = functools.partial(litert_models.build, variant)
            converter = litert.CONVERTER
        results[variant] = _variant(variant, folder, model, data, s, progress, task, outputs, build, converter)

    _blame_variants(folder, float_model, data, s, progress, task, outputs, results, litert_models)

    layers, recommendation, debugger_error = [], None, calibration_error
    if quantizer is not None and results["fiq"].ok:
        layers, recommendation, debugger_error = _debug_and_recommend(
            folder, data, s, progress, task, outputs, results, quantizer, float_model, litert_models
        )

    _write_overlays(folder, results, layers)

    return Report(
        schema_version=SCHEMA_VERSION,
        generated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__,
        tensorflow_version=tf.__version__,
        model=ModelInfo(
            name=name,
            source=s.shown_paths[0] if s.shown_paths else str(s.model),
            format=model.format,
            input_shape=in_shape,
            num_classes=num_classes,
            task="classification" if num_classes else "regression",
            stateful=structure.has_variable_tensors(float_model),
            binary_sigmoid=task.binary_sigmoid,
            largest_weight_elements=structure.largest_weight_elements(float_model),
        ),
        dataset=DatasetInfo(
            source=s.shown_paths[1] if s.shown_paths else str(s.data),
            num_eval=int(len(data.x)),
            num_calibration=int(len(data.x_calib)),
            calibration_overlaps_eval=data.calibration_overlaps_eval,
            calibration_source=data.calibration_source,
            fingerprint=qmetrics.fingerprint(data.x, data.y),
        ),
        variants=[results[v] for v in variants],
        layers=layers,
        recommendation=recommendation,
        timings_s=dict(progress.timings),
        settings=s.recorded(),
        debugger_error=debugger_error,
    )


def _conversion_error(path, exc) -> InputError:
    text = str(exc)
    if "TensorListReserve" in text or "read_variable" in text.lower():
        return InputError(path, inputs.KERAS3_RNN_HINT.format(names="LSTM/GRU"))
    return InputError(path, f"the model does not convert to TFLite: {one_line(exc)}")


def _blame_variants(folder, float_model, data, s, progress, task: Task, outputs, results, litert_models):
    """Per-layer error of every quantized variant against float, and for a variant other than FIQ that loses
    accuracy, the model with the blamed layers kept in float (LiteRT Quantizer), measured."""
    quantized = [name for name, v in results.items() if name != "float" and v.ok]
    if not quantized or not results["float"].ok:
        return
    with progress.stage("layer error", f"per-layer error of {', '.join(quantized)} against float"):
        for name in quantized:
            model = (folder / f"{name}.tflite").read_bytes()
            errors = blame.layer_errors(float_model, model, data.x_calib)
            results[name] = dataclasses.replace(results[name], layer_errors=errors)
            if errors.error is None:
                (folder / f"layer_errors_{name}.csv").write_text(blame.csv_text(errors), encoding="utf-8")
    if not task.classification:
        return  # no accuracy to lose: the per-layer error is the evidence
    float_preds = task.classes(outputs["float"])

    def loses(name: str, preds) -> bool:
        label = findings.NAMES.get(name, name)
        return judgement.accuracy_gap(data.y, float_preds, preds, s.max_accuracy_drop, label).status == "gap"

    for name in quantized:
        v = results[name]
        if name not in blame.FIXABLE or v.layer_errors is None or not loses(name, task.classes(outputs[name])):
            continue
        fixed_name = f"{name}_fix"

        def measure(model, fixed_name=fixed_name):
            out = _measure(fixed_name, model, folder, data, s, progress, task, outputs)
            return dataclasses.replace(out, converter=litert.CONVERTER)

        with progress.stage("selective", f"{name}: blamed layers kept in float (LiteRT Quantizer)"):
            found = blame.fix(
                name, v.layer_errors,
                build=lambda layers, name=name: litert_models.build(name, {n: "float" for n in layers}),
                measure=measure,
                still_loses=lambda r: r.name in outputs and loses(r.name, task.classes(outputs[r.name])),
                code=lambda layers, name=name: litert.reproduction_code(name, {n: "float" for n in layers}, (),
                                                                         len(data.x_calib)))
        results[name] = dataclasses.replace(v, fix=found)


def _write_overlays(folder, results, layers):
    """Model Explorer overlays for each quantized variant: one node-data file per metric, keyed by the op
    output tensor names of <variant>.tflite (a failure costs the overlays only)."""
    from reporter.debug import overlays

    snr = overlays.Metric("snr_db", "SNR against float (dB)", higher_is_better=True)
    lost = overlays.Metric("snr_lost_db", "SNR lost at this op (dB)", higher_is_better=False)
    local = overlays.Metric("rmse_over_scale", "RMSE/scale (debugger, per layer)", higher_is_better=False)
    propagated = overlays.Metric("propagated_rmse_over_scale", "RMSE/scale accumulated from the input",
                                 higher_is_better=False)
    for name, v in list(results.items()):
        if name == "float" or not v.ok:
            continue
        per_metric = {}
        errors = v.layer_errors
        if errors is not None and errors.layers:
            per_metric[snr] = {e.tensor_name: math.inf if e.snr_db is None else e.snr_db for e in errors.layers}
            per_metric[lost] = {e.tensor_name: e.snr_drop_db for e in errors.layers if e.snr_drop_db is not None}
        if name == "fiq" and layers:
            per_metric[local] = {layer.tensor_name: layer.rmse_over_scale for layer in layers}
            per_metric[propagated] = {layer.tensor_name: layer.propagated_rmse_over_scale for layer in layers
                                      if layer.propagated_rmse_over_scale is not None}
        if not per_metric:
            continue
        try:
            written = overlays.write_overlays(folder, (folder / f"{name}.tflite").read_bytes(), f"{name}.tflite",
                                              per_metric)
        except Exception:  # noqa: BLE001 - the report stands without its overlays
            traceback.print_exc()
            continue
        results[name] = dataclasses.replace(v, overlays=[p.name for p in written])


class _LiteRtModels:
    """LiteRT Quantizer on the float variant, set up on first use (one calibration for all)."""

    def __init__(self, float_model: bytes, x_calib):
        self._float_model, self._x_calib, self._quantizer = float_model, x_calib, None

    def quantizer(self) -> litert.LiteRtQuantizer:
        if self._quantizer is None:
            self._quantizer = litert.LiteRtQuantizer(self._float_model, self._x_calib)
        return self._quantizer

    def build(self, variant: str, layers=None, ops=()) -> bytes:
        if variant not in litert.RECIPES:
            raise ValueError(f"{variant} cannot be made by LiteRT Quantizer (from a float .tflite the variants are"
                             f" float, {', '.join(litert.RECIPES)})")
        return self.quantizer().build(variant, layers, ops)


def _variant(variant, folder, model, data, s, progress, task, outputs, build=None,
             converter: str = "") -> VariantResult:
    """Converts (or builds with `build`) and measures one variant; a failure is recorded, not raised.

    Only a model that does not convert or does not run fails the variant; a measurement that fails
    after that is recorded in `measurement_errors` by `_measure`.
    """
    try:
        with progress.stage("convert", detail=variant):
            tflite = build() if build else conv.convert(model.make_converter, variant, data.x_calib)
        result = _measure(variant, tflite, folder, data, s, progress, task, outputs)
        return dataclasses.replace(result, converter=converter)
    except QuantReportError:
        raise
    except Exception as exc:  # noqa: BLE001 - one variant's failure must not stop the others
        traceback.print_exc()  # into run.log
        progress.say(f"{variant} FAILED: {one_line(exc)}")
        return VariantResult(name=variant, status="failed", error=one_line(exc), converter=converter)


def _measure(variant, tflite: bytes, folder, data, s, progress, task: Task, outputs) -> VariantResult:
    """Runs the model on the evaluation data (a failure there raises: the variant failed) and takes each
    measurement on its own: one that fails leaves its field empty and its error in measurement_errors."""
    (folder / f"{variant}.tflite").write_bytes(tflite)
    t0 = time.perf_counter()
    errors: dict[str, str] = {}

    def attempt(measurement: str, take):
        try:
            return take()
        except QuantReportError:
            raise
        except Exception as exc:  # noqa: BLE001 - the other measurements and the variant stand
            traceback.print_exc()  # into run.log
            errors[measurement] = one_line(exc)
            progress.say(f"{variant}: {measurement} not measured: {errors[measurement]}")
            return None

    def analyze():
        text = structure.analyzer_text(tflite)
        (folder / f"analyzer_{variant}.txt").write_text(text, encoding="utf-8")
        return text

    with progress.stage("analyze", detail=variant):
        analyzer = attempt("analyzer", analyze)
        structure_counts = attempt("ops", lambda: (structure.ops(tflite), structure.tensor_types(tflite)))
    ops, types = structure_counts if structure_counts is not None else ({}, {})
    with progress.stage("evaluate", detail=variant):
        out = evaluate.predict(tflite, data.x)  # a model that does not run fails the variant
        outputs[variant] = out
        metrics = output_error = None
        if task.classification:
            metrics = attempt("metrics", lambda: _classification_metrics(variant, out, data, task, outputs))
        elif variant != "float" and "float" in outputs:
            output_error = attempt("output_error", lambda: qmetrics.output_error(out, outputs["float"]))
    latency = None
    if s.latency_runs > 0:  # --latency-runs 0 skips timing: not a failure, nothing to record
        with progress.stage("latency", detail=variant):
            timed = attempt("latency", lambda: evaluate.latency_ms(tflite, data.x[:1], runs=s.latency_runs))
        if timed is not None:
            latency = Latency(median=timed[0], p90=timed[1], runs=timed[2])
    quality = f"accuracy {metrics.accuracy:.1%}" if metrics else (
        f"output MSE vs float {output_error.mse:.3g}" if output_error else
        ("reference output" if variant == "float" else "quality not measured"))
    progress.say(f"{variant}: {len(tflite):,} bytes, {quality} on {len(data.x)} samples"
                 f" ({time.perf_counter() - t0:.1f} s to measure)")
    return VariantResult(
        name=variant,
        status="ok",
        size_bytes=len(tflite),
        ops=ops,
        tensor_types=types,
        latency_ms=latency,
        metrics=metrics,
        output_error=output_error,
        analyzer_text=analyzer or "",
        measurement_errors=errors,
    )


def _classification_metrics(variant, out, data, task: Task, outputs):
    preds = task.classes(out)
    float_preds = task.classes(outputs["float"]) if "float" in outputs else None
    metrics = qmetrics.classification(data.y, preds, task.num_classes, float_preds, task.scores(out))
    # Discordant counts against float, and against FIQ for the models that fix it (McNemar).
    references = ("float", "fiq") if variant in FIXES_FIQ else ("float",)
    if variant.endswith("_fix"):
        references += (variant[: -len("_fix")],)  # a variant's fix, against the variant it fixes
    if variant.startswith("alt_"):
        references += ("selective",)  # a lighter scheme for the recommended layers, against keeping them float
    paired = {ref: qmetrics.paired(data.y, task.classes(outputs[ref]), preds)
              for ref in references if ref != variant and ref in outputs}
    return dataclasses.replace(metrics, paired=paired, correct_bits=qmetrics.pack_correct(preds == data.y))


FIXES_FIQ = ("selective", "rule", *(f"alt_{scheme}" for scheme in litert.LAYER_SCHEMES))  # compared with FIQ as well as float


def _check_forced(quantizer: FiqQuantizer, float_model: bytes, s: RunSettings, model_path):
    """--keep-float names must be tensors of the model and --keep-float-ops its op types: TF would
    silently ignore a name that matches nothing."""
    from reporter.convert.quantize import UnknownNodeError

    try:
        quantizer.check_nodes(s.keep_float)
    except UnknownNodeError as exc:
        raise InputError(model_path, f"--keep-float: {exc}") from None
    present = structure.ops(float_model)
    unknown = [op for op in s.keep_float_ops if op not in present]
    if unknown:
        raise InputError(model_path, f"--keep-float-ops: the model has no {', '.join(unknown)} op"
                                     f" (its ops: {', '.join(sorted(present))})")


def _debug_and_recommend(folder, data, s, progress, task: Task, outputs, results, quantizer, float_model,
                         litert_models):
    try:
        if quantizer.method == litert.METHOD:  # the TFLite debugger reads TF-converter models only
            errors = results["fiq"].layer_errors
            if errors is None or errors.error:
                raise RuntimeError(f"the per-layer comparison of FIQ with float failed: "
                                   f"{errors.error if errors else 'not run'}")
            layers = blame.layer_stats(errors, (folder / "fiq.tflite").read_bytes())
        else:
            with progress.stage("debug", "quantization debugger run on FIQ (local and propagated error)"):
                layers, csv_text = debugger.layer_statistics(quantizer, data.x_calib)
                (folder / "layer_stats.csv").write_text(csv_text, encoding="utf-8")
    except Exception as exc:  # noqa: BLE001 - the report is still useful without the debugger
        traceback.print_exc()
        progress.say(f"debugger FAILED: {one_line(exc)}")
        return [], None, one_line(exc)

    # The seed rule reads per-layer (local) rmse/scale; a LiteRT Quantizer model has only the error
    # accumulated from the input, which would flag every layer after the first bad one: no rule then.
    local_view = quantizer.method != litert.METHOD
    if local_view:
        layers = recommend.mark_suspects(layers, s.suspect_threshold, s.first_layers)
    rule_nodes = recommend.denylist(layers)
    classification = task.classification
    y = data.y if classification else None
    preds = {k: task.classes(v) for k, v in outputs.items()} if classification else {}
    gap = judgement.fiq_gap(y, preds.get("float"), preds.get("fiq"), s.max_accuracy_drop)
    all_nodes = [layer.tensor_name for layer in layers]
    base = dict(threshold=s.suspect_threshold, first_layers=s.first_layers, method=s.recommend,
                denylisted_ops=list(s.keep_float_ops), forced_nodes=list(s.keep_float),
                quantizer=quantizer.method, quantizer_note=quantizer.note)
    rule = RuleResult(s.suspect_threshold, s.first_layers, rule_nodes) if local_view else None
    gap_status = GapStatus(gap.status, gap.drop, gap.p_value, gap.drop, gap.reason)
    if gap.status == "no_gap":
        return layers, Recommendation(
            denylisted_nodes=[], code="", selective=None, gap=gap_status, rule=rule,
            summary="", **base), None

    sel = recommend.selection(data, s.calibration_samples, s.selection_samples, classification)
    float_sel = evaluate.predict(float_model, sel.x)
    candidates = recommend.Candidates(quantizer, s.keep_float_ops, sel, float_sel, classification,
                                      task.binary_sigmoid)
    pol, target_text = recommend.policy(s.max_accuracy_drop, classification, s.search_budget)
    forced = frozenset(s.keep_float)
    search_result = None
    if s.recommend == "search":
        with progress.stage("search"):
            flow = structure.dataflow(quantizer.calibrated or float_model)
            trace = srch.search(recommend.search_layers(layers, flow), candidates, pol, forced)
        chosen = recommend.in_model_order(trace.chosen.nodes, layers)
        with progress.stage("search", f"searched {trace.evaluations} candidates in {trace.seconds:.1f} s:"
                                      f" {len(chosen)} layer(s) in float"):
            steps = recommend.steps_on_evaluation(trace, candidates, layers, data, outputs["float"],
                                                  classification,
                                                  max(3, s.latency_runs // 10) if s.latency_runs else 0,
                                                  task.binary_sigmoid)
        search_result = recommend.search_result(trace, steps, sel, target_text, s.search_budget, layers)
    else:
        chosen = recommend.in_model_order(set(rule_nodes) | forced, layers)

    selective, size_cost = None, None
    fiq = results.get("fiq")
    if chosen or s.keep_float_ops:
        selective = _build_measured("selective", chosen, all_nodes, candidates, folder, data, s, progress,
                                    task, outputs, results)
        if selective.ok and fiq is not None and fiq.ok:
            size_cost = selective.size_bytes - fiq.size_bytes
    if selective is not None and selective.ok and classification:
        gap = judgement.after_fix(gap, y, preds["float"], task.classes(outputs["selective"]), s.max_accuracy_drop)
        gap_status = GapStatus(gap.status, gap.drop, gap.p_value, gap_status.fiq_drop, gap.reason)
    if search_result is not None and sel.heldout is not None and classification and selective is not None \
            and selective.ok:
        held = {k: float(np.mean(preds_k[sel.heldout] == y[sel.heldout])) for k, preds_k in
                (("float", preds["float"]), ("fiq", preds["fiq"]), ("selective", task.classes(outputs["selective"])))}
        search_result = dataclasses.replace(
            search_result, selection_data=dataclasses.replace(search_result.selection_data, heldout_accuracy=held))

    alternatives = []
    if chosen and selective is not None and selective.ok:
        schemes = litert.MIXED_SCHEMES if quantizer.method == litert.METHOD else ("float", *litert.MIXED_SCHEMES)
        alternatives = _alternatives(chosen, schemes, litert_models, folder, data, s, progress, task, outputs,
                                     results)
    if s.recommend == "search" and rule_nodes:
        rule = _measure_rule(rule, set(rule_nodes) | forced, all_nodes, candidates, folder, data, s, progress,
                             task, outputs, results)
    rec = Recommendation(
        denylisted_nodes=chosen,
        code=_reproduction_code(quantizer, chosen, s, len(data.x_calib)) if selective else "",
        summary="",  # worded by the findings
        selective=selective, size_cost_bytes=size_cost, gap=gap_status, search=search_result, rule=rule,
        alternatives=alternatives, **base,
    )
    return layers, rec, None


def _reproduction_code(quantizer, chosen, s, calibration_samples: int) -> str:
    if quantizer.method == litert.METHOD:
        return litert.reproduction_code("fiq", {n: "float" for n in chosen}, s.keep_float_ops, calibration_samples)
    return conv.reproduction_code(chosen, list(s.keep_float_ops), calibration_samples)


def _alternatives(chosen, schemes, litert_models, folder, data, s, progress, task, outputs,
                  results) -> list[Alternative]:
    """The recommended layers in 16x8 or dynamic range instead of float (LiteRT Quantizer; TF's converter
    cannot mix schemes), each built and measured like the recommended model. When TF's converter made
    the recommended model, LiteRT Quantizer's model with the same layers in float is measured too, so
    that the scheme's effect is not mistaken for the converter's."""
    found = []
    try:
        plain = litert_models.build("fiq", None, s.keep_float_ops)
    except Exception as exc:  # noqa: BLE001 - LiteRT Quantizer cannot quantize this model: say so, go on
        traceback.print_exc()
        return [Alternative(scheme, list(chosen), error=one_line(exc)) for scheme in schemes]
    for scheme in schemes:
        name = f"alt_{scheme}"
        try:
            with progress.stage("selective", f"{name}: the recommended layers in {scheme} (LiteRT Quantizer)"):
                model = litert_models.build("fiq", {n: scheme for n in chosen}, s.keep_float_ops)
            if model == plain:  # the scheme does not apply to these layers: nothing to measure
                found.append(Alternative(scheme, list(chosen), applicable=False))
                continue
            measured = _measure(name, model, folder, data, s, progress, task, outputs)
            measured = dataclasses.replace(measured, converter=litert.CONVERTER, accuracy_gap_recovered=(
                recommend.gap_recovered(results.get("float"), results.get("fiq"), measured)))
            found.append(Alternative(scheme, list(chosen), measured))
        except Exception as exc:  # noqa: BLE001 - record and go on
            traceback.print_exc()
            progress.say(f"{name} FAILED: {one_line(exc)}")
            found.append(Alternative(scheme, list(chosen), error=one_line(exc)))
    return found


def _build_measured(name, nodes, all_nodes, candidates, folder, data, s, progress, task, outputs, results):
    """Builds the FIQ model with `nodes` in float and measures it like every variant."""
    why_not = debugger.check_not_everything(nodes, all_nodes)
    if why_not:
        return VariantResult(name=name, status="failed", error=why_not)
    try:
        with progress.stage("selective", f"{name} model built with {len(nodes)} layer(s) in float"):
            tflite = candidates.build(nodes)
        result = _measure(name, tflite, folder, data, s, progress, task, outputs)
    except Exception as exc:  # noqa: BLE001 - record and go on
        traceback.print_exc()
        progress.say(f"{name} model FAILED: {one_line(exc)}")
        return VariantResult(name=name, status="failed", error=one_line(exc))
    return dataclasses.replace(
        result, accuracy_gap_recovered=recommend.gap_recovered(results.get("float"), results.get("fiq"), result),
        converter=candidates.quantizer.converter)


def _measure_rule(rule, nodes, all_nodes, candidates, folder, data, s, progress, task, outputs, results):
    """The seed rule's pick, built and measured beside the search's, for comparison."""
    measured = _build_measured("rule", recommend.in_model_order(nodes, []), all_nodes, candidates, folder, data, s,
                               progress, task, outputs, results)
    score = None
    if measured.ok:
        score = candidates(frozenset(nodes)).score
    return dataclasses.replace(rule, selective=measured, selection_score=score,
                               accuracy_gap_recovered=measured.accuracy_gap_recovered, error=measured.error)
