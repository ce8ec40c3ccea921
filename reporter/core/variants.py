"""The variant registry: every model a report can hold, named once.

Each entry says what the variant is called (short, table and long labels), which quantization scheme it
is, which converter can build it (TensorFlow's converter, LiteRT Quantizer, or both), the TensorFlow
converter's settings and the LiteRT Quantizer recipe that make it, whether it needs calibration, whether
TensorFlow's converter makes it in the side process, whether a loss of it is fixed by keeping its blamed
layers in float, which scheme an alternative gives the recommended layers, and whether it is one of the
models that fix FIQ (they are compared with FIQ as well as float). Conversion, the pipeline, blame,
findings, views, plots and the index read names, labels and these facts from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

TF = "TensorFlow converter"
LITERT = "LiteRT Quantizer"


@dataclass(frozen=True)
class TfSettings:
    """What TensorFlow's converter is set to for a variant (reporter.convert.converter.configure); a calibrated
    variant is given the representative data as well."""

    optimize: bool = True  # tf.lite.Optimize.DEFAULT (float: not set)
    supported_types: tuple = ()  # target_spec.supported_types, by tf dtype name: ("float16",)
    supported_ops: tuple = ()  # target_spec.supported_ops, by tf.lite.OpsSet name
    io_type: Optional[str] = None  # inference input and output type, by tf dtype name: "int8"
    per_channel: bool = True  # False: one scale per weight tensor (the converter's _experimental_disable_per_channel)


@dataclass(frozen=True)
class Variant:
    name: str
    short: str  # in table headers and sentences: "FIQ"
    label: str  # in lists: "Full integer (FIQ)"
    long: str  # where there is room: "Full-integer quantization (float I/O)"
    converters: tuple = ()  # who can build it from a Keras or SavedModel input, preferred first
    tf: Optional[TfSettings] = None  # TensorFlow converter settings (None: that converter does not make it)
    recipe: Optional[str] = None  # LiteRT Quantizer recipe function (litert_quantizer.recipe)
    calibrated: bool = False  # needs representative data
    side: bool = False  # TensorFlow's converter makes it from the SavedModel in the side process
    # A loss is fixed by keeping its blamed layers in float (LiteRT Quantizer; FIQ has the search instead, and
    # LiteRT Quantizer has no float16 or int8-I/O recipe).
    fixable: bool = False
    layer_scheme: Optional[str] = None  # an alternative: FIQ with the recommended layers in this scheme
    fixes_fiq: bool = False  # a model that fixes FIQ: compared with FIQ too
    requested: bool = True  # a user can ask for it with --variants
    default: bool = False  # built when --variants is not given
    scheme_words: str = ""  # the scheme in a sentence, where layers are given it: "dynamic range"
    headline_blame: bool = False  # its blamed layers are named in the headline (FIQ has its own sentence)
    gate_default: bool = False  # the variant --max-accuracy-drop checks unless --gate-variant says otherwise
    # LiteRT Quantizer: every entry of `recipe` with its weights at this granularity ("TENSORWISE": one scale per
    # weight tensor); None: as the recipe has it.
    weight_granularity: Optional[str] = None


# Every variant's name, spelled once: code outside core/ uses these, never the string (an architecture test).
FLOAT, DRQ, FIQ, F16, INT16X8, INT8_IO, WO8 = "float", "drq", "fiq", "f16", "int16x8", "int8_io", "wo8"
FIQ_PER_TENSOR, LITERT_PER_TENSOR = "fiq_per_tensor", "static_wi8_ai8_per_tensor"
PER_TENSOR = (FIQ_PER_TENSOR, LITERT_PER_TENSOR)  # one scale per weight tensor
PER_TENSOR_CLE = "per_tensor_cle"  # a per-tensor variant's fix: the float model equalized across layers first
SELECTIVE, RULE, ALT_FLOAT, ALT_INT16X8, ALT_DRQ = "selective", "rule", "alt_float", "alt_int16x8", "alt_drq"
OUTPUT_FLOAT = "fiq_output_float"
# How the recommended layers are found (--recommend): measured by the search, or by the rmse/scale rule (which
# builds the RULE model).
SEARCH_METHOD, RULE_METHOD = "search", RULE
METHODS = (SEARCH_METHOD, RULE_METHOD)

REGISTRY: tuple[Variant, ...] = (
    Variant(FLOAT, "Float", "Float", "Float TFLite (reference)", (TF,), TfSettings(optimize=False), default=True,
            scheme_words="float"),
    Variant(DRQ, "DRQ", "Dynamic range (DRQ)", "Dynamic-range quantization (weights int8)", (TF, LITERT),
            TfSettings(), recipe="dynamic_wi8_afp32", side=True, fixable=True, default=True,
            scheme_words="dynamic range", headline_blame=True),
    Variant(FIQ, "FIQ", "Full integer (FIQ)", "Full-integer quantization (float I/O)", (TF, LITERT), TfSettings(),
            recipe="static_wi8_ai8", calibrated=True, default=True, gate_default=True),
    Variant(F16, "Float16", "Float16", "Float16 weights", (TF,), TfSettings(supported_types=("float16",)),
            side=True, headline_blame=True),
    Variant(INT16X8, "16x8", "16x8 (int16 activations)", "16-bit activations, 8-bit weights", (TF, LITERT),
            TfSettings(supported_ops=("EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8",)),
            recipe="static_wi8_ai16", calibrated=True, side=True, fixable=True, scheme_words="16x8",
            headline_blame=True),
    Variant(INT8_IO, "Int8 I/O", "Integer only (int8 I/O)", "Integer only (int8 input and output)", (TF,),
            TfSettings(supported_ops=("TFLITE_BUILTINS_INT8",), io_type="int8"), calibrated=True, side=True,
            headline_blame=True),
    Variant(FIQ_PER_TENSOR, "FIQ per-tensor", "Full integer, per-tensor weights",
            "Full-integer quantization with one scale per weight tensor (what many NPUs and microcontrollers need)",
            (TF,), TfSettings(per_channel=False), calibrated=True, side=True, headline_blame=True),
    Variant(WO8, "Weight-only", "Weight-only int8", "Weight-only int8 (dequantized to float at run time)",
            (LITERT,), recipe="weight_only_wi8_afp32", fixable=True, headline_blame=True),
    # FIQ whose output's int8 range clips float's values, rebuilt with the op making that output in float.
    Variant(OUTPUT_FLOAT, "FIQ, float output", "FIQ with its output op in float",
            "FIQ with the op that makes its clipped output kept in float", fixes_fiq=True, requested=False),
    # Models the recommendation builds: never asked for by name. The alternatives are measured in this order.
    Variant(SELECTIVE, "Recommended", "Selective (recommended layers in float)",
            "FIQ with the recommended layers left in float", fixes_fiq=True, requested=False),
    Variant(RULE, "Rule", "Selective by the rmse/scale rule",
            "FIQ with the rmse/scale rule's layers left in float", fixes_fiq=True, requested=False),
    Variant(ALT_FLOAT, "LiteRT, float layers", "float (LiteRT)", "FIQ with the recommended layers in float",
            layer_scheme=FLOAT, fixes_fiq=True, requested=False),
    Variant(ALT_INT16X8, "16x8 layers", "16x8 (LiteRT)",
            "FIQ with the recommended layers in 16x8 (int16 activations)", layer_scheme=INT16X8, fixes_fiq=True,
            requested=False),
    Variant(ALT_DRQ, "DRQ layers", "DRQ (LiteRT)",
            "FIQ with the recommended layers in dynamic range (int8 weights, float activations)",
            layer_scheme=DRQ, fixes_fiq=True, requested=False),
)
# LiteRT Quantizer's preset recipes (litert_quantizer.recipe, version 0.11), each a variant named as the field writes
# it (`litert quantize model.tflite --recipe dynamic_wi4_afp32`): int8, int4 and int2 weights channelwise ("c"),
# blockwise ("b32", "b64") or Hadamard-rotated ("hr"), weight-only, and the static schemes FIQ and 16x8 are, built by
# LiteRT Quantizer beside TensorFlow's converter.
LITERT_PRESETS = (
    "dynamic_wi8_afp32", "dynamic_wi8c_afp32", "dynamic_wi8b32_afp32", "dynamic_wi8b64_afp32", "dynamic_wi8c_hr_afp32",
    "dynamic_legacy_wi8_afp32", "dynamic_wi4_afp32", "dynamic_wi4c_afp32", "dynamic_wi4b32_afp32",
    "dynamic_wi4b64_afp32", "dynamic_wi4c_hr_afp32", "dynamic_wi2c_afp32", "dynamic_wi2b32_afp32",
    "dynamic_wi2b64_afp32", "dynamic_wi2c_hr_afp32", "weight_only_wi8_afp32", "weight_only_wi4_afp32",
    "static_wi8_ai8", "static_wi8_ai16",
)
REGISTRY += tuple(
    Variant(name, name, f"{name} (LiteRT)", f"LiteRT Quantizer preset {name}", (LITERT,), recipe=name,
            calibrated=name.startswith("static_"), fixable=not name.startswith("static_"), headline_blame=True)
    for name in LITERT_PRESETS)
REGISTRY += (
    Variant(LITERT_PER_TENSOR, "static_wi8_ai8 per-tensor", "static_wi8_ai8 per-tensor (LiteRT)",
            "LiteRT Quantizer's static_wi8_ai8 with tensor-wise weights (one scale per weight tensor)", (LITERT,),
            recipe="static_wi8_ai8", calibrated=True, headline_blame=True, weight_granularity="TENSORWISE"),
    # A per-tensor variant that loses accuracy, rebuilt from the float model after cross-layer equalization.
    Variant(PER_TENSOR_CLE, "Per-tensor, equalized", "Full integer, per-tensor weights, after cross-layer equalization",
            "Full integer with one scale per weight tensor, after cross-layer equalization of the float model"
            " (LiteRT Quantizer's static_wi8_ai8 per-tensor)", requested=False),
)
BY_NAME = {v.name: v for v in REGISTRY}

ALL_VARIANTS = tuple(v.name for v in REGISTRY if v.requested)  # what --variants accepts, in report order
DEFAULT_VARIANTS = tuple(v.name for v in REGISTRY if v.default)
FIXES_FIQ = tuple(v.name for v in REGISTRY if v.fixes_fiq)
RECIPES = {v.name: v.recipe for v in REGISTRY if v.recipe and v.requested}  # variant -> LiteRT recipe
ONLY_LITERT = frozenset(v.name for v in REGISTRY if v.requested and v.converters == (LITERT,))
# Float is the model itself (a float .tflite input is used as given), so it never needs a converter.
NEEDS_TF_CONVERTER = frozenset(v.name for v in REGISTRY
                               if v.requested and v.name != FLOAT and LITERT not in v.converters)
CALIBRATED = frozenset(v.name for v in REGISTRY if v.calibrated)
SIDE_PROCESS = tuple(v.name for v in REGISTRY if v.side)  # converted on the side (reporter.convert.side)
# The schemes the recommended layers are given instead of FIQ's, in the order the alternatives are measured.
ALTERNATIVES = {v.layer_scheme: v.name for v in REGISTRY if v.layer_scheme}

# The same scheme from the two engines (TensorFlow's converter, LiteRT Quantizer): each pair is put side by side.
ENGINE_PAIRS = ((FIQ, "static_wi8_ai8", "full integer (int8)"), (DRQ, "dynamic_wi8_afp32", "dynamic range (int8 weights)"),
                (INT16X8, "static_wi8_ai16", "16x8 (int16 activations)"),
                (FIQ_PER_TENSOR, LITERT_PER_TENSOR, "full integer, per-tensor weights"))

SCHEME_WORDS = {v.name: v.scheme_words for v in REGISTRY if v.scheme_words}  # a scheme in a sentence
GATE_DEFAULT = next(v.name for v in REGISTRY if v.gate_default)

SHORT_NAMES = {v.name: v.short for v in REGISTRY}
LABELS = {v.name: v.label for v in REGISTRY}
LONG_NAMES = {v.name: v.long for v in REGISTRY}


def get(name: str) -> Variant:
    """The registry's entry for `name`; a name it does not hold is a LiteRT Quantizer recipe of the user's own
    (`--recipe NAME.json`), built by LiteRT Quantizer from the float model and fixed like its presets."""
    known = BY_NAME.get(name)
    if known is not None:
        return known
    return Variant(name, name, f"{name} (recipe)", f"LiteRT Quantizer recipe {name}.json", (LITERT,),
                   fixable=True, headline_blame=True)


def blamed_in_headline(name: str) -> bool:
    """Its blamed layers are named in the headline (the variants other than FIQ, which has its own sentence)."""
    return get(name).headline_blame


def short(name: str) -> str:
    """"FIQ" for "fiq"; a fix of a variant ("drq_fix") and unknown names are shown as they are named."""
    return SHORT_NAMES.get(name, name)


def ordered(names) -> tuple:
    """Float first (every comparison's reference), then the rest in the registry's order, then recipes of the
    user's own in the order given."""
    wanted = set(names) | {FLOAT}
    return tuple(v.name for v in REGISTRY if v.name in wanted) + tuple(
        dict.fromkeys(n for n in names if n not in BY_NAME))  # recipes of the user's own: last, as given


def alternative(scheme: str) -> str:
    """The variant that keeps the recommended layers in `scheme` instead of FIQ's: "drq" -> "alt_drq"."""
    return ALTERNATIVES[scheme]


FIX_SUFFIX = "_fix"


def fix(name: str) -> str:
    """The model that fixes variant `name` by keeping its blamed layers in float: "drq" -> "drq_fix"."""
    return name + FIX_SUFFIX


def fixed_by(name: str) -> Optional[str]:
    """The variant that the fix `name` fixes ("drq_fix" -> "drq"); None when `name` is no fix."""
    return name[: -len(FIX_SUFFIX)] if name.endswith(FIX_SUFFIX) else None


REPAIR_PREFIX = "repair_"  # the models of the integer-only repair ladder: "repair_static_batch1", ...


def repair(rung: str) -> str:
    """The model the repair ladder's rung `rung` builds: "ranges" -> "repair_ranges"."""
    return REPAIR_PREFIX + rung


def repaired_by(name: str) -> Optional[str]:
    """The rung that built model `name` ("repair_ranges" -> "ranges"); None when `name` is no repair."""
    return name[len(REPAIR_PREFIX):] if name.startswith(REPAIR_PREFIX) else None


# A quantization-aware model's variants, as the report names them: "float" is its fake-quant graph run in float, and
# TF's converter with Optimize.DEFAULT (DRQ's settings) makes the QAT int8 model, as tfmot's guide converts it.
QAT_LABELS = {FLOAT: "Float (the fake-quant graph)", DRQ: "QAT int8 (Optimize.DEFAULT, as tfmot's guide)",
              FIQ: "QAT int8 with a representative dataset"}
QAT_SHORT = {FLOAT: "Float (fake-quant)", DRQ: "QAT int8", FIQ: "QAT int8 + rep. data"}

# A quantization-aware model's float base (--base-model), measured beside it on the same data: its float model and its
# post-training full-integer model, so that QAT and post-training quantization are compared.
BASE_FLOAT, BASE_FIQ = "base_float", "base_fiq"
BASE_LABELS = {BASE_FLOAT: "Base float model (before QAT)", BASE_FIQ: "Post-training FIQ of the base model"}
BASE_SHORT = {BASE_FLOAT: "Base float", BASE_FIQ: "Base PTQ FIQ"}
BASE_VARIANTS = (BASE_FLOAT, BASE_FIQ)  # measured and compared; never blamed or fixed as the model's own variants
