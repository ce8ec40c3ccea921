"""Reading the user's model and data, and checking that they fit each other.

Every problem becomes an InputError naming the file, raised before anything is written.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import traceback
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from reporter.core.arrays import all_finite, chunks
from reporter.core.errors import InputError, storage_problem
from reporter.measure.signature import Inputs, Port, Signature
from reporter.measure.task import BINARY_THRESHOLD, Task, binary_sigmoid_labels, label_codes
from reporter.run import headers

KERAS3_RNN_HINT = (
    "Keras 3 recurrent layers ({names}) do not convert to TFLite (TensorListReserve / READ_VARIABLE);"
    " rebuild the model with tf_keras and a fixed batch_size=1 input, save it as .h5, and run that"
)


@dataclass
class LoadedModel:
    """A model ready for conversion: `make_converter()` returns a fresh TFLiteConverter each call."""

    path: Path
    format: str  # "keras", "h5", "saved_model" or "tflite"
    make_converter: Optional[Callable]  # None for a .tflite: there is nothing to convert
    keras_model: object = None  # the loaded Keras model (not for a SavedModel folder)
    tflite: Optional[bytes] = None  # a float .tflite input, as given

    @property
    def is_tflite(self) -> bool:
        return self.tflite is not None

    def saved_model_folder(self) -> Optional[str]:
        """The SavedModel folder TensorFlow's converter reads (the input itself, or the Keras model exported
        once); None for a .tflite or when the export failed."""
        if self.format == "saved_model":
            return str(self.path)
        folder = getattr(self.make_converter, "saved_model_folder", None)
        return folder() if folder is not None else None


@dataclass
class Dataset:
    source: str
    x: Inputs  # evaluation inputs by name ("" before `bind`: the one array `x` of a one-input model)
    y: np.ndarray  # class ids (int) or float targets
    x_calib: Inputs
    calibration_source: str  # "x_calib" or "x"
    labels_are_classes: bool
    x_pool: Optional[Inputs] = None  # every x_calib sample, beyond the calibration cap (for the search)
    # Labels by output name ("" for the one array `y`): (labels, labels_are_classes). `y` above is the
    # primary output's, once `bind_labels` has matched them to the model's outputs.
    labels: dict = field(default_factory=dict)

    @property
    def calibration_overlaps_eval(self) -> bool:
        return self.calibration_source == "x"


MODEL_KINDS = "a Keras 3 .keras file, a legacy .h5 file, a SavedModel folder or a float .tflite file"
TFLITE_IDENTIFIER = b"TFL3"  # a TFLite flatbuffer's file identifier, bytes 4-8
DATA_KINDS = ("an .npz file with arrays x and y (and optional x_calib; x_<input name> for several inputs), a folder"
              " of .npy files with those names (memory-mapped), or package.module:function returning them")
_TEXT_SUFFIXES = {".csv": "a CSV file", ".tsv": "a TSV file", ".txt": "a text file", ".json": "a JSON file",
                  ".npy": "a single .npy array", ".pkl": "a pickle", ".pickle": "a pickle",
                  ".parquet": "a Parquet file"}


def preflight(model, data):
    """Checks, without TensorFlow, that the model and the data exist and are of a kind quant-report
    reads; raises InputError naming the file and saying what it must be."""
    path = Path(model)
    if not path.exists():
        raise InputError(path, f"no such file or folder (MODEL must be {MODEL_KINDS})")
    if not path.is_dir():
        headers.regular_file(path, "a model")  # a FIFO or a device would block the first read
    if path.is_dir():
        if not (path / "saved_model.pb").is_file():
            raise InputError(path, "folder is not a SavedModel (no saved_model.pb inside)")
    elif path.suffix.lower() == ".tflite":
        with open(path, "rb") as f:
            head = f.read(8)
        if head[4:8] != TFLITE_IDENTIFIER:
            raise InputError(path, "not a TFLite model (no TFL3 flatbuffer identifier)")
    elif path.suffix.lower() not in (".keras", ".h5"):
        raise InputError(path, f"unsupported model format '{path.suffix or path.name}': MODEL must be {MODEL_KINDS}")
    spec = str(data)
    if _is_callable_spec(spec):
        return
    data_path = Path(spec)
    if not data_path.exists():
        raise InputError(data_path, f"no such file (DATA must be {DATA_KINDS})")
    if data_path.is_dir():
        if not any(data_path.glob("x*.npy")):
            raise InputError(data_path, f"a folder without x.npy or x_<input name>.npy (DATA must be {DATA_KINDS})")
        for file in data_path.glob("*.npy"):
            headers.regular_file(file)
        return
    headers.regular_file(data_path)
    with open(data_path, "rb") as f:
        magic = f.read(4)
    if magic != b"PK\x03\x04" and magic != b"PK\x05\x06":  # an .npz is a zip archive (empty: end record only)
        kind = _TEXT_SUFFIXES.get(data_path.suffix.lower(), "not an .npz archive")
        raise InputError(data_path, f"{kind}: DATA must be {DATA_KINDS}")


TRUST_HINT = ("refused: this {kind} model holds Python code (a Lambda layer's function, or a custom object) that"
              " would run when it loads; quant-report loads Keras models in safe mode. If you trust this file,"
              " pass --trust-model (in a batch file: trust_model = true)")


def load_model(path, trust: bool = False, scratch: Optional[Path] = None) -> LoadedModel:
    """Opens a .keras, .h5 or SavedModel folder; InputError if it is missing or not a model. Keras models load in
    safe mode (no Python code from the file runs) unless `trust`: a model that needs it is refused in one line.
    A Keras model is exported once to a SavedModel in `scratch` (the run's staging folder, so that it goes with
    it even when the run is killed), else in the system's temporary folder."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or folder")
    if path.is_dir():
        if not (path / "saved_model.pb").is_file():
            raise InputError(path, "folder is not a SavedModel (no saved_model.pb inside)")
        import tensorflow as tf

        try:
            tf.saved_model.load(str(path))
        except Exception as exc:  # noqa: BLE001 - any failure means an unreadable model
            raise InputError(path, f"cannot load SavedModel: {_first_line(exc)}") from exc
        return LoadedModel(path, "saved_model", lambda: tf.lite.TFLiteConverter.from_saved_model(str(path)))

    suffix = path.suffix.lower()
    if suffix == ".tflite":
        return LoadedModel(path, "tflite", None, tflite=_float_tflite(path))
    if suffix == ".keras":
        import zipfile

        headers.regular_file(path, "a model")
        if not zipfile.is_zipfile(path):
            raise InputError(path, "not a Keras 3 .keras file (a .keras file is a zip archive; this one is not)")
        headers.check_keras_archive(path)  # a huge config.json or a bomb, before Keras reads a byte of it
        import keras

        model = _load(path, lambda: keras.saving.load_model(str(path), compile=False, safe_mode=not trust),
                      "Keras 3 .keras")
        rnn = _keras3_rnn_layers(model, keras)
        if rnn:
            raise InputError(path, KERAS3_RNN_HINT.format(names=", ".join(sorted(set(rnn)))))
        fmt = "keras"
    elif suffix == ".h5":
        import tf_keras
        from tf_keras.src.saving.serialization_lib import SafeModeScope

        def legacy():  # tf_keras applies safe mode to .keras archives only: an .h5 needs the scope
            with SafeModeScope(not trust):
                return tf_keras.models.load_model(str(path), compile=False)

        model = _load(path, legacy, "legacy Keras .h5")
        fmt = "h5"
    else:
        raise InputError(path, f"unsupported model format '{suffix}': expected .keras, .h5 or a SavedModel folder")

    # tf_keras' own `export` names the output tensor differently from `from_keras_model`
    # (StatefulPartitionedCall_1:0); tf.saved_model.save keeps every name, so the model is the same.
    import tensorflow as tf

    export = model.export if fmt == "keras" else lambda folder: tf.saved_model.save(model, folder)
    return LoadedModel(path, fmt, traced_once(model, export, scratch), model)


