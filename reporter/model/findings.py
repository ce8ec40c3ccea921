"""The findings' records: what the measured report means, typed, saved in report.json beside the measurements.

They are decided by reporter.findings.derive (one pure function, `decide`) and worded by reporter.render.words:
the numbers and kinds of a record are the decision, its sentence fields (`verdict`, `text`, `headline`,
`recommendation`, `message`, `reason`, `score_text`) the words. A field marked `unstored` (reporter.core.records)
is a decision only the words read: report.json does not keep it. Every renderer, the index, the gate and the
CLI read them. This module only declares them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from reporter.core import variants
from reporter.core.records import unstored
from reporter.model.bounds import (
    CLASS_ID, COUNT, CULPRIT_INDEX, HEAD_VALUE, INDEX, LATENCY, LATENCY_STEP, NON_NEGATIVE, P_VALUE, RATIO, SCORE_SHARE,
    SHARE, SIZE, figure,
)
from reporter.model.hardware import ToolFigures
from reporter.model.kernels import ReferenceAgreement

# How a Comparison's numbers read (`Comparison.measure`).
POINTS = "points"  # accuracy, a share of samples right: in points, McNemar on the paired counts
SCORE = "score"  # a main metric other than accuracy (mean IoU, the user's metric): the paired bootstrap
OTHER_METRICS = "other_metrics"  # the two were measured by different metrics: not comparable

# Why the gap is what it is (`GapFinding.why`).
FIQ_NOT_BUILT, FIQ_FAILED = "fiq_not_built", "fiq_failed"
NOT_CLASS_SCORES = "not_class_scores"  # no accuracy: the report compares output error instead
METRIC_NOT_MEASURED = "metric_not_measured"  # FIQ's or float's main metric was not measured (`GapFinding.variant`)
SEARCHED = "searched"  # the search measured it (Recommendation.gap's figures; `GapFinding.standing`)
FLOAT_NOT_MEASURED = "float_not_measured"
NOT_WORSE = "not_worse"  # FIQ at least as good as float
NOISE = "noise"  # FIQ's drop within noise
LOSES = "loses"  # FIQ worse beyond noise: the gap (`fiq_drop`)
ALLOWED = "allowed"  # FIQ's drop within --max-accuracy-drop
FIX_MEETS = "fix_meets"  # the recommended model meets the accuracy target: the gap is recovered
FIX_MISSES = "fix_misses"  # the recommended model does not: the gap stays open


@dataclass(frozen=True)
class Comparison:
    """A variant's accuracy against a reference variant on the same samples (paired)."""

    reference: str
    delta: float  # variant - reference on the main metric (accuracy 0..1), positive: better
    # exact McNemar (paired bootstrap for mean IoU or a user's metric); None: not recorded
    p_value: Optional[float] = figure(P_VALUE)
    significant: Optional[bool]
    text: str  # "−32.5 points (p < 0.001)", "within noise (+0.9 points, p = 1)"
    measure: str = unstored(POINTS)  # POINTS, SCORE or OTHER_METRICS
    share: bool = unstored(True)  # SCORE: the metric is a share (0..1), compared in points
    higher_is_better: bool = unstored(True)  # SCORE
    same: bool = unstored(False)  # right on exactly the same samples (POINTS), the same value (SCORE)


@dataclass(frozen=True)
class Degenerate:
    """A variant that predicts one class for (nearly) every sample, where float does not."""

    label: int = figure(CLASS_ID)
    share: float = figure(SHARE)
    float_share: float = figure(SHARE)


@dataclass(frozen=True)
class BlameFinding:
    """The layer a variant's per-layer error blames, and the measured fix when the variant loses accuracy."""

    tensor: str
    layer: str  # the model layer the tensor belongs to (see layer_of)
    op: str
    snr_db: Optional[float] = None
    snr_drop_db: Optional[float] = None
    weight_snr_db: Optional[float] = None
    fix_status: str = "none"  # "fixed", "open", "failed", "none" (no fix built: the variant does not lose accuracy)
    fix_layers: list[str] = field(default_factory=list)
    fix_accuracy: Optional[float] = None
    fix_vs_float: Optional[Comparison] = None
    fix_converter: str = ""
    text: str = ""


