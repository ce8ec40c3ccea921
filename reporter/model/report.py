"""The report's data model: typed, frozen records that save to JSON and load back.

report.json is the canonical output. Everything else (HTML, PDF, Markdown) is rendered from
it, so this module must not import TensorFlow.

Format history (SCHEMA_VERSION):
  1: first version.
  2: the recommendation is measured: `recommendation.method` ("search" or "rule"), `.search` (every
     step with its float layers, size, selection score, accuracy, latency; evaluations, seconds,
     selection data, target, target_met), `.rule` (the seed rule's denylist and its measured model),
     `.gap` (no_gap / gap / recovered / open / not_measurable, with the McNemar p-value),
     `.denylisted_ops`, `.forced_nodes`, `.quantizer`; `layers[].propagated_*` (whole-model verify).
     `recommendation.denylisted_nodes` is the final pick and selective.tflite that model.
     Version-1 files are migrated when read (`migrate`).
  3: `findings` (reporter/findings/derive.py: verdict per variant with significance, gap, culprits, fix,
     warnings, hints, gate, the headline), derived from the measured report; every renderer reads
     them. `metrics.top5_accuracy`, `.roc_auc`, `.classes_present`, `.paired` (discordant counts
     against float and FIQ, for McNemar); `model.binary_sigmoid`; `model.largest_weight_elements`.
     Version-2 files are migrated (the findings are derived when read).
     Later additions with defaults (files without them still read as version 3):
     `variants[].measurement_errors` ({measurement: one-line error} for a measurement of a built model
     that failed: "analyzer", "ops", "metrics" / "output_error", "latency"; its field stays empty or null);
     `findings.variants[].not_measured` (the same); `settings.latency_timing` (batch runs).
  4: beyond TensorFlow's converter. `model.format` "tflite" (a float .tflite input); `variants[].converter`
     ("TensorFlow converter", "LiteRT Quantizer", "given"); variant "wo8" (weight-only int8);
     `variants[].layer_errors` (every quantized variant against float, tensor by tensor: MSE, SNR,
     cosine, the SNR lost at each layer, weight SNR; the layer to blame); `variants[].fix` (a variant
     that loses accuracy, rebuilt with the blamed layers in float, measured);
     `recommendation.alternatives` (the recommended layers in 16x8 or DRQ instead of float, measured);
     `variants[].overlays` (Model Explorer node-data files, one per metric); `metrics.correct_bits`
     (which samples each variant gets right) and `dataset.fingerprint` (what was evaluated), so that
     two runs can be paired (`quant-report diff`).
     Version-3 files read as they are (every new field has a default).
  5: several inputs fed by name, integer inputs, several outputs. `model.inputs` (name, shape with -1 for
     dynamic dimensions, dtype) for every input, in the TFLite signature's order; `model.input_shape` stays
     the first input's shape. With several outputs, `model.outputs` (name, signature key, shape, task,
     classes, labelled, primary) and `variants[].heads` (every output's metrics or output error, by name);
     `metrics` / `output_error` are the primary output's; version-4 files migrate (one input, named "x").
     Later additions with defaults (files without them still read as version 5): tasks "segmentation" (dense
     per-pixel or per-timestep classes: `metrics.accuracy` is pixel accuracy, `metrics.mean_iou`,
     `.iou_per_class`, a pixel confusion matrix) and `metrics.main` (the metric the verdicts read when it is
     not accuracy: mean IoU, or the user's `--metric`, with its interval and paired tests over samples);
     `metrics.user`; `model.main_metric`; `settings.task`, `.metric`, `.metric_mode`; `variants[].nonfinite_outputs`
     (evaluation samples with NaN or inf outputs); `findings.decision`, `variants[].reference_kernels` (--target),
     `recommendation.search.spread`, `.beyond` (the compact sets, wide-range chains and regions along the graph's
     order measured before a loss is called spread), `.selection_data.grown_from`; `variants[].weight_coverage` (weight tensors
     stored below float32, per op type) and `engines` (one scheme from both engines, against each other).
     Standard JSON: a non-finite number is written as null (`to_json`); `layer_errors.layers[].cosine` may be null.
     `findings.variants[].latency_vs_float`, `.latency_vs_fiq`, `.labels_beyond_noise` (every yes/no a view shows is
     a findings' field): findings stored without them are derived again when read. Task "detection" (a model
     ending in TFLite_Detection_PostProcess): `metrics.detection` (mAP@0.5, COCO mAP, recall at IoU 0.5, AP@0.5
     and labelled boxes per class; `recall50` null when no box is labelled), `variants[].clipped_outputs[].part` (which
     of its outputs clips). Every figure is read within its bound (reporter.model.bounds; docs/report-json.md).
     A kind's own figures are `metrics.figures.<kind>` (reporter.model.figures: the record the kind declares):
     `metrics.detection` is now `metrics.figures.detection`, `metrics.mean_iou` and `.iou_per_class`
     `metrics.figures.segmentation`; files with the old fields are migrated when read (`_figures_by_kind`, as each
     kind's record says what it replaces). `variants[].shared_scales` (reporter.model.shared_scale: an integer output
     a CONCATENATION joins from parts, by output name: the scale and zero point they share, each part's float range
     and the share of its nonzero values that grid rounds to 0).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from reporter.core import tasks
from reporter.core.records import as_stored
from reporter.core.variants import FLOAT, RULE_METHOD, SEARCH_METHOD, SELECTIVE
from reporter.model.bounds import (
    COUNT, ERROR_OR_INF, INDEX, LATENCY, NON_NEGATIVE, P_VALUE, SCORE_SHARE, SEARCH_SHARE, SECONDS, SHARE, SIZE, figure,
)
from reporter.model.decode import DecodeError, decode, got, kind, loads as bounded_loads
from reporter.model import hardware
from reporter.model import figures
from reporter.model.findings import Findings
from reporter.model.settings import Settings
from reporter.model.repair import RepairRung
# The records of one measured model live in reporter.model.variant; they are read from here too.
from reporter.model.variant import (  # noqa: F401 - re-exported
    MEASUREMENTS, ClassMetrics, EnginePair, HeadResult, LayerError, LayerErrors, Latency, MainMetric,
    Metrics, OutputError, Paired, PairedScore, SchemeFix, VariantResult,
)
from reporter.model.regression import TargetError  # noqa: F401 - re-exported

SCHEMA_VERSION = 5

# The seed notebook's reference: rmse/scale of a well-quantized tensor is about 1/sqrt(12).
RMSE_OVER_SCALE_IDEAL = 0.2886751345948129




@dataclass(frozen=True)
class InputInfo:
    """One input of the model, as its TFLite signature names it."""

    name: str
    shape: list  # -1 marks a dynamic dimension
    dtype: str  # "float32", or e.g. "int32" for token or category ids


@dataclass(frozen=True)
class OutputInfo:
    """One output (head) of a model with several outputs."""

    name: str  # the Keras output name (a float .tflite: its signature's name)
    key: str  # the TFLite signature's name for it ("output_0", ...)
    shape: list
    task: str  # "classification", "binary" (one sigmoid unit), "multilabel", "segmentation" or "regression"
    num_classes: Optional[int] = None
    labelled: bool = False  # labels were given (y_<name>); an unlabelled head is compared with float only
    primary: bool = False  # the output behind the report's main measurements (--primary-output, or the first labelled)


@dataclass(frozen=True)
class ModelInfo:
    name: str
    source: str
    format: str  # "keras", "h5" or "saved_model"
    input_shape: list  # from the float TFLite model; -1 marks a dynamic dimension
    num_classes: Optional[int]  # None when the output is not class scores
    task: str  # a kind's name as recorded (reporter.core.tasks: a binary sigmoid is "classification"): `task_kind`
    stateful: bool = False  # variable tensors keep state between invokes (e.g. fused LSTM ops)
    # Quantization-aware (fake-quant nodes, tfmot layers): the float model holds QUANTIZE/DEQUANTIZE pairs; "float" is
    # then the fake-quant graph run in float, DRQ's conversion (Optimize.DEFAULT) the QAT int8 model.
    fake_quant_pairs: int = figure(COUNT, 0)
    # One sigmoid output unit with 0/1 labels: class 1 when the output is at least 0.5.
    binary_sigmoid: bool = False
    largest_weight_elements: Optional[int] = figure(COUNT, None)  # the biggest constant tensor of the float model
    inputs: list[InputInfo] = field(default_factory=list)  # every input, by name (schema 5)
    task_reason: str = ""  # why the output was read as this task (schema 5)
    label_note: str = ""  # how the labels were read, when it is not as given (float class ids, ...)
    outputs: list[OutputInfo] = field(default_factory=list)  # several outputs only (schema 5)
    # The metric every verdict, gap and gate reads: "accuracy", "exact-match accuracy", "mean IoU" or the
    # name of the user's --metric ("" in reports written before it was recorded: accuracy).
    main_metric: str = ""
    # A Keras 3 recurrent model converted through a tf_keras twin (batch 1): the largest absolute output
    # difference between the twin and the Keras 3 model, on `twin_samples` evaluation samples (None: no twin).
    twin_max_abs_difference: Optional[float] = figure(NON_NEGATIVE, None)
    twin_samples: int = figure(COUNT, 0)
    # A .tflite input changed so it can be quantized (a signature built, float16 constants widened, op codes
    # normalized: reporter/inputs/tflite_prep.py), one sentence per change; empty when used as given.
    input_changes: list[str] = field(default_factory=list)

    @property
    def task_kind(self) -> tasks.TaskKind:
        """The registry's entry for this model's task (`task`, `binary_sigmoid` and its classes as recorded)."""
        return tasks.recorded(self.task, self.binary_sigmoid, self.num_classes is not None, self.main_metric)


@dataclass(frozen=True)
class DatasetInfo:
    source: str
    num_eval: int = figure(COUNT)
    num_calibration: int = figure(COUNT)
    calibration_overlaps_eval: bool
    calibration_source: str  # "x_calib" or "x"
    # sha256 of the evaluation inputs and labels (shapes, dtypes, bytes): two reports measured the same
    # samples when these agree ("" in reports written before schema 4)
    fingerprint: str = ""


@dataclass(frozen=True)
class Alternative:
    """The recommended layers given a lighter scheme than float (16x8 or dynamic range), measured."""

    scheme: str  # "int16x8" or "drq"
    layers: list[str]
    model: Optional["VariantResult"] = None
    applicable: bool = True  # False: the scheme changes none of these layers (e.g. DRQ on ops without weights)
    error: Optional[str] = None


@dataclass(frozen=True)
class LayerStat:
    """One row of the quantization debugger's layer statistics, plus derived columns."""

    index: int = figure(INDEX)
    op_name: str
    tensor_name: str
    tensor_idx: int = figure(INDEX)
    num_elements: float = figure(COUNT)
    # None: not measured (a LiteRT Quantizer model, compared by reporter.debug.blame)
    stddev: Optional[float] = figure(NON_NEGATIVE)
    mean_error: Optional[float]
    max_abs_error: Optional[float] = figure(NON_NEGATIVE)
    mean_squared_error: float = figure(ERROR_OR_INF)  # inf: overflowed (the debugger's float32), written null
    scale: float = figure(NON_NEGATIVE)
    zero_point: int
    range: float = figure(NON_NEGATIVE)
    rmse_over_scale: float = figure(ERROR_OR_INF)  # inf: its MSE overflowed; written null, read back as inf
    # Whole-model verify: the error accumulated by this op (a float copy of the model runs beside).
    propagated_mean_squared_error: Optional[float] = figure(NON_NEGATIVE, None)
    propagated_rmse_over_scale: Optional[float] = figure(NON_NEGATIVE, None)
    suspect: bool = False
    reasons: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class GapStatus:
    """Whether FIQ lost accuracy beyond noise, and whether the recommended model won it back."""

    status: str  # "no_gap", "gap" (not fixed), "recovered", "open" (partly fixed), "not_measurable"
    drop: Optional[float] = None  # float - model accuracy: FIQ's, or the recommended model's once fixed
    p_value: Optional[float] = figure(P_VALUE, None)  # exact McNemar test of that drop
    fiq_drop: Optional[float] = None  # float - FIQ accuracy
    reason: str = ""


