"""The pipeline: one model and its data in, every stage in order, report.json and artifacts out."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import tempfile
import traceback
from pathlib import Path
from typing import Callable


from reporter import __version__
from reporter.convert import converter as conv
from reporter.convert import litert, side
from reporter.convert.quantize import FiqQuantizer
from reporter.core import variants
from reporter.core.errors import FloatNotMeasuredError, InputError, RenderError, one_line, storage_problem
from reporter.core.files import folder_name, staged_folder
from reporter.core.progress import Progress
from reporter.debug import blame, debugger, overlays
from reporter.findings import derive as findings
from reporter.measure import evaluate, structure
from reporter.measure import metrics as qmetrics
from reporter.measure.measurer import HeadSpec, Measurer
from reporter.measure.signature import check_shapes as signature_check_shapes
from reporter.measure.task import Task
from reporter.model.report import (SCHEMA_VERSION, DatasetInfo, InputInfo, ModelInfo, OutputInfo, Report,
                                   VariantResult)
from reporter.render import formats as render
from reporter.run import inputs
from reporter.run.settings import RunSettings  # noqa: F401 - where callers have always found it
from reporter.search.recommendation import recommend_for


def ordered_variants(names) -> tuple:
    """Float first (it is every comparison's reference), then the rest in the registry's order
    (`RunSettings.check` has refused unknown names)."""
    return variants.ordered(names)


def run(settings: RunSettings) -> tuple[Report, Path]:
    """Runs every stage for one model and writes DIR/NAME/; returns the report and that folder.

    Raises InputError (nothing written) when the model or data cannot be used.
    """
    settings.check()
    variants = ordered_variants(settings.variants)
    name = settings.display_name
    progress = Progress(name, quiet=settings.quiet, listener=settings.listener)
    with staged_folder(settings.out, name, on_replace=progress.say) as folder:
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
    reference = report.variant("float")
    if reference is None or not reference.ok:  # nothing could be compared: written, but not a working run
        raise FloatNotMeasuredError(final, reference.error if reference is not None else "not built")
    return report, final


def _run_in(folder: Path, s: RunSettings, variants: tuple, progress: Progress) -> Report:
    # A second process converts DRQ (and float16, 16x8, int8 I/O) from the SavedModel while this one converts
    # float and goes on; it starts now, so that its TensorFlow imports while this one's does.
    side_conv, exporting = None, None
    try:
        if Path(s.model).suffix.lower() != ".tflite" and any(v in side.VARIANTS for v in variants) \
                and side.worth_it(Path(s.model), s.side_converter):
            side_conv = side.SideConverter()
            if Path(s.model).suffix.lower() in (".keras", ".h5"):  # the export too, while this process loads
                target = tempfile.mkdtemp(prefix=".savedmodel-", dir=folder)
                exporting = (target, side_conv.call(inputs.export_saved_model, str(s.model), s.trust_model, target))
        import tensorflow as tf  # imported here so that its start-up chatter lands in run.log
        from reporter.run import preload

        preload.start(s.formats)  # scikit-learn, matplotlib, Jinja, WeasyPrint: while TensorFlow converts
    except BaseException:  # SIGTERM or Ctrl-C while TensorFlow imports: the side process stops (and writes no
        if side_conv is not None:  # more into the staging folder) before that folder is removed
            side_conv.close()
        raise
    previous_lock = evaluate.set_timing_lock(_quiet_lock(side_conv, evaluate.set_timing_lock(None)))
    model = None
    try:
        with progress.stage("load", "model and data loaded"):
            model = inputs.load_model(s.model, trust=s.trust_model, scratch=folder)
            if exporting is not None and hasattr(model.make_converter, "adopt"):
                model.make_converter.adopt(*exporting)
            data = inputs.load_data(s.data, s.calibration_samples, s.code_dir, say=progress.say, model=model)
        if s.calibration_samples > len(data.x_calib):  # said once here, and in the report's warnings
            progress.say(f"asked for {s.calibration_samples:,} calibration samples; the data hold"
                         f" {len(data.x_calib):,}: calibrating on those")
        return _run_loaded(folder, s, variants, progress, model, data, tf, side_conv)
    finally:
        evaluate.set_timing_lock(previous_lock)
        if side_conv is not None:
            side_conv.close()
        if model is not None:  # the SavedModel exported once for the conversions (batch workers skip atexit)
            getattr(model.make_converter, "cleanup", lambda: None)()


def _quiet_lock(side_conv, outer):
    """The timing lock: the batch's (one model timed at a time across workers), and no conversion running on
    the side while a latency is timed."""
    return outer if side_conv is None else _QuietLock(side_conv, outer)


class _QuietLock:
    """Re-entered for every timing: waits for the side conversions, then holds `outer` if there is one."""

    def __init__(self, side_conv, outer):
        self.side_conv, self.outer = side_conv, outer

    def __enter__(self):
        self.side_conv.wait()
        if self.outer is not None:
            self.outer.__enter__()
        return self

    def __exit__(self, *exc):
        return self.outer.__exit__(*exc) if self.outer is not None else False


def _side_variants(side_conv, model, wanted, x_calib=None, calibrated: bool = False):
    """Hands the variants TensorFlow's converter makes from the SavedModel to the side process: those without
    calibration first (before float converts here), the calibrated ones once their data are bound."""
    if side_conv is None:
        return
    folder = model.saved_model_folder()
    if folder is None:
        return
    for variant in wanted:
        if variant in side.VARIANTS and (variant in variants.CALIBRATED) == calibrated:
            side_conv.submit(folder, variant, x_calib)


def _run_loaded(folder: Path, s: RunSettings, variants: tuple, progress: Progress, model, data, tf,
                side_conv=None) -> Report:
    name = s.display_name
    if model.is_tflite:
        float_model = model.tflite
    else:
        with progress.stage("convert", detail="float"):
            _side_variants(side_conv, model, variants)
            try:
                float_model = conv.convert(model.make_converter, "float", data.x_calib)
            except Exception as exc:  # noqa: BLE001 - the converter raises many kinds
                raise _conversion_error(model.path, exc) from exc
    names, shapes = _keras_outputs(model)
    try:
        sig = evaluate.signature(float_model, output_names=names)
        signature_check_shapes(sig, shapes)
    except ValueError as exc:
        raise InputError(model.path, str(exc)) from None
    data = inputs.bind(data, sig, model.path)
    _side_variants(side_conv, model, variants, data.x_calib, calibrated=True)
    data, heads = inputs.bind_labels(data, sig, model.path, s.primary_output)
    lead = next((h.port for h in heads if h.primary), sig.outputs[0])
    made_by = structure.producers(float_model)
    forced = _forced_tasks(s, sig, model.path)
    raw_labels = {name: y for name, (y, _) in data.labels.items()}
    reading = inputs.read_task(data.y, data.labels_are_classes, lead, made_by.get(lead.index, ""), data.source,
                               f"y_{lead.name}" if heads else "y", s.threshold, forced.get(lead.name))
    data = dataclasses.replace(data, y=reading.y, labels_are_classes=reading.task.classification)
    task = reading.task
    num_classes = task.num_classes
    head_specs = [_head_spec(h, data.source, made_by.get(h.port.index, ""), s.threshold, forced.get(h.port.name))
                  for h in heads]
    score = _task_score(task, data.y)
    user = _user_score(s, raw_labels, heads, lead.name, len(data.x))

    litert_models = litert.LiteRtModels(float_model, data.x_calib, side_conv.calibration if side_conv else None)
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

    m = Measurer(folder, data, task, progress, s.latency_runs, heads=head_specs, score=user or score,
                 fallback=score)
    results: dict[str, VariantResult] = {}
    for variant in variants:
        build, converter = _builder(variant, model, float_model, quantizer, litert_models, data.x_calib, side_conv)
        results[variant] = m.build_and_measure(variant, build, converter)
    if side_conv is not None and not litert_models.has_calibration():  # after the variants' latencies, before
        side_conv.submit_calibration(float_model, data.x_calib)      # the debugger and the search, which time none
    if m.score_error:  # the user's metric failed: the task's own metric is the main one for every model
        progress.say(f"--metric {s.metric} failed: {m.score_error} (traceback in run.log); the report reads"
                     f" {score.name if score else 'the output error'} instead")
        results = {k: m.restated(v) for k, v in results.items()}

    blame.blame_variants(m, float_model, results, litert_models, s.max_accuracy_drop)

    layers, recommendation, debugger_error = [], None, calibration_error
    if quantizer is not None and results["fiq"].ok:
        try:
            layers = debugger.fiq_layers(quantizer, results["fiq"], folder, data.x_calib, progress)
        except Exception as exc:  # noqa: BLE001 - the report is still useful without the debugger
            traceback.print_exc()
            progress.say(f"debugger FAILED: {one_line(exc)}")
            debugger_error = one_line(exc)
        else:
            layers, recommendation = recommend_for(m, s, quantizer, layers, float_model, results, litert_models)

    overlays.write_variant_overlays(folder, results, layers)

    return Report(
        schema_version=SCHEMA_VERSION,
        generated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__,
        tensorflow_version=tf.__version__,
        model=ModelInfo(
            name=name,
            source=s.shown_paths[0] if s.shown_paths else str(s.model),
            format=model.format,
            input_shape=list(sig.inputs[0].shape),
            inputs=[InputInfo(p.key, list(p.shape), p.dtype) for p in sig.inputs],
            task_reason=reading.reason,
            label_note=reading.note,
            outputs=[OutputInfo(h.name, h.key, list(next(p.shape for p in sig.outputs if p.key == h.key)),
                                h.task.kind,
                                h.task.num_classes, h.labelled, h.primary) for h in head_specs],
            num_classes=num_classes,
            task="multilabel" if task.multilabel else "segmentation" if task.dense else (
                "classification" if num_classes else "regression"),
            main_metric=m.score.name if m.score is not None else "",
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
        variants=[results[v] for v in ordered_variants(results)],  # with a whole-model 16x8 the search added
        layers=layers,
        recommendation=recommendation,
        timings_s=dict(progress.timings),
        settings=s.recorded(),
        debugger_error=debugger_error,
    )


def _conversion_error(path, exc) -> Exception:
    full = storage_problem(exc)
    if full is not None:  # the disk, not the model
        return full
    text = str(exc)
    if "TensorListReserve" in text or "read_variable" in text.lower():
        return InputError(path, inputs.KERAS3_RNN_HINT.format(names="LSTM/GRU"))
    return InputError(path, f"the model does not convert to TFLite: {one_line(exc)}")


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


def _builder(variant: str, model, float_model: bytes, quantizer, litert_models: litert.LiteRtModels,
             x_calib, side_conv=None) -> tuple[Callable[[], bytes], str]:
    """How `variant` is built, and by which converter (the registry says which can): float is the float
    model; FIQ comes from the one calibration; a float .tflite input, or a variant only LiteRT Quantizer
    makes, goes to LiteRT Quantizer; the rest to TensorFlow's converter."""
    if variant == "float":
        return (lambda: float_model), ("given" if model.is_tflite else conv.CONVERTER)
    if variant == "fiq" and quantizer is not None:
        return (lambda: quantizer.quantize([])), quantizer.converter
    if model.is_tflite or variants.BY_NAME[variant].converters[0] == variants.LITERT:
        return functools.partial(litert_models.build, variant), litert.CONVERTER
    if side_conv is not None and side_conv.has(variant):  # converted on the side: the same bytes
        return (lambda: side_conv.result(variant) or conv.convert(model.make_converter, variant, x_calib)), \
            conv.CONVERTER
    return (lambda: conv.convert(model.make_converter, variant, x_calib)), conv.CONVERTER


def _keras_outputs(model) -> tuple:
    """The Keras model's output names, in its order, and their shapes without the batch dimension (None, {}
    for a SavedModel folder or a .tflite: their signature names them)."""
    keras_model = model.keras_model
    names = list(getattr(keras_model, "output_names", None) or []) if keras_model is not None else []
    outputs = list(getattr(keras_model, "outputs", None) or []) if keras_model is not None else []
    if not names or len(names) != len(outputs):
        return None, {}
    return names, {n: tuple(o.shape[1:]) for n, o in zip(names, outputs)}


def _forced_tasks(s: RunSettings, sig, model_path) -> dict[str, str]:
    """--task by output name: "KIND" alone names the primary output's (the only one's) task; "OUTPUT=KIND"
    must name an output."""
    given = s.tasks()
    names = [p.name for p in sig.outputs]
    unknown = [n for n in given if n and n not in names]
    if unknown:
        raise InputError(model_path, f"--task {unknown[0]}=...: the model has no output {unknown[0]} (outputs:"
                                     f" {', '.join(names)})")
    found = {n: k for n, k in given.items() if n}
    if "" in given:
        lead = s.primary_output or names[0]
        if len(names) > 1 and not s.primary_output:
            raise InputError(model_path, f"--task {given['']}: the model has {len(names)} outputs"
                                         f" ({', '.join(names)}); say which, e.g. --task {names[0]}={given['']}")
        found.setdefault(lead, given[""])
    return found


def _task_score(task: Task, y):
    """The task's own main metric: accuracy (exact-match for multi-label), mean IoU for dense classes; None for
    a regression (its output error against float is its measure)."""
    from reporter.measure import scoring

    if task.dense:
        return scoring.MeanIoU(task, y)
    if task.classification:
        return scoring.Score(task, y, "exact-match accuracy" if task.multilabel else "accuracy")
    return None


def _user_score(s: RunSettings, labels: dict, heads: list, lead: str, n: int):
    """The user's --metric, loaded (one line naming it when it cannot be), called with the labels as given."""
    if not s.metric:
        return None
    from reporter.measure import scoring
    from reporter.run import metric

    name, fn = metric.load(s.metric, s.data if Path(str(s.data)).exists() else None)
    if heads:
        y_true = {h.port.name: labels.get(h.port.name) for h in heads}
        return scoring.UserScore(name, fn, y_true, n, s.metric_mode != "min", primary=lead)
    return scoring.UserScore(name, fn, next(iter(labels.values())), n, s.metric_mode != "min")


def _head_spec(head: inputs.Head, source, made_by: str, threshold: float, forced=None) -> HeadSpec:
    """What an output of a model with several outputs means: from its labels (classes, binary sigmoid,
    regression), or without labels from its width and the op that makes it (`made_by`): class scores, one
    sigmoid unit (LOGISTIC), or a value compared with float."""
    size = head.port.size
    y = head.y
    if y is not None:
        reading = inputs.read_task(y, head.labels_are_classes, head.port, made_by, source, f"y_{head.port.name}",
                                   threshold, forced)
        task, y = reading.task, reading.y
    elif forced is not None:
        shape = tuple(head.port.allocated or head.port.shape)[1:]
        task = {"regression": Task(None), "binary": Task(2, binary_sigmoid=True, threshold=threshold),
                "multilabel": Task(size, multilabel=True, threshold=threshold), "classification": Task(size),
                "segmentation": Task(shape[-1] if shape else 1, dense=True)}[forced]
    elif size == 1 and made_by == "LOGISTIC":
        task = Task(2, binary_sigmoid=True, threshold=threshold)
    elif size > 1 and made_by == "LOGISTIC":
        task = Task(size, multilabel=True, threshold=threshold)
    else:
        task = Task(size if size > 1 else None)
    return HeadSpec(head.port.name, head.port.key, task, y, head.primary)
