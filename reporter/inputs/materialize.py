"""Models and data held in memory, written as the files a run reads: a Keras model (Keras 3 or tf_keras), the
bytes of a float .tflite, a mapping of arrays, a `tf.data.Dataset` of `(x, y)` batches, a representative-dataset
generator. The Python API (reporter.api) and a batch's `module:function` model entries use it; everything goes
into a folder the caller owns and removes.

A dataset is read batch by batch and streamed into .npy files (a run memory-maps them), so reading it never
holds more than one batch.

Every problem is one `UsageError` line that starts with the argument it is about (`model:`, `data:`,
`calibration:`): arrays that are ragged, of Python objects or not numbers; a batch whose type differs from the
first's; the user's generator or dataset raising; Keras failing to save the model. The user's own exception is
kept as the error's cause (`raise ... from`), for its traceback.
"""

from __future__ import annotations

import os
import re
import shutil
import zipfile
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Optional

import numpy as np

from reporter.core.errors import QuantReportError, UsageError, first_line, one_line, storage_problem

MODEL_KINDS = "a path, a keras.Model (Keras 3 or tf_keras) or the bytes of a float .tflite"
DATA_KINDS = ("a path, 'module:function', a mapping of arrays (x, y, x_calib, x_<input>, y_<output>, meta_<name>) or"
              " a tf.data.Dataset of (x, y) batches")


def is_keras_model(obj) -> bool:
    """A Keras 3 or tf_keras model, told without importing either (a module not yet imported holds no model)."""
    for module in type(obj).__mro__:
        root = module.__module__.split(".")[0]
        if module.__name__ in ("Model", "Functional", "Sequential") and root in ("keras", "tf_keras"):
            return True
    return False


def is_dataset(obj) -> bool:
    return any(c.__module__.startswith("tensorflow") and c.__name__ in ("DatasetV2", "DatasetV1")
               for c in type(obj).__mro__)