@dataclass(frozen=True)
class SelectionData:  # the samples the search chose on: never the evaluation samples without saying so
    source: str  # "x_calib" or "x" (a held-out part of the evaluation data)
    num_samples: int = figure(COUNT)
    score: str  # what the selection score measures
    overlaps_evaluation: bool
    heldout_num: Optional[int] = figure(COUNT, None)  # evaluation samples the search did not see (when it overlaps)
    heldout_accuracy: dict = field(default_factory=dict)  # float / fiq / selective accuracy on them
    overlaps_calibration: bool = False  # x_calib held too few samples beyond the calibration samples
    # the smallest change in the selection score a paired test can show
    detectable: Optional[float] = figure(SHARE, None)
    # the gap was near what this many could show: all x_calib beyond calibration
    grown_from: Optional[int] = figure(COUNT, None)
    # FIQ's selection score on the evaluation data (from the run's stored outputs; None when the selection samples are
    # a part of them), and whether the two data sets show it differently beyond noise (two independent samples)
    fiq_on_evaluation: Optional[float] = None
    differs: Optional[bool] = None


@dataclass(frozen=True)
class SearchStep:
    denylisted_nodes: list[str]
    size_bytes: int = figure(SIZE)
    selection_score: float
    phase: str  # "fiq", "probe", "add", "drop", "rule"
    change: str
    accepted: bool
    # on the evaluation data: the main metric (a share, or the user's metric, any number: `score_share` False)
    accuracy: Optional[float] = figure(SCORE_SHARE, None)
    output_mse: Optional[float] = figure(NON_NEGATIVE, None)  # on the evaluation data, against float (regression)
    latency_ms: Optional[float] = figure(LATENCY, None)
    pareto: bool = False  # no other step is both smaller and more accurate
    chosen: bool = False
    score_share: bool = True  # `accuracy` is a share (accuracy, mean IoU); False: the user's metric, any number


