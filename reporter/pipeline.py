"""The pipeline: one model and its data in, every stage in order, report.json and artifacts out."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from reporter import __version__
from reporter import convert as conv
from reporter import debugger, evaluate, inputs, recommend, render, structure
from reporter import metrics as qmetrics
from reporter.errors import InputError, QuantReportError
from reporter.output import folder_name, staged_folder
from reporter.progress import Progress
from reporter.report import SCHEMA_VERSION, DatasetInfo, Latency, ModelInfo, Recommendation, Report, VariantResult


@dataclass
class RunSettings:
    """Everything one `run` needs; the CLI and the demo both build one."""

    model: str
    data: str
    out: str
    name: Optional[str] = None
    variants: tuple = conv.DEFAULT_VARIANTS
    calibration_samples: int = 100
    suspect_threshold: float = 0.7
    first_layers: int = 0
    latency_runs: int = 50
    formats: tuple = ("html", "pdf", "md", "json")
    quiet: bool = False
    listener: Optional[Callable] = None  # told each stage as it starts (the batch runner's progress)
    failure_log: Optional[str] = None  # where run.log is kept if the run fails (the batch runner's)
    extra: dict = field(default_factory=dict)  # recorded in the report's settings

    @property
    def display_name(self) -> str:
        return self.name or Path(self.model).stem or Path(self.model).name

    def recorded(self) -> dict:
        """The settings as written into report.json."""
        return {
            "variants": list(self.variants),
            "calibration_samples": self.calibration_samples,
            "suspect_threshold": self.suspect_threshold,
            "first_layers": self.first_layers,
            "latency_runs": self.latency_runs,
            **self.extra,
        }


def check_variants(variants) -> tuple:
    """Float first (it is every comparison's reference), then the rest in the canonical order."""
    unknown = [v for v in variants if v not in conv.ALL_VARIANTS]
    if unknown:
        raise QuantReportError(
            f"unknown variant(s) {', '.join(unknown)}: choose from {', '.join(conv.ALL_VARIANTS)}"
        )
    wanted = set(variants) | {"float"}
    return tuple(v for v in conv.ALL_VARIANTS if v in wanted)


def run(settings: RunSettings) -> tuple[Report, Path]:
    """Runs every stage for one model and writes DIR/NAME/; returns the report and that folder.

    Raises InputError (nothing written) when the model or data cannot be used.
    """
    variants = check_variants(settings.variants)
    if settings.suspect_threshold <= 0:
        raise QuantReportError("--suspect-threshold must be above 0")
    bad_formats = [f for f in settings.formats if f not in render.FORMATS]
    if bad_formats:
        raise QuantReportError(f"unknown format(s) {', '.join(bad_formats)}: choose from {', '.join(render.FORMATS)}")
    if settings.first_layers < 0:
        raise QuantReportError("--first-layers must be 0 or more")
    name = settings.display_name
    progress = Progress(name, quiet=settings.quiet, listener=settings.listener)
    with staged_folder(settings.out, name) as folder:
        try:
            with progress.capture(folder / "run.log"):
                report = _run_in(folder, settings, variants, progress)
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
    progress.say("written: " + ", ".join(str(final / p.name) for p in written))
    return report, final


def _run_in(folder: Path, s: RunSettings, variants: tuple, progress: Progress) -> Report:
    import tensorflow as tf  # imported here so that its start-up chatter lands in run.log

    name = s.display_name
    with progress.stage("load", "model and data loaded"):
        model = inputs.load_model(s.model)
        data = inputs.load_data(s.data, s.calibration_samples)
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

    results: dict[str, VariantResult] = {}
    outputs: dict[str, np.ndarray] = {}
    for variant in variants:
        results[variant] = _variant(
            variant, folder, model, data, s, progress, num_classes, outputs,
            prebuilt=float_model if variant == "float" else None,
        )

    layers, recommendation, debugger_error = [], None, None
    if "fiq" in variants:
        layers, recommendation, debugger_error = _debug_and_recommend(
            folder, model, data, s, progress, num_classes, outputs, results
        )

    return Report(
        schema_version=SCHEMA_VERSION,
        generated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__,
        tensorflow_version=tf.__version__,
        model=ModelInfo(
            name=name,
            source=str(s.model),
            format=model.format,
            input_shape=in_shape,
            num_classes=num_classes,
            task="classification" if num_classes else "regression",
            stateful=structure.has_variable_tensors(float_model),
        ),
        dataset=DatasetInfo(
            source=str(s.data),
            num_eval=int(len(data.x)),
            num_calibration=int(len(data.x_calib)),
            calibration_overlaps_eval=data.calibration_overlaps_eval,
            calibration_source=data.calibration_source,
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
    return InputError(path, f"the model does not convert to TFLite: {_one_line(exc)}")


def _variant(variant, folder, model, data, s, progress, num_classes, outputs, prebuilt=None) -> VariantResult:
    """Converts (unless given the flatbuffer) and measures one variant; a failure is recorded, not raised."""
    try:
        if prebuilt is None:
            with progress.stage("convert", detail=variant):
                prebuilt = conv.convert(model.make_converter, variant, data.x_calib)
        return _measure(variant, prebuilt, folder, data, s, progress, num_classes, outputs)
    except QuantReportError:
        raise
    except Exception as exc:  # noqa: BLE001 - one variant's failure must not stop the others
        traceback.print_exc()  # into run.log
        progress.say(f"{variant} FAILED: {_one_line(exc)}")
        return VariantResult(name=variant, status="failed", error=_one_line(exc))


def _measure(variant, tflite: bytes, folder, data, s, progress, num_classes, outputs) -> VariantResult:
    (folder / f"{variant}.tflite").write_bytes(tflite)
    t0 = time.perf_counter()
    with progress.stage("analyze", detail=variant):
        analyzer = structure.analyzer_text(tflite)
        (folder / f"analyzer_{variant}.txt").write_text(analyzer, encoding="utf-8")
        ops = structure.ops(tflite)
        types = structure.tensor_types(tflite)
    with progress.stage("evaluate", detail=variant):
        out = evaluate.predict(tflite, data.x)
        outputs[variant] = out
        metrics = output_error = None
        if num_classes:
            preds = out.argmax(axis=1)
            float_preds = outputs["float"].argmax(axis=1) if "float" in outputs else None
            metrics = qmetrics.classification(data.y, preds, num_classes, float_preds)
        elif variant != "float" and "float" in outputs:
            output_error = qmetrics.output_error(out, outputs["float"])
    with progress.stage("latency", detail=variant):
        median, p90, runs = evaluate.latency_ms(tflite, data.x[:1], runs=s.latency_runs)
    quality = f"accuracy {metrics.accuracy:.1%}" if metrics else (
        f"output MSE vs float {output_error.mse:.3g}" if output_error else "reference output")
    progress.say(f"{variant}: {len(tflite):,} bytes, {quality} on {len(data.x)} samples"
                 f" ({time.perf_counter() - t0:.1f} s to measure)")
    return VariantResult(
        name=variant,
        status="ok",
        size_bytes=len(tflite),
        ops=ops,
        tensor_types=types,
        latency_ms=Latency(median=median, p90=p90, runs=runs),
        metrics=metrics,
        output_error=output_error,
        analyzer_text=analyzer,
    )


def _debug_and_recommend(folder, model, data, s, progress, num_classes, outputs, results):
    try:
        with progress.stage("debug", "quantization debugger run on FIQ"):
            layers, csv_text = debugger.layer_statistics(model.make_converter, data.x_calib)
            (folder / "layer_stats.csv").write_text(csv_text, encoding="utf-8")
    except Exception as exc:  # noqa: BLE001 - the report is still useful without the debugger
        traceback.print_exc()
        progress.say(f"debugger FAILED: {_one_line(exc)}")
        return [], None, _one_line(exc)

    layers = recommend.mark_suspects(layers, s.suspect_threshold, s.first_layers)
    nodes = recommend.denylist(layers)
    selective, size_cost = None, None
    if nodes:
        try:
            with progress.stage("selective", f"selective model built with {len(nodes)} layer(s) in float"):
                tflite = debugger.selective_model(
                    model.make_converter, data.x_calib, nodes, [layer.tensor_name for layer in layers]
                )
            selective = _measure("selective", tflite, folder, data, s, progress, num_classes, outputs)
        except Exception as exc:  # noqa: BLE001 - record and go on
            traceback.print_exc()
            progress.say(f"selective model FAILED: {_one_line(exc)}")
            selective = VariantResult(name="selective", status="failed", error=_one_line(exc))
        fiq = results.get("fiq")
        if selective.ok:
            selective = dataclasses.replace(
                selective,
                accuracy_gap_recovered=recommend.gap_recovered(results.get("float"), fiq, selective),
            )
            if fiq is not None and fiq.ok:
                size_cost = selective.size_bytes - fiq.size_bytes
    rec = Recommendation(
        threshold=s.suspect_threshold,
        first_layers=s.first_layers,
        denylisted_nodes=nodes,
        code=conv.reproduction_code(nodes) if nodes else "",
        summary=recommend.summary(len(nodes), s.suspect_threshold, selective, size_cost),
        selective=selective,
        size_cost_bytes=size_cost,
    )
    return layers, rec, None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:300] if first else type(exc).__name__
