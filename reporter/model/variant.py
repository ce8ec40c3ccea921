"""What one model of a report measured: size, ops, tensor types, latency, the task's metrics, the error
against float, layer by layer, and the fix of a variant that loses accuracy (reporter.model.report holds them
in `Report.variants`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from reporter.model.bounds import (
    CLASS_ID, COSINE, COUNT, INDEX, KAPPA, LATENCY, NON_NEGATIVE, P_VALUE, PartOf, SHARE, SHARE_IF_SHARE, SIZE, figure,
)
from reporter.model.figures import Figures
from reporter.model.kernels import ReferenceAgreement
from reporter.model.hardware import ToolFigures
from reporter.model.output_range import ClippedOutput
from reporter.model.shared_scale import SharedScale
from reporter.model.regression import TargetError


# What `VariantResult.measurement_errors` may name, with the words a report uses for each.
MEASUREMENTS = {
    "analyzer": "TFLite Analyzer text",
    "ops": "operators and tensor types",
    "metrics": "accuracy and metrics",
    "output_error": "output error against float",
    "target_error": "error against the targets",
    "latency": "latency",
    "heads": "metrics of each output",
    "clipping": "output range against float's values", "reference_kernels": "agreement with the reference kernels",
    "shared_scale": "the output scale its concatenated parts share",
}


@dataclass(frozen=True)
class Latency:
    median: float = figure(LATENCY)
    p90: float = figure(LATENCY)
    runs: int = figure(COUNT)
    # An empty invoke on this host (a one-op model timed the same way, median ms): under judgement.timing_floor of it
    # a latency is shown, never compared. 0: not measured (reports written before it), no floor.
    overhead: float = figure(LATENCY, 0.0)


@dataclass(frozen=True)
class ClassMetrics:
    label: int = figure(CLASS_ID)
    precision: float = figure(SHARE)
    recall: float = figure(SHARE)
    f1: float = figure(SHARE)
    support: int = figure(COUNT)
    # Multi-label, per label: its accuracy, ROC AUC (None when the label takes one value only) and the exact
    # McNemar p-value of its correctness against float's (1 for float itself).
    accuracy: Optional[float] = figure(SHARE, None)
    roc_auc: Optional[float] = figure(SHARE, None)
    p_vs_float: Optional[float] = figure(P_VALUE, None)


@dataclass(frozen=True)
class Paired:
    """Paired correctness of two variants on the same samples: the discordant counts McNemar needs."""

    reference_only: int = figure(COUNT)  # samples the reference variant gets right and this one wrong
    variant_only: int = figure(COUNT)  # samples this variant gets right and the reference wrong


@dataclass(frozen=True)
class PairedScore:
    """A metric that is not a share of right samples, paired with a reference variant's on the same samples:
    the difference (positive: better, whichever way the metric points) and a paired bootstrap's p-value."""

    delta: float
    p_value: float = figure(P_VALUE)


@dataclass(frozen=True)
class MainMetric:
    """The metric the verdicts read when it is not the share of samples right (accuracy, exact-match accuracy):
    mean IoU of a dense model, or the user's --metric. Its interval and paired tests resample whole samples
    (images, sequences), never pixels."""

    name: str  # "mean IoU", or the user's metric name
    value: float = figure(SHARE_IF_SHARE)
    higher_is_better: bool = True
    share: bool = True  # a value in 0..1, shown in percent and compared in points; else shown as a number
    low: Optional[float] = figure(SHARE_IF_SHARE, None)  # 95 % bootstrap interval over samples
    high: Optional[float] = figure(SHARE_IF_SHARE, None)
    paired: dict[str, PairedScore] = field(default_factory=dict)  # reference variant -> paired test
    # a user's metric that returned one value per sample: the value is their mean and `paired` holds paired t-tests
    per_sample: bool = False
    # a user's metric that returned one number: the blocks of samples it was also called on (batch means), whose
    # values its interval (value ± t·sd/√blocks) and its paired t-tests read; None for any other metric
    blocks: Optional[int] = figure(COUNT, None)


