"""Measuring built models of one run: every variant, fix and candidate the same way, on the same data.

A `Measurer` carries what travels together through a run's measurements: the output folder, the data,
what the model's output means (`Task`), progress, latency settings and the outputs of every model
measured so far (each is compared with float, and the fixes with FIQ, on the same samples).
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from reporter.core.errors import QuantReportError, one_line
from reporter.core.progress import Progress
from reporter.core import judgement, variants
from reporter.measure import evaluate, graph, structure
from reporter.measure import metrics as qmetrics
from reporter.measure.scoring import Score, Scored
from reporter.measure.task import KindError, Task, nonfinite_rows
from reporter.model.data import Dataset
from reporter.model.output_range import ClippedOutput
from reporter.model.regression import TargetError
from reporter.model.report import HeadResult, Latency, Metrics, OutputError, VariantResult
from reporter.model.variant import WeightCoverage


@dataclass(frozen=True)
class HeadSpec:
    """One output of a model with several outputs, as measured: its task and labels (None: compared with
    float only)."""

    name: str
    key: str  # the signature's output name
    task: Task
    y: Optional[np.ndarray] = None
    primary: bool = False

    @property
    def labelled(self) -> bool:
        return self.y is not None


@dataclass
class Measurer:
    folder: Path  # the report folder: <name>.tflite and analyzer_<name>.txt are written here
    data: Dataset  # x, y, x_calib
    task: Task
    progress: Progress
    latency_runs: int = 0  # 0: latency is not timed
    outputs: dict[str, np.ndarray] = field(default_factory=dict)  # model name -> (primary) output on data.x
    heads: list[HeadSpec] = field(default_factory=list)  # several outputs only
    head_outputs: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # model -> output name -> output
    # The main metric every verdict reads (accuracy, mean IoU, the user's metric; None: output error only),
    # and each measured model's value of it. `fallback` takes over when the user's metric fails, or when it gives
    # every model the same value (`score_error`).
    score: Optional[Score] = None
    fallback: Optional[Score] = None
    scored: dict[str, Scored] = field(default_factory=dict)
    metric_error: str = ""  # the user's metric failed (the first error): the run fell back to `fallback`
    kind_error: str = ""  # a plug-in task kind's code failed (the first error, said once; each model's is recorded)
    # The target's tool reads buffers inline only (TFLite Micro): each model is written with its buffers inline
    # (LiteRT Quantizer stores large ones after the flatbuffer), the file measured the file shipped.
    inline_buffers: bool = False
    # While not None, `measure` leaves each latency to `timed_later` (name -> the model's bytes, in order): the
    # variants' models are all built and run first, so no timing waits for conversions another process still makes.
    deferred: Optional[dict] = None

    @property
    def score_error(self) -> str:
        """Why the user's metric is not the run's main metric ("" while it is): the first error it raised, or,
        read once the models are measured, that it never varies: the same value for every one of them although
        the task's own metric tells them apart (or, with none, although it depends on no sample). Such a metric
        cannot tell the models apart, so it decides nothing: the run falls back to `fallback`, every model
        measured so far scored again."""
        if not self.metric_error:
            same = self._constant_user_metric()
            if same is not None:
                value, names, why = same
                print(f"--metric: {self.score.name} gave every model the same value, {value!r} ({', '.join(names)}),"
                      f" although {why}: it is not used to decide")  # into run.log
                self.metric_error = (f"it gave every model the same value ({value:.6g}, float included) although"
                                     f" {why}: a metric that never varies decides nothing")
                self.score = self.fallback
                self.scored.clear()
                if self.score is not None:
                    self.scored.update({name: self.score.measure(out) for name, out in self.outputs.items()})
        return self.metric_error

    def _constant_user_metric(self) -> Optional[tuple[float, list[str], str]]:
        """(the one value, the models, why that is wrong) when the user's metric gave every measured model, float
        included, the same value while their outputs differ and either the task's own metric does not give them
        all the same value, or (without one) the user's metric is the same on every resample of the samples too;
        None otherwise. A metric that is merely coarse, where the task's own metric ties the models as well, is
        kept."""
        if self.score is None or self.score is self.fallback or variants.FLOAT not in self.scored:
            return None
        names = [name for name in self.scored if name in self.outputs]
        if len(names) < 2 or not _all_same([self.scored[name].value for name in names]):
            return None
        reference = self.outputs[variants.FLOAT]
        if all(np.array_equal(self.outputs[name], reference, equal_nan=True) for name in names):
            return None  # identical outputs: the same value says nothing about the metric
        value = float(self.scored[names[0]].value)
        if self.fallback is not None:
            try:
                own = [self.fallback.measure(self.outputs[name]).value for name in names]
            except Exception:  # noqa: BLE001 - the task's own metric unmeasurable here: the user's stays
                traceback.print_exc()  # into run.log
                return None
            if _all_same(own):
                return None
            return value, names, f"{self.fallback.name} tells them apart"
        samples = [np.asarray(self.scored[name].per_sample if self.scored[name].per_sample is not None
                              else self.scored[name].boot, np.float64) for name in names]
        if all(s.size and _all_same(s.tolist() + [value]) for s in samples):
            return value, names, "their outputs differ and it is the same on any of the samples"
        return None

    @property
    def primary(self) -> Optional[HeadSpec]:
        return next((h for h in self.heads if h.primary), None)

    def drop(self, name: str, reference: str = variants.FLOAT) -> Optional[tuple[float, float]]:
        """(how much worse model `name` is than `reference` on the main metric, positive: worse; the paired
        test's p-value), or None when either has no value of it."""
        if self.score is None or name not in self.scored or reference not in self.scored:
            return None
        delta, p = self.score.compare(self.scored[name], self.scored[reference])
        return -delta, p

    def classes(self, name: str) -> np.ndarray:
        """The classes the model called `name` predicted on the evaluation data."""
        return self.task.classes(self.outputs[name])

    def build_and_measure(self, name: str, build: Callable[[], bytes], converter: str) -> VariantResult:
        """Builds one variant with `build` and measures it; a failure is recorded, not raised.

        Only a model that does not build or does not run fails the variant; a measurement that fails
        after that is recorded in `measurement_errors` by `measure`.
        """
        since = self.progress.mark()
        tflite = None
        try:
            with self.progress.stage("convert", detail=name):
                tflite = build()
            return dataclasses.replace(self.measure(name, tflite), converter=converter)
        except QuantReportError:
            raise
        except Exception as exc:  # noqa: BLE001 - one variant's failure must not stop the others
            traceback.print_exc()  # into run.log
            # the converter's own cause, never a bare exception name
            said = str(exc) if isinstance(exc, NotRunnable) else self.progress.failure(exc, since)
            detail = None
            if tflite is not None:  # it was built: running it failed; the first cause found in the file says why
                found = structure.weight_zero_point(tflite)  # in the user's terms, LiteRT's own words kept apart
                detail, said = (said, found) if found else (None, f"{said}{_input_cause(self.data.x)}")
                said = f"built, but it could not run: {said}"
            self.progress.say(f"{name} FAILED: {said}")
            return VariantResult(name=name, status="failed", error=said, error_detail=detail, converter=converter)

    def measure(self, name: str, tflite: bytes) -> VariantResult:
        """Runs the model on the evaluation data (a failure there raises: the variant failed) and takes each
        measurement on its own: one that fails leaves its field empty and its error in measurement_errors."""
        folder, data, task, progress = self.folder, self.data, self.task, self.progress
        bad = structure.bad_scale(tflite)
        if not bad:  # a detector's outputs sized in the file (LiteRT allocates it): it runs on every runtime
            tflite = graph.with_static_shapes(tflite)
        if self.inline_buffers:
            tflite = graph.with_buffers_inline(tflite)
        (folder / f"{name}.tflite").write_bytes(tflite)
        if bad:  # LiteRT would crash the process allocating it: the variant fails, the run goes on
            raise NotRunnable(bad)
        t0 = time.perf_counter()
        errors: dict[str, str] = {}

        def failed(measurement: str, exc: Exception) -> None:
            if measurement == "user_metric":  # said once, by the run, with what it does instead
                self.metric_error = self.metric_error or errors[measurement]
            elif isinstance(exc, KindError):  # the same plug-in code for every model: said once
                if not self.kind_error:
                    self.kind_error = str(exc)
                    progress.say(f"{exc} for {name}; each model it fails on has its {measurement} not measured"
                                 " (traceback in run.log)")
            else:
                progress.say(f"{name}: {measurement} not measured: {errors[measurement]}")

        attempt = _attempter(errors, failed)  # the other measurements and the variant stand

        def analyze():
            text = structure.analyzer_text(tflite)
            (folder / f"analyzer_{name}.txt").write_text(text, encoding="utf-8")
            return text

        with progress.stage("analyze", detail=name):
            analyzer = attempt("analyzer", analyze)
            structure_counts = attempt("ops", lambda: (structure.ops(tflite), structure.tensor_types(tflite),
                                                       _coverage(tflite), structure.op_tensor_types(tflite)))
        ops, types, coverage, op_types = structure_counts if structure_counts is not None else ({}, {}, {}, {})
        with progress.stage("evaluate", detail=name):
            if self.heads:  # a model that does not run fails the variant
                by_key = evaluate.predict_all(tflite, data.x)
                self.head_outputs[name] = {h.name: by_key[h.key] for h in self.heads}
                out = self.head_outputs[name][self.primary.name]
            else:
                out = evaluate.predict(tflite, data.x)
            self.outputs[name] = out
            nonfinite = int(nonfinite_rows(self.head_outputs[name] if self.heads else out).sum())
            everywhere = len(out) > 0 and bool(nonfinite_rows(out).all())  # the output the main scale reads
            if everywhere:
                progress.say(f"{name}: produced NaN or inf on every one of its {len(out):,} samples: "
                             + ("nothing can be compared with it" if name == variants.FLOAT else
                                "it is never judged to meet the accuracy target"))
            elif nonfinite:
                progress.say(f"{name}: produced NaN or inf on {nonfinite:,} of {len(out):,} samples ("
                             + ("they count as wrong; " if task.classification else "")
                             + "errors against float leave them out)")
            metrics, output_error, target_error, heads = self._quality(name, out, self.head_outputs.get(name), attempt)
            clipped = (attempt("clipping", lambda: self._clipped(name, tflite)) or {}) if name != variants.FLOAT else {}
            if everywhere:  # its figures (0 % of NaN) compare nothing: the report's scale is recorded not measured
                scale = "metrics" if task.classification or self.score is not None else "output_error"
                errors.setdefault(scale, NOT_FINITE)
                metrics, output_error = (None, output_error) if scale == "metrics" else (metrics, None)
        latency = None
        if self.latency_runs > 0 and self.deferred is not None:
            self.deferred[name] = tflite
        elif self.latency_runs > 0:  # --latency-runs 0 skips timing: not a failure, nothing to record
            latency = self._latency(name, tflite, attempt)
        quality = (f"{metrics.main.name} {metrics.main.value:.4g}" if metrics and metrics.main else
                   f"accuracy {metrics.accuracy:.1%}" if metrics and metrics.accuracy is not None else None) or (
            f"output MSE vs float {output_error.mse:.3g}" if output_error else
            ("reference output" if name == variants.FLOAT else "quality not measured"))
        if target_error is not None:
            quality += f", MAE vs target {target_error.mae:.3g}"
        progress.say(f"{name}: {len(tflite):,} bytes, {quality} on {len(data.x)} samples"
                     f" ({time.perf_counter() - t0:.1f} s to measure)")
        return VariantResult(
            name=name,
            status="ok",
            size_bytes=len(tflite),
            ops=ops,
            tensor_types=types,
            op_tensor_types=op_types,
            weight_coverage=coverage,
            latency_ms=latency,
            metrics=metrics,
            output_error=output_error,
            analyzer_text=analyzer or "",
            measurement_errors=errors,
            heads=heads,
            nonfinite_outputs=nonfinite,
            target_error=target_error,
            clipped_outputs=clipped,
        )

    def _latency(self, name: str, tflite: bytes, attempt) -> Optional[Latency]:
        with self.progress.stage("latency", detail=name):
            timed = attempt("latency", lambda: evaluate.latency_ms(tflite, self.data.x[:1], runs=self.latency_runs))
        if timed is None:
            return None
        return Latency(median=timed[0], p90=timed[1], runs=timed[2], overhead=evaluate.timing_overhead_ms())

    def timed_later(self, results: dict[str, VariantResult]) -> dict[str, VariantResult]:
        """`results` with the latencies `measure` left for later timed now, in the order the models were measured (a
        timing that fails is recorded in that model's measurement_errors and said, as when timed at once); timing is
        done at once again afterwards."""
        deferred, self.deferred = self.deferred or {}, None
        timed = dict(results)
        for name, tflite in deferred.items():
            if name not in timed or not timed[name].ok:
                continue
            errors = dict(timed[name].measurement_errors)

            def failed(measurement: str, exc: Exception, model=name) -> None:
                self.progress.say(f"{model}: {measurement} not measured: {errors[measurement]}")

            latency = self._latency(name, tflite, _attempter(errors, failed))
            timed[name] = dataclasses.replace(timed[name], latency_ms=latency, measurement_errors=errors)
        return timed

    def quality_on(self, name: str, outputs: dict[str, np.ndarray]) -> "Quality":
        """Model `name`'s quality from another run's outputs (every output by signature key: the target's kernels),
        read exactly as its own run reads its outputs (`_quality`), paired with float's run; nothing is stored: the
        model's own measurement stands. A measurement that fails there is left empty, its reason in `errors`."""
        rows = {key: np.asarray(value).reshape(len(value), -1) for key, value in outputs.items()}  # as LiteRT's runs
        if self.heads:
            by_head = {h.name: rows[h.key] for h in self.heads}
            out = by_head[self.primary.name]
        else:
            by_head, out = None, next(iter(rows.values()))
            if len(rows) > 1:  # several outputs read as one (a detector's), given one by one
                joined = evaluate.joined_outputs((self.folder / f"{name}.tflite").read_bytes(), outputs)
                out = out if joined is None else joined
        errors: dict[str, str] = {}
        # the other measurements there stand; the run's own are untouched
        attempt = _attempter(errors, lambda measurement, exc: self.progress.say(
            f"{name}: {measurement} not measured on the target: {errors[measurement]}"))

        metrics, output_error, target_error, heads = self._quality(name, out, by_head, attempt, on_target=True)
        if len(out) and bool(nonfinite_rows(out).all()):  # as its own run: figures of NaN compare nothing
            scale = "metrics" if self.task.classification or self.score is not None else "output_error"
            errors.setdefault(scale, NOT_FINITE)
            metrics, output_error = (None, output_error) if scale == "metrics" else (metrics, None)
        return Quality(metrics, output_error, target_error, heads, errors)

    def _quality(self, name: str, out: np.ndarray, by_head: Optional[dict[str, np.ndarray]], attempt,
                 on_target: bool = False) -> tuple:
        """(metrics, output error, target error, heads) of model `name` read from its outputs: `out`, the primary
        one, and `by_head`, every output by name (several outputs only). The one reading of a model's outputs: the
        task's metrics, the main metric (the task's own or the user's), the error against float's output and against
        the regression targets, and every other output's, each taken by `attempt(measurement, take)`. Its own run
        (`measure`) pairs them with every reference model and keeps the main metric's values; a target's run
        (`on_target`) pairs them with float's run only (float never runs on a target: its run is the reference
        everywhere) and keeps nothing."""
        task, y = self.task, self.data.y
        flt = self.outputs.get(variants.FLOAT)
        refs = ({} if flt is None else {variants.FLOAT: flt}) if on_target else self.outputs
        metrics = output_error = target_error = None
        if not task.classification and _targets_fit(y, out):
            target_error = attempt("target_error", lambda: qmetrics.target_error(out, y))
        if task.classification:
            metrics = attempt("metrics", lambda: self._classification_metrics(name, out, outputs=refs))
        elif name != variants.FLOAT and flt is not None:
            output_error = attempt("output_error", lambda: qmetrics.output_error(out, flt))
        heads = (attempt("heads", lambda: self._heads(name, by_head, on_target)) or {}) if self.heads else {}
        if self.score is not None and (metrics is not None or not task.classification):
            metrics = self._main(name, out, by_head, metrics, attempt, on_target)
        return metrics, output_error, target_error, heads

    def _clipped(self, name: str, tflite: bytes) -> dict[str, ClippedOutput]:
        """The outputs of model `name` made by an integer tensor whose range cuts off float's values (by output
        name), measured on float's outputs for the evaluation data."""
        if variants.FLOAT not in self.outputs:
            return {}
        if self.heads:
            floats = {h.key: (h.name, self.head_outputs[variants.FLOAT][h.name]) for h in self.heads}
        else:  # several outputs read as one (a detector's): each by its signature key, said what it is
            parts = self.task.kind.parts(tflite, self.outputs[variants.FLOAT])
            floats = None if parts is None else {key: (key, values) for key, (_, values) in parts.items()}
        found = {}
        for key, (low, high, step, dtype) in evaluate.integer_output_ranges(tflite).items():
            if floats is None:
                label, values = key, self.outputs[variants.FLOAT]
            elif key in floats:
                label, values = floats[key]
            else:
                continue
            share = evaluate.clipped_share(values, low, high, step)
            if share > 0:
                found[label] = ClippedOutput(share=share, low=low, high=high, dtype=dtype,
                                             part="" if self.heads or floats is None else parts[key][0])
        return found

    def references(self, name: str) -> tuple:
        """The models a model's metrics are paired with: float, FIQ for the models that fix it, the variant a
        fix fixes, the selective model for its lighter-scheme alternatives."""
        references = (variants.FLOAT, variants.FIQ) if name in variants.FIXES_FIQ else (variants.FLOAT,)
        fixed = variants.fixed_by(name)
        if fixed is not None:
            references += (fixed,)  # a variant's fix, against the variant it fixes
        if name in variants.ALTERNATIVES.values():
            references += (variants.SELECTIVE,)  # the recommended layers in a lighter scheme, against them in float
        return tuple(ref for ref in references if ref != name)

    def _main(self, name: str, out, by_head, metrics: Optional[Metrics], attempt,
              on_target: bool = False) -> Optional[Metrics]:
        """The main metric of model `name` measured (the user's, if any: in its own run it falls back to the task's
        own when it fails, said once), paired with its references (on the target: float's run), attached to
        `metrics`."""
        user = self.score is not self.fallback
        given = by_head if user and self.heads else out
        scored = attempt("user_metric" if user and not on_target else "metrics", lambda: self.score.measure(given))
        if scored is None and user and not on_target:
            self.score = self.fallback
            self.scored.clear()
            if self.score is None:
                return metrics
            return self._rescore(name, out, by_head, metrics, attempt)
        if scored is None:
            return metrics
        if not on_target:
            self.scored[name] = scored
        references = (variants.FLOAT,) if on_target else self.references(name)
        paired = {ref: self.score.compare(scored, self.scored[ref]) for ref in references if ref in self.scored}
        main = self.score.main(scored, paired)
        return dataclasses.replace(metrics or Metrics(), main=main, user=dict(scored.values or {}))

    def restated(self, result: VariantResult) -> VariantResult:
        """A model measured before the user's metric failed, its main metric restated as the task's own."""
        m = result.metrics
        if not self.score_error or m is None or m.main is None:
            return result
        if result.name not in self.scored:
            return dataclasses.replace(result, metrics=None if m.accuracy is None else dataclasses.replace(m, main=None))
        paired = {ref: self.score.compare(self.scored[result.name], self.scored[ref])
                  for ref in self.references(result.name) if ref in self.scored}
        main = self.score.main(self.scored[result.name], paired) if self.score is not None else None
        if main is None and m.accuracy is None:  # a regression model: its output error is its measure
            return dataclasses.replace(result, metrics=None)
        return dataclasses.replace(result, metrics=dataclasses.replace(m, main=main))

    def _rescore(self, name: str, out, by_head, metrics, attempt) -> Optional[Metrics]:
        """After the user's metric failed: every model measured so far scored again by the task's own metric."""
        for earlier in self.outputs:
            if earlier != name:
                self.scored[earlier] = self.score.measure(self.outputs[earlier])
        return self._main(name, out, by_head, metrics, attempt)

    def _classification_metrics(self, name: str, out: np.ndarray, y=None, task: Optional[Task] = None,
                                outputs: Optional[dict] = None):
        """Metrics of `out` against labels `y` (default: the primary output's), paired with the reference
        models' outputs in `outputs` (model name -> output)."""
        y = self.data.y if y is None else y
        task = task or self.task
        outputs = self.outputs if outputs is None else outputs
        metrics = task.metrics(y, out, outputs.get(variants.FLOAT))
        correct = task.correct(out, y)
        if correct is None:  # no sample is right or wrong as a whole: the kind's main metric is bootstrapped
            return metrics
        # Discordant counts against float, and against FIQ for the models that fix it (McNemar).
        paired = {ref: qmetrics.paired_correct(task.correct(outputs[ref], y), correct)
                  for ref in self.references(name) if ref in outputs}
        return dataclasses.replace(metrics, paired=paired, correct_bits=qmetrics.pack_correct(correct))

    def _heads(self, name: str, by_head: dict[str, np.ndarray], on_target: bool = False) -> dict[str, HeadResult]:
        """Every output of model `name` (`by_head`: its outputs by name) measured: a labelled classification head
        against its labels (paired with float's and FIQ's same head; on the target, float's), a regression or
        unlabelled one-unit head by its error against float's output (and its targets'), an unlabelled class-score
        head by how often it predicts float's class."""
        found = {}
        for h in self.heads:
            mine = by_head[h.name]
            same = {m: outs[h.name] for m, outs in self.head_outputs.items() if not on_target or m == variants.FLOAT}
            ref = same.get(variants.FLOAT)
            if h.labelled and h.task.classification:
                metrics = self._classification_metrics(name, mine, h.y, h.task, same)
                found[h.name] = HeadResult(metrics=self._head_main(name, h, metrics, mine, same))
            elif h.task.classification:  # unlabelled class scores: the same class as float
                agree = None if ref is None else float(np.mean(h.task.classes(mine) == h.task.classes(ref)))
                found[h.name] = HeadResult(agreement_with_float=agree)
            else:
                error = qmetrics.output_error(mine, ref) if ref is not None and name != variants.FLOAT else None
                target = qmetrics.target_error(mine, h.y) if h.labelled and _targets_fit(h.y, mine) else None
                found[h.name] = HeadResult(output_error=error, target_error=target)
        return found

    def _head_main(self, name: str, h: HeadSpec, metrics: Metrics, mine: np.ndarray, same: dict) -> Metrics:
        """A labelled output whose samples are not right or wrong as a whole (dense classes: positions are not
        samples), with its kind's own main metric (mean IoU) paired with the same output of its references by the
        kind's bootstrap over samples: its accuracy has no paired test, and every labelled output takes part in the
        decision on one. A share only (the per-output table words it as one); others as they are."""
        if metrics is None or metrics.main is not None or metrics.correct_bits:  # McNemar's, or the kind's own
            return metrics
        score = h.task.score(h.y)
        if score is None or not score.bootstrapped or not score.share:
            return metrics
        scored = score.measure(mine)
        paired = {ref: score.compare(scored, score.measure(same[ref])) for ref in self.references(name) if ref in same}
        return dataclasses.replace(metrics, main=score.main(scored, paired))


@dataclass(frozen=True)
class Quality:
    """A model's quality read from a target's run of it (`Measurer.quality_on`), as its own run records it: the
    reporter.model.variant.OnTarget fields, and each measurement that failed there ({measurement: one line})."""

    metrics: Optional[Metrics] = None
    output_error: Optional[OutputError] = None
    target_error: Optional[TargetError] = None
    heads: dict[str, HeadResult] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


# Why a model's main scale is not measured when its output is NaN or inf on every evaluation sample: the decision
# reads it (reporter.findings.decision: not measured, so never meeting the target; float so: nothing is compared).
NOT_FINITE = "its outputs are NaN or inf on every evaluation sample"


def _attempter(errors: dict[str, str], failed: Callable[[str, Exception], None]):
    """`attempt(measurement, take)`: `take()`, or None when it raises (quant-report's own errors go on up): the
    traceback into run.log, its one line into `errors[measurement]`, then `failed(measurement, exc)` says it."""
    def attempt(measurement: str, take):
        try:
            return take()
        except QuantReportError:
            raise
        except Exception as exc:  # noqa: BLE001 - one measurement's failure, recorded and said
            traceback.print_exc()  # into run.log
            errors[measurement] = one_line(exc)
            failed(measurement, exc)
            return None
    return attempt


class NotRunnable(ValueError):
    """A built model LiteRT cannot run, found by reading it before LiteRT would crash the process on it."""


def _input_cause(x) -> str:
    """"; the inputs reach 1e+30, the likely cause" when a built model fails to run on non-finite or extreme inputs;
    "" otherwise."""
    arrays = x.arrays.values() if hasattr(x, "arrays") else [x]
    for a in arrays:
        a = np.asarray(a)
        if a.dtype.kind != "f" or not a.size:
            continue
        if not np.all(np.isfinite(a)):
            return "; the inputs hold NaN or inf, the likely cause"
        top = float(np.max(np.abs(a)))
        if top > judgement.EXTREME_INPUT:
            return f"; the inputs reach {top:.0e}, the likely cause"
    return ""


def _all_same(values) -> bool:
    """Every value equal (to a relative 1e-12)."""
    a = np.asarray(values, np.float64)
    return bool(a.size) and float(np.ptp(a)) <= 1e-12 * max(1.0, float(np.abs(a).max()))


def _coverage(tflite: bytes) -> dict[str, WeightCoverage]:
    return {op: WeightCoverage(**row) for op, row in structure.weight_coverage(tflite).items()}


def _targets_fit(y, out) -> bool:
    """Regression targets for `out`: as many values per sample as the output, for as many samples."""
    if y is None or out is None or len(y) != len(out) or np.asarray(y).dtype.kind not in "fiub":
        return False
    return int(np.prod(np.shape(y)[1:])) == int(np.prod(np.shape(out)[1:]))
