"""One run's settings (RunSettings) and the command line's flags, both made from the settings' declarations
(reporter.core.schema): the flags (`add_flags`, the one place an argparse argument is made: every subcommand's,
positional arguments included), a batch file's values (`check_value`) and the run's own checks (`problems`, then
`RunSettings.check` for files), so a setting cannot mean one thing on the command line and another in a TOML file or
the API. RunSettings' fields are written out with their types (a type checker reads them); a test holds them to the
declarations. Imports no TensorFlow.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Union

from reporter.core import targets
from reporter.core.schema import (BATCH, BATCH_BY_NAME, BY_NAME, DEFAULTS, FORMATS, GATE, GATE_BY_KEY,  # noqa: F401
                                  GATE_BY_NAME, JOBS, NOT_RECORDED, RUN, Setting)

# Each declared setting's default, as its field's default: the value is declared once, in reporter.core.schema.
_DEFAULT: dict[str, Any] = {s.name: s.default for s in (*RUN, *GATE)}


@dataclass
class RunSettings:
    """Everything one `run` needs: what the user gave, how the run is driven, and every declared setting (a field
    each, by its name, in its order and with its default in reporter.core.schema: RUN, then GATE; lists are tuples,
    immutable and safe to share); the CLI, the API, a batch worker and the demo build one."""

    model: str
    data: str
    out: str
    name: Optional[str] = None
    quiet: bool = False
    listener: Optional[Callable] = None  # told each stage as it starts (the batch runner's progress)
    failure_log: Optional[str] = None  # where run.log is kept if the run fails (the batch runner's)
    extra: dict = field(default_factory=dict)  # recorded in the report's settings
    shown_paths: Optional[tuple] = None  # (model, data) as the report shows them; default: as given
    code_dir: Optional[str] = None  # where a data function's module is looked for (a batch file's folder)
    side_converter: bool = True  # convert DRQ etc. in a second process (reporter.convert.side) where it pays
    # The declared settings (reporter.core.schema.RUN).
    variants: tuple[str, ...] = _DEFAULT["variants"]
    calibration_samples: int = _DEFAULT["calibration_samples"]
    suspect_threshold: float = _DEFAULT["suspect_threshold"]
    first_layers: int = _DEFAULT["first_layers"]
    latency_runs: int = _DEFAULT["latency_runs"]
    recommend: str = _DEFAULT["recommend"]
    search_budget: int = _DEFAULT["search_budget"]
    search_share: float = _DEFAULT["search_share"]
    selection_samples: int = _DEFAULT["selection_samples"]
    keep_float: tuple[str, ...] = _DEFAULT["keep_float"]
    keep_float_ops: tuple[str, ...] = _DEFAULT["keep_float_ops"]
    recipe: tuple[str, ...] = _DEFAULT["recipe"]
    target: str = _DEFAULT["target"]
    primary_output: Optional[str] = _DEFAULT["primary_output"]
    threshold: float = _DEFAULT["threshold"]
    plugin: tuple[str, ...] = _DEFAULT["plugin"]
    task: tuple[str, ...] = _DEFAULT["task"]
    metric: Optional[str] = _DEFAULT["metric"]
    metric_mode: str = _DEFAULT["metric_mode"]
    trust_model: bool = _DEFAULT["trust_model"]
    custom_objects: Optional[str] = _DEFAULT["custom_objects"]
    base_model: Optional[str] = _DEFAULT["base_model"]
    micro_arena: Optional[int] = _DEFAULT["micro_arena"]
    formats: tuple[str, ...] = _DEFAULT["formats"]
    data_timeout: Optional[float] = _DEFAULT["data_timeout"]
    # The gate's (reporter.core.schema.GATE).
    max_accuracy_drop: Optional[float] = _DEFAULT["max_accuracy_drop"]
    gate_variant: Optional[str] = _DEFAULT["gate_variant"]

    def tasks(self) -> dict[str, str]:
        """--task as {output name: kind}; "" for a KIND given without an output name."""
        return {item.rpartition("=")[0]: item.rpartition("=")[2] for item in self.task}

    def check(self):
        """Everything that can be checked before TensorFlow is imported: the values (`value_problems`), then the
        files: that the model and data exist and are of a kind quant-report reads, the recipes, and that the output
        folder can be written. Raises QuantReportError naming the flag or file."""
        from reporter.core import files as output
        from reporter.core.errors import QuantReportError
        from reporter.inputs.preflight import check_model_file, preflight

        wrong = self.value_problems()
        if wrong:  # a value: a usage error (exit code 2), nothing read yet
            from reporter.core.errors import UsageError

            raise UsageError("; ".join(wrong))
        bad = []
        if self.custom_objects and not self.trust_model:  # the model's code refused: its input, not the command line
            bad.append(f"--custom-objects {self.custom_objects} imports that module, whose code runs: pass"
                       " --trust-model too (in a batch file: trust_model = true)")
        if self.base_model and not Path(self.base_model).exists():
            bad.append(f"--base-model {self.base_model}: no such file or folder")
        elif self.base_model and Path(self.model).exists() and Path(self.base_model).resolve() == \
                Path(self.model).resolve():
            bad.append(f"--base-model {self.base_model}: the model itself; the base is the float model before"
                       " quantization-aware training")
        if bad:
            raise QuantReportError("; ".join(bad))
        preflight(self.model, self.data)
        if self.base_model:
            check_model_file(self.base_model)  # a damaged or foreign file, before any work
        self.check_variants()
        if self.recipe:
            from reporter.inputs import recipes

            recipes.load(self.recipe, self.code_dir)  # each file read and checked: one line naming a bad one
        output.check_writable(self.out)
        output.check_replaceable(self.out, self.display_name, (self.model, self.base_model, self.data))

    def value_problems(self) -> list[str]:
        """What is wrong with the settings' values and how they go together, one line each, without reading a
        file: the declarations' checks, a bad --name."""
        from reporter.core import files as output

        bad = problems({name: getattr(self, name) for name in (*DEFAULTS, *GATE_BY_NAME)})
        if self.name is not None and output.name_problem(self.name):
            bad.insert(0, f"--name {output.name_problem(self.name)}")
        return bad

    def check_variants(self):
        """A usage error (exit code 2) for variants a float .tflite cannot have: TensorFlow's converter makes them."""
        from reporter.core.errors import UsageError
        from reporter.core.variants import NEEDS_TF_CONVERTER

        unavailable = [v for v in self.variants if v in NEEDS_TF_CONVERTER] \
            if Path(self.model).suffix.lower() == ".tflite" else []
        if unavailable:
            raise UsageError(
                f"--variants {','.join(unavailable)}: not available for a float .tflite input ({self.model}):"
                " TensorFlow's converter makes them from a Keras model or SavedModel; LiteRT Quantizer makes"
                " drq, fiq, int16x8 and wo8 (its fiq already has int8 input and output)")

    @property
    def built_variants(self) -> tuple:
        """The variants to build: those asked for, and those the target adds (int8 I/O, float16) where they can be
        built (TensorFlow's converter makes them; from a float .tflite LiteRT's FIQ is integer-only already)."""
        from reporter.core.variants import NEEDS_TF_CONVERTER

        adds = targets.REGISTRY[self.target].adds
        if Path(self.model).suffix.lower() == ".tflite":
            adds = tuple(v for v in adds if v not in NEEDS_TF_CONVERTER)
        from reporter.inputs.recipes import variant_name

        return tuple(dict.fromkeys((*self.variants, *adds, *(variant_name(p) for p in self.recipe))))

    @property
    def display_name(self) -> str:
        return self.name or Path(self.model).stem or Path(self.model).name

    def recorded(self) -> dict:
        """The settings as written into report.json."""
        values = {s.name: list(getattr(self, s.name)) if s.kind == "list" else getattr(self, s.name)
                  for s in (*RUN, *GATE) if s.recorded}
        if values["gate_variant"] is None:  # written only when set
            del values["gate_variant"]
        return {**values, **self.extra}


