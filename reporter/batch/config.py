"""The batch configuration file: TOML, checked whole before anything runs.

Every problem (unknown key, missing file, duplicate name, bad value) is collected with the line it
is on, so the user fixes them all in one go.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from reporter.inputs import settings
from reporter.core.errors import QuantReportError
from reporter.findings.gate import Gate
from reporter.core.files import folder_name, name_problem
from reporter.model.decode import MAX_DEPTH, JSONLimitError, check_depth

RUN_KEYS = settings.BY_NAME  # the batch file's run keys are the command line's run flags
MODEL_KEYS = {"name", "path", "data"} | set(RUN_KEYS)
GATE_KEYS = settings.GATE_BY_KEY


class ConfigError(QuantReportError):
    """One or more problems in the configuration file, one line each."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass
class ModelEntry:
    name: str
    path: Union[Path, str]  # the model file, or package.module:function returning the model
    data: str  # an absolute .npz path, or package.module:function
    options: dict  # run settings: defaults overridden by the model's own keys
    line: int
    shown: tuple = ()  # (model, data) as the config file gives them: what the report shows


BATCH_KEYS = settings.BATCH_BY_NAME  # [batch]: where the models run (the command line's flags win)


@dataclass
class BatchConfig:
    path: Path
    models: list[ModelEntry]
    gate: Optional[Gate] = None
    defaults: dict = field(default_factory=dict)
    batch: dict = field(default_factory=dict)  # [batch]: executor, address, cpus_per_task


def _key_lines(text: str) -> dict:
    """Maps (table, model index, key) to the 1-based line where the key is set.

    Tables are "" (top level), "defaults", "gate" and "model"; the model index counts [[model]]
    headers (0-based). The header line itself is stored under key None.
    """
    lines = {}
    table, index = "", -1
    header = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"']+)\s*\]\]?")
    key = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\")\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        m = header.match(line)
        if m:
            table = m.group(2).strip("\"'")
            if m.group(1) == "[[":
                index = index + 1 if table == "model" else index
            lines.setdefault((table, index if table == "model" else -1, None), number)
            continue
        m = key.match(line)
        if m:
            lines.setdefault((table, index if table == "model" else -1, m.group(1).strip('"')), number)
    return lines


# TOML's strings and comments, blanked (lines kept) before its brackets are counted
_TOML_SKIP = re.compile(r'"""(?:\\[\s\S]|[^\\])*?"""(?!")|\'\'\'[\s\S]*?\'\'\'(?!\')|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\'|#[^\n]*')


def _is_function_spec(value: str, base: Path) -> bool:
    return ":" in value and not value.endswith(".npz") and not (base / value).exists() and not Path(value).is_absolute()


def _resolved(table, base: Path):
    """A [defaults] or [[model]] table with its `plugin` files, relative to the batch file's folder, made absolute
    (a module is kept as named): what the checks, the driver and the workers read."""
    value = table.get("plugin") if isinstance(table, dict) else None
    if not isinstance(value, list):
        return table
    return {**table, "plugin": [str((base / v).resolve()) if isinstance(v, str) and (v.endswith(".py") or "/" in v)
                                and not Path(v).expanduser().is_absolute() else v for v in value]}