def _float_tflite(path: Path) -> bytes:
    """The bytes of a float .tflite; InputError if it is not a TFLite model or is already quantized."""
    from reporter.measure import structure

    data = path.read_bytes()
    if data[4:8] != TFLITE_IDENTIFIER:
        raise InputError(path, "not a TFLite model (no TFL3 flatbuffer identifier)")
    from reporter.run import tflite_check

    wrong = tflite_check.problem(path)  # in a child process under a memory ceiling, before anything reads it
    if wrong:
        raise InputError(path, f"cannot use this TFLite model: {wrong}")
    try:
        quantized = structure.quantized_tensors(data)
    except Exception as exc:  # noqa: BLE001 - a damaged flatbuffer
        raise InputError(path, f"cannot read the TFLite model: {_first_line(exc)}") from exc
    if quantized:
        raise InputError(path, f"the model is already quantized ({quantized} int8/int16/float16 tensors, e.g."
                               " weights); quant-report needs the float .tflite to quantize it")
    return data


class traced_once:
    """A converter factory that traces the Keras model once: the first call exports it to a temporary
    SavedModel and every converter reads that. `from_keras_model` re-traces on every conversion
    (6.4 s per conversion of a 155-layer MobileNetV2 here, against a 4.2 s export and 3.4 s per
    conversion from it); the converted models are the same (ops, tensor names, predictions; tested).
    If the export fails (a layer Keras cannot export), each converter traces the model itself.
    `cleanup()` removes the export (the pipeline calls it; batch workers exit without atexit)."""

    def __init__(self, model, export: Callable[[str], None], scratch: Optional[Path] = None):
        self._model, self._export, self._scratch = model, export, scratch
        self._folder: Optional[str] = None
        self._exported: Optional[bool] = None
        self._elsewhere = None  # (folder, future): exported by another process (see `adopt`)

    def __call__(self):
        import tensorflow as tf

        if self._ensure_export():
            return tf.lite.TFLiteConverter.from_saved_model(self._folder)
        return tf.lite.TFLiteConverter.from_keras_model(self._model)

    def adopt(self, folder: str, future) -> None:
        """The export is being made by another process into `folder` (`future` gives the folder when done): the
        first conversion waits for it, or exports here if that failed."""
        if self._exported is None:
            self._elsewhere = (folder, future)

    def _ensure_export(self) -> bool:
        elsewhere = self._elsewhere
        if self._exported is None and elsewhere is not None:
            self._elsewhere = None
            folder, future = elsewhere
            try:
                future.result()
                self._folder, self._exported = folder, True
                atexit.register(self.cleanup)
            except Exception:  # noqa: BLE001 - export here instead, as if nobody had tried
                traceback.print_exc()  # into run.log
                shutil.rmtree(folder, ignore_errors=True)
        if self._exported is None:
            self._folder = tempfile.mkdtemp(prefix=".savedmodel-" if self._scratch else "quant-report-savedmodel-",
                                            dir=self._scratch)
            atexit.register(self.cleanup)
            try:
                self._export(self._folder)
                self._exported = True
            except Exception as exc:  # noqa: BLE001 - fall back to the slower path, which is what the user would do
                traceback.print_exc()  # into run.log
                full = storage_problem(exc)
                if full is not None:  # a full disk or a file-size limit: no other path would write either
                    raise full from exc
                self._exported = False
        return self._exported

    def saved_model_folder(self) -> Optional[str]:
        """The SavedModel every converter reads, exported now if it was not yet; None if the export failed."""
        return self._folder if self._ensure_export() else None

    def cleanup(self):
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder, self._exported = None, None


