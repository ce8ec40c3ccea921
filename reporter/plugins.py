"""The composition root: the built-in plug-ins, the installed ones and the user's own, registered by the entry points.

The registries sit low (reporter.core.tasks, reporter.core.targets, reporter.convert.rungs) and never import the
plug-ins above them; the command line, the Python API and, through reporter.core.children and the Ray pool, every
child process they start call `register_builtins()` first. It also loads the plug-ins installed packages declare in
the entry-point group `quant_report.plugins` (one warning line for one that fails; the run goes on without it).

A user's plug-in (`--plugin MODULE_OR_FILE`, a batch file's `plugin`, `reporter.run(plugins=...)`) is a module whose
import registers task kinds (`reporter.measure.kinds.register`) or targets (`reporter.core.targets.register`):
`load` imports it, once per process, and every child started afterwards imports it too before its first call, so a
batch worker knows a kind its driver was given. Importing it runs its code: code the user named to be run, as a
conftest.py is. `unloaded` says in one line which plug-in a saved report needs when it was made with one this
process has not loaded (`render`, `diff`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional

from reporter.core import children
from reporter.core.errors import InputError, UsageError, one_line

GROUP = "quant_report.plugins"  # the entry-point group installed packages declare their plug-ins in
_LOADED: dict[str, types.ModuleType] = {}  # a user's plug-in by its key (the resolved file, or the module name)
_installed = False  # the entry points are loaded once per process


def register_builtins() -> None:
    """Registers the built-in task kinds, targets and repair rungs, then the installed plug-ins (entry points), in
    this process and in every child it starts from now on; a second call does nothing."""
    from reporter.convert import rungs  # noqa: F401 - its REGISTRY holds the built-in rungs, in ladder order
    from reporter.core import targets  # noqa: F401 - its FAMILIES hold the built-in targets
    from reporter.measure import kinds  # noqa: F401 - importing it registers the built-in kinds in core.tasks

    children.at_start(register_builtins)
    load_installed()


class PluginError(UsageError):
    """A plug-in that cannot be loaded: "NAME: the problem", one line (exit code 2: nothing ran)."""

    def __init__(self, spec: str, problem: str):
        self.spec, self.problem = spec, problem
        super().__init__(f"{spec}: {problem}")


def _warn(text: str) -> None:
    """A warning line on the terminal; not again from each child process (its parent said it)."""
    import multiprocessing

    if multiprocessing.parent_process() is None:
        print(f"quant-report: warning: {text}", file=sys.stderr)


def load_installed(warn: Callable[[str], None] = _warn) -> list[str]:
    """Loads every plug-in of the entry-point group `quant_report.plugins` (a module, imported; or a function,
    called without arguments), once per process; returns their names. One that fails is one `warn` line naming it
    and why, and is left out."""
    global _installed
    if _installed:
        return []
    _installed = True
    from importlib.metadata import entry_points

    loaded = []
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        try:
            _guarded(f"entry point {point.name}", lambda: _call(point.load()))
        except PluginError as exc:
            warn(f"the plug-in {point.name} ({point.value}, entry point of {GROUP}) was not loaded: {exc.problem};"
                 " going on without it")
            continue
        loaded.append(point.name)
    return loaded


def _call(found) -> None:
    """An entry point's object: a module is loaded already; a function registers when called."""
    if not isinstance(found, types.ModuleType) and callable(found):
        found()


def load(specs: Iterable[str], base: Optional[Path] = None) -> tuple[str, ...]:
    """Loads the user's plug-ins `specs` (each an importable module name or a .py file, relative to `base`, else the
    current folder), each once per process, and makes every child started from now on load them first. Returns
    them as loaded (files as absolute paths). A PluginError naming the first that cannot be loaded: a missing file,
    a module Python does not find, an exception or sys.exit while it is imported; what it registered before failing
    is taken out again."""
    specs = tuple(specs)
    found = tuple(_key(spec, base) for spec in specs)
    for spec, key in zip(specs, found):
        if key not in _LOADED:
            _LOADED[key] = _import(spec, key)
    if found:
        children.at_start(Loaded(found))
    return found


@dataclass(frozen=True)
class Loaded:
    """What a child runs first to load its parent's plug-ins (picklable: a batch's Ray tasks are handed it too)."""

    keys: tuple[str, ...]

    def __call__(self) -> None:
        load(self.keys)


def loaded() -> tuple[str, ...]:
    """The user's plug-ins loaded in this process, as `load` resolved them."""
    return tuple(_LOADED)


