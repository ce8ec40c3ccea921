"""Models and data held in memory, written as the files a run reads: a Keras model (Keras 3 or tf_keras), the
bytes of a float .tflite, a mapping of arrays, a `tf.data.Dataset` of `(x, y)` batches, a representative-dataset
generator. The Python API (reporter.api) and a batch's `module:function` model entries use it; everything goes
into a folder the caller owns and removes.

A dataset is read batch by batch and streamed into .npy files (a run memory-maps them), so reading it never
holds more than one batch.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterable, Mapping, Optional

import numpy as np

from reporter.core.errors import UsageError

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
    raise UsageError(f"model: expected {MODEL_KINDS}, not {type(model).__name__}")


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
            np.save(target / f"{key}.npy", np.asarray(value), allow_pickle=False)
    elif is_dataset(data):
        _stream(_pairs(data), target, ("x", "y"), limit=None)
    else:
        raise UsageError(f"data: expected {DATA_KINDS}, not {type(data).__name__}")
    if calibration is not None:
        for stale in target.glob("x_calib*.npy"):
            stale.unlink()
        batches = _calibration_batches(calibration)
        _stream(((x, None) for x in batches), target, ("x_calib", None), limit=calibration_samples)
    return str(target)


def _check_key(key) -> None:
    if not isinstance(key, str) or not key or "/" in key or "\\" in key or key.startswith("."):
        raise UsageError(f"data: array name {key!r} is not a usable name (x, y, x_calib, x_<input>, y_<output>,"
                         " meta_<name>)")


def _copy_arrays(path: Path, target: Path) -> None:
    """The arrays of an .npz or a folder of .npy files, one by one, as .npy files in `target`."""
    if path.is_dir():
        for file in sorted(path.glob("*.npy")):
            shutil.copyfile(file, target / file.name)
        return
    if path.suffix.lower() != ".npz":
        raise UsageError(f"data {path}: calibration= goes with arrays, a dataset, an .npz or a folder of .npy files")
    with np.load(path, allow_pickle=False) as arrays:
        for key in arrays.files:
            _check_key(key)
            np.save(target / f"{key}.npy", arrays[key], allow_pickle=False)


def _pairs(dataset) -> Iterable[tuple]:
    """(x, y) batches as NumPy: a dataset of (x, y) tuples, or of x alone (y None)."""
    for item in dataset.as_numpy_iterator():
        if isinstance(item, tuple) and len(item) in (1, 2):
            yield item[0], item[1] if len(item) == 2 else None
        else:
            yield item, None


def _calibration_batches(calibration) -> Iterable:
    """Calibration inputs, batch by batch: a dataset's x (or its (x, y) pairs' x), or what a representative-dataset
    generator yields (a list of input arrays, one per input in the model's order, or a dict by input name)."""
    if is_dataset(calibration):
        return (x for x, _ in _pairs(calibration))
    if callable(calibration):
        return (_from_representative(item) for item in calibration())
    raise UsageError("calibration: expected a tf.data.Dataset or a representative-dataset generator function,"
                     f" not {type(calibration).__name__}")


def _from_representative(item):
    if isinstance(item, Mapping):
        return dict(item)
    if isinstance(item, (list, tuple)):
        if len(item) != 1:
            raise UsageError(f"calibration: the generator yielded {len(item)} arrays; for a model with several"
                             " inputs, yield a dict by input name")
        return item[0]
    return item


def _stream(batches: Iterable[tuple], target: Path, names: tuple, limit: Optional[int]) -> None:
    """Appends each batch's arrays to .npy files: x (or x_<input> for a dict), y (or y_<output>)."""
    writers: dict[str, _NpyWriter] = {}
    rows = 0
    try:
        for x, y in batches:
            parts = [(names[0], x)] + ([(names[1], y)] if names[1] is not None and y is not None else [])
            count = None
            for base, value in parts:
                arrays = {f"{base}_{k}": v for k, v in value.items()} if isinstance(value, Mapping) else {base: value}
                for key, array in arrays.items():
                    array = np.asarray(array)
                    if array.ndim == 0:
                        raise UsageError(f"data: a batch of {key} is a scalar; a dataset must yield batches"
                                         " (dataset.batch(n))")
                    if limit is not None:
                        array = array[:max(0, limit - rows)]
                    count = len(array) if count is None else count
                    if key not in writers:
                        writers[key] = _NpyWriter(target / f"{key}.npy")
                    writers[key].append(array)
            rows += count or 0
            if limit is not None and rows >= limit:
                break
        if not writers:
            raise UsageError("data: the dataset yielded no batch")
    finally:
        for writer in writers.values():
            writer.close()


class _NpyWriter:
    """An .npy file written batch by batch: the raw rows go to a side file, the header is written when the
    number of rows is known, then the rows are copied behind it in chunks (memory: one chunk)."""

    def __init__(self, path: Path):
        self.path, self.raw = path, path.with_suffix(".raw")
        self.file = open(self.raw, "wb")
        self.dtype, self.shape, self.rows = None, None, 0

    def append(self, array: np.ndarray) -> None:
        if self.dtype is None:
            self.dtype, self.shape = array.dtype, array.shape[1:]
        if array.shape[1:] != self.shape:
            raise UsageError(f"data: {self.path.stem} batches differ in shape ({self.shape} then {array.shape[1:]})")
        self.file.write(np.ascontiguousarray(array, dtype=self.dtype).tobytes())
        self.rows += len(array)

    def close(self) -> None:
        if self.file.closed:
            return
        self.file.close()
        if self.dtype is None:
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
    """A batch entry's `module:function` model: the function called (reporter.run.usercode.call_function) and the
    model it returns (a Keras model or .tflite bytes) saved in `folder`; a problem is an InputError naming it."""
    from reporter.core.errors import InputError
    from reporter.run import usercode

    must = "a model function must return a keras.Model or the bytes of a float .tflite"
    made = usercode.call_function(spec, code_dir, "model", must)
    try:
        return model_file(made, folder)
    except UsageError as exc:
        raise InputError(spec, f"{exc}; {must}") from None