def export_saved_model(model_path: str, trust: bool, folder: str) -> str:
    """Loads the Keras model (in safe mode unless `trust`, as the run does) and exports it into `folder`: run in
    the side process (reporter.convert.side) while the run imports TensorFlow and loads the model itself."""
    loaded = load_model(model_path, trust=trust)
    loaded.make_converter._export(folder)
    return folder


def _load(path, loader, kind):
    try:
        return loader()
    except Exception as exc:  # noqa: BLE001 - keras raises many kinds for a bad file
        if "safe_mode" in str(exc) or "arbitrary code" in str(exc):
            raise InputError(path, TRUST_HINT.format(kind=kind)) from exc
        raise InputError(path, f"cannot be read as a {kind} model: {_first_line(exc)}") from exc


def _keras3_rnn_layers(model, keras) -> list[str]:
    found = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.RNN):
            found.append(type(layer).__name__)
        # Bidirectional wraps RNNs in attributes, not sub-layers the walk always reaches.
        inner = getattr(layer, "forward_layer", None)
        if inner is not None and isinstance(inner, keras.layers.RNN):
            found.append(type(inner).__name__)
    return found


def load_data(spec: str, calibration_samples: int, code_dir: Optional[str] = None,
              say: Optional[Callable[[str], None]] = None, model: Optional[LoadedModel] = None) -> Dataset:
    """Reads the evaluation inputs, labels `y` and optional calibration inputs from an .npz file or a
    `package.module:function`: `x` (and `x_calib`) for a one-input model; `x_<input name>` (and
    `x_calib_<input name>`) for several inputs, or from a function `x` (and `x_calib`) as a dict keyed by
    input name. Arrays keep their types until `bind` matches them to the model's inputs.
    An .npz's or a folder's .npy headers are checked before any array is read (reporter.run.headers): against
    each other, the memory budget and, given the loaded `model`, its inputs. `say` prints a progress line
    (a data function is announced before it is called, so that one that never returns is seen waiting)."""
    try:
        return _load_data(spec, calibration_samples, code_dir, say, model)
    except MemoryError:
        raise InputError(spec, "ran out of memory while reading the data; save the arrays as a folder of .npy"
                               " files, which are memory-mapped") from None


