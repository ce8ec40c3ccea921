"""LiteRT Quantizer: quantized models made from a float .tflite with recipes.

The only module that imports `litert_quantizer`. It makes the variants of a float .tflite input
(where TensorFlow's converter has nothing to convert), the weight-only variant of any model, and
the models TF's converter cannot build: one scheme for most of the model and another (float,
dynamic range, 16x8) for chosen layers. Static recipes are calibrated once; every model after that
is built from the same calibration in milliseconds.

Layers are named by their op's output tensor, as in the debugger and TF's denylist; LiteRT
Quantizer matches recipe entries against an op's "scope", its output tensor names joined by ';'
with a trailing ';', so each entry here matches exactly one op.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Mapping, Optional

import numpy as np

from reporter.convert.quantize import check_names
from reporter.core import variants
from reporter.core.variants import LITERT, RECIPES
from reporter.measure.evaluate import as_inputs
from reporter.measure.signature import Inputs

METHOD = "litert-quantizer"
# The op type of a recipe entry that matches the graph's outputs (LiteRT Quantizer's IOOperator "OUTPUT"): given
# as an op kept in float (`quantize(nodes, (GRAPH_OUTPUTS,))`), the model's outputs stay float32, the ops making
# them int8 followed by a DEQUANTIZE, as TF's FIQ (float I/O) has them; the static recipes quantize them otherwise.
GRAPH_OUTPUTS = "OUTPUT"
CONVERTER = LITERT
# Variant (scheme) -> LiteRT Quantizer recipe function (module `litert_quantizer.recipe`), and which variants
# only it or only TF's converter make: from the registry.
# Schemes a chosen layer can be given instead of the model's (float = not quantized), in the registry's order.
LAYER_SCHEMES = tuple(name for name in variants.BY_NAME if name in variants.ALTERNATIVES)
STATIC = frozenset(name for name in RECIPES if name in variants.CALIBRATED)  # recipes that read the calibration
# Lighter than float for the layers FIQ cannot keep in int8, tried beside keeping them float (in the order
# the registry's alternatives are measured).
MIXED_SCHEMES = tuple(scheme for scheme in variants.ALTERNATIVES if scheme != variants.FLOAT)


def _recipe(scheme: str, own: Mapping[str, list] = None) -> list[dict]:
    """`scheme`'s recipe entries: a preset of LiteRT Quantizer (with the registry's weight granularity, where it
    sets one), or a recipe of the user's own (`own`: variant name -> the entries of its JSON file)."""
    import copy

    if own and scheme in own:
        return copy.deepcopy(list(own[scheme]))
    from litert_quantizer import recipe

    entries = getattr(recipe, RECIPES[scheme])()
    granularity = variants.get(scheme).weight_granularity
    for entry in entries if granularity else ():
        weights = (entry.get("op_config") or {}).get("weight_tensor_config")
        if weights:
            weights["granularity"] = granularity
    return entries


def _scopes(model: bytes) -> tuple[dict[str, str], dict[str, str], str, list]:
    """Output tensor name -> its op's scope, and -> its op type; the signature and its input names."""
    from reporter.measure import graph, runtime

    it = runtime.load(model)
    tensors = it.get_tensor_details()
    scopes, op_types = {}, {}
    for op in graph.op_details(model):
        names = [tensors[i]["name"] for i in op["outputs"] if i >= 0 and tensors[i]["name"]]
        if not names:
            continue
        scope = ";".join(names) + ";"
        for name in names:
            scopes[name] = scope
            op_types[name] = op["op_name"]
    signatures = it.get_signature_list()
    if not signatures:
        raise ValueError("the model has no signature (LiteRT Quantizer calibrates through one)")
    signature = "serving_default" if "serving_default" in signatures else next(iter(signatures))
    return scopes, op_types, signature, list(signatures[signature]["inputs"])