@dataclass(frozen=True)
class TriedSet:
    """A set of ops beyond the compact ones that the search measured alone (reporter.search.engine.look_beyond)."""

    kind: str  # "chain" (connected wide-range ops with their consumers), "prefix" or "suffix" (the graph's order)
    ops: int = figure(COUNT)  # ops kept in float
    first: str  # the first and last of them in the graph's order
    last: str
    score: float  # selection score
    won_back: float  # share of the way from FIQ's selection score to the target (1: the target is reached)
    error_cut: float  # share of FIQ's error on the selection samples (1 - score) it removes
    cause: bool  # it reaches the target or wins back half of the way (judgement.compact_cause): worth keeping
    meets_target: bool


@dataclass(frozen=True)
class BeyondCompact:
    """What the search measured on a large model before it would call FIQ's loss spread across the network: the
    compact sets (at most `compact_limit` of `layers` debugged ops), then the debugger's chains of wide-range
    tensors as units and regions along the graph's order (prefix and suffix bisection)."""

    layers: int = figure(COUNT)
    compact_limit: int = figure(COUNT)
    compact_sets: int = figure(COUNT)  # compact sets measured (alone, and the helpful ones together)
    outcome: str  # "compact": one is the cause, nothing beyond was needed; "chain" / "region": the best set beyond
    # them is a cause; "spread": chains and regions were measured and none is; "unmeasured": the budget ran out first
    # connected chains of ops whose range is >= judgement.WIDE_RANGE_FACTOR x the median
    chains_found: int = figure(COUNT, 0)
    chains: int = figure(COUNT, 0)  # of them measured
    regions: int = figure(COUNT, 0)  # prefixes and suffixes measured
    best: Optional[TriedSet] = None  # the cause the search went on with, else the best score measured beyond