def _load_data(spec: str, calibration_samples: int, code_dir, say, model) -> Dataset:
    if _is_callable_spec(spec):
        arrays = _call_data_function(spec, code_dir, say)
    elif Path(spec).is_dir():
        arrays = headers.read_npy_folder(Path(spec), _model_inputs(model))
    else:
        arrays = headers.read_npz(Path(spec), _model_inputs(model))
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
        labels[name] = _labels(spec, y_raw, what)
    y, labels_are_classes = next(iter(labels.values()))

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
    return Dataset(str(spec), x, y, x_calib, calib_source, labels_are_classes, x_pool, labels)


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
    if not named:
        raise InputError(spec, f"no array 'y' or 'y_<output name>' (found: {', '.join(sorted(arrays)) or 'nothing'})")
    out = {}
    for name, value in named.items():
        what = f"y_{name}" if name else "y"
        try:
            a = np.asarray(value)
            if a.dtype == object:
                raise TypeError(f"'{what}' holds {type(value).__name__} objects, not numbers")
        except (TypeError, ValueError) as exc:
            raise InputError(spec, f"'{what}' is not numeric: {_first_line(exc)}") from exc
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
        try:
            a = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise InputError(spec, f"{what} is not numeric: {_first_line(exc)}") from exc
        if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_) or a.ndim == 0:
            raise InputError(spec, f"{what} is not a numeric array (got {a.dtype}, shape {a.shape})")
        out[name] = a
    try:
        return Inputs(out)
    except ValueError as exc:
        raise InputError(spec, f"{prefix}: {exc}") from None


def _shown(prefix: str, x: Inputs) -> str:
    return ", ".join(f"{prefix}_{n}" if n else prefix for n in x.names)


def bind(data: Dataset, signature: Signature, model_path) -> Dataset:
    """The data matched to the model's inputs by name (the one array of a one-input model to its one input)
    and cast to each input's type: integer data stay integers for an integer input (token or category ids),
    float inputs take float32, and a cast that would change a value is an error naming the array.
    A missing, extra or misnamed array is an error naming the model's inputs and the arrays found."""
    ports = signature.inputs
    names = [p.key for p in ports]

    def match(x: Inputs, prefix: str) -> Inputs:
        if len(ports) == 1 and len(x.names) == 1 and x.names[0] in ("", names[0]):
            arrays = {names[0]: x.single()}
        else:
            if sorted(x.names) != sorted(names):
                wanted = ", ".join(f"{prefix}_{n}" for n in names) if len(names) > 1 else prefix
                raise InputError(data.source, f"the model {Path(model_path).name} has {len(names)} input(s):"
                                              f" {', '.join(names)}; expected array(s) {wanted}, found {_shown(prefix, x)}")
            arrays = {n: x[n] for n in names}
        return Inputs({p.key: _cast(data.source, f"{prefix}_{p.key}" if len(ports) > 1 else prefix, arrays[p.key], p,
                                    model_path) for p in ports})

    x = match(data.x, "x")
    pool = match(data.x_pool, "x_calib") if data.x_pool is not None else None
    x_calib = match(data.x_calib, "x_calib" if data.calibration_source == "x_calib" else "x")
    return dataclasses.replace(data, x=x, x_calib=x_calib, x_pool=pool)