class LiteRtQuantizer:
    """Calibrates a float .tflite once and builds any scheme from it, with chosen layers in float or
    in another scheme.

    Offers what the search needs of `reporter.convert.quantize.FiqQuantizer`: `quantize(nodes, ops)` is the
    FIQ model with those layers (output tensor names) or op types kept in float.
    """

    method = METHOD
    converter = CONVERTER

    def __init__(self, float_model: bytes, x_calib, calibration=None, recipes: Mapping[str, list] = None):
        self.float_model = bytes(float_model)
        self._own = dict(recipes or {})  # the user's recipe files: variant name -> entries
        self._x_calib = x_calib
        self._scopes, self._op_types, self._signature, self._inputs = _scopes(self.float_model)
        self._calibration = None
        self._collected = calibration  # statistics collected by another process from the same model and data
        self.note = ""
        self.calibrated = None  # no calibrated TF model: the dataflow is read from the float model
        self.calibrated_from = "float model"

    # --- calibration ---------------------------------------------------------------------------
    def calibration(self):
        """Min/max of every tensor over the calibration samples, collected once (int8 and 16x8
        recipes read the same statistics)."""
        if self._calibration is None and self._collected is not None:
            self._calibration = self._collected()  # None when that failed: collected here then
        if self._calibration is None:
            x = as_inputs(self._x_calib)
            single = x.single()
            if single is not None:  # one input: whatever the data call it
                x = Inputs({self._inputs[0]: single})
            data = {self._signature: [{k: (a if np.issubdtype(a.dtype, np.integer) else a.astype(np.float32))
                                       for k, a in x.sample(i).items()} for i in range(len(x))]}
            self._calibration = _calibrate(self.float_model, _recipe(variants.FIQ), data)
        return self._calibration

    # --- models --------------------------------------------------------------------------------
    def recipe(self, scheme: str, layers: Mapping[str, str] = None, ops: Iterable[str] = ()) -> list[dict]:
        """`scheme`'s recipe with each of `layers` (name -> "float", "drq" or "int16x8") and each op
        type in `ops` given its own entry; later entries take precedence in LiteRT Quantizer."""
        layers = dict(layers or {})
        check_names(list(layers), self.tensor_names)
        entries = list(_recipe(scheme, self._own))
        for op in ops:
            entries.append({"regex": ".*", "operation": op, "algorithm_key": "no_quantize"})
        for name, layer_scheme in layers.items():
            regex = "^" + re.escape(self._scopes[name]) + "$"
            if layer_scheme == variants.FLOAT:
                entries.append({"regex": regex, "operation": "*", "algorithm_key": "no_quantize"})
            elif layer_scheme in LAYER_SCHEMES:
                entries.extend(dict(entry, regex=regex) for entry in _recipe(layer_scheme))
            else:
                raise ValueError(f"unknown layer scheme {layer_scheme!r}; choose from {', '.join(LAYER_SCHEMES)}")
        return entries

    def build(self, scheme: str, layers: Mapping[str, str] = None, ops: Iterable[str] = ()) -> bytes:
        from litert_quantizer import quantizer

        entries = self.recipe(scheme, layers, ops)
        q = quantizer.Quantizer(self.float_model, entries)
        calibration = self.calibration() if q.need_calibration else None
        return bytes(q.quantize(calibration, enable_progress_report=False).quantized_model)

    def quantize(self, denylisted_nodes: Iterable[str] = (), denylisted_ops: Iterable[str] = ()) -> bytes:
        """The FIQ model with the given layers and op types kept in float."""
        return self.build(variants.FIQ, {n: variants.FLOAT for n in denylisted_nodes}, denylisted_ops)

    # --- names ---------------------------------------------------------------------------------
    @property
    def tensor_names(self) -> set:
        return set(self._scopes)

    def op_type(self, name: str) -> Optional[str]:
        return self._op_types.get(name)

    def check_nodes(self, nodes: Iterable[str]):
        check_names(list(nodes), self.tensor_names)


def reproduction_code(scheme: str, layers: Mapping[str, str], ops: Iterable[str] = (), calibration_samples: int = 0) -> str:
    """The Python a user runs to build the model with LiteRT Quantizer themselves."""
    lines = ["import json", "import re", "from litert_quantizer import quantizer, recipe", ""]
    if scheme in RECIPES:
        lines.append(f"entries = recipe.{RECIPES[scheme]}()")
        granularity = variants.get(scheme).weight_granularity
        if granularity:
            lines += ["for e in entries:",
                      f"    e['op_config']['weight_tensor_config']['granularity'] = {granularity!r}"]
    else:  # a recipe of the user's own
        lines.append(f"entries = json.load(open({scheme + '.json'!r}))")
    for op in ops:
        lines.append(f"entries.append({{'regex': '.*', 'operation': {op!r}, 'algorithm_key': 'no_quantize'}})")
    if layers:
        recipes = ", ".join(f"{s!r}: recipe.{RECIPES[s]}" for s in LAYER_SCHEMES if s != variants.FLOAT)
        lines.append("# each layer is named by its op's output tensor; LiteRT Quantizer matches 'name;'")
        lines.append("layers = {")
        lines += [f"    {name!r}: {layer_scheme!r}," for name, layer_scheme in layers.items()]
        lines.append("}")
        lines += [
            "for name, scheme in layers.items():",
            "    regex = '^' + re.escape(name + ';') + '$'",
            "    if scheme == 'float':",
            "        entries.append({'regex': regex, 'operation': '*', 'algorithm_key': 'no_quantize'})",
            "    else:",
            f"        scheme_recipe = {{{recipes}}}[scheme]",
            "        entries += [dict(e, regex=regex) for e in scheme_recipe()]",
        ]
    lines.append("q = quantizer.Quantizer('float.tflite', entries)")
    if scheme in STATIC or scheme not in RECIPES:  # a recipe of the user's own may read a calibration
        calib = f"the same {calibration_samples} samples" if calibration_samples else "calibration samples"
        lines.append(f"calibration = q.calibrate({{signature: [{{input_name: x[i:i + 1]}} for i in ...]}})  # {calib}")
        lines.append("model = q.quantize(calibration).quantized_model")
    else:
        lines.append("model = q.quantize().quantized_model")
    lines.append("open('model.tflite', 'wb').write(model)")
    return "\n".join(lines) + "\n"