@dataclass(frozen=True)
class VariantFinding:
    name: str
    label: str
    ok: bool
    error: str = ""
    # "reference", "same" (within noise), "worse", "better", "not_measurable", "not_measured" (its accuracy
    # or output error failed to be measured), "failed"
    direction: str = ""
    accuracy: Optional[float] = figure(SCORE_SHARE, None)
    accuracy_low: Optional[float] = figure(SCORE_SHARE, None)  # Wilson 95 % interval
    accuracy_high: Optional[float] = figure(SCORE_SHARE, None)
    main_metric: str = ""  # a second metric beside accuracy: "ROC AUC", "Top-5 accuracy" or "F1 (macro)"
    main_value: Optional[float] = figure(SHARE, None)
    # What `accuracy` (and its interval, vs_float, vs_fiq) measures when it is not accuracy: "exact-match
    # accuracy", "mean IoU" or the user's metric; `score_share` False: a plain number, not a share.
    score_name: str = ""
    score_share: bool = True
    vs_float: Optional[Comparison] = None
    vs_fiq: Optional[Comparison] = None  # the recommended model and the rule's pick
    size_bytes: Optional[int] = figure(SIZE, None)
    size_ratio: Optional[float] = figure(RATIO, None)  # size / float size
    latency_ms: Optional[float] = figure(LATENCY, None)
    latency_ratio: Optional[float] = figure(RATIO, None)  # latency / float latency
    slower: bool = False  # beyond judgement.LATENCY_NOTABLE_RATIO
    output_mse: Optional[float] = figure(NON_NEGATIVE, None)  # regression: against the float output
    # regression: the float output's variance (the MSE's scale)
    output_variance: Optional[float] = figure(NON_NEGATIVE, None)
    degenerate: Optional[Degenerate] = None
    verdict: str = ""  # one line
    not_measured: dict[str, str] = field(default_factory=dict)  # measurement -> error (VariantResult's)
    blame: Optional[BlameFinding] = None  # only for a quantized variant that loses accuracy
    quantized: Optional[bool] = None  # anything stored below float32 (reporter.core.targets.quantized); None: not read
    drq_nothing: bool = False  # DRQ as large as float with no int8 tensor: the converter quantized no weight
    quantized_little: bool = False  # under judgement.ALMOST_NOTHING_SHARE of the weight values below float32
    weights_share: Optional[float] = figure(SHARE, None)  # the share of the weight values stored below float32
    # Its latency against float's, and (the recommended model, the rule's pick) against FIQ's, by the timing-noise rule
    # (judgement.latency_step): 0 neither is faster, -1 / +1 faster / slower, -2 / +2 beyond judgement.COUNT_BIG_RATIO
    # times; None: either was not timed (float itself: None)
    latency_vs_float: Optional[int] = figure(LATENCY_STEP, None)
    latency_vs_fiq: Optional[int] = figure(LATENCY_STEP, None)
    # Multi-label: the labels (their place in metrics.per_class) whose correctness differs from float's beyond noise
    labels_beyond_noise: list[int] = figure(INDEX, default_factory=list)


@dataclass(frozen=True)
class Reason:
    kind: str  # "needed" (measured by the search), "rmse_over_scale", "first_layers", "forced"
    text: str
    value: Optional[float] = None
    threshold: Optional[float] = None


@dataclass(frozen=True)
class Culprit:
    """A layer to blame: kept in float by the recommendation (or flagged by the rule, when nothing
    was built), with the structured reasons."""

    index: int = figure(CULPRIT_INDEX)  # -1: a tensor the debugger's layers do not hold
    op: str
    tensor: str
    layer: str  # the Keras layer the tensor belongs to, read from its name ("" when unknown)
    reasons: list[Reason] = field(default_factory=list)
    kept: bool = False


@dataclass(frozen=True)
class GapFinding:
    status: str  # "no_gap", "gap" (nothing fixed it), "recovered", "open" (partly), "not_measurable"
    reason: str  # `why` in words
    fiq_drop: Optional[float] = None  # float - FIQ accuracy
    p_value: Optional[float] = figure(P_VALUE, None)
    why: str = unstored("")  # FIQ_NOT_BUILT, ..., LOSES
    variant: str = unstored("")  # METRIC_NOT_MEASURED: the variant whose main metric was not measured
    # SEARCHED: how the figures the search measured (Recommendation.gap: FIQ's drop, or the recommended model's once
    # built) stand against the accuracy target (reporter.core.judgement.NOT_WORSE ... LOSES)
    standing: str = unstored("")