def _cast(source, what: str, a: np.ndarray, port: Port, model_path) -> np.ndarray:
    expected = list(port.shape[1:])
    got = list(a.shape[1:])
    if len(expected) != len(got) or any(e not in (-1, g) for e, g in zip(expected, got)):
        shown = ["None" if e == -1 else str(e) for e in expected]
        raise InputError(source, f"'{what}' has shape {tuple(got)} per sample but the model {Path(model_path).name}"
                                 f" expects ({', '.join(shown)})" + (f" for input {port.key}" if what != "x" else ""))
    dtype = np.dtype(port.dtype)
    if port.integer:  # ids: whole numbers within the type's range, kept exact
        if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.bool_)):
            if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
                raise InputError(source, f"'{what}' holds non-integer values, but input {port.key} of the model takes"
                                         f" {dtype.name} ids")
        info = np.iinfo(dtype)
        if a.size and (a.min() < info.min or a.max() > info.max):
            raise InputError(source, f"'{what}' holds values outside {dtype.name} ({a.min()}..{a.max()})")
        return a.astype(dtype, copy=False)
    if np.issubdtype(a.dtype, np.integer) and a.size and max(np.abs(p).max() for p in chunks(a)) > 2 ** 24:
        raise InputError(source, f"'{what}' holds integers beyond 2^24, which float32 cannot hold exactly")
    return a.astype(np.float32, copy=False)  # a memory-mapped float32 array stays mapped


def _is_callable_spec(spec: str) -> bool:
    return ":" in spec and not Path(spec).exists() and not spec.endswith(".npz")


def _model_inputs(model: Optional[LoadedModel]) -> Optional[headers.ModelInputs]:
    """The loaded Keras model's inputs (per-sample shapes by name), for the data's headers to be checked against
    before they are read; None when unknown (a SavedModel folder or a .tflite: their signature comes later)."""
    keras_model = getattr(model, "keras_model", None)
    try:
        found = list(getattr(keras_model, "inputs", None) or [])
        shapes = {str(getattr(t, "name", "")).split(":")[0]: tuple(None if d is None else int(d) for d in t.shape[1:])
                  for t in found}
    except Exception:  # noqa: BLE001 - a model whose inputs cannot be read this way is checked later, by `bind`
        return None
    if not found or len(shapes) != len(found):
        return None
    return headers.ModelInputs(Path(model.path).name, shapes)


def _call_data_function(spec: str, code_dir: Optional[str] = None, say: Optional[Callable[[str], None]] = None) -> dict:
    """Calls `package.module:function`. The module is looked for among installed packages first, then in
    `code_dir` (a batch file's folder) or the current folder, loaded from there without adding the folder to
    sys.path: a file beside a config can shadow nothing. Loading and calling it run behind a wall
    (usercode.wall): its sys.exit or KeyboardInterrupt is one error naming it, not the end of quant-report."""
    from reporter.run import usercode

    module_name, _, func_name = spec.partition(":")
    folders = [Path(code_dir)] if code_dir else [Path.cwd()]
    must = "a data function must return its arrays (a mapping with 'x' and 'y')"
    try:
        with usercode.wall(spec, "the data module", must):
            func = getattr(usercode.import_module(module_name, folders, installed_first=True), func_name)
    except (ImportError, AttributeError) as exc:
        raise InputError(spec, f"cannot import data function: {_first_line(exc)}") from exc
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's module may raise anything while it loads
        raise InputError(spec, f"data module failed to load: {type(exc).__name__}: {_first_line(exc)}") from exc
    if say is not None:
        say(f"calling the data function {spec} (quant-report waits until it returns)")
    try:
        with usercode.wall(spec, "the data function", must):
            result = func()
            if not hasattr(result, "keys"):
                raise InputError(spec, "data function must return a mapping with 'x' and 'y', got"
                                       f" {type(result).__name__}")
            return dict(result)
    except InputError:
        raise
    except MemoryError:
        raise InputError(spec, "the data function ran out of memory") from None
    except Exception as exc:  # noqa: BLE001 - the user's function may raise anything
        raise InputError(spec, f"data function failed: {type(exc).__name__}: {_first_line(exc)}") from exc


