"""The user's metric function (`--metric MODULE:FUNCTION`), found without changing what Python imports.

`FILE.py:FUNCTION` loads that file; `MODULE:FUNCTION` loads MODULE.py (or MODULE/__init__.py) from the data
file's folder, then the current folder, and only then an installed module of that name. The file is loaded
under a private name and nothing is added to sys.path, so a metric module can shadow no installed package.
Loading it runs its code: it is code the user asked to run, as a conftest.py is; it runs behind
usercode.wall, so that a sys.exit in it is one error naming the module, not the end of quant-report.

The run's main metric is the user's (`user_score`), else the task's own (`task_score`).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from reporter.core.errors import InputError
from reporter.measure.scoring import Score, UserScore
from reporter.measure.task import KindError, Task
from reporter.inputs.labels import Head
from reporter.inputs.settings import RunSettings


def load(spec: str, beside: Optional[str | Path] = None) -> tuple[str, Callable]:
    """(the metric's name, the function) for `spec`; InputError naming the spec when it cannot be loaded."""
    target, _, func_name = spec.rpartition(":")
    if not target or not func_name:
        raise InputError(spec, "--metric must be FILE.py:FUNCTION or MODULE:FUNCTION")
    from reporter.inputs import usercode

    must = f"loading a metric module must only define {func_name}(y_true, y_pred)"
    with usercode.wall(spec, f"the metric module {target}", must):
        module = _module(spec, target, beside)
    fn = getattr(module, func_name, None)
    if fn is None or not callable(fn):
        raise InputError(spec, f"no function {func_name} in {getattr(module, '__file__', target)}")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise InputError(spec, f"{func_name} must take two arguments, (y_true, y_pred)") from None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in params):
        raise InputError(spec, f"{func_name} must take two arguments, (y_true, y_pred)")
    return func_name, fn


def check_meta(spec: str, fn: Callable, meta: dict) -> None:
    """Every parameter of the metric after (y_true, y_pred) that has no default must be a `meta_<name>` array of
    the data; InputError naming the parameter and the arrays there are otherwise."""
    params = list(inspect.signature(fn).parameters.values())
    rest = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)][2:]
    missing = [p.name for p in rest if p.default is p.empty and p.name not in meta]
    if missing:
        have = ", ".join(f"meta_{k}" for k in meta) or "none"
        raise InputError(spec, f"the metric takes {', '.join(missing)}, but the data hold no array"
                               f" {', '.join('meta_' + m for m in missing)} (meta arrays found: {have})")


def _module(spec: str, target: str, beside):
    from reporter.inputs import usercode

    path = Path(target)
    try:
        if path.suffix == ".py":
            if not path.is_file():
                raise InputError(spec, f"no such file: {path}")
            return usercode.load_file(path, "quant_report_metric")
        folders = [Path(beside).resolve().parent] if beside and Path(beside).exists() else []
        return usercode.import_module(target, [*folders, Path.cwd()], installed_first=False)
    except usercode.NotFound as exc:
        raise InputError(spec, f"cannot find the metric module {target} (looked beside the data, in the current"
                               f" folder and among installed modules): {exc}") from None
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's module may raise anything while it loads
        raise InputError(spec, f"the metric module {target} failed to load: {type(exc).__name__}:"
                               f" {str(exc).splitlines()[0] if str(exc) else ''}") from None


def task_score(task: Task, y: np.ndarray) -> Optional[Score]:
    """The task kind's own main metric (reporter.measure.kinds: accuracy, exact-match accuracy, mean IoU, mask IoU
    ...); None for a kind without one, such as a regression (its output error against float is its measure). A
    plug-in kind whose score() fails is one line naming it, as a --metric module that does not load is."""
    try:
        return task.score(y)
    except KindError as exc:
        raise InputError(exc.where, exc.problem) from None


def user_score(s: RunSettings, labels: dict, heads: list[Head], lead: str, n: int,
               meta: Optional[dict] = None) -> Optional[Score]:
    """The user's --metric, loaded (one line naming it when it cannot be), called with the labels as given (None
    without any; of any shape, one row per sample) and the data's `meta_<name>` arrays it declares."""
    if not s.metric:
        return None
    name, fn = load(s.metric, s.data if Path(str(s.data)).exists() else None)
    check_meta(s.metric, fn, meta or {})
    if heads:
        # y_<output name> by output; one plain `y` for several outputs is the metric's as it is
        y_true = labels[""] if "" in labels else {h.port.name: labels.get(h.port.name) for h in heads}
        score = UserScore(name, fn, y_true, n, s.metric_mode != "min", primary=lead)
    else:
        score = UserScore(name, fn, next(iter(labels.values()), None), n, s.metric_mode != "min")
    score.meta = dict(meta or {})
    return score