def plugins_of(path) -> list[tuple[str, str]]:
    """The plug-ins a batch file names ([defaults] and [[model]] `plugin`), each with "FILE:LINE", files made
    absolute: the driver loads them before the file's --task values are checked. Nothing for a file that cannot be
    read (`load` says why)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        check_depth(_TOML_SKIP.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text))
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, JSONLimitError, RecursionError, tomllib.TOMLDecodeError):
        return []
    lines = _key_lines(text)
    models = data.get("model") if isinstance(data.get("model"), list) else []
    tables = [("defaults", -1, data.get("defaults"))] + [("model", i, m) for i, m in enumerate(models)]
    found = []
    for table, index, values in tables:
        values = _resolved(values, path.parent)
        if isinstance(values, dict) and isinstance(values.get("plugin"), list):
            line = lines.get((table, index, "plugin")) or lines.get((table, index, None)) or 1
            found += [(spec, f"{path}:{line}") for spec in values["plugin"] if isinstance(spec, str) and spec]
    return list(dict.fromkeys(found))


def load(path) -> BatchConfig:
    """Reads and checks the configuration; raises ConfigError listing every problem found."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{path}: no such file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{path}: cannot be read ({exc})"]) from None
    try:
        check_depth(_TOML_SKIP.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text))  # before tomllib recurses
        data = tomllib.loads(text)
    except JSONLimitError as exc:  # the one line every reader of nested text gives
        match = re.search(r"\(line (\d+)\)", str(exc))
        where = f"{path}:{match.group(1)}" if match else str(path)
        raise ConfigError([f"{where}: {str(exc).split(' (line')[0]}"]) from None
    except RecursionError:  # not reached after the scan; kept so that no path ends in a traceback
        raise ConfigError([f"{path}: nested more than {MAX_DEPTH} levels deep"]) from None
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        where = f"{path}:{match.group(1)}" if match else str(path)
        raise ConfigError([f"{where}: not valid TOML: {exc}"]) from None

    lines = _key_lines(text)
    base = path.parent
    problems: list[tuple[int, str]] = []

    def at(table, index, key):
        return lines.get((table, index, key)) or lines.get((table, index, None)) or 1

    def problem(line, message):
        problems.append((line, f"{path}:{line}: {message}"))

    for key in data:
        if key not in ("defaults", "gate", "model", "batch"):
            problem(at("", -1, key) if not isinstance(data[key], dict) else at(key, -1, None),
                    f"unknown key '{key}' (expected [defaults], [gate], [batch] and [[model]] tables)")

    batch = data.get("batch", {})
    if not isinstance(batch, dict):
        problem(at("", -1, "batch"), "'batch' must be a table")
        batch = {}
    for key, value in batch.items():
        if key not in BATCH_KEYS:
            problem(at("batch", -1, key), f"unknown key '{key}' in [batch] (allowed: {', '.join(sorted(BATCH_KEYS))})")
        elif value is None or settings.check_value(BATCH_KEYS[key], value):
            problem(at("batch", -1, key), f"'{key}' must be {BATCH_KEYS[key].must_be}, not {value!r}")

    defaults = _resolved(data.get("defaults", {}), base)
    if not isinstance(defaults, dict):
        problem(at("", -1, "defaults"), "'defaults' must be a table")
        defaults = {}
    for key, value in defaults.items():
        if key not in RUN_KEYS:
            problem(at("defaults", -1, key), f"unknown key '{key}' in [defaults] (allowed: {', '.join(sorted(RUN_KEYS))})")
        elif settings.check_value(RUN_KEYS[key], value):
            problem(at("defaults", -1, key), settings.check_value(RUN_KEYS[key], value))

    gate = None
    raw_gate = data.get("gate")
    if raw_gate is not None:
        if not isinstance(raw_gate, dict):
            problem(at("", -1, "gate"), "'gate' must be a table")
        else:
            ok = True
            for key, value in raw_gate.items():
                if key not in GATE_KEYS:
                    problem(at("gate", -1, key), f"unknown key '{key}' in [gate] (allowed: {', '.join(sorted(GATE_KEYS))})")
                    ok = False
                elif settings.check_value(GATE_KEYS[key], value):
                    problem(at("gate", -1, key), settings.check_value(GATE_KEYS[key], value))
                    ok = False
            if "max_accuracy_drop" not in raw_gate:
                problem(at("gate", -1, None), "[gate] needs 'max_accuracy_drop'")
                ok = False
            if ok:
                # without 'variant' the gate holds each model's decision for its target (reporter.findings.gate)
                gate = Gate(float(raw_gate["max_accuracy_drop"]), raw_gate.get("variant", ""))

    raw_models = data.get("model", [])
    if not isinstance(raw_models, list) or not raw_models:
        problem(1, "no [[model]] entries: add at least one with name, path and data")
        raw_models = []
    models: list[ModelEntry] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_models):
        raw = _resolved(raw, base)
        header = at("model", i, None)
        for key, value in raw.items():
            if key not in MODEL_KEYS:
                problem(at("model", i, key), f"unknown key '{key}' in [[model]] (allowed: {', '.join(sorted(MODEL_KEYS))})")
            elif key in RUN_KEYS and settings.check_value(RUN_KEYS[key], value):
                problem(at("model", i, key), settings.check_value(RUN_KEYS[key], value))
        for key in ("path", "data"):
            if key not in raw:
                problem(header, f"[[model]] #{i + 1} has no '{key}'")
            elif not isinstance(raw[key], str) or not raw[key]:
                problem(at("model", i, key), f"'{key}' must be a non-empty string")
        if not isinstance(raw.get("path"), str) or not isinstance(raw.get("data"), str):
            continue
        if _is_function_spec(raw["path"], base):  # a model function: called in the model's worker
            model_path = raw["path"]
        else:
            model_path = (base / raw["path"]).resolve()
            if not model_path.exists():
                problem(at("model", i, "path"), f"model not found: {model_path}")
        if _is_function_spec(raw["data"], base):
            data_spec = raw["data"]
        else:
            data_path = (base / raw["data"]).resolve()
            if not data_path.is_file():
                problem(at("model", i, "data"), f"data file not found: {data_path}")
            data_spec = str(data_path)
        name = raw.get("name") or (model_path.rpartition(":")[2] if isinstance(model_path, str)
                                   else model_path.stem or model_path.name)
        if not isinstance(name, str):
            problem(at("model", i, "name"), "'name' must be a string")
            continue
        if name_problem(name):
            problem(at("model", i, "name") if "name" in raw else header, f"'name' {name_problem(name)}")
            continue
        folder = folder_name(name)  # two names may map to one output folder ("a b", "a_b")
        if folder in seen:
            problem(at("model", i, "name") if "name" in raw else header,
                    f"duplicate model name '{name}' (its report folder '{folder}' is already used on line {seen[folder]})")
        else:
            seen[folder] = at("model", i, "name") if "name" in raw else header
        options = {**defaults, **{k: v for k, v in raw.items() if k in RUN_KEYS}}
        metric = options.get("metric")
        if isinstance(metric, str) and metric.rpartition(":")[0].endswith(".py"):
            file, _, func = metric.rpartition(":")  # a metric file is found relative to this config's folder
            options["metric"] = f"{(base / file).resolve()}:{func}"
        models.append(ModelEntry(name=name, path=model_path, data=data_spec, options=options, line=header,
                                 shown=(raw["path"], raw["data"])))

    if problems:
        raise ConfigError([message for _, message in sorted(problems, key=lambda p: p[0])])
    return BatchConfig(path=path, models=models, gate=gate, defaults=defaults, batch=batch)