def _labels(spec, y_raw: np.ndarray, what: str = "y") -> tuple[np.ndarray, bool]:
    """Class ids from integer labels; rows (one-hot or multi-hot) as they are, for `read_task` to read against
    the output; float targets stay as they are."""
    if y_raw.ndim >= 3 or (y_raw.ndim == 2 and y_raw.shape[1] > 1):  # rows, or a label per position (dense)
        if np.issubdtype(y_raw.dtype, np.integer) or np.issubdtype(y_raw.dtype, np.bool_):
            return y_raw.astype(np.int64), True
        if np.issubdtype(y_raw.dtype, np.floating):
            return y_raw, y_raw.ndim == 2
        raise InputError(spec, f"'{what}' has unsupported type {y_raw.dtype}")
    if y_raw.ndim == 2:
        y_raw = y_raw[:, 0]
    if y_raw.ndim != 1:
        raise InputError(spec, f"'{what}' must be class ids or one-hot rows, got shape {y_raw.shape}")
    if np.issubdtype(y_raw.dtype, np.integer) or np.issubdtype(y_raw.dtype, np.bool_):
        return y_raw.astype(np.int64), True
    if np.issubdtype(y_raw.dtype, np.floating):
        return y_raw.astype(np.float32), False
    raise InputError(spec, f"'{what}' has unsupported type {y_raw.dtype}")


@dataclass(frozen=True)
class Head:
    """One output of a model with several outputs, with its labels when the data have them."""

    port: Port
    y: Optional[np.ndarray]
    labels_are_classes: bool
    primary: bool


def bind_labels(data: Dataset, signature: Signature, model_path, primary: Optional[str]) -> tuple[Dataset, list[Head]]:
    """The labels matched to the model's outputs by name. One output: `y` (or `y_<its name>`), no heads.
    Several: `y_<output name>` for each labelled output (a head without labels is compared with float);
    the primary output (`primary`, else the first labelled) gives `data.y`. A label array that names no
    output is an error naming the outputs and the arrays found."""
    outputs = signature.outputs
    names = [p.name for p in outputs]
    found = ", ".join(f"y_{n}" if n else "y" for n in data.labels)
    if len(outputs) == 1:
        if primary is not None and primary != names[0]:
            raise InputError(model_path, f"--primary-output {primary}: the model has one output, {names[0]}")
        if len(data.labels) == 1 and next(iter(data.labels)) in ("", names[0]):
            y, classes = next(iter(data.labels.values()))
            return dataclasses.replace(data, y=y, labels_are_classes=classes), []
        raise InputError(data.source, f"the model {Path(model_path).name} has one output, {names[0]}; expected labels"
                                      f" y, found {found}")
    unknown = [n for n in data.labels if n not in names]
    if unknown:
        raise InputError(data.source, f"the model {Path(model_path).name} has {len(names)} outputs: {', '.join(names)};"
                                      f" expected label arrays y_<output name> (any may be left out), found {found}")
    if primary is not None and primary not in data.labels:
        what = "has no labels" if primary in names else f"is not an output (outputs: {', '.join(names)})"
        raise InputError(model_path, f"--primary-output {primary} {what}")
    lead = primary or next(n for n in names if n in data.labels)
    heads = [Head(p, *(data.labels[p.name] if p.name in data.labels else (None, False)), primary=p.name == lead)
             for p in outputs]
    y, classes = data.labels[lead]
    return dataclasses.replace(data, y=y, labels_are_classes=classes), heads


@dataclass(frozen=True)
class TaskReading:
    """What an output's labels say: the labels as the measurements compare them, the task, and why."""

    y: np.ndarray
    task: Task
    reason: str
    note: str = ""  # how the labels were read when not as given


def read_task(y: np.ndarray, labels_are_classes: bool, port: Port, made_by: str, source, what: str,
              threshold: float = BINARY_THRESHOLD, forced: Optional[str] = None) -> TaskReading:
    """The task of an output from its shape, the op that makes it (`made_by`: SOFTMAX, LOGISTIC, ...) and its
    labels `y` (named `what`), or the task the user named (`forced`, one of TASK_KINDS), checked against them:
    * class scores at every position (output (N, ..., k)) with a label per position (class ids, or one-hot
      along the last axis): dense classes (segmentation), measured by pixel accuracy and mean IoU;
    * k sigmoid units (LOGISTIC) with rows of 0/1 labels: multi-label, each label at >= `threshold`, no argmax;
    * one-hot rows or class ids for k class scores: classification; 0/1 ids for one unit: a binary sigmoid;
    * whole-number float labels for a classifier: class ids, with a note;
    * labels that contradict the output (multi-hot rows or fractions for a softmax) are an error naming it;
    * other float targets: the output is compared with float (regression)."""
    name = port.name
    if forced is not None:
        return _forced_task(forced, y, labels_are_classes, port, made_by, source, what, threshold)
    dense = _dense_labels(y, port, source, what)
    if dense is not None:
        return dense
    if y.ndim > 2:
        raise InputError(source, f"'{what}' has shape {y.shape} but output {name} has shape"
                                 f" {_shape(port)}: expected one label per sample, or one per position")
    return _read_flat(y, labels_are_classes, port, made_by, source, what, threshold)