def _calibrate(float_model: bytes, entries: list, data: dict):
    """LiteRT Quantizer's calibration of `float_model` for the recipe `entries` (`Quantizer.calibrate`'s statistics)
    with each op's recipe looked up once instead of once per sample: LiteRT Quantizer 0.11 matches every op's scope
    against every recipe regex and re-checks its config for every calibration sample (a quarter of EfficientNet-B0's
    calibration over 100 samples, 0.65 s of 2.5 s). Through `Quantizer.calibrate` when its calibrator or recipe
    manager is not where 0.11 has them."""
    from litert_quantizer import quantizer

    try:
        from litert_quantizer import calibrator, recipe_manager

        manager = recipe_manager.RecipeManager()
        manager.load_quantization_recipe(entries)
        calib = calibrator.Calibrator(float_model, num_threads=os.cpu_count() or 1)  # as Quantizer.calibrate does
    except (ImportError, AttributeError, TypeError):
        return quantizer.Quantizer(float_model, entries).calibrate(data, num_threads=os.cpu_count() or 1)
    if not manager.need_calibration():
        return {}
    calib.calibrate(data, _LookedUpOnce(manager))
    return calib.get_model_qsvs()


class _LookedUpOnce:
    """A recipe manager whose `get_quantization_configs(op, scope)` answers each (op, scope) once (a pure lookup
    in the loaded recipe); everything else is the manager's own."""

    def __init__(self, manager):
        self._manager, self._found = manager, {}

    def get_quantization_configs(self, op, scope):
        key = (op, scope)
        if key not in self._found:
            self._found[key] = self._manager.get_quantization_configs(op, scope)
        return self._found[key]

    def __getattr__(self, name):
        return getattr(self._manager, name)


def collect_calibration(float_model: bytes, x_calib):
    """LiteRT Quantizer's statistics of `float_model` over `x_calib` (what `LiteRtQuantizer.calibration` collects), in
    the process this is called in: the side process or the contained child, while the run goes on."""
    return LiteRtQuantizer(float_model, x_calib).calibration()


class LiteRtModels:
    """LiteRT Quantizer on one float model, set up on first use (one calibration for all its models)."""

    def __init__(self, float_model: bytes, x_calib, calibration=None, recipes: Mapping[str, list] = None):
        self._float_model, self._x_calib, self._quantizer = float_model, x_calib, None
        self._calibration = calibration  # a callable giving statistics collected elsewhere (or None)
        self._elsewhere = False  # collect_from was called
        self._own = dict(recipes or {})  # the user's recipe files: variant name -> entries

    def quantizer(self) -> "LiteRtQuantizer":
        if self._quantizer is None:
            self._quantizer = LiteRtQuantizer(self._float_model, self._x_calib, self._calibration, self._own)
        return self._quantizer

    def collect_from(self, calibration) -> None:
        """The statistics will come from `calibration()` (another process collecting them now; None from it: they are
        collected here), unless they were collected already."""
        self._elsewhere = True
        if self._quantizer is None:
            self._calibration = calibration
        elif self._quantizer._calibration is None:
            self._quantizer._collected = calibration

    def collected_elsewhere(self) -> bool:
        """`collect_from` named where the statistics come from."""
        return self._elsewhere

    def has_calibration(self) -> bool:
        """The statistics were collected already (by a variant built before)."""
        return self._quantizer is not None and self._quantizer._calibration is not None

    def build(self, variant: str, layers=None, ops=()) -> bytes:
        if variant not in RECIPES and variant not in self._own:
            raise ValueError(f"{variant} cannot be made by LiteRT Quantizer (from a float .tflite the variants are"
                             f" float, {', '.join(RECIPES)})")
        return self.quantizer().build(variant, layers, ops)