def _is_file(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or os.sep in spec


def _key(spec: str, base: Optional[Path]) -> str:
    """A plug-in's key: its file, absolute (a PluginError when there is none), or its module name."""
    if not isinstance(spec, str) or not spec:
        raise PluginError(repr(spec), "not a module name or a .py file")
    if _is_file(spec):
        path = Path(spec).expanduser()
        path = path if path.is_absolute() else (Path(base) if base else Path.cwd()) / path
        if path.is_dir():
            raise PluginError(spec, "a folder, not a .py file (a package is named by its module name)")
        if not path.is_file():
            raise PluginError(spec, f"no such file ({path})" if str(path) != spec else "no such file")
        return str(path.resolve())
    if not all(part.isidentifier() for part in spec.split(".")):
        raise PluginError(spec, "not a module name (a.b.c) nor a .py file")
    return spec


def _module_name(file: str) -> str:
    """The name a plug-in file is imported under: the same in every process (a class it defines is pickled by that
    name into a child), private (it shadows no module) and distinct for two files of one name."""
    stem = re.sub(r"\W", "_", Path(file).stem)
    return f"quant_report_plugin_{stem}_{hashlib.sha256(file.encode()).hexdigest()[:8]}"


def _import(spec: str, key: str) -> types.ModuleType:
    """Imports the plug-in (its file under a private name, or its module); a PluginError naming it if it fails,
    with what it had registered taken out and the half-imported module forgotten."""
    name = _module_name(key) if _is_file(spec) else key
    before = _registered()
    try:
        return _guarded(spec, lambda: _exec(name, key) if _is_file(spec) else _import_module(key))
    except PluginError:
        _forget(before)
        sys.modules.pop(name, None)
        raise


def _import_module(name: str) -> types.ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):  # the plug-in itself is missing
            raise InputError(name, f"no module named {exc.name!r} (not installed, nor importable from here; a file"
                                   " is given by its path: my_plugin.py)") from None
        raise


def _exec(name: str, file: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling find the module by its name
    spec.loader.exec_module(module)
    return module


def _guarded(spec: str, call: Callable):
    """`call()`, the plug-in's code, behind the wall (a sys.exit in it is its failure); any exception it raises as a
    PluginError in one line."""
    from reporter.core.wall import wall

    try:
        with wall(spec, "the plug-in", "a plug-in registers its kinds and targets, or raises an exception"):
            return call()
    except InputError as exc:  # the wall's (it called sys.exit or raised KeyboardInterrupt), or a module not found
        raise PluginError(spec, exc.problem) from None
    except SyntaxError as exc:
        raise PluginError(spec, f"could not be imported: SyntaxError: {exc.msg} (line {exc.lineno})") from None
    except Exception as exc:  # noqa: BLE001 - a plug-in's import may raise anything: one line naming it
        raise PluginError(spec, f"could not be imported: {one_line(exc)}") from exc


def _registered() -> tuple:
    """What the registries a plug-in fills hold now: task kinds, target families, figures records."""
    from reporter.core import targets, tasks
    from reporter.model import figures

    return {k.name for k in tasks.kinds()}, list(targets.FAMILIES), set(figures.records())


def _forget(before: tuple) -> None:
    """Takes out what a failed plug-in registered after `before` (so that a corrected one can be loaded again)."""
    from reporter.core import targets, tasks
    from reporter.model import figures

    kinds, families, records = before
    for kind in tasks.kinds():
        if kind.name not in kinds:
            tasks.unregister(kind.name)
    for family in [f for f in targets.FAMILIES if f not in families]:
        targets.unregister(family)
    for name in set(figures.records()) - records:
        figures.unregister(name)


# --- a saved report made with a plug-in ------------------------------------------------------------------------
def unloaded(path, kinds: bool = True) -> Optional[str]:
    """One line for the first report.json at `path` (a report.json, a report folder or a batch folder) made with a
    task kind (`kinds`; else only its figures count), or holding a kind's figures, that no plug-in loaded here
    registers: which plug-in it needs, as its settings record them; None when every kind is known here (or the file is
    not readable: its reader says why)."""
    for report in _reports(Path(path)):
        problem = _unknown_in(report, kinds)
        if problem:
            return f"{report}: {problem}"
    return None


def _reports(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if (path / "report.json").is_file():
        return [path / "report.json"]
    return sorted(path.glob("*/report.json")) if path.is_dir() else []


def _unknown_in(file: Path, kinds: bool = True) -> str:
    from reporter.core import tasks
    from reporter.model import figures
    from reporter.model.decode import loads

    try:
        data = loads(file.read_text(encoding="utf-8"))
        model, settings = data.get("model") or {}, data.get("settings") or {}
        task = model.get("task")
    except (OSError, ValueError, RecursionError, AttributeError):
        return ""
    if not isinstance(task, str):
        return ""
    needs = ""
    if kinds and not any(k.record.task == task for k in tasks.kinds()):
        needs = f"made with the task kind {task!r}"
    else:
        unknown = sorted(_figures_names(data) - set(figures.records()) - set(figures.replaced()))
        if unknown:
            needs = f"holds the figures of {', '.join(map(repr, unknown))}"
    if not needs:
        return ""
    given = [p for p in settings.get("plugin") or [] if isinstance(p, str)] if isinstance(settings, dict) else []
    if given:
        return (f"{needs}, which no plug-in loaded here registers; the run loaded "
                f"{' '.join(f'--plugin {p}' for p in given)}: give it here too")
    return (f"{needs}, which no plug-in loaded here registers, and the run recorded no --plugin (an installed"
            " package's or one registered through the Python API): load the module that registers it with --plugin")


def _figures_names(value) -> set:
    """The kind names of every `metrics.figures` map in report.json's data."""
    names: set = set()
    if isinstance(value, dict):
        for key, item in value.items():
            found = item.get("figures") if key == "metrics" and isinstance(item, dict) else None
            if isinstance(found, dict):
                names |= set(found)
            names |= _figures_names(item)
    elif isinstance(value, list):
        for item in value:
            names |= _figures_names(item)
    return names