@dataclass(frozen=True)
class FixFinding:
    """The recommended model, as measured: only called a fix when it was built and measured."""

    layers: int = figure(COUNT)
    built: bool
    status: str  # "recovered", "open", "measured" (regression: output error only), "failed", "not_built"
    accuracy: Optional[float] = None
    points_won_back: Optional[float] = None  # recommended - FIQ accuracy (0..1)
    share_of_gap: Optional[float] = None
    vs_fiq: Optional[Comparison] = None
    vs_float: Optional[Comparison] = None
    size_cost_bytes: Optional[int] = None  # against FIQ
    output_mse: Optional[float] = figure(NON_NEGATIVE, None)
    fiq_output_mse: Optional[float] = figure(NON_NEGATIVE, None)
    rule_layers: Optional[int] = figure(COUNT, None)
    rule_share_of_gap: Optional[float] = None
    text: str = ""  # why it failed, when it did
    # The scheme the recommended layers use in the pick: "float", or a lighter one ("int16x8", "drq") measured as
    # good within noise and smaller (reporter.findings.derive._pick), with why (reporter.render.words).
    scheme: str = variants.FLOAT
    scheme_reason: str = ""


@dataclass(frozen=True)
class AlternativeFinding:
    """The recommended layers in a lighter scheme than float, against the recommended model."""

    scheme: str  # "float" (LiteRT's own FIQ with them in float), "int16x8" or "drq"
    converter: str
    status: str  # "lighter" (as accurate within noise and smaller), "worse", "not_lighter", "not_applicable", "failed"
    accuracy: Optional[float] = None
    vs_recommended: Optional[Comparison] = None
    size_delta_bytes: Optional[int] = None  # against the recommended model
    text: str = ""


@dataclass(frozen=True)
class Notice:
    code: str  # stable, for tools: "stateful", "calibration_overlap", "classes_missing", "measurement_failed", ...
    text: str
    output: str = ""  # the output its sentence is about, by name ("" : none in particular); its figures are its own


@dataclass(frozen=True)
class GateFinding:
    passed: bool
    variant: str
    limit: float = figure(SHARE)
    drop: Optional[float]
    p_value: Optional[float] = figure(P_VALUE)
    message: str


@dataclass(frozen=True)
class HeadFinding:
    """One output of a model with several outputs, for one model variant."""

    output: str
    variant: str
    measure: str  # "accuracy", "agreement with float" (no labels), "output MSE" (regression or no labels)
    value: Optional[float] = figure(HEAD_VALUE, None)
    vs_float: Optional[Comparison] = None  # labelled class-score outputs
    worse: bool = False  # less accurate than float beyond noise
    text: str = ""  # the cell: "51.9 % [42.3–61.2] (−44.4 points, p < 0.001)"
    low: Optional[float] = unstored(None)  # accuracy: the Wilson 95 % interval
    high: Optional[float] = unstored(None)
    variance: Optional[float] = unstored(None)  # output MSE: the float output's variance (the MSE's scale)


@dataclass(frozen=True)
class TradeoffPoint:
    """One quantized model measured (a variant, the recommended model, its layers in a lighter scheme) on the
    trade-off between size, latency and the main metric."""

    name: str  # the variant's name: "fiq", "selective", "alt_int16x8", ...
    label: str
    score: float  # the main metric, as measured
    score_text: str
    vs_float: Optional[Comparison]
    size_bytes: int = figure(SIZE)
    latency_ms: Optional[float] = figure(LATENCY)
    meets_target: bool  # not worse than float beyond noise (or the allowed drop)
    pareto: bool  # no other model is smaller, faster and better at once
    picks: list[str] = field(default_factory=list)  # what the decision names it: SHIP, RUNNER_UP or NOT_QUANTIZED
    chosen: bool = False  # the decided model (`Decision.variant`)
    # runs on the decision's --target as built; None: not tried by the target's own tool (TFLite Micro, Vela)
    runs_on_target: Optional[bool] = True
    why: str = ""  # the decision's reason it is not the model shipped (`Option.why`, OPT_*)
    share: bool = unstored(True)  # the main metric is a share (0..1): `score_text` in percent