@dataclass(frozen=True)
class SearchCost:
    """The search's budget as decided before it started (reporter.search.budget), estimated from the model's file and
    the sample counts, never timed: `share` of `bare_seconds` (the bare seed calls on the same model and data),
    `candidate_seconds` per candidate, hence at most `candidates` candidates."""

    share: float = figure(SEARCH_SHARE)
    bare_seconds: float = figure(SECONDS)
    candidate_seconds: float = figure(SECONDS)
    candidates: int = figure(COUNT)


@dataclass(frozen=True)
class SearchResult:
    steps: list[SearchStep]
    evaluations: int = figure(COUNT)
    seconds: float = figure(SECONDS)
    seconds_per_candidate: float = figure(SECONDS)
    selection_data: SelectionData
    target: float  # the selection score aimed at
    target_text: str
    target_met: bool
    stop_reason: str
    budget: int = figure(COUNT)
    necessity: dict[str, float] = field(default_factory=dict)  # node -> selection score lost without it
    spread: bool = False  # no compact set, chain nor region is the loss's cause: stopped after measuring them
    beyond: Optional[BeyondCompact] = None  # a large model: what was measured before calling the loss spread
    cost: Optional[SearchCost] = None  # the budget by --search-share, estimated before the search
    out_of_budget: bool = False  # the search stopped because its budget was spent (the best set measured is kept)


