"""The user's own LiteRT Quantizer recipes (`--recipe FILE.json`): read, checked and named after their files.

A recipe is LiteRT Quantizer's JSON: a list of entries {"regex", "operation", "algorithm_key", "op_config"}, later
entries taking precedence (the format `litert quantize --recipe FILE.json` and `Quantizer(model, FILE.json)` read).
Each becomes a variant called after its file ("int4_fc.json" -> "int4_fc"), built by LiteRT Quantizer from the
float model (with the run's one calibration when it quantizes activations) and measured like every variant.
Reading one runs no code: it is JSON, checked by LiteRT Quantizer's own recipe manager (no TensorFlow).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Optional

from reporter.core import variants
from reporter.core.errors import UsageError

MAX_BYTES = 1 << 20  # a recipe is a few entries; a bigger file is not one
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # it names files in the report folder: <name>.tflite


def _bad(path: str, problem: str) -> UsageError:
    """A recipe that cannot be used is a usage error (exit 2, nothing ran), naming the file."""
    return UsageError(f"--recipe {path}: {problem}")


def variant_name(path: str) -> str:
    """The variant a recipe file makes: its file name without ".json"."""
    return Path(path).stem


def locate(path: str, code_dir: Optional[str] = None) -> Path:
    """A relative path is read beside the batch file (`code_dir`), else from the current folder."""
    p = Path(path)
    return p if p.is_absolute() or code_dir is None else Path(code_dir) / p


def load(paths: Iterable[str], code_dir: Optional[str] = None) -> dict[str, list]:
    """Variant name -> the recipe's entries, for every file in `paths`; a UsageError names the first file that is
    not a recipe this run can build, and why."""
    found: dict[str, list] = {}
    for path in paths:
        name = variant_name(path)
        entries = _read(locate(path, code_dir), path)
        if not _NAME.match(name):
            raise _bad(path, f"the variant is named after the file, and {name!r} is not a usable name: use"
                                   " letters, digits, '_', '-' and '.' (at most 64)")
        if name in variants.BY_NAME or variants.fixed_by(name) is not None:
            raise _bad(path, f"the variant would be called {name!r}, which is a built-in name or a fix's:"
                                   " rename the file")
        if name in found:
            raise _bad(path, f"two recipe files are called {name}.json: rename one")
        found[name] = entries
    return found


def needs_calibration(entries: list) -> bool:
    """The recipe quantizes activations (reads the run's calibration), as LiteRT Quantizer decides it."""
    from litert_quantizer import recipe_manager

    manager = recipe_manager.RecipeManager()
    manager.load_quantization_recipe(entries)
    return bool(manager.need_calibration())


def _read(file: Path, shown: str) -> list:
    try:
        with open(file, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise _bad(shown, "no such recipe file") from None
    except OSError as exc:
        raise _bad(shown, f"cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:
        raise _bad(shown, f"is over {MAX_BYTES // 1024} KB: not a LiteRT Quantizer recipe")
    from reporter.model.decode import JSONLimitError, loads as bounded_loads

    try:
        entries = bounded_loads(raw.decode("utf-8"))  # depth and number size bounded, as every JSON reader
    except JSONLimitError as exc:
        raise _bad(shown, str(exc)) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise _bad(shown, f"is not JSON ({str(exc).splitlines()[0]})") from None
    problem = _shape_problem(entries)
    if problem is None:
        problem = _litert_problem(entries)
    if problem is not None:
        raise _bad(shown, f"is not a LiteRT Quantizer recipe: {problem}")
    return entries


def _shape_problem(entries) -> Optional[str]:
    if not isinstance(entries, list) or not entries:
        return "expected a non-empty JSON list of entries"
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            return f"entry {i} is not an object"
        for key in ("regex", "operation", "algorithm_key"):
            if not isinstance(entry.get(key), str):
                return f"entry {i} has no {key!r} text"
        try:
            re.compile(entry["regex"])
        except re.error as exc:
            return f"entry {i}'s regex does not compile ({exc})"
        if entry["algorithm_key"] != "no_quantize" and not isinstance(entry.get("op_config"), dict):
            return f"entry {i} ({entry['algorithm_key']}) has no 'op_config' object"
    return None


def _litert_problem(entries: list) -> Optional[str]:
    """What LiteRT Quantizer's recipe manager says of the entries, or None."""
    try:
        needs_calibration(entries)
    except Exception as exc:  # noqa: BLE001 - its checks raise ValueError, KeyError, TypeError, ...
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"LiteRT Quantizer refuses it ({text})"
    return None