# Why the decision is what it is (`Decision.why`).
MEETS = "meets"  # the cheapest model for the target that meets the accuracy target
FLOAT_CHEAPER = "float_cheaper"  # a CPU: quantized models meet the target, but each costs more there than float
NONE_MEETS = "none_meets"  # no quantized model for the target meets it: float is kept (cpu, gpu), none (int8)
NO_CANDIDATE = "no_candidate"  # nothing for the target was built and measured
FLOAT_DEGENERATE = "float_degenerate"  # float itself answers one class (or one value) for every sample: no answer
SHIP, RUNNER_UP = "ship", "runner-up"  # `TradeoffPoint.picks`
NOT_QUANTIZED = "not quantized"  # `TradeoffPoint.picks`: the converter quantized nothing of it (float by another name)


# Why one engine's model is the better of a scheme built by both (`EngineChoice.why`).
ENGINE_CHEAPER = "cheaper"  # both meet the accuracy target: the cheaper for the target
ENGINE_ONLY_MEETS = "only_meets"  # only it meets the accuracy target
ENGINE_NEARER = "nearer"  # neither meets it: the nearer to float, beyond noise (the paired test between the two)
ENGINE_TIE = "tie"  # the two cannot be told apart: the same cost, or neither meets and they differ within noise


@dataclass(frozen=True)
class EngineChoice:
    """Of one scheme built by both engines (`Report.engines`), the one the decision would take in that lane."""

    scheme: str
    tf: str
    litert: str
    better: str = ""  # the variant; "" when the two could not be judged (float or a metric not measured)
    why: str = ""  # ENGINE_CHEAPER, ENGINE_ONLY_MEETS, ENGINE_NEARER or ENGINE_TIE


# Why an option is not the model shipped (`Option.why`); "" for the shipped one.
OPT_REFERENCE = "reference"  # float: the reference every option is judged against
OPT_NOT_MEASURED = "not_measured"  # the report's main metric (or output error) was not measured for it
OPT_NOT_ON_TARGET = "not_on_target"  # it does not run on the target as built (read from its tensor types)
OPT_NOT_QUANTIZED = "not_quantized"  # the converter quantized nothing of it: float by another name
OPT_DOES_NOT_MEET = "does_not_meet"  # it does not meet the accuracy target
OPT_COSTS_MORE = "costs_more"  # it meets the target but costs more on the target than the shipped one
OPT_TIE_LESS_ACCURATE = "tie_less_accurate"  # as cheap, but less accurate beyond noise (the paired comparison)
OPT_TIE_LARGER = "tie_larger"  # as cheap and as accurate within noise, but larger
OPT_RUNNER_UP = "runner_up"  # meets the target and trades differently: named as the runner-up


@dataclass(frozen=True)
class Option:
    """One model measured, judged once against float and the target by reporter.findings.decision (the one
    acceptance rule, reporter.findings.rule.meets_target, on the report's one scale); report.json keeps every
    option, and every sentence and table about the decision reads these records."""

    name: str
    label: str
    score: Optional[float]  # the report's scale: its main metric as measured, or (no main metric) output R² against
    # float; None: not measured on that scale (never judged on another)
    standing: str  # reporter.findings.rule.standing of its worst output: not_worse, allowed, noise, close, loses,
    # not_measured
    meets: bool  # the accuracy target, on every labelled output
    runs: bool  # on the target, as built (read from its tensor types)
    quantized: bool  # anything stored below float32
    size_bytes: int = figure(SIZE)
    latency_ms: Optional[float] = figure(LATENCY, None)  # median, one thread, as timed here
    # its spread: what "faster beyond timing noise" reads (None: fewer than judgement.MIN_TIMED_RUNS runs, no spread
    # told)
    latency_p90_ms: Optional[float] = figure(LATENCY, None)
    vs_float: Optional[Comparison] = None  # the main metric against float, paired
    cost: Optional[float] = None  # among the options that run on the target and meet the accuracy target: size
    # (and, where the target is timed, latency) in doublings over the cheapest; None for the others
    why: str = ""  # OPT_*: why it is not the model shipped ("" for the shipped one)
    higher_is_better: bool = True  # the scale's direction
    # the output error against float (a report without a main metric)
    output_mse: Optional[float] = figure(NON_NEGATIVE, None)
    output_variance: Optional[float] = figure(NON_NEGATIVE, None)
    kernels: str = ""  # what `score` was measured on, where the target has kernels of its own ("" : LiteRT's default)
    not_there: str = ""  # why it does not run on the target, in the target's tool's own words
    npu_share: Optional[float] = figure(SHARE, None)  # an Ethos-U target: the share of its ops Vela puts on the NPU
    estimate_ms: Optional[float] = figure(LATENCY, None)  # an Ethos-U target: Vela's estimated inference time
    # it predicts this class for (nearly) every sample (judgement.DEGENERATE_SHARE)
    one_class: Optional[int] = figure(CLASS_ID, None)
    loses: bool = unstored(False)  # worse than float beyond noise (`vs_float`'s paired test)
    tools: Optional[ToolFigures] = unstored(None)  # its target tools' figures (its variant's on_target keeps them)
    tried: bool = unstored(False)  # the target's own check ran it (its variant's on_target is recorded)
    # Its latency against float's and the shipped model's, as VariantFinding.latency_vs_float (None: not timed)
    latency_vs_float: Optional[int] = unstored(None)
    latency_vs_ship: Optional[int] = unstored(None)