def check_value(setting: Setting, value) -> Optional[str]:
    """None when `value` is valid for `setting`, else what it must be (for a TOML file or the API), with the closest
    names for a name it does not know."""
    if setting.check(value):
        return None
    return f"'{setting.name}' must be {setting.must_be}, not {value!r}{_did_you_mean(setting, value)}"


def _did_you_mean(setting: Setting, value) -> str:
    """"; did you mean ethos-u55-128?" for a name close to one of the setting's choices; "" otherwise."""
    import difflib

    if not setting.choices or not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value.lower(), [str(c) for c in setting.choices], n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def _choice(setting: Setting, text: str) -> str:
    """A choice as given, or as the one choice it names in another case ("ETHOS-U55-128"); ArgumentTypeError in one
    line with the closest names otherwise."""
    if text in setting.choices:
        return text
    folded = [c for c in setting.choices if str(c).lower() == text.lower()]
    if len(folded) == 1:
        return folded[0]
    close = _did_you_mean(setting, text)
    raise argparse.ArgumentTypeError(f"unknown {text!r}" + (close or f" (choose from {', '.join(setting.choices)})"))


def problems(values: dict) -> list[str]:
    """Every invalid value among `values` (RunSettings fields: the run's and the gate's, None for a gate not asked
    for), one message each, as flags."""
    found = []
    for name, value in values.items():
        setting = BY_NAME.get(name) or GATE_BY_NAME.get(name)
        if setting is None or (value is None and name in GATE_BY_NAME):
            continue
        if not setting.check(value):
            found.append(f"{setting.flag} must be {setting.must_be}, not {value!r}")
    return found


