"""The user's own code (a data function, a metric), found without changing what Python imports.

A module is looked for in the folders given (the batch file's folder, the data file's folder, the current
folder) as MODULE.py or MODULE/__init__.py, and loaded from that file. Nothing is added to sys.path, so a
file beside a batch config (a `jinja2.py`, say) can never shadow a package quant-report or TensorFlow imports.
Loading it runs its code: it is code the user asked to run, as a conftest.py is.

`installed_first` says whether an installed module of the same name wins (data functions: a config folder
must not shadow anything) or the file in the folders does (a metric beside the data).

The user's code runs behind `wall`: a `sys.exit` or a KeyboardInterrupt it raises itself becomes one
InputError naming it, instead of ending quant-report with the user's exit code (exit 3 reads as a failed gate,
exit 0 as success with nothing written). A real Ctrl-C or SIGTERM arriving meanwhile still goes through.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import sys
from pathlib import Path
from typing import Callable, Iterable, Optional

from reporter.core.errors import InputError, first_line
from reporter.core.wall import wall  # noqa: F401 - where the run's callers find it

_loaded = itertools.count()


class NotFound(ImportError):
    """No such module in the folders or among installed modules."""


def import_module(target: str, folders: Iterable[Path], installed_first: bool):
    """The module `target` ("pkg.mod" or "mod") from one of `folders` or installed; ImportError if none, and the
    module's own exception if it fails while it loads."""
    parts = target.split(".")
    if not all(part.isidentifier() for part in parts):
        raise NotFound(f"'{target}' is not a module name")
    if installed_first:
        try:
            if importlib.util.find_spec(parts[0]) is not None:
                return importlib.import_module(target)
        except (ImportError, ValueError):
            pass
    for folder in folders:
        root = Path(folder) / parts[0]
        if root.with_suffix(".py").is_file() or (root / "__init__.py").is_file():
            return _from_folder(parts, Path(folder))
    try:
        return importlib.import_module(target)
    except ImportError as exc:
        raise NotFound(str(exc).splitlines()[0] if str(exc) else f"No module named '{target}'") from None


def load_file(file: Path, prefix: str = "quant_report_user"):
    """A single .py file, loaded under a private name (it shadows nothing)."""
    name = f"{prefix}_{next(_loaded)}"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _from_folder(parts: list[str], folder: Path):
    """`parts` ("pkg", "mod") from `folder`: a single module under a private name; a package under a private
    name too, its submodules imported through it (relative imports inside it work)."""
    root = folder / parts[0]
    if len(parts) == 1 and root.with_suffix(".py").is_file():
        return load_file(root.with_suffix(".py"))
    init = root / "__init__.py"
    if not init.is_file():
        raise NotFound(f"No module named '{'.'.join(parts)}' in {folder}")
    private = f"quant_report_user_{next(_loaded)}_{parts[0]}"
    spec = importlib.util.spec_from_file_location(private, init, submodule_search_locations=[str(root)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[private] = package  # a package's submodules find it by name
    spec.loader.exec_module(package)
    return importlib.import_module(".".join([private, *parts[1:]])) if len(parts) > 1 else package


def call_function(spec: str, code_dir: Optional[str], kind: str, must: str,
                  say: Optional[Callable[[str], None]] = None, timeout: Optional[float] = None):
    """Calls `package.module:function` (a `kind` function: "data", "model") without arguments and returns what it
    returns. The module is looked for among installed packages first, then in `code_dir` (a batch file's folder)
    or the current folder. Loading and calling it run behind the wall; any failure is an InputError naming `spec`.
    While it runs, `say` prints "still waiting" every 30 s; with `timeout` (seconds, set by --KIND-timeout) a call
    that has not returned by then is stopped (reporter.core.waiting)."""
    from reporter.core.waiting import TimedOut, waiting

    timeout_flag = f"--{kind}-timeout"
    module_name, _, func_name = spec.partition(":")
    folders = [Path(code_dir)] if code_dir else [Path.cwd()]
    try:
        with wall(spec, f"the {kind} module", must):
            func = getattr(import_module(module_name, folders, installed_first=True), func_name)
    except (ImportError, AttributeError) as exc:
        raise InputError(spec, f"cannot import {kind} function: {first_line(exc)}") from exc
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's module may raise anything while it loads
        raise InputError(spec, f"{kind} module failed to load: {type(exc).__name__}: {first_line(exc)}") from exc
    if say is not None:
        limit = f"waits up to {timeout:g} s, {timeout_flag}" if timeout else f"waits until it returns; {timeout_flag} sets a limit"
        say(f"calling the {kind} function {spec} (quant-report {limit})")
    try:
        with waiting(f"the {kind} function {spec}", say, timeout), wall(spec, f"the {kind} function", must):
            return func()
    except TimedOut:
        raise InputError(spec, f"the {kind} function did not return within {timeout:g} s ({timeout_flag})") from None
    except InputError:
        raise
    except MemoryError:
        raise InputError(spec, f"the {kind} function ran out of memory") from None
    except Exception as exc:  # noqa: BLE001 - the user's function may raise anything
        raise InputError(spec, f"{kind} function failed: {type(exc).__name__}: {first_line(exc)}") from exc
