"""The variant registry: every model a report can hold, named once.

Each entry says what the variant is called (short, table and long labels), which quantization scheme it
is, which converter can build it (TensorFlow's converter, LiteRT Quantizer, or both) and its LiteRT
Quantizer recipe, whether it needs calibration, and whether it is one of the models that fix FIQ (they
are compared with FIQ as well as float). Conversion, the pipeline, findings, views, plots and the index
read names and labels from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

TF = "TensorFlow converter"
LITERT = "LiteRT Quantizer"


@dataclass(frozen=True)
class Variant:
    name: str
    short: str  # in table headers and sentences: "FIQ"
    label: str  # in lists: "Full integer (FIQ)"
    long: str  # where there is room: "Full-integer quantization (float I/O)"
    converters: tuple = ()  # who can build it from a Keras or SavedModel input, preferred first
    recipe: Optional[str] = None  # LiteRT Quantizer recipe function (litert_quantizer.recipe)
    calibrated: bool = False  # needs representative data
    fixes_fiq: bool = False  # a model that fixes FIQ: compared with FIQ too
    requested: bool = True  # a user can ask for it with --variants
    default: bool = False  # built when --variants is not given


# Every variant's name, spelled once: code outside core/ uses these, never the string (an architecture test).
FLOAT, DRQ, FIQ, F16, INT16X8, INT8_IO, WO8 = "float", "drq", "fiq", "f16", "int16x8", "int8_io", "wo8"
SELECTIVE, RULE, ALT_FLOAT, ALT_INT16X8, ALT_DRQ = "selective", "rule", "alt_float", "alt_int16x8", "alt_drq"

REGISTRY: tuple[Variant, ...] = (
    Variant("float", "Float", "Float", "Float TFLite (reference)", (TF,), default=True),
    Variant("drq", "DRQ", "Dynamic range (DRQ)", "Dynamic-range quantization (weights int8)", (TF, LITERT),
            recipe="dynamic_wi8_afp32", default=True),
    Variant("fiq", "FIQ", "Full integer (FIQ)", "Full-integer quantization (float I/O)", (TF, LITERT),
            recipe="static_wi8_ai8", calibrated=True, default=True),
    Variant("f16", "Float16", "Float16", "Float16 weights", (TF,)),
    Variant("int16x8", "16x8", "16x8 (int16 activations)", "16-bit activations, 8-bit weights", (TF, LITERT),
            recipe="static_wi8_ai16", calibrated=True),
    Variant("int8_io", "Int8 I/O", "Integer only (int8 I/O)", "Integer only (int8 input and output)", (TF,),
            calibrated=True),
    Variant("wo8", "Weight-only", "Weight-only int8", "Weight-only int8 (dequantized to float at run time)",
            (LITERT,), recipe="weight_only_wi8_afp32"),
    # Models the recommendation builds: never asked for by name.
    Variant("selective", "Recommended", "Selective (recommended layers in float)",
            "FIQ with the recommended layers left in float", fixes_fiq=True, requested=False),
    Variant("rule", "Rule", "Selective by the rmse/scale rule",
            "FIQ with the rmse/scale rule's layers left in float", fixes_fiq=True, requested=False),
    Variant("alt_float", "LiteRT, float layers", "float (LiteRT)", "FIQ with the recommended layers in float",
            fixes_fiq=True, requested=False),
    Variant("alt_int16x8", "16x8 layers", "16x8 (LiteRT)",
            "FIQ with the recommended layers in 16x8 (int16 activations)", fixes_fiq=True, requested=False),
    Variant("alt_drq", "DRQ layers", "DRQ (LiteRT)",
            "FIQ with the recommended layers in dynamic range (int8 weights, float activations)", fixes_fiq=True,
            requested=False),
)
BY_NAME = {v.name: v for v in REGISTRY}

ALL_VARIANTS = tuple(v.name for v in REGISTRY if v.requested)  # what --variants accepts, in report order
DEFAULT_VARIANTS = tuple(v.name for v in REGISTRY if v.default)
FIXES_FIQ = tuple(v.name for v in REGISTRY if v.fixes_fiq)
RECIPES = {v.name: v.recipe for v in REGISTRY if v.recipe and v.requested}  # variant -> LiteRT recipe
ONLY_LITERT = frozenset(v.name for v in REGISTRY if v.requested and v.converters == (LITERT,))
# Float is the model itself (a float .tflite input is used as given), so it never needs a converter.
NEEDS_TF_CONVERTER = frozenset(v.name for v in REGISTRY if v.requested and v.name != "float" and LITERT not in v.converters)
CALIBRATED = frozenset(v.name for v in REGISTRY if v.calibrated)

SHORT_NAMES = {v.name: v.short for v in REGISTRY}
LABELS = {v.name: v.label for v in REGISTRY}
LONG_NAMES = {v.name: v.long for v in REGISTRY}


def short(name: str) -> str:
    """"FIQ" for "fiq"; a fix of a variant ("drq_fix") and unknown names are shown as they are named."""
    return SHORT_NAMES.get(name, name)


def ordered(names) -> tuple:
    """Float first (every comparison's reference), then the rest in the registry's order."""
    wanted = set(names) | {"float"}
    return tuple(v for v in ALL_VARIANTS if v in wanted)


def alternative(scheme: str) -> str:
    """The variant that keeps the recommended layers in `scheme` instead of float: "drq" -> "alt_drq"."""
    return f"alt_{scheme}"