def _value(setting: Setting, text: str) -> Union[int, float, str, list[str], tuple[str, ...]]:
    """A flag's text as its kind's value (ValueError when it is not one; ArgumentTypeError for an unknown choice)."""
    if setting.kind == "int":
        return int(text)
    if setting.kind == "number":
        return float(text)
    if setting.kind == "list":
        parts = text.split(",") if setting.comma else [text]
        items = [x.strip() for x in parts if x.strip()]  # action="extend" adds repeated flags up
        return items if setting.repeatable else tuple(items)
    if setting.kind == "choice":
        return _choice(setting, text)
    return text


def _argparse_type(setting: Setting) -> Callable[[str], Any]:
    """Parses and checks a flag's text, so a bad value is a usage error naming the flag."""
    def parse(text: str):
        try:
            value = _value(setting, text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {setting.must_be}, not {text!r}") from None
        if isinstance(value, (list, tuple)) and setting.choices:
            unknown = [x for x in value if x not in setting.choices]
            if unknown:
                raise argparse.ArgumentTypeError(f"unknown {setting.noun + ' ' if setting.noun else ''}"
                                                 f"{', '.join(unknown)}: choose from {', '.join(setting.choices)}")
        if not setting.check(value):
            raise argparse.ArgumentTypeError(f"must be {setting.must_be}, not {text!r}")
        return value
    return parse


def add_flag(parser: argparse.ArgumentParser, setting: Setting) -> Optional[str]:
    """`setting` as an argument of `parser` (a flag, or a positional argument), its text parsed and checked by the
    declaration; returns its flag (None for a positional argument)."""
    if setting.kind == "version":  # prints the declared text and exits
        parser.add_argument(setting.flag, action="version", version=setting.default, help=setting.help)
        return setting.flag
    kwargs: dict = dict(help=setting.help)
    if not setting.positional:
        kwargs.update(dest=setting.name, default=setting.default)
    if setting.required:
        kwargs["required"] = True
    if setting.kind == "bool":
        parser.add_argument(setting.flag, action="store_true", **kwargs)
        return setting.flag
    kwargs["type"] = _argparse_type(setting)  # a choice too: a name it does not know gets the closest, in one line
    kwargs["metavar"] = setting.metavar or ("{" + ",".join(setting.choices) + "}" if setting.kind == "choice"
                                            and len(setting.choices) <= 4 else "NAME" if setting.kind == "choice"
                                            else None)
    if setting.repeatable:
        kwargs.update(action="extend", default=[])
    if setting.positional:
        parser.add_argument(setting.name, **kwargs)
        return None
    parser.add_argument(setting.flag, **kwargs)
    return setting.flag


def add_flags(parser: argparse.ArgumentParser, settings: Iterable[Setting] = RUN) -> list[str]:
    """Each of `settings` as an argument of `parser`, in order; returns the flags made (for a did-you-mean)."""
    return [flag for flag in (add_flag(parser, s) for s in settings) if flag]


def from_args(args: argparse.Namespace) -> dict:
    """The run settings given on the command line, as RunSettings keyword arguments."""
    return {s.name: tuple(getattr(args, s.name)) if s.kind == "list" else getattr(args, s.name) for s in RUN}


def from_toml(options: dict) -> dict:
    """A batch entry's (already checked) keys as RunSettings keyword arguments."""
    return {k: tuple(v) if BY_NAME[k].kind == "list" else v for k, v in options.items() if k in BY_NAME}
