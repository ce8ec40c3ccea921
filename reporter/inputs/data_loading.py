"""Reading the user's data: an .npz file, a folder of .npy files or a data function, checked before use.

The arrays keep their types and names here; reporter.inputs.binding matches them to the model's inputs and
reporter.inputs.labels the labels to its outputs. Every problem becomes an InputError naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import numpy as np

from reporter.core.arrays import all_finite
from reporter.core.errors import InputError, first_line
from reporter.model.data import Dataset, Inputs
from reporter.inputs import headers
from reporter.inputs.labels import read_labels
from reporter.inputs.model_loading import LoadedModel

DATA_KINDS = ("an .npz file with arrays x and y (and optional x_calib; x_<input name> for several inputs), a folder"
              " of .npy files with those names (memory-mapped), or package.module:function returning them")
TEXT_SUFFIXES = {".csv": "a CSV file", ".tsv": "a TSV file", ".txt": "a text file", ".json": "a JSON file",
                 ".npy": "a single .npy array", ".pkl": "a pickle", ".pickle": "a pickle",
                 ".parquet": "a Parquet file"}



def _numeric(spec: str, what: str, value) -> np.ndarray:
    """`value` as a numeric (or bool) array of at least one axis; InputError naming `what` otherwise."""
    try:
        a = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise InputError(spec, f"{what} is not numeric: {first_line(exc)}") from exc
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_) or a.ndim == 0:
        raise InputError(spec, f"{what} is not a numeric array (got {a.dtype}, shape {a.shape})")
    return a

def load_data(spec: str, calibration_samples: int, code_dir: Optional[str] = None,
              say: Optional[Callable[[str], None]] = None, model: Optional[LoadedModel] = None,
              timeout: Optional[float] = None) -> Dataset:
    """Reads the evaluation inputs, labels `y` and optional calibration inputs from an .npz file or a
    `package.module:function`: `x` (and `x_calib`) for a one-input model; `x_<input name>` (and
    `x_calib_<input name>`) for several inputs, or from a function `x` (and `x_calib`) as a dict keyed by
    input name. Arrays keep their types until `bind` matches them to the model's inputs.
    An .npz's or a folder's .npy headers are checked before any array is read (reporter.inputs.headers): against
    each other, the memory budget and, given the loaded `model`, its inputs. `say` prints a progress line
    (a data function is announced before it is called, and "still waiting" is said every 30 s while it runs; it is
    stopped after `timeout` seconds when one is given)."""
    try:
        return _load_data(spec, calibration_samples, code_dir, say, model, timeout)
    except MemoryError:
        raise InputError(spec, "ran out of memory while reading the data; save the arrays as a folder of .npy"
                               " files, which are memory-mapped") from None


def _load_data(spec: str, calibration_samples: int, code_dir, say, model, timeout) -> Dataset:
    if is_callable_spec(spec):
        arrays = _call_data_function(spec, code_dir, say, timeout)
    else:  # the headers read and checked against the model's inputs, then the arrays, in one call
        arrays = headers.read_arrays(Path(spec), *_model_inputs(model))
    x = _inputs(spec, arrays, "x")
    if x is None:
        raise InputError(spec, f"no array 'x' or 'x_<input name>' (found: {', '.join(sorted(arrays)) or 'nothing'})")
    raw_labels = _label_arrays(spec, arrays)
    if len(x) == 0:
        raise InputError(spec, "the data set is empty ('x' has no samples)")
    labels = {}
    for name, y_raw in raw_labels.items():
        what = f"y_{name}" if name else "y"
        if y_raw.shape[0] != len(x):
            raise InputError(spec, f"'x' has {len(x)} samples but '{what}' has {y_raw.shape[0]}")
        labels[name] = read_labels(spec, y_raw, what)
    y, labels_are_classes = next(iter(labels.values()), (None, False))
    meta = _meta_arrays(spec, arrays, len(x))

    if calibration_samples < 1:
        raise InputError(spec, "calibration needs at least 1 sample")
    x_calib = _inputs(spec, arrays, "x_calib")
    if x_calib is not None:
        if len(x_calib) == 0:
            raise InputError(spec, "'x_calib' is empty")
        for name in set(x.names) & set(x_calib.names):  # names are matched to the model's by `bind`
            if x_calib[name].shape[1:] != x[name].shape[1:]:
                what = f"'x_calib_{name}'" if name else "'x_calib'"
                raise InputError(spec, f"{what} has shape {x_calib[name].shape[1:]} per sample but the evaluation"
                                       f" data have {x[name].shape[1:]}")
        calib_source = "x_calib"
    else:
        x_calib, calib_source = x, "x"
    x_pool = x_calib if calib_source == "x_calib" else None
    x_calib = x_calib[:calibration_samples]
    for inputs in (x, x_calib if x_pool is None else x_pool):
        for name in inputs.names:
            a = inputs[name]
            if np.issubdtype(a.dtype, np.floating) and not all_finite(a):
                raise InputError(spec, "'x' or 'x_calib' holds NaN or infinite values")
    return Dataset(str(spec), x, y, x_calib, calib_source, labels_are_classes, x_pool, labels, meta)


def _meta_arrays(spec, arrays: dict, n: int) -> dict:
    """The per-sample arrays for the user's metric by name: `meta_<name>` (npz keys, .npy files) or a "meta"
    mapping from a data function; each numeric (or boolean) with one row per evaluation sample."""
    found = arrays.get("meta")
    if found is not None and not hasattr(found, "keys"):
        raise InputError(spec, f"'meta' must be a mapping of per-sample arrays by name, got {type(found).__name__}")
    named = {f"meta_{k}": v for k, v in (found or {}).items()}
    named.update({k: v for k, v in arrays.items() if k.startswith("meta_")})
    out = {}
    for key, value in named.items():
        name = key[len("meta_"):]
        if not name.isidentifier():
            raise InputError(spec, f"'{key}': a meta array's name must be a Python identifier (it is passed to the"
                                   " metric as a keyword argument)")
        a = _numeric(spec, f"'{key}'", value)
        if a.shape[0] != n:
            raise InputError(spec, f"'x' has {n} samples but '{key}' has {a.shape[0]}")
        out[name] = a
    return out


def _label_arrays(spec, arrays: dict) -> dict:
    """The labels by output name: {"": y} for the one array `y`, a dict `y` by output name, or the arrays
    `y_<output name>`."""
    found = arrays.get("y")
    if isinstance(found, dict):
        named = dict(found)
    elif found is not None:
        named = {"": found}
    else:
        named = {k[2:]: v for k, v in arrays.items() if k.startswith("y_")}
    out = {}  # none: labels are optional for the user's metric (reporter.inputs.labels.bind_labels says when not)
    for name, value in named.items():
        what = f"y_{name}" if name else "y"
        try:
            a = np.asarray(value)
            if a.dtype == object:
                raise TypeError(f"'{what}' holds {type(value).__name__} objects, not numbers")
        except (TypeError, ValueError) as exc:
            raise InputError(spec, f"'{what}' is not numeric: {first_line(exc)}") from exc
        out[name] = a
    return out


def _inputs(spec, arrays: dict, prefix: str) -> Optional[Inputs]:
    """`prefix` ("x" or "x_calib") as Inputs: the one array `prefix` (named "" until bound), a dict by input
    name, or the arrays `prefix_<input name>`; None when there are none."""
    found = arrays.get(prefix)
    if found is not None and isinstance(found, dict):
        named = dict(found)
    elif found is not None:
        named = {"": found}
    else:
        start = prefix + "_"
        named = {k[len(start):]: v for k, v in arrays.items() if k.startswith(start)
                 and not (prefix == "x" and k.startswith("x_calib"))}
        if not named:
            return None
    out = {}
    for name, value in named.items():
        what = f"'{prefix}_{name}'" if name else f"'{prefix}'"
        out[name] = _numeric(spec, what, value)
    try:
        return Inputs(out)
    except ValueError as exc:
        raise InputError(spec, f"{prefix}: {exc}") from None


def is_callable_spec(spec: str) -> bool:
    return ":" in spec and not Path(spec).exists() and not spec.endswith(".npz")


def _model_inputs(model: Optional[LoadedModel]) -> tuple[str, Optional[dict]]:
    """The loaded Keras model's file name and inputs (per-sample shapes by name), for the data's headers to be
    checked against before they are read; no shapes when unknown (a SavedModel folder or a .tflite: their signature
    comes later)."""
    keras_model = getattr(model, "keras_model", None)
    try:
        found = list(getattr(keras_model, "inputs", None) or [])
        shapes = {str(getattr(t, "name", "")).split(":")[0]: tuple(None if d is None else int(d) for d in t.shape[1:])
                  for t in found}
    except Exception:  # noqa: BLE001 - a model whose inputs cannot be read this way is checked later, by `bind`
        return "", None
    if not found or len(shapes) != len(found):
        return "", None
    return Path(model.path).name, shapes


def _call_data_function(spec: str, code_dir: Optional[str] = None, say: Optional[Callable[[str], None]] = None,
                        timeout: Optional[float] = None) -> dict:
    """Calls `package.module:function` (reporter.inputs.usercode.call_function: found without touching sys.path,
    behind the wall) and checks that it returned a mapping of arrays."""
    from reporter.inputs import usercode

    must = "a data function must return its arrays (a mapping with 'x' and 'y')"
    result = usercode.call_function(spec, code_dir, "data", must, say, timeout)
    if not hasattr(result, "keys"):
        raise InputError(spec, f"data function must return a mapping with 'x' and 'y', got {type(result).__name__}")
    return dict(result)