@dataclass(frozen=True)
class Metrics:
    """Quality of one variant on the evaluation data: classification metrics (a regression model measured by
    the user's --metric has only `user` and `main`)."""

    accuracy: Optional[float] = figure(SHARE, None)
    precision: Optional[float] = figure(SHARE, None)  # macro average
    recall: Optional[float] = figure(SHARE, None)
    f1: Optional[float] = figure(SHARE, None)
    balanced_accuracy: Optional[float] = figure(SHARE, None)
    cohen_kappa: Optional[float] = figure(KAPPA, None)
    agreement_with_float: Optional[float] = figure(SHARE, None)
    per_class: list[ClassMetrics] = field(default_factory=list)
    confusion_matrix: list[list[int]] = figure(COUNT, default_factory=list)
    top5_accuracy: Optional[float] = figure(SHARE, None)  # more than 5 classes: the true label among the 5 top scores
    roc_auc: Optional[float] = figure(SHARE, None)  # binary classifiers: from the class-1 score
    # Classes with evaluation samples: macro averages and balanced accuracy are over these.
    classes_present: Optional[list[int]] = figure(CLASS_ID, None)
    paired: dict[str, Paired] = field(default_factory=dict)  # reference variant ("float", "fiq") -> counts
    # Which evaluation samples it gets right, in order: numpy.packbits of the booleans, base64 ("" before
    # schema 4). `quant-report diff` pairs two runs on the same samples with it (McNemar).
    correct_bits: str = ""
    # Multi-label (schema 5): accuracy is exact-match, precision/recall/F1 are macro over labels, per_class is
    # per label (support: its positive samples), and there is no confusion matrix.
    hamming_loss: Optional[float] = figure(SHARE, None)
    micro_f1: Optional[float] = figure(SHARE, None)
    user: dict[str, float] = field(default_factory=dict)  # the user's --metric: name -> value
    # A task kind's own figures, by its name (reporter.model.figures: the record each kind declares, e.g. a
    # detector's mAP, segmentation's IoU per class); its rows and words are the kind's too.
    figures: Figures = field(default_factory=Figures)
    main: Optional[MainMetric] = None  # the verdicts' metric when it is not accuracy

    @property
    def score(self) -> float:
        """The value every verdict reads: the main metric's, else accuracy."""
        return self.main.value if self.main is not None else self.accuracy

    @property
    def higher_is_better(self) -> bool:
        return self.main.higher_is_better if self.main is not None else True

    @property
    def share(self) -> bool:
        """The main metric is a share (0..1): shown in percent, compared in points."""
        return self.main.share if self.main is not None else True


@dataclass(frozen=True)
class OutputError:
    """For models whose output is not class scores: error against the float variant's output."""

    mse: float = figure(NON_NEGATIVE)
    max_abs_error: float = figure(NON_NEGATIVE)
    # variance of the float output, the scale the MSE is read on
    float_variance: Optional[float] = figure(NON_NEGATIVE, None)


@dataclass(frozen=True)
class HeadResult:
    """One output of a model with several outputs, measured: against its labels, or against float's output."""

    metrics: Optional[Metrics] = None  # a labelled classification head
    output_error: Optional[OutputError] = None  # a regression head, or any head without labels
    # an unlabelled classification head: same class as float
    agreement_with_float: Optional[float] = figure(SHARE, None)
    target_error: Optional[TargetError] = None  # a regression head with targets: error against them


@dataclass(frozen=True)
class WeightCoverage:
    """One op type's weights in a model (constant inputs of rank 2 or more: kernels, embedding tables) and how many
    of them the model stores below float32 (int8, int4, int2, int16, float16): what a scheme took of what it could."""

    tensors: int = figure(COUNT)
    quantized: int = figure(PartOf("tensors"))
    elements: int = figure(COUNT)
    quantized_elements: int = figure(PartOf("elements"))


@dataclass(frozen=True)
class OnTarget:
    """One model checked where it ships: whether it runs there (the runtime or compiler said so, or why not, in
    its own words) and its accuracy measured on the target's kernels, paired with float."""

    target: str
    kernels: str  # what the accuracy was measured on: "LiteRT's reference kernels", "TFLite Micro"
    runs: bool
    error: str = ""  # why it does not run there, or why it could not be checked (one line)
    metrics: Optional[Metrics] = None  # on the target's kernels (classification, a user's metric), paired with float
    output_error: Optional[OutputError] = None  # on the target's kernels, against float (every output not class scores)
    # on the target's kernels, as the model's own run records them: the error against regression targets, and every
    # output of a model with several (VariantResult.target_error, .heads)
    target_error: Optional[TargetError] = None
    heads: dict[str, HeadResult] = field(default_factory=dict)
    # each tool's figures by its name (its record registered in reporter.model.hardware): what the tool said of it
    tools: ToolFigures = field(default_factory=ToolFigures)
    # The ops the host CPU runs beside the target (a detector's postprocess with its DEQUANTIZE/QUANTIZE ops), by
    # type: the target runs the network, its accuracy is the network's there with the postprocess as the host runs it.
    host_ops: dict[str, int] = figure(COUNT, default_factory=dict)
    # quant-report's own failure checking it (its code raised, not the runtime or compiler): the model was not
    # checked there, and `error` says the tool failed.
    tool_failure: str = ""


