"""Every run setting, declared once: name, type, default, check and help.

The command line's flags (`add_flags`), the batch file's keys (`check_value`) and the pipeline's own
checks (`problems`) are all made from these declarations, so a setting cannot mean one thing on the
command line and another in a TOML file. Imports no TensorFlow.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from reporter.core import targets
from reporter.core.judgement import SUSPECT_THRESHOLD
from reporter.core import tasks
from reporter.measure.task import BINARY_THRESHOLD
from reporter.core.variants import ALL_VARIANTS, DEFAULT_VARIANTS, FIQ, FLOAT, GATE_DEFAULT, METHODS, SEARCH_METHOD

from reporter.render import FORMATS  # noqa: E402 - the renderers own their formats


@dataclass(frozen=True)
class Setting:
    name: str  # the RunSettings field and the TOML key; the flag is --name-with-dashes
    kind: str  # "int", "number", "str", "choice", "list" (comma-separated on the command line, a TOML list), "bool"
    # (a flag without a value on the command line, true or false in a TOML file)
    default: Any
    help: str
    must_be: str  # what a valid value is, for error messages: "an integer >= 1"
    check: Callable[[Any], bool]
    choices: tuple = ()  # allowed values of a "choice", or of each item of a "list"
    metavar: Optional[str] = None
    repeatable: bool = False  # a "list" flag that may be given several times, adding up
    comma: bool = True  # a "list" flag's text is split at commas (not for tensor names)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _int(minimum: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum


def _number(check: Callable[[float], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and check(v)


def _list_of(choices: tuple = (), nonempty: bool = False) -> Callable[[Any], bool]:
    def ok(v):
        if not isinstance(v, (list, tuple)) or (nonempty and not v):
            return False
        return all(isinstance(x, str) and x and (not choices or x in choices) for x in v)
    return ok


RUN = (
    Setting("variants", "list", DEFAULT_VARIANTS,
            f"comma-separated: {', '.join(ALL_VARIANTS)} (default: {','.join(DEFAULT_VARIANTS)})",
            f"a list of variants from {', '.join(ALL_VARIANTS)}", _list_of(ALL_VARIANTS, nonempty=True),
            choices=ALL_VARIANTS, metavar="LIST"),
    Setting("calibration_samples", "int", 100, "samples used for calibration and the debugger (default: 100)",
            "an integer >= 1", _int(1), metavar="N"),
    Setting("suspect_threshold", "number", SUSPECT_THRESHOLD,
            f"rmse/scale above which the rule flags a layer (default: {SUSPECT_THRESHOLD:g})",
            "a number > 0", _number(lambda v: v > 0), metavar="T"),
    Setting("first_layers", "int", 0,
            "the rule also keeps the first N debugged layers in float (default: 0; the seed notebook uses 5)",
            "an integer >= 0", _int(0), metavar="N"),
    Setting("latency_runs", "int", 50, "timed single-sample invokes per variant; 0 skips latency (default: 50)",
            "an integer >= 0", _int(0), metavar="N"),
    Setting("formats", "list", FORMATS, f"comma-separated: {', '.join(FORMATS)} (default: all)",
            f"a list from {', '.join(FORMATS)}", _list_of(FORMATS, nonempty=True), choices=FORMATS,
            metavar="LIST"),
    Setting("recommend", "choice", SEARCH_METHOD,
            "search: measure candidate models for the fewest layers to keep in float (default);"
            " rule: the seed notebook's rmse/scale rule",
            " or ".join(f'"{m}"' for m in METHODS), lambda v: v in METHODS, choices=METHODS),
    Setting("search_budget", "int", 60, "candidate models the search may build and measure (default: 60)",
            "an integer >= 1", _int(1), metavar="N"),
    Setting("selection_samples", "int", 500,
            "samples the search chooses on: x_calib beyond the calibration samples, else a held-out half of x"
            " (default: 500)", "an integer >= 10", _int(10), metavar="N"),
    Setting("keep_float", "list", (),
            "keep this tensor's op in float in every candidate (repeatable; names as in layer_stats.csv)",
            "a list of tensor names", _list_of(), metavar="NAME", repeatable=True, comma=False),
    Setting("primary_output", "str", None,
            "a model with several outputs: the output the report's main numbers and the search's target are about"
            " (default: every labelled output counts for the search and the gate; the first labelled leads)",
            "an output name", lambda v: v is None or (isinstance(v, str) and bool(v)), metavar="NAME"),
    Setting("threshold", "number", BINARY_THRESHOLD,
            f"sigmoid outputs (binary or multi-label): a class or label is predicted where the output is at least T"
            f" (default: {BINARY_THRESHOLD:g})", "a number between 0 and 1", _number(lambda v: 0 < v < 1),
            metavar="T"),
    Setting("task", "list", (),
            f"what an output is, when the report's reading of its shape, activation and labels is not what you"
            f" mean: KIND, or OUTPUT=KIND for one of several outputs (repeatable; KIND: {', '.join(tasks.names())})",
            f"KIND or OUTPUT=KIND with KIND one of {', '.join(tasks.names())}", lambda v: _list_of()(v) and all(
                x.rpartition("=")[2] in tasks.names() and x.rpartition("=")[0] != "" or x in tasks.names() for x in v),
            metavar="[OUTPUT=]KIND", repeatable=True),
    Setting("metric", "str", None,
            "your own metric, FILE.py:FUNCTION or MODULE:FUNCTION (looked for beside the data, then in the current"
            " folder): fn(y_true, y_pred) -> float or dict, called with the labels as given and the raw outputs;"
            " it becomes the metric every verdict, gap, gate and fix reads",
            "FILE.py:FUNCTION or MODULE:FUNCTION", lambda v: v is None or (
                isinstance(v, str) and ":" in v and all(v.rpartition(":")[::2])), metavar="MODULE:FUNCTION"),
    Setting("base_model", "str", None,
            "a quantization-aware model's float base (the model before QAT: .keras, .h5 or a SavedModel folder): its"
            " float model and its post-training full-integer model are measured beside the QAT models on the same"
            " data", "a path", lambda v: v is None or (isinstance(v, str) and bool(v)), metavar="PATH"),
    Setting("metric_mode", "choice", "max", "--metric: max (higher is better, default) or min (lower is better)",
            '"max" or "min"', lambda v: v in ("max", "min"), choices=("max", "min")),
    Setting("trust_model", "bool", False,
            "load a Keras model (.keras, .h5) that holds Python code, such as a Lambda layer's function: that code"
            " runs when the model loads, so only for a file you trust (default: refused)",
            "true or false", lambda v: isinstance(v, bool)),
    Setting("custom_objects", "str", None,
            "a Keras model with custom layers or functions: import MODULE first (installed, else MODULE.py beside a"
            " batch file or in the current folder), or FILE.py (a path, relative to the current folder or to a batch"
            " file), which registers them (e.g. @keras.saving.register_keras_serializable()); its code"
            " runs, so only with --trust-model", "a module name or a FILE.py path", lambda v: v is None or (
                isinstance(v, str) and (v.endswith(".py") or all(part.isidentifier() for part in v.split(".")))),
            metavar="MODULE|FILE.py"),
    Setting("target", "choice", targets.DEFAULT,
            targets.help_text(),
            " or ".join(f'"{t}"' for t in targets.TARGETS), lambda v: v in targets.TARGETS, choices=targets.TARGETS),
    Setting("recipe", "list", (),
            "a LiteRT Quantizer recipe (JSON, as `litert quantize --recipe` reads) built as one more variant, named"
            " after the file: int4_fc.json -> int4_fc (repeatable; in a batch file, relative to it)",
            "a list of .json files", lambda v: _list_of()(v) and all(x.lower().endswith(".json") for x in v),
            metavar="FILE.json", repeatable=True, comma=False),
    Setting("data_timeout", "number", None,
            "a data function (MODULE:FUNCTION) that has not returned after this many seconds is stopped and the run"
            " fails with one line saying so (default: no limit; a \"still waiting\" line every 30 s either way)",
            "a number of seconds > 0", lambda v: v is None or _number(lambda x: x > 0)(v), metavar="SECONDS"),
    Setting("keep_float_ops", "list", (),
            "keep every op of these types in float, e.g. MEAN (comma-separated, repeatable)",
            'a list of op names such as "MEAN"', _list_of(), metavar="OPS", repeatable=True),
)

GATE = (
    Setting("max_accuracy_drop", "number", None,
            "gate: exit with code 3 when no model for --target loses at most D accuracy (0..1) against float (with"
            " --variant: when that variant loses more); also the search's target", "a number from 0 to 1",
            _number(lambda v: 0 <= v <= 1), metavar="D"),
    Setting("variant", "choice", None,
            "the variant the gate checks (default: the model decided for --target; before --target, it was"
            f" {GATE_DEFAULT})", f'a quantized variant such as "{FIQ}"', lambda v: v in ALL_VARIANTS and v != FLOAT,
            choices=tuple(v for v in ALL_VARIANTS if v != FLOAT)),
)

BY_NAME = {s.name: s for s in RUN}
NOT_RECORDED = {"formats", "data_timeout"}  # how the run is written or waited for, not what was measured: the
# report is the same either way
GATE_BY_NAME = {s.name: s for s in GATE}
DEFAULTS = {s.name: s.default for s in RUN}


@dataclass
class RunSettings:
    """Everything one `run` needs; the CLI and the demo both build one."""

    model: str
    data: str
    out: str
    name: Optional[str] = None
    # The run settings; their defaults, checks and help are declared once above (RUN).
    variants: tuple = DEFAULTS["variants"]
    calibration_samples: int = DEFAULTS["calibration_samples"]
    suspect_threshold: float = DEFAULTS["suspect_threshold"]
    first_layers: int = DEFAULTS["first_layers"]
    latency_runs: int = DEFAULTS["latency_runs"]
    formats: tuple = DEFAULTS["formats"]
    recommend: str = DEFAULTS["recommend"]  # "search" (measured) or "rule" (the seed notebook's rmse/scale rule)
    search_budget: int = DEFAULTS["search_budget"]  # candidate models the search may build and measure
    selection_samples: int = DEFAULTS["selection_samples"]  # samples the search chooses on
    keep_float: tuple = DEFAULTS["keep_float"]  # tensor names always kept in float
    keep_float_ops: tuple = DEFAULTS["keep_float_ops"]  # op types always kept in float (e.g. MEAN)
    recipe: tuple = DEFAULTS["recipe"]  # the user's LiteRT Quantizer recipe files: one variant each
    data_timeout: Optional[float] = DEFAULTS["data_timeout"]  # seconds a data function may take; None: no limit
    target: str = DEFAULTS["target"]  # where the shipped model runs: a name in reporter.core.targets.REGISTRY
    primary_output: Optional[str] = DEFAULTS["primary_output"]  # several outputs: the one that leads
    threshold: float = DEFAULTS["threshold"]  # sigmoid outputs: predicted where at least this
    task: tuple = DEFAULTS["task"]  # "KIND" or "OUTPUT=KIND": what an output is, as the user says
    metric: Optional[str] = DEFAULTS["metric"]  # the user's metric function, MODULE:FUNCTION
    metric_mode: str = DEFAULTS["metric_mode"]  # "max" or "min"
    trust_model: bool = DEFAULTS["trust_model"]  # a Keras model's Python code (Lambda layers) may run when it loads
    custom_objects: Optional[str] = DEFAULTS["custom_objects"]  # a module registering custom Keras classes
    base_model: Optional[str] = DEFAULTS["base_model"]  # a QAT model's float base: PTQ measured beside QAT
    max_accuracy_drop: Optional[float] = None  # the gate's limit, and the search's target
    gate_variant: Optional[str] = None  # the variant the gate checks (recorded; the findings say pass/fail)
    quiet: bool = False
    listener: Optional[Callable] = None  # told each stage as it starts (the batch runner's progress)
    failure_log: Optional[str] = None  # where run.log is kept if the run fails (the batch runner's)
    extra: dict = field(default_factory=dict)  # recorded in the report's settings
    shown_paths: Optional[tuple] = None  # (model, data) as the report shows them; default: as given
    code_dir: Optional[str] = None  # where a data function's module is looked for (a batch file's folder)
    side_converter: bool = True  # convert DRQ etc. in a second process (reporter.convert.side) where it pays

    def tasks(self) -> dict[str, str]:
        """--task as {output name: kind}; "" for a KIND given without an output name."""
        return {item.rpartition("=")[0]: item.rpartition("=")[2] for item in self.task}

    def check(self):
        """Everything that can be checked before TensorFlow is imported: the settings' values, that the
        model and data exist and are of a kind quant-report reads, and that the output folder can be
        written. Raises QuantReportError naming the flag or file."""
        from reporter.run.preflight import preflight
        from reporter.core import files as output
        from reporter.core.errors import QuantReportError

        bad = problems({name: getattr(self, name) for name in DEFAULTS})
        if self.custom_objects and not self.trust_model:
            bad.append(f"--custom-objects {self.custom_objects} imports that module, whose code runs: pass"
                       " --trust-model too (in a batch file: trust_model = true)")
        if self.base_model and not Path(self.base_model).exists():
            bad.append(f"--base-model {self.base_model}: no such file or folder")
        if self.name is not None and output.name_problem(self.name):
            bad.insert(0, f"--name {output.name_problem(self.name)}")
        if bad:
            raise QuantReportError("; ".join(bad))
        preflight(self.model, self.data)
        if self.recipe:
            from reporter.run import recipes

            recipes.load(self.recipe, self.code_dir)  # each file read and checked: one line naming a bad one
        if Path(self.model).suffix.lower() == ".tflite":
            from reporter.core.variants import NEEDS_TF_CONVERTER

            unavailable = [v for v in self.variants if v in NEEDS_TF_CONVERTER]
            if unavailable:
                from reporter.core.errors import UsageError

                raise UsageError(
                    f"--variants {','.join(unavailable)}: not available for a float .tflite input ({self.model}):"
                    " TensorFlow's converter makes them from a Keras model or SavedModel; LiteRT Quantizer makes"
                    " drq, fiq, int16x8 and wo8 (its fiq already has int8 input and output)")
        output.check_writable(self.out)
        output.check_replaceable(self.out, self.display_name)

    @property
    def built_variants(self) -> tuple:
        """The variants to build: those asked for, and those the target adds (int8 I/O, float16) where they can be
        built (TensorFlow's converter makes them; from a float .tflite LiteRT's FIQ is integer-only already)."""
        from reporter.core.variants import NEEDS_TF_CONVERTER

        adds = targets.REGISTRY[self.target].adds
        if Path(self.model).suffix.lower() == ".tflite":
            adds = tuple(v for v in adds if v not in NEEDS_TF_CONVERTER)
        from reporter.run.recipes import variant_name

        return tuple(dict.fromkeys((*self.variants, *adds, *(variant_name(p) for p in self.recipe))))

    @property
    def display_name(self) -> str:
        return self.name or Path(self.model).stem or Path(self.model).name

    def recorded(self) -> dict:
        """The settings as written into report.json."""
        values = {s.name: list(getattr(self, s.name)) if s.kind == "list" else getattr(self, s.name)
                  for s in RUN if s.name not in NOT_RECORDED}
        return {
            **values,
            "max_accuracy_drop": self.max_accuracy_drop,
            **({"gate_variant": self.gate_variant} if self.gate_variant else {}),
            **self.extra,
        }


def check_value(setting: Setting, value) -> Optional[str]:
    """None when `value` is valid for `setting`, else what it must be (for a TOML file or the API)."""
    if setting.check(value):
        return None
    return f"'{setting.name}' must be {setting.must_be}, not {value!r}"


def problems(values: dict) -> list[str]:
    """Every invalid value among `values` (RunSettings fields), one message each, as flags."""
    found = []
    for name, value in values.items():
        setting = BY_NAME.get(name)
        if setting is not None and not setting.check(value):
            found.append(f"{setting.flag} must be {setting.must_be}, not {value!r}")
    return found


def _argparse_type(setting: Setting) -> Callable[[str], Any]:
    """Parses and checks a flag's text, so a bad value is a usage error naming the flag."""
    def parse(text: str):
        try:
            if setting.kind == "int":
                value = int(text)
            elif setting.kind == "number":
                value = float(text)
            elif setting.kind == "list":
                parts = text.split(",") if setting.comma else [text]
                value = [x.strip() for x in parts if x.strip()]  # action="extend" adds repeated flags up
                value = value if setting.repeatable else tuple(value)
            else:
                value = text
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {setting.must_be}, not {text!r}") from None
        items = value if setting.kind == "list" else [value]
        if setting.kind == "list" and setting.choices:
            unknown = [x for x in items if x not in setting.choices]
            if unknown:
                raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}: choose from {', '.join(setting.choices)}")
        if not setting.check(value):
            raise argparse.ArgumentTypeError(f"must be {setting.must_be}, not {text!r}")
        return value
    return parse


def add_flag(parser: argparse.ArgumentParser, setting: Setting, flag: Optional[str] = None):
    kwargs: dict = dict(help=setting.help, dest=setting.name, default=setting.default)
    if setting.kind == "bool":
        parser.add_argument(flag or setting.flag, action="store_true", **kwargs)
        return
    if setting.kind == "choice":
        kwargs["choices"] = setting.choices
    else:
        kwargs["type"] = _argparse_type(setting)
        kwargs["metavar"] = setting.metavar
    if setting.repeatable:
        kwargs.update(action="extend", default=[])
    parser.add_argument(flag or setting.flag, **kwargs)


def add_flags(parser: argparse.ArgumentParser, settings=RUN):
    for setting in settings:
        add_flag(parser, setting)


def from_args(args: argparse.Namespace) -> dict:
    """The run settings given on the command line, as RunSettings keyword arguments."""
    return {s.name: tuple(getattr(args, s.name)) if s.kind == "list" else getattr(args, s.name) for s in RUN}


def from_toml(options: dict) -> dict:
    """A batch entry's (already checked) keys as RunSettings keyword arguments."""
    return {k: tuple(v) if BY_NAME[k].kind == "list" else v for k, v in options.items() if k in BY_NAME}