@dataclass(frozen=True)
class Decision:
    """The model to ship for the run's --target (reporter.core.targets), decided from every model measured:
    those that run on the target and meet the accuracy target (within noise of float, or within
    --max-accuracy-drop), then the cheapest by the target's priorities."""

    target: str  # the run's --target: a name in reporter.core.targets.REGISTRY
    variant: str  # the model to ship ("" when nothing for the target can be: int8 without an integer-only model)
    label: str
    meets_target: bool  # a quantized model for the target meets the accuracy target (float may still ship: CPU)
    why: str  # MEETS, FLOAT_CHEAPER, NONE_MEETS or NO_CANDIDATE
    reason: str = ""  # the headline's first sentence
    runner_up: str = ""  # meets the target and trades differently (smaller, faster or more accurate); or, when
    # none meets, the target's closest model
    runner_up_label: str = ""
    would_meet: str = ""  # none meets: the cheapest model that meets the accuracy target but not the hardware
    file: str = ""  # the shipped model's .tflite in the report folder
    reference_agreement: Optional[ReferenceAgreement] = None  # int8: default against reference kernels
    candidates: int = figure(COUNT, 0)  # models measured that run on the target
    would_meet_label: str = ""
    options: list[Option] = field(default_factory=list)  # every model measured, judged: what the decision read
    # FLOAT_DEGENERATE: the class float predicts for every sample (None: a regression whose float output does not vary)
    degenerate_class: Optional[int] = figure(CLASS_ID, None)
    input_transform: Optional["InputTransform"] = None  # a repaired model that needs the host to standardize its input
    hardware: Optional["OnTarget"] = None  # the shipped model where it ships (int8, micro, ethos-u*): the tool's figures  # every model measured, judged: what the decision read

    def option(self, name: str) -> Optional[Option]:
        return next((o for o in self.options if o.name == name), None)


@dataclass(frozen=True)
class Findings:
    task: str  # "classification", "binary" (one sigmoid unit) or "regression"
    headline: list[str]  # the story, in two or three sentences
    variants: list[VariantFinding]
    gap: GapFinding
    culprits: list[Culprit]
    fix: Optional[FixFinding]
    warnings: list[Notice]
    hints: list[Notice]
    gate: Optional[GateFinding] = None
    recommendation: str = ""  # one sentence: what the recommendation keeps in float and what that measured
    alternatives: list[AlternativeFinding] = field(default_factory=list)
    heads: list[HeadFinding] = field(default_factory=list)  # several outputs: every output of every variant
    tradeoff: list[TradeoffPoint] = field(default_factory=list)  # every model measured: the one comparison table
    decision: Optional[Decision] = None  # the model to ship for --target
    engines: list[EngineChoice] = field(default_factory=list)  # one scheme from both engines: the better of the two

    def variant(self, name: str) -> Optional[VariantFinding]:
        return next((v for v in self.variants if v.name == name), None)


# The record of a model where it ships (it holds measurements: reporter.model.variant defines it, importing this
# module's names first); read here for `Decision.hardware`'s type.
from reporter.model.variant import OnTarget  # noqa: E402,F401 - after the records variant.py reads from here
from reporter.model.repair import InputTransform  # noqa: E402,F401 - the same