def model_file(model, folder: Path) -> Path:
    """`model` as a file a run reads: a path as it is; a Keras 3 model saved as model.keras, a tf_keras one as
    model.h5 (a SavedModel folder when .h5 cannot hold it); .tflite bytes as model.tflite."""
    if isinstance(model, (str, os.PathLike)):
        return Path(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        if len(data) < 8 or data[4:8] != b"TFL3":
            raise UsageError("model: these bytes are not a .tflite flatbuffer (no TFL3 identifier)")
        path = folder / "model.tflite"
        path.write_bytes(data)
        return path
    if is_keras_model(model):
        try:
            return _saved_keras(model, folder)
        except QuantReportError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever Keras raised, said as one line naming the argument
            raise _save_failed(model, exc) from exc
    raise UsageError(f"model: expected {MODEL_KINDS}, not {type(model).__name__}")


def _saved_keras(model, folder: Path) -> Path:
    keras3 = type(model).__module__.split(".")[0] == "keras"
    if keras3:
        path = folder / "model.keras"
        model.save(str(path))
        return path
    path = folder / "model.h5"
    try:
        model.save(str(path))
    except (NotImplementedError, ValueError):  # a subclassed tf_keras model: .h5 cannot hold it
        path.unlink(missing_ok=True)
        path = folder / "saved_model"
        model.save(str(path))
    return path


def _save_failed(model, exc: Exception) -> QuantReportError:
    """Keras could not save `model` (a run reads the model from a file): the disk's reason, or one line naming
    the layer whose get_config() is missing when that is the cause."""
    full = storage_problem(exc)
    if full is not None:
        return full
    layer = _layer_without_config(exc)
    what = f"{type(model).__name__} {getattr(model, 'name', '')!s}".strip()
    if layer is not None:
        return UsageError(f"model: Keras cannot save {what}, which a run reads from a file: layer {layer} has no"
                          " working get_config() (a custom layer whose __init__ takes arguments needs one); add it,"
                          " or pass the model's path or a float .tflite's bytes")
    return UsageError(f"model: Keras cannot save {what}, which a run reads from a file ({one_line(exc)}); pass the"
                      " model's path or a float .tflite's bytes instead")


def _layer_without_config(exc: Exception) -> Optional[str]:
    """'NAME' (Class) of the layer whose get_config() raised NotImplementedError, read from the traceback."""
    if not isinstance(exc, NotImplementedError):
        return None
    found, tb = None, exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        owner = frame.f_locals.get("self") if frame.f_code.co_name == "get_config" else None
        if owner is not None and hasattr(owner, "name"):
            found = f"{str(owner.name)!r} ({type(owner).__name__})"
        tb = tb.tb_next
    return found


def model_name(model) -> Optional[str]:
    """The name a model in memory goes by: a Keras model's own name; None for a path (its file names it)."""
    if isinstance(model, (str, os.PathLike)):
        return None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return "model"
    return str(getattr(model, "name", "") or "model")


def data_source(data, folder: Path, calibration=None, calibration_samples: int = 100) -> str:
    """`data` as what a run reads: a path or 'module:function' as it is; arrays or a dataset as a folder of .npy
    files in `folder`. `calibration` (a second dataset, or a representative-dataset generator as the TFLite
    converter takes it) adds x_calib; with a path, the file's arrays are copied beside it."""
    if isinstance(data, (str, os.PathLike)) and calibration is None:
        return str(data)
    target = folder / "data"
    target.mkdir()
    if isinstance(data, (str, os.PathLike)):
        _copy_arrays(Path(data), target)
    elif isinstance(data, Mapping):
        for key, value in data.items():
            _check_key(key)
            named = {f"{key}_{k}": v for k, v in value.items()} if isinstance(value, Mapping) else {key: value}
            for name, array in named.items():  # a dict by input (output, meta) name: x_<input>, ...
                _check_key(name)
                np.save(target / f"{name}.npy", numeric_array(array, "data", repr(name)), allow_pickle=False)
    elif is_dataset(data):
        _stream(_pairs(data, "data"), target, ("x", "y"), None, ("data", "batch"))
    else:
        raise UsageError(f"data: expected {DATA_KINDS}, not {type(data).__name__}")
    if calibration is not None:
        for stale in target.glob("x_calib*.npy"):
            stale.unlink()
        batches = _calibration_batches(calibration)
        unit = "batch" if is_dataset(calibration) else "sample"
        _stream(((x, None) for x in batches), target, ("x_calib", None), calibration_samples, ("calibration", unit))
    return str(target)


def _check_key(key) -> None:
    if not isinstance(key, str) or not key or "/" in key or "\\" in key or key.startswith("."):
        raise UsageError(f"data: array name {key!r} is not a usable name (x, y, x_calib, x_<input>, y_<output>,"
                         " meta_<name>)")


def numeric_array(value, argument: str, what: str,
                  single: str = "a single value, not an array with one row per sample") -> np.ndarray:
    """`value` as a NumPy array of numbers (or booleans) with a sample axis; else one line naming the argument
    ("data", "calibration") and the array (`what`): ragged, Python objects, strings, a single value (`single`
    says what that is)."""
    kind = type(value).__name__
    if "Ragged" in kind or "Sparse" in kind:
        raise UsageError(f"{argument}: {what} is a {kind}, not a dense array; pad it to one shape (.to_tensor())")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        shape = re.search(r"inhomogeneous shape after (\d+) dimensions?", str(exc))
        if shape:
            raise UsageError(f"{argument}: {what} is ragged: its rows differ in length or shape after"
                             f" {shape.group(1)} dimension(s); pad or crop them to one shape") from None
        raise UsageError(f"{argument}: {what} is not an array of numbers: {one_line(exc)}") from None
    if array.dtype == object:
        first = next((type(v).__name__ for v in array.flat if v is not None), "None") if array.size else "nothing"
        raise UsageError(f"{argument}: {what} is an array of Python objects (dtype object, e.g. {first}), not of"
                         " numbers; convert it (np.stack(...), .astype(np.float32))")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        words = _KINDS.get(array.dtype.kind, "not numbers")
        raise UsageError(f"{argument}: {what} holds {array.dtype} values ({words}), not numbers")
    if array.ndim == 0:
        raise UsageError(f"{argument}: {what} is {single}")
    return array


_KINDS = {"U": "text", "S": "bytes", "M": "dates", "m": "time spans", "V": "records"}


def _copy_arrays(path: Path, target: Path) -> None:
    """The arrays of an .npz or a folder of .npy files, one by one, as .npy files in `target`."""
    if path.is_dir():
        for file in sorted(path.glob("*.npy")):
            shutil.copyfile(file, target / file.name)
        return
    if path.suffix.lower() != ".npz":
        raise UsageError(f"data {path}: calibration= goes with arrays, a dataset, an .npz or a folder of .npy files")
    try:
        with np.load(path, allow_pickle=False) as arrays:
            for key in arrays.files:
                _check_key(key)
                np.save(target / f"{key}.npy", arrays[key], allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        full = storage_problem(exc)
        if full is not None:
            raise full from None
        raise UsageError(f"data {path}: cannot be read as an .npz ({first_line(exc)})") from exc


def _pairs(dataset, argument: str) -> Iterable[tuple]:
    """(x, y) batches as NumPy: a dataset of (x, y) tuples, or of x alone (y None)."""
    for item in user_items(dataset.as_numpy_iterator, f"{argument}: the tf.data.Dataset", "batch"):
        if isinstance(item, tuple) and len(item) in (1, 2):
            yield item[0], item[1] if len(item) == 2 else None
        else:
            yield item, None


def _calibration_batches(calibration) -> Iterable:
    """Calibration inputs, batch by batch: a dataset's x (or its (x, y) pairs' x), or what a representative-dataset
    generator yields (a list of input arrays, one per input in the model's order, or a dict by input name)."""
    if is_dataset(calibration):
        return (x for x, _ in _pairs(calibration, "calibration"))
    if callable(calibration):
        name = getattr(calibration, "__name__", type(calibration).__name__)
        items = user_items(calibration, f"calibration: the representative-dataset generator {name}()", "sample")
        return (_from_representative(item) for item in items)
    raise UsageError("calibration: expected a tf.data.Dataset or a representative-dataset generator function,"
                     f" not {type(calibration).__name__}")


def user_items(make: Callable[[], Iterable], who: str, unit: str) -> Iterator:
    """The items of the user's iterable `make()`, one by one. An exception raised by the user's code (calling
    `make`, or producing an item) is one UsageError line: `who` (the argument, the callback) raised on which
    `unit` ("batch", "sample") and why; the user's exception is its cause."""
    try:
        iterator = iter(make())
    except QuantReportError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code: any exception is theirs, said in one line
        raise UsageError(f"{who} raised when called: {_said(exc)}") from exc
    count = 0
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            return
        except QuantReportError:
            raise
        except Exception as exc:  # noqa: BLE001 - as above
            raise UsageError(f"{who} raised on its {_ordinal(count + 1)} {unit}: {_said(exc)}") from exc
        count += 1
        yield item


def _said(exc: Exception) -> str:
    """The exception as one line, without the "{{function_node ...}}" TensorFlow puts before a dataset's error."""
    text = re.sub(r"^\s*\{\{function_node [^}]*\}\}\s*", "", str(exc)).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}"[:300] if text else type(exc).__name__


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _from_representative(item):
    if isinstance(item, Mapping):
        return dict(item)
    if isinstance(item, (list, tuple)):
        if len(item) != 1:
            raise UsageError(f"calibration: the generator yielded {len(item)} arrays; for a model with several"
                             " inputs, yield a dict by input name")
        return item[0]
    return item


def _stream(batches: Iterable[tuple], target: Path, names: tuple, limit: Optional[int], said: tuple) -> None:
    """Appends each batch's arrays to .npy files: x (or x_<input> for a dict), y (or y_<output>). A problem is one
    line naming the argument (`said`: ("data" or "calibration", what an item is called: "batch", "sample"));
    then no .npy file is left behind."""
    argument, unit = said
    writers: dict[str, _NpyWriter] = {}
    rows, batch, done = 0, 0, False
    try:
        for x, y in batches:
            batch += 1
            parts = [(names[0], x)] + ([(names[1], y)] if names[1] is not None and y is not None else [])
            count = None
            for base, value in parts:
                arrays = {f"{base}_{k}": v for k, v in value.items()} if isinstance(value, Mapping) else {base: value}
                for key, array in arrays.items():
                    array = numeric_array(array, argument, f"{key} in {unit} {batch}",
                                          single="a scalar; a dataset must yield batches (dataset.batch(n))")
                    if limit is not None:
                        array = array[:max(0, limit - rows)]
                    count = len(array) if count is None else count
                    if key not in writers:
                        writers[key] = _NpyWriter(target / f"{key}.npy", said)
                    writers[key].append(array, batch)
            rows += count or 0
            if limit is not None and rows >= limit:
                break
        if not writers:
            raise UsageError(f"{argument}: the dataset yielded no batch")
        done = True
    finally:
        for writer in writers.values():
            writer.close(keep=done)


class _NpyWriter:
    """An .npy file written batch by batch: the raw rows go to a side file, the header is written when the
    number of rows is known, then the rows are copied behind it in chunks (memory: one chunk). Every batch has
    the first's type and per-sample shape: a change is refused, never cast."""

    def __init__(self, path: Path, said: tuple):
        self.path, self.raw, (self.argument, self.unit) = path, path.with_suffix(".raw"), said
        self.file = open(self.raw, "wb")
        self.dtype, self.shape, self.rows = None, None, 0

    def append(self, array: np.ndarray, batch: int) -> None:
        if self.dtype is None:
            self.dtype, self.shape = array.dtype, array.shape[1:]
        if array.shape[1:] != self.shape:
            raise UsageError(f"{self.argument}: {self.path.stem} has shape {array.shape[1:]} per sample in"
                             f" {self.unit} {batch} but {self.shape} before; every {self.unit} must have one shape")
        if array.dtype != self.dtype:
            raise UsageError(f"{self.argument}: {self.path.stem} is {array.dtype} in {self.unit} {batch} but"
                             f" {self.dtype} before; every {self.unit} must have one type (cast them to one, e.g."
                             " .astype(np.float32))")
        self.file.write(np.ascontiguousarray(array).tobytes())
        self.rows += len(array)

    def close(self, keep: bool = True) -> None:
        """Writes the .npy file (`keep`), or removes what was written (a run that failed)."""
        if self.file.closed:
            return
        self.file.close()
        if self.dtype is None or not keep:
            self.raw.unlink(missing_ok=True)
            return
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
                  "shape": (self.rows, *self.shape)}
        with open(self.path, "wb") as out, open(self.raw, "rb") as raw:
            np.lib.format.write_array_header_1_0(out, header) if _fits_v1(header) else \
                np.lib.format.write_array_header_2_0(out, header)
            shutil.copyfileobj(raw, out, 1 << 22)
        self.raw.unlink()


def _fits_v1(header: dict) -> bool:
    return len(repr(header)) < 65000


def call_model_function(spec: str, code_dir: Optional[str], folder: Path) -> Path:
    """A batch entry's `module:function` model: the function called (reporter.inputs.usercode.call_function) and the
    model it returns (a Keras model or .tflite bytes) saved in `folder`; a problem is an InputError naming it."""
    from reporter.core.errors import InputError
    from reporter.inputs import usercode

    must = "a model function must return a keras.Model or the bytes of a float .tflite"
    made = usercode.call_function(spec, code_dir, "model", must)
    try:
        return model_file(made, folder)
    except UsageError as exc:
        raise InputError(spec, f"{exc}; {must}") from None
