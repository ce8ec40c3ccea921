"""Every command-line argument is made from its declaration (reporter/core/schema.py) by the one builder
(reporter/inputs/settings.py), with its check; the settings classes are typed as the declarations say, and a type
checker sees it."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import re
import subprocess
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any, Optional

import pytest

from reporter.cli import build_parser, main
from reporter.core import schema
from reporter.core.errors import UsageError
from reporter.core.exit_codes import ExitCode
from reporter.inputs.settings import RunSettings
from reporter.model.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
BUILDER = Path("reporter/inputs/settings.py")
# What each subcommand needs to parse at all; a bad value is added to it (or replaces a positional argument).
NEEDS = {"run": ["m.keras", "--data", "d.npz"], "batch": ["c.toml"], "diff": ["a", "b"],
         "render": ["r.json", "--format", "md"], "demo": []}
# A value each kind's check refuses (argparse's own parsing, then the declaration's check).
BAD = {"int": "x", "number": "nan", "choice": "nosuch", "list": "nosuch", "str": ""}
# Flags whose every text is valid on the command line: a tensor or op name is looked up in the model later, a report
# name is checked by the run (RunSettings.value_problems: exit 2 too, after parsing).
ANY_TEXT = {"keep_float", "keep_float_ops", "name"}


def test_no_argparse_argument_is_made_outside_the_one_builder():
    """An AST walk over reporter/: `add_argument(` is called in reporter/inputs/settings.py only."""
    outside = []
    for path in sorted((ROOT / "reporter").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (
                    isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
                    or isinstance(node.func, ast.Name) and node.func.id == "add_argument"):
                rel = path.relative_to(ROOT)
                if rel != BUILDER:
                    outside.append(f"{rel}:{node.lineno}")
    assert outside == []


def _subparsers():
    parser = build_parser()
    return parser, parser._subparsers._group_actions[0].choices


def test_every_declared_setting_is_an_argument_of_its_subcommands_as_declared():
    """Each subcommand's arguments are exactly its declarations, in order (the --help order), each with the
    declared flag (or position), default, help and requirement; and every run, gate and batch setting is one of them
    where it applies."""
    parser, subs = _subparsers()
    assert set(subs) == set(schema.COMMANDS)
    for name, sub in subs.items():
        actions = [a for a in sub._actions if a.dest != "help"]
        declared = schema.COMMANDS[name]
        assert [a.dest for a in actions] == [s.name for s in declared], name
        for action, setting in zip(actions, declared):
            where = f"{name} {setting.name}"
            assert action.option_strings == ([] if setting.positional else [setting.flag]), where
            assert action.help == setting.help, where
            assert action.required == (setting.positional or setting.required), where
            if not setting.positional:
                default = list(setting.default) if setting.repeatable else setting.default
                assert action.default == default, where
    top = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    assert [a.option_strings for a in top] == [[s.flag] for s in schema.TOP]
    names = {command: {s.name for s in settings} for command, settings in schema.COMMANDS.items()}
    for setting in (*schema.RUN, *schema.GATE):
        assert setting.name in names["run"], setting.name
    for setting in schema.RUN:
        assert setting.name in names["demo"], setting.name
    for setting in (*schema.BATCH, schema.JOBS):
        assert setting.name in names["batch"], setting.name
    for command in ("batch", "diff"):  # the gate's limit, with the gate's own check
        limit = next(s for s in schema.COMMANDS[command] if s.name == "max_accuracy_drop")
        assert limit.check is schema.GATE_BY_NAME["max_accuracy_drop"].check


def _bad_value_cases():
    for command, settings in schema.COMMANDS.items():
        for setting in settings:
            if setting.kind == "bool" or setting.name in ANY_TEXT:
                continue
            bad = BAD[setting.kind]
            argv = list(NEEDS[command])
            if setting.positional:  # NEEDS lists the positional arguments first, in order
                argv[[s.name for s in settings if s.positional].index(setting.name)] = bad
                named = f"argument {setting.metavar or setting.name}"
            else:
                argv += [setting.flag, bad]
                named = f"argument {setting.flag}"
            yield pytest.param([command, *argv], named, id=f"{command}-{setting.name}")


@pytest.mark.parametrize("argv,named", list(_bad_value_cases()))
def test_a_bad_value_of_any_argument_is_a_one_line_usage_error_naming_it(capfd, argv, named):
    """Every declared argument checks its value on the command line: exit 2, one line naming the argument, nothing
    run (the parser refuses it before any command starts)."""
    with pytest.raises(UsageError):
        build_parser().parse_args(argv)
    capfd.readouterr()
    assert main(argv) == ExitCode.USAGE
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"quant-report {argv[0]}: error: {named}: "), lines[0]


def _run_settings_type(setting: schema.Setting):
    """The type RunSettings gives a declared setting: its kind's, optional where it has no default."""
    if setting.kind == "list":
        return tuple[str, ...]
    base = {"int": int, "number": float, "bool": bool}.get(setting.kind, str)
    return base if setting.default is not None else Optional[base]


