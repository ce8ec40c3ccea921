"""The user's metric function (`--metric MODULE:FUNCTION`), found without changing what Python imports.

`FILE.py:FUNCTION` loads that file; `MODULE:FUNCTION` loads MODULE.py (or MODULE/__init__.py) from the data
file's folder, then the current folder, and only then an installed module of that name. The file is loaded
under a private name and nothing is added to sys.path, so a metric module can shadow no installed package.
Loading it runs its code: it is code the user asked to run, as a conftest.py is.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import itertools
from pathlib import Path
from typing import Callable, Optional

from reporter.core.errors import InputError

_loaded = itertools.count()


def load(spec: str, beside: Optional[str | Path] = None) -> tuple[str, Callable]:
    """(the metric's name, the function) for `spec`; InputError naming the spec when it cannot be loaded."""
    target, _, func_name = spec.rpartition(":")
    if not target or not func_name:
        raise InputError(spec, "--metric must be FILE.py:FUNCTION or MODULE:FUNCTION")
    module = _module(spec, target, beside)
    fn = getattr(module, func_name, None)
    if fn is None or not callable(fn):
        raise InputError(spec, f"no function {func_name} in {getattr(module, '__file__', target)}")
    try:
        inspect.signature(fn).bind(None, None)
    except (TypeError, ValueError):
        raise InputError(spec, f"{func_name} must take two arguments, (y_true, y_pred)") from None
    return func_name, fn


def _module(spec: str, target: str, beside):
    path = Path(target)
    candidates = [path] if path.suffix == ".py" else []
    if path.suffix != ".py":
        relative = Path(*target.split(".")) if all(part.isidentifier() for part in target.split(".")) else None
        folders = [Path(beside).resolve().parent] if beside and Path(beside).exists() else []
        folders.append(Path.cwd())
        if relative is not None:
            for folder in folders:
                candidates += [folder / relative.with_suffix(".py"), folder / relative / "__init__.py"]
    for file in candidates:
        if file.is_file():
            return _from_file(spec, file)
    if path.suffix == ".py":
        raise InputError(spec, f"no such file: {path}")
    try:
        return importlib.import_module(target)
    except ImportError as exc:
        raise InputError(spec, f"cannot find the metric module {target} (looked beside the data, in the current"
                               f" folder and among installed modules): {str(exc).splitlines()[0]}") from None


def _from_file(spec: str, file: Path):
    name = f"quant_report_metric_{next(_loaded)}"
    loader_spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(loader_spec)
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's module may raise anything while it loads
        raise InputError(spec, f"the metric module {file} failed to load: {type(exc).__name__}:"
                               f" {str(exc).splitlines()[0] if str(exc) else ''}") from None
    return module