def _read_flat(y, labels_are_classes, port, made_by, source, what, threshold) -> TaskReading:
    size, name = port.size, port.name
    softmax = made_by == "SOFTMAX"
    if y.ndim == 2:
        rows = np.asarray(y)
        binary_values = bool(np.isin(rows, (0, 1)).all())
        one_hot = binary_values and bool((rows.sum(axis=1) == 1).all())
        if made_by == "LOGISTIC" and size == rows.shape[1] > 1 and binary_values:
            return _multilabel(rows, size, threshold, "sigmoid units")
        if binary_values and not one_hot and size > 1:
            raise InputError(source, f"'{what}' holds multi-hot rows (several labels per sample) but output {name} is"
                                     f" {'a softmax' if softmax else 'not a sigmoid per label'}: one label per sample"
                                     " (or --task multilabel)")
        if not binary_values:
            raise InputError(source, f"'{what}' holds rows of shape {rows.shape} that are not one-hot for output"
                                     f" {name} of shape {_shape(port)}")
        y = rows.argmax(axis=1).astype(np.int64)  # one-hot rows: class ids
        reason = f"{size} class scores and one-hot labels: the top score is the class"
        return TaskReading(y, Task(_classes(y, size, source, what)), reason)
    note = ""
    if not labels_are_classes:
        whole = bool(np.all(np.isfinite(y)) and np.all(y == np.round(y)))
        fits = whole and y.size and y.min() >= 0 and (y.max() < size if size > 1 else y.max() <= 1)
        if fits and (size > 1 or made_by == "LOGISTIC"):
            y, labels_are_classes = y.astype(np.int64), True
            note = (f"'{what}' holds whole numbers stored as floats; output {name} is a classifier, so they were read"
                    " as class ids")
        elif softmax and size > 1:
            raise InputError(source, f"'{what}' holds values that are not class ids (e.g. {_example(y)}) but output"
                                     f" {name} is a softmax classifier: labels must be whole numbers 0..{size - 1}")
    if binary_sigmoid_labels(size, y, labels_are_classes):
        return TaskReading(y, Task(2, binary_sigmoid=True, threshold=threshold),
                           f"one output unit and 0/1 labels: class 1 where it is at least {threshold:g}", note)
    if size <= 1 or not labels_are_classes:
        why = "float targets" if not labels_are_classes else "one output unit and labels other than 0/1"
        return TaskReading(y, Task(None), f"{why}: each variant's output is compared with float's", note)
    return TaskReading(y, Task(_classes(y, size, source, what)),
                       f"{size} class scores and class-id labels: the top score is the class", note)


def _multilabel(rows, size, threshold, what: str) -> TaskReading:
    return TaskReading(label_codes(np.asarray(rows).astype(np.uint8)), Task(size, multilabel=True, threshold=threshold),
                       f"{size} {what} and rows of 0/1 labels: each label is predicted where its unit is at least"
                       f" {threshold:g}, and a sample is right when all its labels are")


def _shape(port: Port) -> tuple:
    return tuple(port.allocated or port.shape)[1:]