def test_the_settings_classes_are_typed_and_ordered_as_declared():
    """RunSettings ends with one field per run and gate setting, and report.json's Settings has one per recorded
    setting: same names, order, defaults, and a type matching the kind; no field of either is typed Any."""
    declared = (*schema.RUN, *schema.GATE)
    fields = dataclasses.fields(RunSettings)
    hints = typing.get_type_hints(RunSettings)
    assert [f.name for f in fields][-len(declared):] == [s.name for s in declared]
    assert not {s.name for s in declared} & {f.name for f in fields[:-len(declared)]}
    for setting, f in zip(declared, fields[-len(declared):]):
        assert hints[f.name] == _run_settings_type(setting), f.name
        assert f.default == setting.default, f.name
    recorded = schema.recorded()
    record_fields = dataclasses.fields(Settings)
    record_hints = typing.get_type_hints(Settings)
    assert [f.name for f in record_fields] == [s.name for s in recorded]
    for setting, f in zip(recorded, record_fields):
        assert record_hints[f.name] == schema.record_type(setting), f.name
        empty = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
        assert empty == ([] if setting.kind == "list" else None), f.name
    assert Any not in (*hints.values(), *record_hints.values())


# Lines marked "# error" must be mypy's errors, and only they.
SNIPPET = textwrap.dedent("""\
    from typing import Optional

    from reporter.inputs.settings import RunSettings
    from reporter.model.settings import Settings


    def reads(run: RunSettings, record: Settings) -> None:
        samples: int = run.calibration_samples
        drop: Optional[float] = run.max_accuracy_drop
        variants: tuple[str, ...] = run.variants
        metric: Optional[str] = run.metric
        recorded: list[str] = record.variants
        share: Optional[float] = record.search_share
        RunSettings(model="m.keras", data="d.npz", out="reports", calibration_samples=5, variants=("fiq",))


    def misreads(run: RunSettings, record: Settings) -> None:
        samples: str = run.calibration_samples  # error
        share: float = record.search_share  # error
        arena: int = run.micro_arena  # error
        run.no_such_setting  # error
        RunSettings(model="m.keras", data="d.npz", out="reports", calibration_samples="5")  # error
""")


def test_a_type_checker_sees_every_settings_field(tmp_path):
    """mypy is clean on the two settings modules and on code reading their fields as declared, and flags code that
    misreads one (a field typed Any would let each misreading pass)."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e .[test])")
    snippet = tmp_path / "uses_settings.py"
    snippet.write_text(SNIPPET)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), str(snippet), str(BUILDER), "reporter/model/settings.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    expected = {i for i, line in enumerate(SNIPPET.splitlines(), 1) if line.endswith("# error")}
    assert {int(re.match(r".*uses_settings\.py:(\d+):", e).group(1)) for e in errors if "uses_settings" in e} \
        == expected, proc.stdout
    assert [e for e in errors if "uses_settings" not in e] == [], proc.stdout