@dataclass(frozen=True)
class RuleResult:
    """The seed notebook's rule (rmse/scale above a threshold, plus the first N layers), measured."""

    threshold: float
    first_layers: int = figure(COUNT)
    denylisted_nodes: list[str]
    selection_score: Optional[float] = None
    selective: Optional["VariantResult"] = None
    accuracy_gap_recovered: Optional[float] = None
    error: Optional[str] = None


@dataclass(frozen=True)
class Recommendation:
    threshold: float
    first_layers: int = figure(COUNT)
    denylisted_nodes: list[str]
    code: str
    summary: str  # one sentence on what was found and what the selective model achieved
    selective: Optional[VariantResult] = None
    size_cost_bytes: Optional[int] = None  # selective size - FIQ size
    method: str = RULE_METHOD  # SEARCH_METHOD ("search") or RULE_METHOD ("rule")
    denylisted_ops: list[str] = field(default_factory=list)
    forced_nodes: list[str] = field(default_factory=list)  # --keep-float
    gap: Optional[GapStatus] = None
    search: Optional[SearchResult] = None
    rule: Optional[RuleResult] = None
    quantizer: str = ""  # "calibrate-once", "public-debugger" or "litert-quantizer"
    quantizer_note: str = ""
    alternatives: list[Alternative] = field(default_factory=list)


