"""The pipeline: one model and its data in, every stage in order, report.json and artifacts out.

After loading, each stage takes the run context (reporter.pipeline.context): the float model, the data bound to
it and the task, the metrics and the quantizer, so that a stage never needs a long parameter list.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import functools
import tempfile
import traceback
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import numpy as np

from reporter.core.version import __version__, tensorflow_version
from reporter.convert import converter as conv
from reporter.convert import contained, litert, side
from reporter.convert.quantize import FiqQuantizer
from reporter.core import heap, lifetime, targets, variants
from reporter.core.errors import (FloatNotMeasuredError, InputError, QuantReportError, RenderError, StorageError,
                                  one_line, storage_problem)
from reporter.core.files import as_the_user_knows, folder_name, staged_folder, write_atomic
from reporter.core.progress import Progress
from reporter.debug import blame, debugger, overlays
from reporter.measure import engines, evaluate, kernels, shared_scale, structure
from reporter.measure import metrics as qmetrics
from reporter.measure.measurer import Measurer
from reporter.measure.task import KindError
from reporter.measure.signature import check_shapes as signature_check_shapes
from reporter.model.data import Dataset
from reporter.model.settings import Settings
from reporter.model.report import (SCHEMA_VERSION, DatasetInfo, InputInfo, LayerStat, ModelInfo, OutputInfo,
                                   Recommendation, Report, VariantResult)
from reporter.render import formats as render
from reporter.inputs import binding, labels, metric, model_loading, recipes, task_reading
from reporter.inputs import described as keras_described
from reporter.pipeline import beside, conclude, on_target, repairs
from reporter.pipeline.context import Quantizer, RunContext, RunStart
from reporter.inputs.data_loading import load_data
from reporter.inputs.model_loading import LoadedModel
from reporter.inputs.settings import RunSettings  # noqa: F401 - where callers have always found it
from reporter.search import output_range
from reporter.search.recommendation import Asked, recommend_for


def ordered_variants(names) -> tuple:
    """Float first (it is every comparison's reference), then the rest in the registry's order
    (`RunSettings.check` has refused unknown names)."""
    return variants.ordered(names)


def run(settings: RunSettings) -> tuple[Report, Path]:
    """Runs every stage for one model and writes DIR/NAME/; returns the report and that folder.

    Raises InputError (nothing written) when the model or data cannot be used.
    """
    settings.check()
    name = settings.display_name
    try:
        return _run_staged(settings, name)
    except Exception as exc:
        full = _storage_failure(exc)
        if full is None:
            raise
        # the disk refused a write: named by the folder the user gave, not by a file inside the staging folder
        raise full.at(as_the_user_knows(full.path, settings.out, name)) from exc


def _storage_failure(exc: Exception) -> Optional[StorageError]:
    """The disk's refusal behind `exc`; None for anything else, and for an error quant-report already said in
    its own words (a model file that cannot be read is not a write that failed)."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, QuantReportError):
        return None
    return storage_problem(exc)


def _run_staged(settings: RunSettings, name: str) -> tuple[Report, Path]:
    progress = Progress(name, quiet=settings.quiet, listener=settings.listener)
    with staged_folder(settings.out, name, on_replace=progress.say) as folder:
        try:
            # the side process and the contained child (`helpers`) stop once the reports are written (the PDF is laid
            # out by one of them while this process writes the other formats), while their output still goes to
            # run.log, and before the staging folder goes
            with heap.frozen_for_the_run(), progress.capture(folder / "run.log"), lifetime.spawn_without_main(), \
                    lifetime.run_tempdir(), contextlib.ExitStack() as helpers:
                report, images, helper = _run_in(folder, settings, progress, helpers)
                with progress.stage("render", f"rendered {', '.join(settings.formats)}"):
                    heap.freeze()  # the report and the libraries that draw and lay it out: skipped by collections
                    written, render_errors = render.write_reports(report, folder, settings.formats, images, helper)
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
    reference = report.variant(variants.FLOAT)
    if reference is None or not reference.ok:  # nothing could be compared: written, but not a working run
        raise FloatNotMeasuredError(final, reference.error if reference is not None else "not built")
    return report, final


def _run_in(folder: Path, s: RunSettings, progress: Progress,
            helpers: contextlib.ExitStack) -> tuple[Report, Optional[dict], Optional[object]]:
    """The measured report with its findings, its charts when a format shows them (None: drawn when it is
    rendered), drawn while the side process can draw some of them, and the helper process that can lay out the PDF
    (None: none). The processes it starts are stopped by `helpers` (on SIGTERM or Ctrl-C too: before the staging
    folder is removed, so that none writes into it any more)."""
    # A second process converts DRQ (and float16, 16x8, int8 I/O) from the SavedModel while this one converts
    # float and goes on; it starts now, so that its TensorFlow imports while this one's does.
    side_conv, exporting, child, described = None, None, None, None
    if variants.FIQ in s.variants and Path(s.model).suffix.lower() != ".tflite":
        child = contained.Child()  # calibrates where a native crash cannot end the run
        helpers.callback(child.close)
    if Path(s.model).suffix.lower() != ".tflite" and any(v in side.VARIANTS for v in s.built_variants) \
            and side.worth_it(Path(s.model), s.side_converter):
        side_conv = side.SideConverter()
        helpers.callback(side_conv.close)
        if Path(s.model).suffix.lower() in (".keras", ".h5"):  # it opens the model (and describes it to this
            target = tempfile.mkdtemp(prefix=".savedmodel-", dir=folder)  # process, which need not load it
            opened = (str(s.model), s.trust_model)  # too) and exports it (reporter.inputs.described)
            described = side_conv.call(keras_described.describe, *opened, s.custom_objects, s.code_dir, s.target)
            exporting = (target, side_conv.call(keras_described.export_described, *opened, target,
                                                s.custom_objects, s.code_dir, s.target))
    if child is not None and side_conv is None:  # two TensorFlow imports on two cores: the child's at once
        child.warm()
    if Path(s.model).suffix.lower() != ".tflite":  # a float .tflite is measured and quantized by LiteRT: no
        with heap.imports():  # its 560,000 objects kept out of Python's collections
            import tensorflow  # noqa: F401 - TensorFlow (2.5 s); imported here, its start-up chatter in run.log
    from reporter.pipeline import preload

    # scikit-learn, matplotlib, Jinja (and WeasyPrint, unless a helper process lays out the PDF): while TensorFlow
    # converts
    preload.start([f for f in s.formats if f != "pdf"] if child is not None or side_conv is not None else s.formats)
    background, ahead = contained.Background(), {}
    previous_lock = evaluate.set_timing_lock(beside.quiet_lock(side_conv, evaluate.set_timing_lock(None), background))
    model = None
    try:
        if child is not None and described is not None:  # this process waits for the side process's description
            child.warm()  # instead of loading the model: the child's TensorFlow import meanwhile
        with progress.stage("load", "model and data loaded"):
            opening = dict(trust=s.trust_model, scratch=folder, custom_objects=s.custom_objects, code_dir=s.code_dir,
                           target=s.target)
            model = keras_described.load_described(s.model, described.result, **opening) if described is not None \
                else model_loading.load_model(s.model, **opening)
            if exporting is not None and hasattr(model.make_converter, "adopt"):
                model.make_converter.adopt(*exporting)
            data = load_data(s.data, s.calibration_samples, s.code_dir, say=progress.say, model=model,
                             timeout=s.data_timeout)
            model.fit_twin(data.x)  # a Keras 3 recurrent model's twin takes the data's sequence length
        if child is not None and side_conv is not None and described is None:  # a third import: once this one and
            child.warm()  # the load are done, while the side process exports and converts
        if s.calibration_samples > len(data.x_calib):  # said once here, and in the report's warnings
            progress.say(f"asked for {s.calibration_samples:,} calibration samples; the data hold"
                         f" {len(data.x_calib):,}: calibrating on those")
        start = RunStart(s, folder, progress, side_conv, background, ahead)
        report = conclude.attach(_run_loaded(start, model, data, child))
        _write_input_transform(report, folder)  # the findings, decided and worded, and what they ask of the host
        # the charts, shared with the side process, else with the contained child (idle by now), which then lays out
        # the PDF
        helper = side_conv or (child.helper() if child is not None else None)
        return report, beside.charts(report, s.formats, helper, ahead), helper
    finally:
        evaluate.set_timing_lock(previous_lock)
        if model is not None:  # the SavedModel exported once for the conversions (batch workers skip atexit)
            getattr(model.make_converter, "cleanup", lambda: None)()


def _side_variants(start: RunStart, model: LoadedModel, x_calib=None, calibrated: bool = False):
    """Hands the variants TensorFlow's converter makes from the SavedModel to the side process: those without
    calibration first (before float converts here), the calibrated ones once their data are bound."""
    if start.side is None:
        return
    folder = model.saved_model_folder()
    if folder is None:
        return
    for variant in start.variants:
        if variant in side.VARIANTS and (variant in variants.CALIBRATED) == calibrated:
            start.side.submit(folder, variant, x_calib)


class _Debugged(NamedTuple):
    """What the debugger and the recommendation found: the per-layer table, the measured recommendation (None
    without one) and why the calibration or the debugger failed (None: neither did)."""

    layers: list[LayerStat]
    recommendation: Optional[Recommendation]
    error: Optional[str]


def _write_input_transform(report: Report, folder: Path):
    """The host's standardization of the input beside the model that needs it (a repair that moved the model's
    normalization off it): input_transform.json, {"model", "input", "subtract", "divide"}."""
    import json

    decision = report.findings.decision if report.findings is not None else None
    if decision is None or decision.input_transform is None:
        return
    t = decision.input_transform
    data = {"model": decision.file, "input": t.input, "subtract": t.subtract, "divide": t.divide,
            "how": "x_model = (x - subtract) / divide, per feature, before the model reads x"}
    write_atomic(folder / "input_transform.json", (json.dumps(data, indent=2) + "\n").encode("utf-8"))


def _run_loaded(start: RunStart, model: LoadedModel, data: Dataset,
                child: Optional[contained.Child] = None) -> Report:
    """The stages after loading, in order: each reads the run context. `child` is where the calibration runs
    (None: in this process)."""
    ctx = _prepare(start, model, data)
    ctx, calibration_error = _calibrate(ctx, child)
    m, results, views = _measure(ctx, child.crashed if child is not None else None)
    debugged = _debug(ctx, m, results, calibration_error, views)
    results, checked = on_target.check_all(ctx, m, results, debugged.recommendation)
    debugged = debugged._replace(recommendation=checked)
    overlays.write_variant_overlays(ctx.folder, results, debugged.layers)
    return repairs.climb(ctx, m, _report(ctx, m, results, debugged))


def _prepare(start: RunStart, model: LoadedModel, data: Dataset) -> RunContext:
    """The float model, its signature, the data bound to its inputs, the labels to its outputs, the task of
    each output and the main metric: the run context every later stage reads."""
    s = start.settings
    float_model = _float_model(start, model, data)
    names, shapes = _keras_outputs(model)
    try:
        sig = evaluate.signature(float_model, output_names=names, joined=True)
        signature_check_shapes(sig, shapes)
    except ValueError as exc:
        raise InputError(model.path, str(exc)) from None
    base = _base_float(start, data, sig) if s.base_model else None
    data = binding.bind(data, sig, model.path)
    model.prove_twin(data.x)  # a Keras 3 recurrent model's tf_keras twin, against that model on the data
    _side_variants(start, model, data.x_calib, calibrated=True)
    data, heads = labels.bind_labels(data, sig, model.path, s.primary_output, metric=bool(s.metric))
    lead = next((h.port for h in heads if h.primary), sig.outputs[0])
    made_by = structure.producers(float_model)
    forced = task_reading.forced_tasks(s, sig, model.path)
    raw_labels = {name: y for name, (y, _) in data.labels.items()}
    given = task_reading.LabelSource(data.y, data.labels_are_classes, data.source, f"y_{lead.name}" if heads else "y")
    reading = task_reading.read_task(given, lead, made_by.get(lead.index, ""), s.threshold, forced.get(lead.name),
                                     metric=bool(s.metric))
    data = dataclasses.replace(data, y=reading.y, labels_are_classes=reading.task.classification)
    head_specs = tuple(task_reading.head_spec(h, data.source, made_by.get(h.port.index, ""), s.threshold,
                                              forced.get(h.port.name), metric=bool(s.metric)) for h in heads)
    score = metric.task_score(reading.task, data.y)
    user = metric.user_score(s, raw_labels, heads, lead.name, len(data.x), data.meta)
    litert_models = litert.LiteRtModels(float_model, data.x_calib, start.side.calibration if start.side else None,
                                        recipes.load(s.recipe, s.code_dir))
    return RunContext(**vars(start), model=model, float_model=float_model, signature=sig, data=data, base=base,
                      reading=reading, heads=head_specs, score=user or score, task_score=score,
                      litert_models=litert_models)


def _float_model(start: RunStart, model: LoadedModel, data: Dataset) -> bytes:
    """The float model: a float .tflite input as given, else converted (the side process is handed its
    variants first)."""
    if model.is_tflite:
        return model.tflite
    with start.progress.stage("convert", detail=variants.FLOAT):
        _side_variants(start, model)
        try:
            return conv.convert(model.make_converter, variants.FLOAT, data.x_calib)
        except Exception as exc:  # noqa: BLE001 - the converter raises many kinds
            raise _conversion_error(model.path, exc) from exc


def _calibrate(ctx: RunContext, child: Optional[contained.Child] = None) -> tuple[RunContext, Optional[str]]:
    """Calibrates once for FIQ, the debugger and the search (when FIQ is asked for): the context with its
    quantizer, and why the calibration failed (None: it did not; FIQ is then recorded as failed)."""
    if variants.FIQ not in ctx.variants:
        return ctx, None
    if not ctx.model.is_tflite and structure.fake_quant_pairs(ctx.float_model):
        # A quantization-aware graph: its fake-quant nodes set the ranges, and only TensorFlow's converter builds
        # it as tfmot's guide does (the calibrate-once path refuses it or writes weight zero points int8 forbids):
        # FIQ is converted like the other variants, and the debugger and the search (which need that path) skip it.
        ctx.progress.say("quantization-aware model: FIQ is TensorFlow's conversion with a representative dataset")
        return ctx, None
    quantizer, calibration_error = None, None
    since = ctx.progress.mark()
    try:
        with ctx.progress.stage("calibrate", "calibrated once (FIQ, debugger, search)"):
            if ctx.model.is_tflite:
                quantizer = ctx.litert_models.quantizer()
                quantizer.calibration()
            else:
                quantizer = FiqQuantizer(ctx.model.make_converter, ctx.data.x_calib, float_model=ctx.float_model,
                                         child=child)
    except Exception as exc:  # noqa: BLE001 - FIQ is then recorded as failed, the rest goes on
        traceback.print_exc()
        calibration_error = ctx.progress.failure(exc, since)
        ctx.progress.say(f"calibration FAILED: {calibration_error}")
    if quantizer is not None:
        _check_forced(ctx, quantizer)
    return dataclasses.replace(ctx, quantizer=quantizer), calibration_error


def _measure(ctx: RunContext, crash: Optional[contained.NativeCrash] = None) -> tuple[Measurer, dict, Optional[tuple]]:
    """Builds and measures every variant, then blames the layers of those that lose accuracy; returns the measurer,
    the variants and the debugger's views started once FIQ is measured (None: not started). After a crashed
    calibration (`crash`), FIQ fails with it and the other calibrated variants convert in a child of their own."""
    s = ctx.settings
    m = Measurer(ctx.folder, ctx.data, ctx.task, ctx.progress, s.latency_runs, heads=list(ctx.heads),
                 score=ctx.score, fallback=ctx.task_score, inline_buffers=targets.of(s.target).inline_buffers)
    results: dict[str, VariantResult] = {}
    m.deferred = {}  # every variant built and run first, then timed: no latency waits for the side's conversions
    for variant in ctx.variants:
        build, converter = _crashed_builder(ctx, variant, crash) if crash is not None else (None, None)
        build, converter = (build, converter) if build is not None else _builder(ctx, variant)
        results[variant] = m.build_and_measure(variant, build, converter)
    results = m.timed_later(results)
    if m.score_error:  # the user's metric failed: the task's own metric is the main one for every model
        ctx.progress.say(f"--metric {s.metric} failed: {m.score_error} (traceback in run.log); the report reads"
                         f" {ctx.task_score.name if ctx.task_score else 'the output error'} instead")
        results = {k: m.restated(v) for k, v in results.items()}
    views = _views_started(ctx, results)  # they run in the other processes while the layers are blamed here

    if s.base_model:  # a QAT model's float base: post-training quantization measured beside QAT, on the same data
        results.update(_base_models(ctx, m))
    blame.blame_variants(m, ctx.float_model, results, ctx.litert_models, conclude.target_rule(s, m))
    fiq = results.get(variants.FIQ)
    if ctx.quantizer is not None and fiq is not None and fiq.ok:  # an output whose int8 range clips: its own fix
        fixed = output_range.output_float_fix(m, ctx.quantizer, fiq, (ctx.folder / f"{fiq.name}.tflite").read_bytes())
        if fixed is not None:
            results[variants.OUTPUT_FLOAT] = fixed
    results = shared_scale.attach(m, ctx.float_model, results)  # an output whose concatenated parts share a scale
    if targets.of(s.target).reference_kernels:
        results = {name: _with_reference_kernels(ctx, v) for name, v in results.items()}
    return m, results, views


def _base_float(start: RunStart, data: Dataset, sig) -> tuple[LoadedModel, bytes]:
    """--base-model, checked before any other work: loaded like the model and converted to float, with the same
    inputs and outputs as the model (count, shapes, dtypes, in order); InputError naming the first difference."""
    s = start.settings
    base = model_loading.load_model(s.base_model, s.trust_model, start.folder, s.custom_objects, s.code_dir,
                                    target=s.target)
    with start.progress.stage("convert", detail=variants.BASE_FLOAT):
        try:
            made = base.tflite if base.make_converter is None else conv.convert(base.make_converter, variants.FLOAT,
                                                                                 data.x_calib)
            theirs = evaluate.signature(made)
        except Exception as exc:  # noqa: BLE001 - the converter raises many kinds
            raise InputError(s.base_model, f"the base model could not be converted: {one_line(exc)}") from exc
    for what, ours, other in (("input", sig.inputs, theirs.inputs), ("output", sig.outputs, theirs.outputs)):
        if len(ours) != len(other):
            raise InputError(s.base_model, f"the base model has {len(other)} {what}(s), the model {len(ours)}:"
                                           " --base-model must be the model before quantization-aware training")
        for a, b in zip(ours, other):
            if tuple(a.shape[1:]) != tuple(b.shape[1:]) or np.dtype(a.dtype) != np.dtype(b.dtype):
                raise InputError(s.base_model, f"the base model's {what} {b.key} is {tuple(b.shape[1:])}"
                                               f" {np.dtype(b.dtype).name}, the model's {a.key} is"
                                               f" {tuple(a.shape[1:])} {np.dtype(a.dtype).name}: --base-model must be"
                                               " the model before quantization-aware training")
    return base, made


def _base_models(ctx: RunContext, m: Measurer) -> dict[str, VariantResult]:
    """--base-model: the quantization-aware model's float base (loaded, converted and checked by `_base_float` before
    any other work), and its post-training FIQ (TensorFlow's converter, the run's calibration samples), measured like
    every model on the same data; one that does not quantize or does not take the data fails its variant."""
    base, base_float = ctx.base
    found = {}
    for name, scheme in ((variants.BASE_FLOAT, variants.FLOAT), (variants.BASE_FIQ, variants.FIQ)):
        if scheme == variants.FLOAT:
            build, engine = (lambda: base_float), conv.CONVERTER
        elif base.make_converter is None:  # a float .tflite base: LiteRT Quantizer quantizes it
            build = lambda: litert.LiteRtModels(base.tflite, ctx.data.x_calib).build(variants.FIQ)  # noqa: E731
            engine = litert.CONVERTER
        else:
            build = functools.partial(conv.convert, base.make_converter, scheme, ctx.data.x_calib)
            engine = conv.CONVERTER
        found[name] = m.build_and_measure(name, build, engine)
    return found


def _with_reference_kernels(ctx: RunContext, v: VariantResult) -> VariantResult:
    """An integer-only model (the int8 target's candidates) run by LiteRT's reference kernels too, and their
    agreement with the default kernels recorded; a failure is recorded as a measurement error."""
    if not v.ok or not targets.of(ctx.settings.target).runs(v.tensor_types, v.ops, v.op_tensor_types):
        return v
    try:
        with ctx.progress.stage("reference kernels", detail=v.name):
            model = (ctx.folder / f"{v.name}.tflite").read_bytes()
            found = kernels.reference_agreement(model, ctx.data.x, targets.REFERENCE_SAMPLES,
                                                classes=ctx.task.num_classes is not None and ctx.task.kind.top_class)
    except Exception as exc:  # noqa: BLE001 - the rest of the report stands without it
        traceback.print_exc()
        return dataclasses.replace(v, measurement_errors={**v.measurement_errors, "reference_kernels": one_line(exc)})
    return dataclasses.replace(v, reference_kernels=found)


def _views_started(ctx: RunContext, results: dict[str, VariantResult]) -> Optional[debugger.Views]:
    """The debugger's two views of FIQ, started in the contained child (debugger.start_views) once every variant is
    measured and timed, when the debug stage will read them (TF's converter calibrated FIQ and it measured) and the
    run has no side process: the child runs them on the core this process leaves while it blames the layers (the
    transformer's debug stage 0.26 -> 0.0 s). With a side process the two views take both cores at the debug stage:
    started here they would slow the blame (EfficientNet-B0's layer error stage 0.35 -> 0.78 s for 0.26 s less
    debugging). No latency is timed while they run. None when they are not started here (the debug stage then starts
    them, and says why they fail)."""
    if ctx.quantizer is None or not results[variants.FIQ].ok or ctx.quantizer.method == litert.METHOD \
            or ctx.background is None or ctx.side is not None:
        return None
    try:
        views = debugger.start_views(ctx.quantizer, ctx.data.x_calib)
    except Exception:  # noqa: BLE001 - started (and its failure said) by the debug stage instead
        traceback.print_exc()
        return None
    for view in views:
        if view is not None:
            ctx.background.add(view)
    return views


def _debug(ctx: RunContext, m: Measurer, results: dict[str, VariantResult], calibration_error: Optional[str],
           started: Optional[debugger.Views] = None) -> _Debugged:
    """FIQ's per-layer table from the debugger (its views `started` already, else started now), and the measured
    recommendation of layers to keep in float."""
    layers, recommendation, debugger_error = [], None, calibration_error
    if ctx.quantizer is not None and results[variants.FIQ].ok:
        since = ctx.progress.mark()
        # the debugger's whole-model view in the side process while the child runs the local one
        views = debugger.Beside(ctx.side, functools.partial(beside.after_the_debuggers_views, ctx), started)
        try:
            layers = debugger.fiq_layers(ctx.quantizer, results[variants.FIQ], ctx.folder, ctx.data.x_calib,
                                         ctx.progress, views)
        except Exception as exc:  # noqa: BLE001 - the report is still useful without the debugger
            traceback.print_exc()
            debugger_error = ctx.progress.failure(exc, since)  # the converter's own cause, not a bare "RuntimeError"
            ctx.progress.say(f"debugger FAILED: {debugger_error}")
        else:
            asked = Asked(Settings(**ctx.settings.recorded()), conclude.target_rule(ctx.settings, m),
                          beside.helper(ctx), beside.draw_ahead(ctx, results))
            try:
                layers, recommendation = recommend_for(m, asked, ctx.quantizer, layers, results, ctx.litert_models)
            except KindError as exc:  # a plug-in task kind's code failed in the search: the report stands without it
                traceback.print_exc()
                ctx.progress.say(f"the search stopped: {exc} (traceback in run.log); no model is recommended")
    beside.side_litert_calibration(ctx)  # when the debugger did not start it (a no-op when it did)
    return _Debugged(layers, recommendation, debugger_error)


def _target_tools(ctx: RunContext) -> dict[str, str]:
    """The versions of the tools the target is checked with (TFLite Micro, Vela), for the report's metadata."""
    from reporter.measure import hardware

    wanted = targets.of(ctx.settings.target).distributions
    return {name: version for name, version in hardware.versions().items() if name in wanted}


def _report(ctx: RunContext, m: Measurer, results: dict[str, VariantResult], debugged: _Debugged) -> Report:
    """The measured report (its findings are derived from it afterwards)."""
    s, sig, data, task, float_model = ctx.settings, ctx.signature, ctx.data, ctx.task, ctx.float_model
    num_classes = task.num_classes
    return Report(
        schema_version=SCHEMA_VERSION,
        generated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__,
        tensorflow_version=tensorflow_version(),
        target_tools=_target_tools(ctx),
        model=ModelInfo(
            name=s.display_name,
            source=s.shown_paths[0] if s.shown_paths else str(s.model),
            format=ctx.model.format,
            input_shape=list(sig.inputs[0].shape),
            inputs=[InputInfo(p.key, list(p.shape), p.dtype) for p in sig.inputs],
            task_reason=ctx.reading.reason,
            label_note=ctx.reading.note,
            outputs=[OutputInfo(h.name, h.key, list(next(p.shape for p in sig.outputs if p.key == h.key)),
                                h.task.kind.name,
                                h.task.num_classes, h.labelled, h.primary) for h in ctx.heads],
            num_classes=num_classes,
            task=task.kind.record.task,
            main_metric=m.score.name if m.score is not None else "",
            stateful=structure.has_variable_tensors(float_model),
            fake_quant_pairs=structure.fake_quant_pairs(float_model),
            binary_sigmoid=task.kind.record.binary_sigmoid,
            largest_weight_elements=structure.largest_weight_elements(float_model),
            **_twin_fields(ctx.model),
            input_changes=list(ctx.model.tflite_changes),
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
        layers=debugged.layers,
        recommendation=debugged.recommendation,
        timings_s=dict(ctx.progress.timings),
        settings=Settings(**s.recorded()),
        debugger_error=debugged.error,
        engines=engines.pairs(m, results),
    )


def _twin_fields(model: LoadedModel) -> dict:
    """A Keras 3 recurrent model converted through its tf_keras twin: the proof, as ModelInfo fields."""
    proof = model.twin_proof
    if proof is None:
        return {}
    return {"twin_max_abs_difference": proof.max_abs_difference, "twin_samples": proof.samples}


def _conversion_error(path, exc) -> Exception:
    full = storage_problem(exc)
    if full is not None:  # the disk, not the model
        return full
    text = str(exc)
    if "TensorListReserve" in text or "read_variable" in text.lower():
        return InputError(path, model_loading.KERAS3_RNN_HINT.format(names="LSTM/GRU"))
    return InputError(path, f"the model does not convert to TFLite: {one_line(exc)}")


def _check_forced(ctx: RunContext, quantizer: Quantizer):
    """--keep-float names must be tensors of the model and --keep-float-ops its op types: TF would
    silently ignore a name that matches nothing."""
    from reporter.convert.quantize import UnknownNodeError

    s, model_path = ctx.settings, ctx.model.path
    try:
        quantizer.check_nodes(s.keep_float)
    except UnknownNodeError as exc:
        raise InputError(model_path, f"--keep-float: {exc}") from None
    present = structure.ops(ctx.float_model)
    unknown = [op for op in s.keep_float_ops if op not in present]
    if unknown:
        raise InputError(model_path, f"--keep-float-ops: the model has no {', '.join(unknown)} op"
                                     f" (its ops: {', '.join(sorted(present))})")


def _builder(ctx: RunContext, variant: str) -> tuple[Callable[[], bytes], str]:
    """How `variant` is built, and by which converter (the registry says which can): float is the float
    model; FIQ comes from the one calibration; a float .tflite input, or a variant only LiteRT Quantizer
    makes, goes to LiteRT Quantizer; the rest to TensorFlow's converter."""
    model, float_model, quantizer, side_conv = ctx.model, ctx.float_model, ctx.quantizer, ctx.side
    x_calib = ctx.data.x_calib
    if variant == variants.FLOAT:
        return (lambda: float_model), ("given" if model.is_tflite else conv.CONVERTER)
    if variant == variants.FIQ and quantizer is not None:
        return (lambda: quantizer.quantize([])), quantizer.converter
    if model.is_tflite or variants.get(variant).converters[0] == variants.LITERT:
        return functools.partial(ctx.litert_models.build, variant), litert.CONVERTER
    if side_conv is not None and side_conv.has(variant):  # converted on the side: the same bytes
        return (lambda: side_conv.result(variant) or conv.convert(model.make_converter, variant, x_calib)), \
            conv.CONVERTER
    return (lambda: conv.convert(model.make_converter, variant, x_calib)), conv.CONVERTER


def _crashed_builder(ctx: RunContext, variant: str, crash: contained.NativeCrash) -> tuple:
    """After the calibration crashed: FIQ fails with that crash; another variant TF's converter calibrates
    (16x8, int8 I/O) converts in a child of its own (the converter calibrates the same way); (None, None) for
    the rest (built as usual)."""
    if variant not in variants.CALIBRATED or ctx.model.is_tflite \
            or variants.get(variant).converters[0] == variants.LITERT:
        return None, None
    if variant == variants.FIQ:
        def fail():
            raise crash
        return fail, variants.TF
    folder, x_calib = ctx.model.saved_model_folder(), ctx.data.x_calib
    if folder is None:
        return None, None
    return (lambda: contained.convert_once(folder, variant, x_calib)), conv.CONVERTER


def _keras_outputs(model: LoadedModel) -> tuple:
    """The Keras model's output names, in its order, and their shapes without the batch dimension (None, {}
    for a SavedModel folder or a .tflite: their signature names them)."""
    keras_model = model.keras_model
    names = list(getattr(keras_model, "output_names", None) or []) if keras_model is not None else []
    outputs = list(getattr(keras_model, "outputs", None) or []) if keras_model is not None else []
    if not names or len(names) != len(outputs):
        return None, {}
    return names, {n: tuple(o.shape[1:]) for n, o in zip(names, outputs)}
