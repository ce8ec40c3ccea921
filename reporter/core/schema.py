"""Every setting, declared once: name, type, default, help, the check of its value, and where it applies.

A run setting (RUN) is a flag of `run` and `demo`, a key of a batch file, a keyword of `reporter.run(...)` and a
field of report.json's `settings`; the gate's (GATE) a flag of `run` and a batch file's [gate] (its limit also
`batch --baseline`'s and `diff`'s --max-accuracy-drop); a batch's notes
(NOTES) are written into report.json only. The command line (reporter.inputs.settings builds argparse's flags), the batch
file's reader (reporter.batch.config), the API's keywords (reporter.api) and report.json's settings record
(reporter.model.settings) all read these declarations. The subcommands' own arguments (COMMANDS: `run`'s model and
--data, `diff`'s BASE and NEW, --out, --quiet ...) and the top-level --version (TOP) are declared here too, so every
argument of the command line is made by one builder (reporter.inputs.settings.add_flags) with its check. The checks
here are pure (values only); files are checked by the run (reporter.inputs.settings.RunSettings.check). Imports no
TensorFlow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, Optional, Sequence, Union

from reporter.core import targets, tasks
from reporter.core.version import __version__
from reporter.core.judgement import BINARY_THRESHOLD, SUSPECT_THRESHOLD
from reporter.core.variants import ALL_VARIANTS, DEFAULT_VARIANTS, FIQ, FLOAT, GATE_DEFAULT, METHODS, SEARCH_METHOD

FORMATS = ("html", "pdf", "md", "json")  # what a run writes: the renderers (reporter.render) make each
MAX_DATA_TIMEOUT_S = 7 * 24 * 3600  # --data-timeout's largest value: finite, and within what a timer can hold
# Every int and number setting has a finite upper bound, and report.json's reader (reporter.model.settings) checks a
# recorded value with the same declaration: a value a run accepts is one `render` and `diff` read back.
MAX_COUNT = 2**31 - 1  # samples, layers, timed runs, candidates: what a 32-bit signed integer holds, beyond any run
MAX_ARENA_BYTES = 2**32 - 1  # --micro-arena: 4 GiB - 1, the most a 32-bit microcontroller can address
MAX_SUSPECT_THRESHOLD = 2**32  # rmse/scale, in quantization steps: a 32-bit value has no more
MAX_WORKERS = 4096  # --jobs, cpus_per_task: processes or CPUs of one machine, with room to spare


@dataclass(frozen=True)
class Setting:
    name: str  # the RunSettings field and the TOML key; the flag is --name-with-dashes
    kind: str  # "int", "number", "str", "choice", "list" (comma-separated on the command line, a TOML list), "bool"
    # (a flag without a value on the command line, true or false in a TOML file), "version" (prints its default)
    default: Any
    help_text: Union[str, Callable[[], str]]  # a callable for words read from a registry (task kinds) when used
    must_be_text: Union[str, Callable[[], str]]  # what a valid value is, for error messages: "an integer >= 1"
    check: Callable[[Any], bool]
    choices: Sequence = ()  # allowed values of a "choice", or of each item of a "list" (a tuple, or the targets'
    # registry's names, read when asked)
    metavar: Optional[str] = None
    repeatable: bool = False  # a "list" flag that may be given several times, adding up
    comma: bool = True  # a "list" flag's text is split at commas (not for tensor names)
    recorded: bool = True  # kept in report.json's `settings` (not how the run was written or waited for)
    toml_key: Optional[str] = None  # its key in a batch file's table when not its name ([gate] variant)
    positional: bool = False  # given by its place on the command line (`run MODEL`), not as --name
    required: bool = False  # a flag that must be given (`run --data`)
    noun: str = ""  # what an item of a "list" is, in the error for one it does not know ("demo model(s)")

    @property
    def help(self) -> str:
        return self.help_text() if callable(self.help_text) else self.help_text

    @property
    def must_be(self) -> str:
        return self.must_be_text() if callable(self.must_be_text) else self.must_be_text

    @property
    def key(self) -> str:
        """Its key in a batch file."""
        return self.toml_key or self.name

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _int(minimum: int, maximum: int) -> Callable[[Any], bool]:
    """An integer from `minimum` to `maximum`: both bounds, so a recorded value always reads back."""
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and minimum <= v <= maximum


def _int_text(minimum: int, maximum: int, what: str = "an integer") -> str:
    """What `_int(minimum, maximum)` accepts, in words: "an integer >= 1 and at most 2,147,483,647"."""
    return f"{what} >= {minimum} and at most {maximum:,}"


def _number(check: Callable[[float], bool]) -> Callable[[Any], bool]:
    """A finite number (not NaN or infinite, not true or false) for which `check` holds."""
    return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and (
        isinstance(v, int) or math.isfinite(v)) and check(v)


def _plugins(v) -> bool:
    """A list of plug-ins: each a .py file that exists, or the name of a module Python finds (its parent packages are
    imported to find it: the user named it to be run)."""
    import importlib.util
    import os

    def found(item: str) -> bool:
        if item.endswith(".py") or "/" in item or os.sep in item:
            return os.path.isfile(item)
        if not all(part.isidentifier() for part in item.split(".")):
            return False
        try:
            return importlib.util.find_spec(item) is not None
        except (ImportError, ValueError):
            return False
    return _list_of()(v) and all(found(x) for x in v)


def _list_of(choices: tuple = (), nonempty: bool = False) -> Callable[[Any], bool]:
    def ok(v):
        if not isinstance(v, (list, tuple)) or (nonempty and not v):
            return False
        return all(isinstance(x, str) and x and (not choices or x in choices) for x in v)
    return ok


# In the order report.json's settings record lists them (reporter.model.settings).
RUN = (
    Setting("variants", "list", DEFAULT_VARIANTS,
            f"comma-separated: {', '.join(ALL_VARIANTS)} (default: {','.join(DEFAULT_VARIANTS)})",
            f"a list of variants from {', '.join(ALL_VARIANTS)}", _list_of(ALL_VARIANTS, nonempty=True),
            choices=ALL_VARIANTS, metavar="LIST"),
    Setting("calibration_samples", "int", 100, "samples used for calibration and the debugger (default: 100)",
            _int_text(1, MAX_COUNT), _int(1, MAX_COUNT), metavar="N"),
    Setting("suspect_threshold", "number", SUSPECT_THRESHOLD,
            f"rmse/scale above which the rule flags a layer (default: {SUSPECT_THRESHOLD:g})",
            f"a number > 0 and at most {MAX_SUSPECT_THRESHOLD:,}", _number(lambda v: 0 < v <= MAX_SUSPECT_THRESHOLD),
            metavar="T"),
    Setting("first_layers", "int", 0,
            "the rule also keeps the first N debugged layers in float (default: 0; the seed notebook uses 5)",
            _int_text(0, MAX_COUNT), _int(0, MAX_COUNT), metavar="N"),
    Setting("latency_runs", "int", 50, "timed single-sample invokes per variant; 0 skips latency (default: 50)",
            _int_text(0, MAX_COUNT), _int(0, MAX_COUNT), metavar="N"),
    Setting("recommend", "choice", SEARCH_METHOD,
            "search: measure candidate models for the fewest layers to keep in float (default);"
            " rule: the seed notebook's rmse/scale rule",
            " or ".join(f'"{m}"' for m in METHODS), lambda v: v in METHODS, choices=METHODS),
    Setting("search_budget", "int", 60, "candidate models the search may build and measure (default: 60)",
            _int_text(1, MAX_COUNT), _int(1, MAX_COUNT), metavar="N"),
    Setting("search_share", "number", 0.25,
            "the search may cost at most this share of the bare seed calls on the same model and data (TensorFlow's"
            " converter for float, DRQ, FIQ and the debugger, each evaluated once), both estimated from the model's"
            " ops and multiply-accumulates before it starts, never timed (default: 0.25)",
            "a number > 0 and <= 100", _number(lambda v: 0 < v <= 100), metavar="SHARE"),
    Setting("selection_samples", "int", 500,
            "samples the search chooses on: x_calib beyond the calibration samples, else a held-out half of x"
            " (default: 500)", _int_text(10, MAX_COUNT), _int(10, MAX_COUNT), metavar="N"),
    Setting("keep_float", "list", (),
            "keep this tensor's op in float in every candidate (repeatable; names as in layer_stats.csv)",
            "a list of tensor names", _list_of(), metavar="NAME", repeatable=True, comma=False),
    Setting("keep_float_ops", "list", (),
            "keep every op of these types in float, e.g. MEAN (comma-separated, repeatable)",
            'a list of op names such as "MEAN"', _list_of(), metavar="OPS", repeatable=True),
    Setting("recipe", "list", (),
            "a LiteRT Quantizer recipe (JSON, as `litert quantize --recipe` reads) built as one more variant, named"
            " after the file: int4_fc.json -> int4_fc (repeatable; in a batch file, relative to it)",
            "a list of .json files", lambda v: _list_of()(v) and all(x.lower().endswith(".json") for x in v),
            metavar="FILE.json", repeatable=True, comma=False),
    Setting("target", "choice", targets.DEFAULT,
            targets.help_text,  # read when shown: a plug-in's targets (--plugin) are registered after this import
            lambda: " or ".join(f'"{t}"' for t in targets.TARGETS), lambda v: v in targets.TARGETS,
            choices=targets.TARGETS),
    Setting("primary_output", "str", None,
            "a model with several outputs: the output the report's main numbers and the search's target are about"
            " (default: every labelled output counts for the search and the gate; the first labelled leads)",
            "an output name", lambda v: v is None or (isinstance(v, str) and bool(v)), metavar="NAME"),
    Setting("threshold", "number", BINARY_THRESHOLD,
            f"sigmoid outputs (binary or multi-label): a class or label is predicted where the output is at least T"
            f" (default: {BINARY_THRESHOLD:g})", "a number between 0 and 1", _number(lambda v: 0 < v < 1),
            metavar="T"),
    Setting("plugin", "list", (),
            "a plug-in of yours: an importable MODULE or a FILE.py (a path; in a batch file, relative to it) whose"
            " import registers task kinds (reporter.measure.kinds.register) or targets"
            " (reporter.core.targets.register), which --task and --target then offer; loaded in every process the run"
            " starts (repeatable; recorded in report.json, so that `render` can say which plug-in a report needs)",
            "an importable module name or a .py file that exists", _plugins, metavar="MODULE|FILE.py",
            repeatable=True, comma=False),
    Setting("task", "list", (),
            lambda: f"what an output is, when the report's reading of its shape, activation and labels is not what you"
                    f" mean: KIND, or OUTPUT=KIND for one of several outputs (repeatable; KIND:"
                    f" {', '.join(tasks.names())})",
            lambda: f"KIND or OUTPUT=KIND with KIND one of {', '.join(tasks.names())}", lambda v: _list_of()(v) and all(
                x.rpartition("=")[2] in tasks.names() and x.rpartition("=")[0] != "" or x in tasks.names() for x in v),
            metavar="[OUTPUT=]KIND", repeatable=True),
    Setting("metric", "str", None,
            "your own metric, FILE.py:FUNCTION or MODULE:FUNCTION (looked for beside the data, then in the current"
            " folder): fn(y_true, y_pred) -> float or dict, called with the labels as given and the raw outputs;"
            " it becomes the metric every verdict, gap, gate and fix reads",
            "FILE.py:FUNCTION or MODULE:FUNCTION", lambda v: v is None or (
                isinstance(v, str) and ":" in v and all(v.rpartition(":")[::2])), metavar="MODULE:FUNCTION"),
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
    Setting("base_model", "str", None,
            "a quantization-aware model's float base (the model before QAT: .keras, .h5 or a SavedModel folder): its"
            " float model and its post-training full-integer model are measured beside the QAT models on the same"
            " data", "a path", lambda v: v is None or (isinstance(v, str) and bool(v)), metavar="PATH"),
    Setting("micro_arena", "int", None,
            "--target micro: the tensor arena the microcontroller's firmware gives TFLite Micro, in bytes, at most"
            f" {MAX_ARENA_BYTES:,} (4 GiB - 1, the most a 32-bit device addresses); a model that needs more does not"
            " run there (default: the arena each model needs is measured and stated, not limited)",
            _int_text(1, MAX_ARENA_BYTES, "an integer number of bytes") + " (4 GiB - 1)",
            lambda v: v is None or _int(1, MAX_ARENA_BYTES)(v), metavar="BYTES"),
    Setting("formats", "list", FORMATS, f"comma-separated: {', '.join(FORMATS)} (default: all)",
            f"a list from {', '.join(FORMATS)}", _list_of(FORMATS, nonempty=True), choices=FORMATS,
            metavar="LIST", recorded=False),
    Setting("data_timeout", "number", None,
            "a data function (MODULE:FUNCTION) that has not returned after this many seconds is stopped and the run"
            " fails with one line saying so (default: no limit; a \"still waiting\" line every 30 s either way)",
            f"a number of seconds from 0 to {MAX_DATA_TIMEOUT_S:,} (7 days)",
            lambda v: v is None or _number(lambda x: 0 < x <= MAX_DATA_TIMEOUT_S)(v), metavar="SECONDS",
            recorded=False),
)

GATE = (
    Setting("max_accuracy_drop", "number", None,
            "gate: exit with code 3 when no model for --target loses at most D accuracy (0..1) against float (with"
            " --variant: when that variant loses more); also the search's target", "a number from 0 to 1",
            _number(lambda v: 0 <= v <= 1), metavar="D"),
    Setting("gate_variant", "choice", None,
            "the variant the gate checks (default: the model decided for --target; before --target, it was"
            f" {GATE_DEFAULT})", f'a quantized variant such as "{FIQ}"', lambda v: v in ALL_VARIANTS and v != FLOAT,
            choices=tuple(v for v in ALL_VARIANTS if v != FLOAT), toml_key="variant"),
)

# Where a batch's models run: flags of `batch` and keys of a batch file's [batch] (the flags win); not recorded.
EXECUTORS = ("local", "ray")
BATCH = (
    Setting("executor", "choice", None,
            "local: worker processes on this machine (default); ray: one Ray task per model", "'local' or 'ray'",
            lambda v: v is None or v in EXECUTORS, choices=EXECUTORS, recorded=False),
    Setting("address", "str", None,
            "with --executor ray: the cluster to join (e.g. ray://head:10001 or auto); default: a local Ray instance"
            " with --jobs CPUs", "a Ray cluster address (text)", lambda v: v is None or (isinstance(v, str) and bool(v)),
            metavar="ADDR", recorded=False),
    Setting("cpus_per_task", "int", None, "with --executor ray: CPUs Ray reserves for each model (default 1)",
            _int_text(1, MAX_WORKERS), lambda v: v is None or _int(1, MAX_WORKERS)(v), metavar="N", recorded=False),
)
BATCH_BY_NAME = {s.name: s for s in BATCH}
# `batch --jobs` (a flag only: a batch file does not say how many of its models run at once).
JOBS = Setting("jobs", "int", None, "models run at once, each in its own process (default: number of cores)",
               _int_text(1, MAX_WORKERS), lambda v: v is None or _int(1, MAX_WORKERS)(v), metavar="N", recorded=False)

# What a batch writes into each report's settings beside the run's own: notes, not choices (no flag, no TOML key).
NOTES = (
    Setting("latency_timing", "str", None, "a batch's note on how latency was timed beside other runs", "text",
            lambda v: v is None or isinstance(v, str)),
    Setting("inputs_sha256", "str", None, "a batch: the fingerprint of the inputs the run read (--resume)", "text",
            lambda v: v is None or isinstance(v, str)),
)

BY_NAME = {s.name: s for s in RUN}
GATE_BY_NAME = {s.name: s for s in GATE}
GATE_BY_KEY = {s.key: s for s in GATE}  # a batch file's [gate] keys
DEFAULTS = {s.name: s.default for s in RUN}
NOT_RECORDED = frozenset(s.name for s in RUN if not s.recorded)

# The subcommands' own arguments: declared as the settings are (flag, default, help, check), never recorded.
DEMO_MODELS = ("digits_cnn", "digits_lstm", "breast_cancer_mlp", "wine_wide_deep")  # reporter.pipeline.demo trains them
BASELINE_HELP = ("an earlier run to compare with (report.json, report folder or batch folder): writes diff.md and"
                 " diff.json beside the result; with --max-accuracy-drop D, fails (exit 3) when a variant's"
                 " accuracy falls more than D below the baseline's")


def _text(v) -> bool:
    """Non-empty text: a path or a name the command needs."""
    return isinstance(v, str) and bool(v)


def _optional_text(v) -> bool:
    return v is None or _text(v)


def _bool(v) -> bool:
    return isinstance(v, bool)


_argument = partial(Setting, recorded=False)  # a subcommand's own argument: a Setting no report records

OUT = _argument("out", "str", "reports", "output folder (default: reports)", "a folder", _text)
QUIET = _argument("quiet", "bool", False, "no progress lines", "true or false", _bool)
DEBUG = _argument("debug", "bool", False, "show tracebacks", "true or false", _bool)
BASELINE = _argument("baseline", "str", None, BASELINE_HELP, "a report.json, report folder or batch folder",
                     _optional_text, metavar="BASE")
MAX_ACCURACY_DROP = GATE_BY_NAME["max_accuracy_drop"]  # `batch --baseline`'s and `diff`'s: the gate's own check
RUN_OPTIONS = (OUT, *RUN, QUIET, DEBUG)  # `run`'s and `demo`'s
# `batch`'s, `diff`'s and `render`'s --plugin: the run's check; loaded before the parser is built (reporter.cli)
PLUGIN = replace(BY_NAME["plugin"], recorded=False)

COMMANDS: dict[str, tuple[Setting, ...]] = {
    "run": (
        _argument("model", "str", None, "a .keras file, a legacy .h5 file or a SavedModel folder",
                  "a model file or folder", _text, positional=True),
        _argument("data", "str", None,
                  "an .npz with x, y and optional x_calib, or package.module:function returning them",
                  "an .npz file or package.module:function", _text, required=True),
        _argument("name", "str", None, "report name (default: the model file's name)", "a name",
                  lambda v: v is None or isinstance(v, str)),  # what a name may hold: RunSettings.value_problems
        *GATE, BASELINE, *RUN_OPTIONS),
    "batch": (
        _argument("config", "str", None, "a TOML file with [defaults], optional [gate] and [[model]] entries",
                  "a TOML file", _text, positional=True),
        OUT, JOBS,
        _argument("resume", "bool", False,
                  "skip models whose complete report exists and whose inputs have not changed", "true or false", _bool),
        replace(QUIET, help_text="no progress display"), BASELINE, *BATCH,
        _argument("shared_dir", "bool", False,
                  "with --executor ray: every node sees --out at the same path, so tasks write their reports there"
                  " instead of returning the files", "true or false", _bool),
        replace(MAX_ACCURACY_DROP,
                help_text="with --baseline: fail (exit 3) when a variant's accuracy falls more than D (0-1) below"
                          " BASE's"),
        replace(PLUGIN, help_text="a plug-in of yours (MODULE or FILE.py) loaded in the batch and in every worker,"
                                  " added to each model's `plugin` (repeatable)")),
    "diff": (
        _argument("base", "str", None, "the earlier run (e.g. the base branch's)",
                  "a report.json, report folder or batch folder", _text, metavar="BASE", positional=True),
        _argument("new", "str", None, "the later run (e.g. the pull request's)",
                  "a report.json, report folder or batch folder", _text, metavar="NEW", positional=True),
        _argument("format", "choice", "md", "", '"md", "html" or "json"', lambda v: v in ("md", "html", "json"),
                  choices=("md", "html", "json")),
        replace(OUT, default=None, help_text="output file (default: print to standard output)",
                must_be_text="a file or folder", check=_optional_text),
        replace(MAX_ACCURACY_DROP,
                help_text="fail (exit 3) when a variant's accuracy in NEW is more than D (0-1) below BASE's"),
        replace(PLUGIN, help_text="a plug-in (MODULE or FILE.py) whose task kinds or targets the reports were made"
                                  " with (repeatable)")),
    "render": (
        _argument("report", "str", None, "a report.json written by quant-report", "a report.json or report folder",
                  _text, positional=True),
        _argument("format", "choice", None, "", " or ".join(f'"{f}"' for f in FORMATS), lambda v: v in FORMATS,
                  choices=FORMATS, required=True),
        replace(OUT, default=None, help_text="output file (default: report.html, report.pdf or summary.md beside it)",
                must_be_text="a file or folder", check=_optional_text),
        replace(PLUGIN, help_text="a plug-in (MODULE or FILE.py) whose task kind or target the report was made with"
                                  " (repeatable; report.json's settings.plugin names those the run loaded)"),
        DEBUG),
    "demo": (
        _argument("models", "list", None, f"comma-separated subset of: {', '.join(DEMO_MODELS)}",
                  f"a list of demo models from {', '.join(DEMO_MODELS)}",
                  lambda v: v is None or _list_of(DEMO_MODELS, nonempty=True)(v), choices=DEMO_MODELS,
                  metavar="MODELS", noun="demo model(s)"),
        *RUN_OPTIONS),
}
# The top-level parser's own: `quant-report --version`.
TOP = (_argument("version", "version", f"quant-report {__version__}", "show program's version number and exit",
                 "nothing", lambda v: True),)


def recorded() -> tuple[Setting, ...]:
    """The settings report.json's `settings` holds, in order: the run's, the gate's, the batch's notes."""
    return tuple(s for s in (*RUN, *GATE, *NOTES) if s.recorded)


def record_type(setting: Setting):
    """The type of the setting's field in report.json's record (older reports may lack it: None or empty)."""
    if setting.kind == "list":
        return list[str]
    return Optional[{"int": int, "number": float, "bool": bool}.get(setting.kind, str)]