@dataclass(frozen=True)
class Report:
    schema_version: int
    generated_at: str
    tool_version: str
    tensorflow_version: str
    model: ModelInfo
    dataset: DatasetInfo
    variants: list[VariantResult]
    layers: list[LayerStat]
    recommendation: Optional[Recommendation]
    timings_s: dict[str, float] = figure(SECONDS)
    settings: Settings = field(default_factory=Settings)  # the run's settings, typed (reporter.model.settings)
    debugger_error: Optional[str] = None
    engines: list[EnginePair] = field(default_factory=list)  # one scheme from both engines, side by side
    repairs: list[RepairRung] = field(default_factory=list)  # the integer-only repair ladder (int8, micro, ethos-u*)
    target_tools: dict[str, str] = field(default_factory=dict)  # the target's tools and their versions (micro, ethos-u*)
    findings: Optional[Findings] = None  # decided from everything above by reporter.findings, worded by render.words

    # --- what the record says, read the same way by the findings and the words ------------------------------
    def columns(self) -> list[VariantResult]:
        """The variants the findings judge: the built ones, the recommended model, and the rule's pick when the
        search chose."""
        cols = list(self.variants)
        rec = self.recommendation
        if rec and rec.selective:
            cols.append(rec.selective)
        if rec and rec.rule and rec.rule.selective and rec.method == SEARCH_METHOD:
            cols.append(rec.rule.selective)
        return cols

    def column(self, name: str) -> Optional[VariantResult]:
        """The judged variant called `name` (`columns`), or None."""
        return next((v for v in self.columns() if v.name == name), None)

    def metric(self) -> tuple[str, bool]:
        """The main metric's name and whether it is a share (0..1): the report's one scale, what every verdict
        reads."""
        flt = self.variant(FLOAT)
        main = flt.metrics.main if flt is not None and flt.metrics is not None else None
        if main is not None:
            return main.name, main.share
        return self.model.main_metric or self.model.task_kind.share_metric, True

    def metric_plain(self) -> bool:
        """The main metric is the kind's share of samples right (a classifier's accuracy, not the user's metric nor
        mean IoU): the words say its moves as plain points ("4.3 accuracy points"), never "points of accuracy"."""
        flt = self.variant(FLOAT)
        main = flt.metrics.main if flt is not None and flt.metrics is not None else None
        return main is None and not self.settings.metric and self.model.task_kind.plain_points

    def measurable(self) -> bool:
        """The report has a main metric to judge by (class scores, or the user's metric); else its scale is the
        output error against float."""
        return self.model.num_classes is not None or bool(self.model.main_metric)

    def primary_output(self) -> Optional[str]:
        """The output the main metric reads, for a model with several outputs (None for one output)."""
        return next((o.name for o in self.model.outputs if o.primary), None)

    def variant(self, name: str) -> Optional[VariantResult]:
        """The variant called `name`, the selective model included, or None."""
        for v in self.variants:
            if v.name == name:
                return v
        if name == SELECTIVE and self.recommendation:
            return self.recommendation.selective
        return None

    def to_dict(self) -> dict:
        """report.json's data: every field but the `unstored` ones (reporter.core.records)."""
        return as_stored(self)

    def to_json(self) -> str:
        """Standard JSON: every number that is not finite (NaN, inf) is written as null, so that every JSON
        reader (and this tool's `render`, `diff`, `--resume`, batch index) reads the file."""
        return json.dumps(finite(self.to_dict()), indent=2, sort_keys=False, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict) -> "Report":
        """A report from parsed report.json data, migrated and type-checked: any malformed value is a ValueError
        whose one-line message names the field's path ("variants[1].size_bytes: expected an integer, ...")."""
        data = migrate(data)
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"report schema_version {version!r} is not supported (this tool reads {SCHEMA_VERSION})"
            )
        data = dict(data)
        stored = data.pop("findings", None)
        try:
            report = _build(cls, data)
            # Only loads: a report whose findings were dropped by `migrate` gets them from
            # reporter.render.load_report, the one place that decides and words them again.
            findings = _build(Findings, stored, "findings") if stored is not None else None
        except RecursionError:
            raise ValueError("report.json is nested too deeply to be a report") from None
        return dataclasses.replace(report, findings=findings)

    @classmethod
    def from_json(cls, text: str) -> "Report":
        try:
            data = bounded_loads(text)  # depth and number size bounded: a hostile file is one line
        except RecursionError:
            raise ValueError("report.json is nested too deeply to be a report") from None
        return cls.from_dict(data)