@dataclass(frozen=True)
class VariantResult:
    name: str
    status: str  # "ok" or "failed"
    error: Optional[str] = None
    error_detail: Optional[str] = None  # the runtime's raw text where `error` gives the cause found in the file
    size_bytes: Optional[int] = figure(SIZE, None)
    ops: dict[str, int] = figure(COUNT, default_factory=dict)
    tensor_types: dict[str, int] = figure(COUNT, default_factory=dict)
    latency_ms: Optional[Latency] = None
    metrics: Optional[Metrics] = None
    output_error: Optional[OutputError] = None
    # Only for the selective model: (selective - fiq) / (float - fiq) accuracy.
    accuracy_gap_recovered: Optional[float] = None
    # The TFLite Analyzer's text, kept here so that every format renders from report.json alone.
    analyzer_text: str = ""
    # A measurement of a built and run model that failed: {"latency": "RuntimeError: ..."}. Its field
    # stays None (or empty); the variant is still "ok" (it converted and ran). Keys: MEASUREMENTS.
    measurement_errors: dict[str, str] = field(default_factory=dict)
    # What built the model: "TensorFlow converter", "LiteRT Quantizer", or "given" (the float .tflite input).
    converter: str = ""
    layer_errors: Optional[LayerErrors] = None
    fix: Optional[SchemeFix] = None
    overlays: list[str] = field(default_factory=list)  # Model Explorer node-data files beside <name>.tflite
    heads: dict[str, HeadResult] = field(default_factory=dict)  # several outputs: each one by name (schema 5)
    # Evaluation samples on which the model output NaN or inf (any output): they predict no class (wrong), and
    # errors against float leave them out. Counted on every model that ran; 0 in reports written before.
    nonfinite_outputs: int = figure(COUNT, 0)
    target_error: Optional[TargetError] = None  # a regression output with targets: error against them
    clipped_outputs: dict[str, ClippedOutput] = field(default_factory=dict)  # integer outputs that clip, by name
    # integer outputs a CONCATENATION joins from parts, by name: the one scale they share and what it rounds to 0
    shared_scales: dict[str, SharedScale] = field(default_factory=dict)
    reference_kernels: Optional[ReferenceAgreement] = None  # --target int8: default against reference kernels
    # tensors its ops compute with, by type (int8 spec)
    op_tensor_types: dict[str, int] = figure(COUNT, default_factory=dict)
    on_target: Optional[OnTarget] = None  # checked where it ships (--target int8, micro, ethos-u*): runs, accuracy there
    weight_coverage: dict[str, WeightCoverage] = field(default_factory=dict)  # by op type (read from the file)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def not_measured(self, measurement: str) -> Optional[str]:
        """The error that kept `measurement` from being measured, or None."""
        return self.measurement_errors.get(measurement)

    def weights_share(self) -> Optional[float]:
        """The share of the model's weight values (elements of every weight tensor) stored below float32; None
        when its weights were not read or it has none."""
        total = sum(c.elements for c in self.weight_coverage.values())
        if self.not_measured("ops") or not total:
            return None
        return sum(c.quantized_elements for c in self.weight_coverage.values()) / total


@dataclass(frozen=True)
class LayerError:
    """One op's output in a quantized model against the same tensor of the float model, over the same
    samples: the error accumulated from the input up to this layer."""

    index: int = figure(INDEX)  # the op's position in the quantized model
    op_name: str
    tensor_name: str  # in the quantized model (Model Explorer overlays key on it)
    float_tensor_name: str
    matched_by: str  # "name" or "position"
    mse: Optional[float] = figure(NON_NEGATIVE)  # None: not finite (the quantized op overflowed)
    snr_db: Optional[float]  # None: no error at all (infinite SNR)
    cosine: Optional[float] = figure(COSINE)  # None: not finite (an output overflowed to inf or held NaN)
    snr_drop_db: Optional[float] = None  # SNR lost at this op against its inputs (None: see next)
    error_starts_here: bool = False  # its inputs are exact and its output is not: all its error is its own
    weight_snr_db: Optional[float] = None  # its quantized weights against the float weights
    weight_mse: Optional[float] = figure(NON_NEGATIVE, None)
    quantized_dtype: str = ""


@dataclass(frozen=True)
class LayerErrors:
    """A quantized variant compared with float tensor by tensor, and the layer it blames."""

    layers: list[LayerError] = field(default_factory=list)
    samples: int = figure(COUNT, 0)
    unmatched: int = figure(COUNT, 0)
    culprit: Optional[str] = None  # tensor name of the layer to blame
    note: str = ""
    error: Optional[str] = None  # the comparison failed (the variant's other measurements stand)


@dataclass(frozen=True)
class SchemeFix:
    """A variant that lost accuracy, rebuilt with the blamed layers kept in float and measured."""

    layers: list[str]  # tensor names kept in float
    model: Optional["VariantResult"] = None
    code: str = ""
    error: Optional[str] = None


@dataclass(frozen=True)
class EnginePair:
    """One scheme built by both engines (TensorFlow's converter and LiteRT Quantizer), measured against each other on
    the same evaluation samples: how often they predict the same (classes), or how far their outputs are apart."""

    scheme: str  # in words: "full integer (int8)"
    tf: str  # the variant TensorFlow's converter built
    litert: str  # the variant LiteRT Quantizer built
    # share of samples (positions, for dense outputs) with the same prediction
    agreement: Optional[float] = figure(SHARE, None)
    output_mse: Optional[float] = figure(NON_NEGATIVE, None)  # a regression: mean squared difference of their outputs
    float_variance: Optional[float] = figure(NON_NEGATIVE, None)  # the scale that MSE is read on (float's variance)
    # Op types whose count differs: {op: [count in tf's model, count in LiteRT's]}.
    op_differences: dict[str, list[int]] = figure(COUNT, default_factory=dict)