def _dense_labels(y: np.ndarray, port: Port, source, what: str, required: bool = False) -> Optional[TaskReading]:
    """Class scores at every position (output (N, *positions, k), k > 1) and a label for each position: class
    ids (N, *positions), or one-hot (N, *positions, k). None when the output or the labels are not of that
    kind (an error instead when `required`)."""
    shape = _shape(port)
    positions, k = shape[:-1], (shape[-1] if shape else 1)
    if len(shape) < 2 or k < 2:
        if required:
            raise InputError(source, f"--task segmentation: output {port.name} has shape {shape}; a dense output has"
                                     " class scores at every position, e.g. (height, width, classes)")
        return None
    y = np.asarray(y)
    fits = lambda dims: len(dims) == len(positions) and all(p <= 0 or d == p for d, p in zip(dims, positions))  # noqa: E731
    if fits(y.shape[1:]):
        ids = y
    elif y.ndim == len(shape) + 1 and y.shape[-1] == k and fits(y.shape[1:-1]) and np.isin(y, (0, 1)).all() \
            and (y.sum(axis=-1) == 1).all():
        ids = y.argmax(axis=-1)
    else:
        if required:
            raise InputError(source, f"--task segmentation: '{what}' has shape {y.shape} but output {port.name} has"
                                     f" shape {shape}: expected class ids {('n',) + tuple(positions)} or one-hot"
                                     f" {('n',) + tuple(shape)}")
        return None
    whole = np.issubdtype(ids.dtype, np.integer) or bool(np.all(np.isfinite(ids)) and np.all(ids == np.round(ids)))
    if not whole:
        raise InputError(source, f"'{what}' holds values that are not class ids (e.g. {_example(ids)}) but output"
                                 f" {port.name} has class scores at every position")
    ids = ids.reshape(len(ids), -1).astype(np.int64)
    _classes(ids, k, source, what)
    where = "pixel" if len(positions) >= 2 else "position"
    return TaskReading(ids, Task(k, dense=True),
                       f"{k} class scores at every {where} and a label per {where}: the top score is the {where}'s"
                       " class; measured by pixel accuracy and mean IoU over the classes present")


def _forced_task(kind: str, y, labels_are_classes, port: Port, made_by: str, source, what, threshold) -> TaskReading:
    """The task the user named with --task, with the labels checked against it."""
    name, size = port.name, port.size
    said = f"as --task {kind} says"
    if kind == "regression":
        return TaskReading(np.asarray(y, np.float32), Task(None), f"{said}: each variant's output is compared with"
                                                                  " float's")
    if kind == "segmentation":
        found = _dense_labels(y, port, source, what, required=True)
        return dataclasses.replace(found, reason=f"{said}: " + found.reason)
    if kind == "multilabel":
        rows = np.asarray(y).reshape(len(y), -1) if np.asarray(y).ndim >= 2 else None
        if rows is None or rows.shape[1] != size or not np.isin(rows, (0, 1)).all():
            shown = np.asarray(y).shape
            raise InputError(source, f"--task multilabel: output {name} has {size} units but '{what}' has shape"
                                     f" {shown}: expected rows of {size} 0/1 labels")
        found = _multilabel(rows, size, threshold, "units")
        return dataclasses.replace(found, reason=f"{said}: " + found.reason)
    if kind == "binary":
        y = np.asarray(y)
        if size != 1 or y.ndim != 1 or not np.isin(y, (0, 1)).all():
            raise InputError(source, f"--task binary: output {name} must have one unit and '{what}' labels 0/1"
                                     f" (it has {size} unit(s), labels of shape {y.shape})")
        return TaskReading(y.astype(np.int64), Task(2, binary_sigmoid=True, threshold=threshold),
                           f"{said}: class 1 where the output is at least {threshold:g}")
    # classification
    if size < 2:
        raise InputError(source, f"--task classification: output {name} has one unit; use --task binary")
    reading = _read_flat(np.asarray(y), labels_are_classes, port, "SOFTMAX", source, what, threshold)
    if not reading.task.classification or reading.task.multilabel:
        raise InputError(source, f"--task classification: '{what}' does not hold class ids or one-hot rows for"
                                 f" output {name}")
    return dataclasses.replace(reading, reason=f"{said}: the top score is the class")


def _classes(y: np.ndarray, size: int, source, what: str) -> int:
    if y.size and (y.min() < 0 or y.max() >= size):
        raise InputError(source, f"labels out of range: '{what}' holds {int(y.min())}..{int(y.max())} but the model"
                                 f" has {size} classes")
    return size


def _example(y: np.ndarray) -> str:
    odd = y[np.isfinite(y) & (y != np.round(y))] if np.issubdtype(y.dtype, np.floating) else y[:1]
    return f"{(odd[0] if odd.size else y.flat[0]):g}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