def finite(value):
    """`value` (JSON data: dicts, lists, numbers, ...) with every float that is NaN or infinite replaced by
    None; the rest as it is (a new container only where something changed)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        new = {k: finite(v) for k, v in value.items()}
        return value if all(new[k] is value[k] for k in value) else new
    if isinstance(value, (list, tuple)):
        new = [finite(v) for v in value]
        return value if all(a is b for a, b in zip(new, value)) else new
    return value


def check_version(data) -> int:
    """The schema_version of report.json data, or a ValueError saying why it is not one this tool reads."""
    if not isinstance(data, dict):
        raise ValueError(f"the top level is {kind(data)}, not a JSON object")
    if "schema_version" not in data:
        raise ValueError("schema_version: missing (not a quant-report report.json?)")
    version = data["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise DecodeError("schema_version", f"expected an integer, got {got(version)}")
    if not 1 <= version <= SCHEMA_VERSION:
        newer = "; a newer quant-report may read it" if version > SCHEMA_VERSION else ""
        raise DecodeError("schema_version", f"{version} is not supported "
                                            f"(this tool reads versions 1 to {SCHEMA_VERSION}{newer})")
    return version


def migrate(data: dict) -> dict:
    """Brings an older report.json up to SCHEMA_VERSION, so that every saved report still renders.
    Data that is not a report of a version this tool reads is a ValueError (see `check_version`)."""
    check_version(data)
    if data.get("schema_version") == 1:
        data = json.loads(json.dumps(data))  # a deep copy: the caller's dict stays as it was
        data["schema_version"] = 2
        rec = data.get("recommendation")
        if isinstance(rec, dict):  # anything else is reported by the typed decoder
            rec.setdefault("method", RULE_METHOD)
    if data.get("schema_version") == 2:
        # Version 3 only adds fields with defaults; the findings are derived when the report is built.
        data = json.loads(json.dumps(data))
        data["schema_version"] = 3
        data.pop("findings", None)
    if data.get("schema_version") == 3:
        # Version 4 only adds fields with defaults; the findings are derived again (they may say more).
        data = json.loads(json.dumps(data))
        data["schema_version"] = 4
        data.pop("findings", None)
    if data.get("schema_version") == 4:
        # Version 5 lists the inputs by name: a version-4 model had one, fed from the array `x`.
        data = json.loads(json.dumps(data))
        data["schema_version"] = 5
        model = data.get("model")
        if isinstance(model, dict) and "inputs" not in model and isinstance(model.get("input_shape"), list):
            model["inputs"] = [{"name": "x", "shape": model["input_shape"], "dtype": "float32"}]
    data = _figures_by_kind(data)
    data = hardware.migrated(data)  # the target tools' figures, once a field each, kept by tool
    found = data.get("findings")
    if isinstance(found, dict) and isinstance(found.get("variants"), list) \
            and any(isinstance(v, dict) and "latency_vs_float" not in v for v in found["variants"]):
        data = {k: v for k, v in data.items() if k != "findings"}  # derived again when read (see the history above)
    return data


def _figures_by_kind(data: dict) -> dict:
    """`data` with every `metrics` record's fields that a kind's figures replaced (reporter.model.figures.replaced:
    `detection`, `mean_iou`, `iou_per_class`) moved into its `figures` map by kind name (null fields dropped, as a
    run leaves them out)."""
    old = figures.replaced()

    def moved(metrics: dict) -> dict:
        found = dict(metrics.get("figures") or {})
        out = {k: v for k, v in metrics.items() if k not in old}
        for key, (kind, name) in old.items():
            value = metrics.get(key)
            if value is not None:
                found[kind] = value if name is None else {**found.get(kind, {}), name: value}
        if found:
            out["figures"] = found
        return out

    def walk(value):
        if isinstance(value, dict):
            return {k: moved(walk(v)) if k == "metrics" and isinstance(v, dict) and old.keys() & v.keys()
                    else walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(data)


def _build(tp, value, path: str = ""):
    """A value of type `tp` (a dataclass, list, dict or Optional of them) from JSON data, every value checked
    against the declared types (reporter.model.decode): a DecodeError (a ValueError) names the first that is not."""
    return decode(tp, value, path)


def layer_of(tensor: str) -> str:
    """The Keras layer a TFLite tensor comes from, read from its name: "model/normalization/Sub" ->
    "normalization". Empty when the name has no scope."""
    parts = [p for p in tensor.split(";")[0].split("/") if p]
    return parts[-2] if len(parts) >= 2 else ""
