"""Opening the user's model: a Keras 3 .keras file, a legacy .h5 file, a SavedModel folder or a float .tflite.

Every problem becomes an InputError naming the file, raised before anything is written.
"""

from __future__ import annotations

import atexit
import functools
import re
import shutil
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from reporter.convert import converter
from reporter.core.errors import InputError, first_line, storage_problem
from reporter.inputs import tflite_prep
from reporter.inputs import headers, keras_twin

KERAS3_RNN_HINT = (
    "Keras 3 recurrent layers ({names}) do not convert to TFLite (TensorListReserve / READ_VARIABLE);"
    " rebuild the model with tf_keras and a fixed batch_size=1 input, save it as .h5, and run that"
)
TWIN_HINT = ("Keras 3 recurrent layers ({names}) do not convert to TFLite, and the tf_keras twin quant-report builds"
             " to convert them cannot be: {reason}; rebuild the model with tf_keras and a fixed batch_size=1 input,"
             " save it as .h5, and run that")
PROOF_HINT = ("the tf_keras twin quant-report built to convert its Keras 3 recurrent layers ({names}) does not compute"
              " what the model does: {reason}; rebuild the model with tf_keras and a fixed batch_size=1 input, save"
              " it as .h5, and run that")
CUSTOM_HINT = ("needs the custom class {name}, which is not registered: pass --custom-objects MODULE or FILE.py (a"
               " module that registers it, e.g. with @keras.saving.register_keras_serializable()) together with"
               " --trust-model")
# How Keras 3 and tf_keras name a class they could not find, somewhere in the chain of exceptions.
_MISSING_CLASS = re.compile(r"Could not locate (?:class|function) '([^']+)'|Unknown (?:layer|object|class)[^:]*:"
                            r" '?([A-Za-z_][\w.>]*)")


NOT_A_KERAS_ZIP = "not a Keras 3 .keras file (a .keras file is a zip archive; this one is not)"


@dataclass
class LoadedModel:
    """A model ready for conversion: `make_converter()` returns a fresh TFLiteConverter each call."""

    path: Path
    format: str  # "keras", "h5", "saved_model" or "tflite"
    make_converter: Optional[Callable]  # None for a .tflite: there is nothing to convert
    keras_model: object = None  # the loaded Keras model (not for a SavedModel folder); the twin, for a Keras 3 RNN
    tflite: Optional[bytes] = None  # a float .tflite input, as given (made usable: `tflite_changes`)
    tflite_changes: tuple = ()  # what was changed in a .tflite input to quantize it (run/tflite_prep.py)
    keras3_model: object = None  # a Keras 3 recurrent model converted through its tf_keras twin (`keras_model`)
    twin_proof: Optional[keras_twin.TwinProof] = None  # the twin proved on the data (`prove_twin`)
    static_batch: str = ""  # why the Keras model is converted with a static batch of 1 ("": its batch stays dynamic)

    def fit_twin(self, x) -> None:
        """A twin whose inputs leave a dimension unknown (a sequence length) is built again with the data's sizes
        (`x`, the evaluation inputs), before anything exports it: the measured models then take whole samples."""
        if self.keras3_model is None or not keras_twin.unknown_dims(self.keras_model):
            return
        try:
            twin = keras_twin.build_twin(self.keras3_model, keras_twin.data_shapes(self.keras3_model, x))
        except keras_twin.TwinError as exc:
            names = ", ".join(sorted(set(keras_twin.recurrent_layers(self.keras3_model))))
            raise InputError(self.path, TWIN_HINT.format(names=names, reason=str(exc))) from None
        self.keras_model = twin
        self.make_converter.twin = twin

    def prove_twin(self, x) -> None:
        """A model converted through a tf_keras twin: proves the twin on the evaluation inputs `x` (the largest
        output difference against the Keras 3 model, kept in `twin_proof`); InputError if they differ."""
        if self.keras3_model is None:
            return
        try:
            self.twin_proof = keras_twin.prove(self.keras3_model, self.keras_model, x)
        except keras_twin.TwinError as exc:
            names = ", ".join(sorted(set(keras_twin.recurrent_layers(self.keras3_model))))
            raise InputError(self.path, PROOF_HINT.format(names=names, reason=str(exc))) from None

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


MODEL_KINDS = "a Keras 3 .keras file, a legacy .h5 file, a SavedModel folder or a float .tflite file"
TFLITE_IDENTIFIER = b"TFL3"  # a TFLite flatbuffer's file identifier, bytes 4-8
STATIC_BATCH_LINE = "quant-report: {name} is converted with a static batch of 1: {why}"
SHAPE_OPS = "a dynamic batch would add shape ops (SHAPE, GATHER, REDUCE_PROD) that integer runtimes have no kernel for"
TRUST_HINT = ("refused: this {kind} model holds Python code (a Lambda layer's function, or a custom object) that"
              " would run when it loads; quant-report loads Keras models in safe mode. If you trust this file,"
              " pass --trust-model (in a batch file: trust_model = true)")


def load_model(path, trust: bool = False, scratch: Optional[Path] = None, custom_objects: Optional[str] = None,
               code_dir: Optional[str] = None, target: Optional[str] = None) -> LoadedModel:
    """`open_model`, saying in run.log (the run's stderr) when the model is converted with a static batch of 1 and
    why."""
    loaded = open_model(path, trust, scratch, custom_objects, code_dir, target)
    if loaded.static_batch:
        print(STATIC_BATCH_LINE.format(name=loaded.path.name, why=loaded.static_batch), file=sys.stderr)
    return loaded


def open_model(path, trust: bool = False, scratch: Optional[Path] = None, custom_objects: Optional[str] = None,
               code_dir: Optional[str] = None, target: Optional[str] = None) -> LoadedModel:
    """Opens a .keras, .h5 or SavedModel folder; InputError if it is missing or not a model. Keras models load in
    safe mode (no Python code from the file runs) unless `trust`: a model that needs it is refused in one line.
    `custom_objects` names a module imported first (it registers the model's custom classes; needs `trust`),
    installed, else MODULE.py in `code_dir` (a batch file's folder) or the current folder; or a FILE.py path.
    A Keras 3 model with recurrent layers is converted through its tf_keras twin (reporter.inputs.keras_twin).
    A Keras model is exported once to a SavedModel in `scratch` (the run's staging folder, so that it goes with
    it even when the run is killed), else in the system's temporary folder. A Keras model is exported with a static
    batch of 1 when its inputs fix the batch at 1 or `target` (a --target name) runs one sample at a time
    (`static_batch_reason`); a SavedModel folder or a .tflite is converted as given (the repair ladder's
    static_batch1 rung gives integer targets that model's batch-1 form)."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or folder")
    if custom_objects:
        import_custom_objects(custom_objects, trust, code_dir)
    if path.is_dir():
        if not (path / "saved_model.pb").is_file():
            raise InputError(path, "folder is not a SavedModel (no saved_model.pb inside)")
        import tensorflow as tf

        try:
            tf.saved_model.load(str(path))
        except Exception as exc:  # noqa: BLE001 - any failure means an unreadable model
            raise InputError(path, f"cannot load SavedModel: {first_line(exc)}") from exc
        return LoadedModel(path, "saved_model", lambda: converter.from_saved_model(str(path)))

    suffix = path.suffix.lower()
    if suffix == ".tflite":
        prepared = _float_tflite(path)
        return LoadedModel(path, "tflite", None, tflite=prepared.data, tflite_changes=tuple(prepared.changes))
    if suffix not in (".keras", ".h5"):
        raise InputError(path, f"unsupported model format '{suffix}': expected .keras, .h5 or a SavedModel folder")
    model = read_keras(path, trust)
    fmt = "keras" if suffix == ".keras" else "h5"
    if fmt == "keras":
        rnn = keras_twin.recurrent_layers(model)
        if rnn:
            return _through_twin(path, model, rnn, scratch)

    why = static_batch_reason(model, target)
    export = functools.partial(export_keras if fmt == "keras" else export_legacy, model, batch1=bool(why))
    return LoadedModel(path, fmt, traced_once(model, export, scratch), model, static_batch=why)


def read_keras(path: Path, trust: bool = False):
    """The Keras model of a .keras (Keras 3) or .h5 (tf_keras) file, loaded in safe mode unless `trust`; InputError
    naming the file when it is not one, needs --trust-model or a custom class, or cannot be read."""
    if path.suffix.lower() == ".keras":
        import zipfile

        headers.regular_file(path, "a model")
        if not zipfile.is_zipfile(path):
            raise InputError(path, NOT_A_KERAS_ZIP)
        headers.check_keras_archive(path)  # a huge config.json or a bomb, before Keras reads a byte of it
        import keras

        return _load(path, lambda: keras.saving.load_model(str(path), compile=False, safe_mode=not trust),
                     "Keras 3 .keras")
    import tf_keras
    from tf_keras.src.saving.serialization_lib import SafeModeScope

    def legacy():  # tf_keras applies safe mode to .keras archives only: an .h5 needs the scope
        with SafeModeScope(not trust):
            return tf_keras.models.load_model(str(path), compile=False)

    return _load(path, legacy, "legacy Keras .h5")


def fixed_batch_of_one(model) -> bool:
    """Every input of the Keras model (Keras 3 or tf_keras) fixes its batch dimension at 1 (`Input(batch_size=1)`,
    `batch_shape=(1, ...)`)."""
    try:
        inputs = list(model.inputs or ())
    except (AttributeError, ValueError):  # a subclassed model without symbolic inputs: its batch is not declared
        return False
    return bool(inputs) and all(len(t.shape) > 0 and t.shape[0] == 1 for t in inputs)


def static_batch_reason(model, target: Optional[str] = None) -> str:
    """The one decision of the export's batch: why the Keras `model` is exported (and so every variant, the debugger,
    the side process's conversions and the search's candidates converted) with a static batch of 1, "" to keep it
    dynamic. A batch fixed at 1 in the model is kept; `target` (a --target name) asks for it when its runtime runs one
    sample at a time. Either way the converter then adds no shape ops for an unknown batch."""
    from reporter.core import targets

    if fixed_batch_of_one(model):
        return f"its inputs fix the batch at 1 (Input(batch_size=1)), and {SHAPE_OPS}"
    if target and targets.of(target).static_batch:
        return f"--target {target} runs one sample at a time, and {SHAPE_OPS}"
    return ""


def export_signature(model, batch1: bool):
    """The input signature a Keras 3 model is exported with: Keras's own (every batch dimension None), with the batch
    fixed to 1 when `batch1`."""
    import keras
    from keras.src.export.export_utils import get_input_signature

    signature = get_input_signature(model)
    if not batch1:
        return signature
    return keras.tree.map_structure(
        lambda spec: keras.InputSpec(shape=(1, *tuple(spec.shape)[1:]), dtype=spec.dtype, name=spec.name), signature)


def export_legacy(model, folder: str, batch1: bool = False) -> None:
    """A tf_keras (.h5) model as a SavedModel: `tf.saved_model.save`, which keeps its own batch (a fixed batch of 1
    stays 1); with `batch1`, the serving function tf_keras traces for it with the batch fixed to 1 (the same function
    and output names, only the batch differs)."""
    import tensorflow as tf

    # tf_keras' own `export` names the output tensor differently from `from_keras_model`
    # (StatefulPartitionedCall_1:0); tf.saved_model.save keeps every name, so the model is the same.

    if not batch1 or fixed_batch_of_one(model):
        tf.saved_model.save(model, folder)
        return
    from tf_keras.src.saving.legacy import saving_utils

    signature = tf.nest.map_structure(lambda spec: tf.TensorSpec([1, *spec.shape[1:]], spec.dtype, spec.name),
                                      saving_utils.model_call_inputs(model)[0])
    serve = saving_utils.trace_model_call(model, input_signature=signature)
    tf.saved_model.save(model, folder, signatures=serve)


def export_keras(model, folder: str, batch1: bool = False) -> None:
    """A Keras 3 model as the SavedModel TensorFlow's converter reads: Keras's own ExportArchive with the one
    `serve` endpoint `model.export` writes (and its `serving_default` alias), minus what no conversion reads: the
    variables listed again under the archive (each a Keras variable the save walks), the walk over every layer for
    lookup tables, the gradient functions and the printed signature. EfficientNet-B0: 7.3 s to 3.3 s; the
    converted models are the same but for the names of constant tensors (tests/test_trace_once.py). A model the
    short export cannot save (a resource it does not track, such as a custom layer's lookup table) is exported
    by `model.export`, as before. `batch1`: the inputs' batch fixed to 1 (`export_signature`)."""
    import keras
    import tensorflow as tf

    try:
        signature = export_signature(model, batch1)
    except ImportError:  # a Keras without it: its own export
        model.export(folder, verbose=False)
        return
    try:
        archive = keras.export.ExportArchive()
        archive.add_endpoint("serve", model.__call__, signature)
        archive.write_out(folder, options=tf.saved_model.SaveOptions(experimental_custom_gradients=False),
                          verbose=False)
    except Exception as exc:  # noqa: BLE001 - whatever the short export misses, Keras's own export handles or says
        print(f"quant-report: exporting with model.export: the short export failed ({first_line(exc)})",
              file=sys.stderr)  # into run.log
        _empty(Path(folder))
        model.export(folder, verbose=False, input_signature=signature)


def _empty(folder: Path) -> None:
    """Removes what a failed export wrote inside `folder` (a folder the run made for it)."""
    for item in folder.iterdir():
        shutil.rmtree(item) if item.is_dir() and not item.is_symlink() else item.unlink()


def _through_twin(path: Path, model, rnn: list[str], scratch: Optional[Path]) -> LoadedModel:
    """A Keras 3 recurrent model as its tf_keras twin (batch 1, the same weights), which converts; proved on the
    data later (`LoadedModel.prove_twin`). InputError naming the layer when the twin cannot be built."""
    import tensorflow as tf

    try:
        twin = keras_twin.build_twin(model)
    except keras_twin.TwinError as exc:
        raise InputError(path, TWIN_HINT.format(names=", ".join(sorted(set(rnn))), reason=str(exc))) from None
    return LoadedModel(path, "keras", _TwinExport(twin, scratch), twin, keras3_model=model,
                       static_batch="its recurrent layers convert through a tf_keras twin, which takes one sample at a"
                                    " time")


class _TwinExport:
    """The converter factory of a tf_keras twin: `traced_once` of the twin as it is when it is first exported
    (`LoadedModel.fit_twin` may build it again with the data's sizes before that)."""

    def __init__(self, twin, scratch: Optional[Path]):
        import tensorflow as tf

        self.twin = twin
        self._traced = traced_once(twin, lambda folder: tf.saved_model.save(self.twin, folder), scratch)

    def __call__(self):
        self._traced._model = self.twin  # what `from_keras_model` reads if the export fails
        return self._traced()

    def adopt(self, folder: str, future) -> None:
        self._traced.adopt(folder, future)

    def saved_model_folder(self) -> Optional[str]:
        return self._traced.saved_model_folder()

    def cleanup(self):
        self._traced.cleanup()

    def export(self, folder: str) -> None:
        """The twin exported as a SavedModel into `folder` (the side process's export)."""
        if keras_twin.unknown_dims(self.twin):  # its sizes come from the data, which the side process has not
            raise RuntimeError("the tf_keras twin's input sizes come from the data: exported by the run itself")
        self._traced.export(folder)


def import_custom_objects(module: str, trust: bool, code_dir: Optional[str] = None) -> None:
    """Imports `module`, which registers a model's custom Keras classes: a module name (installed, else
    MODULE.py in `code_dir` or the current folder) or a FILE.py path (relative to `code_dir`, a batch file's
    folder, else to the current folder). Its code runs, so only with `trust`. InputError naming the setting
    otherwise, or naming a missing file."""
    from reporter.inputs import usercode

    if not trust:
        raise InputError(module, "--custom-objects imports this module, whose code runs: pass --trust-model too")
    file = custom_objects_file(module, code_dir)
    if file is not None and not file.is_file():
        raise InputError(module, f"--custom-objects: no such file ({file})")
    try:
        with usercode.wall(module, "the --custom-objects module", "it must only import and register classes"):
            if file is not None:
                usercode.load_file(file)
            else:
                folders = ([Path(code_dir)] if code_dir else []) + [Path.cwd()]
                usercode.import_module(module, folders, installed_first=True)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's module failed as it loaded
        raise InputError(module, f"--custom-objects: cannot import it: {first_line(exc)}") from exc


def custom_objects_file(value: str, code_dir: Optional[str] = None) -> Optional[Path]:
    """The file a --custom-objects value names (it ends in .py or holds a path separator), resolved against
    `code_dir` (a batch file's folder), else the current folder; None for a module name."""
    if not (value.endswith(".py") or "/" in value or "\\" in value):
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else (Path(code_dir) if code_dir else Path.cwd()) / path


def _float_tflite(path: Path) -> tflite_prep.Prepared:
    """The bytes of a float .tflite, made usable (a signature, float16 constants widened, op codes normalized:
    reporter/inputs/tflite_prep.py); InputError if it is not a TFLite model or is already quantized."""
    from reporter.measure import structure

    data = path.read_bytes()
    if data[4:8] != TFLITE_IDENTIFIER:
        raise InputError(path, "not a TFLite model (no TFL3 flatbuffer identifier)")
    from reporter.inputs import tflite_check

    wrong = tflite_check.problem(path)  # in a child process under a memory ceiling, before anything reads it
    if wrong:
        raise InputError(path, f"cannot use this TFLite model: {wrong}")
    try:
        prepared = tflite_prep.prepare(data)
        quantized = structure.quantized_tensors(prepared.data)
    except Exception as exc:  # noqa: BLE001 - a damaged flatbuffer
        raise InputError(path, f"cannot read the TFLite model: {first_line(exc)}") from exc
    if quantized:
        raise InputError(path, f"the model is already quantized ({quantized} int8/int16/float16 tensors, e.g."
                               " weights); quant-report needs the float .tflite to quantize it")
    return prepared


class traced_once:
    """A converter factory that traces the Keras model once: the first call exports it to a temporary
    SavedModel and every converter reads that. `from_keras_model` re-traces on every conversion
    (6.4 s per conversion of a 155-layer MobileNetV2 here, against a 4.2 s export and 3.4 s per
    conversion from it); the converted models are the same (ops, tensor names, predictions; tested).
    If the export fails (a layer Keras cannot export), each converter traces the model itself.
    `cleanup()` removes the export (the pipeline calls it; batch workers exit without atexit)."""

    def __init__(self, model, export: Callable[[str], None], scratch: Optional[Path] = None):
        self._model, self._export, self._scratch = model, export, scratch  # `model`: a Keras model, or a stand-in
        # whose real() gives it (reporter.inputs.described)
        self._folder: Optional[str] = None
        self._exported: Optional[bool] = None
        self._elsewhere = None  # (folder, future): exported by another process (see `adopt`)

    def __call__(self):
        import tensorflow as tf

        if self._ensure_export():
            return converter.from_saved_model(self._folder)
        return tf.lite.TFLiteConverter.from_keras_model(self._model.real() if hasattr(type(self._model), "real")
                                                        else self._model)

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

    def export(self, folder: str) -> None:
        """The model exported as a SavedModel into `folder` (the side process's export)."""
        self._export(folder)

    def saved_model_folder(self) -> Optional[str]:
        """The SavedModel every converter reads, exported now if it was not yet; None if the export failed."""
        return self._folder if self._ensure_export() else None

    def cleanup(self):
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder, self._exported = None, None


def _load(path, loader, kind):
    try:
        return loader()
    except Exception as exc:  # noqa: BLE001 - keras raises many kinds for a bad file
        if "safe_mode" in str(exc) or "arbitrary code" in str(exc):
            raise InputError(path, TRUST_HINT.format(kind=kind)) from exc
        missing = _missing_class(exc)
        if missing:
            raise InputError(path, CUSTOM_HINT.format(name=missing)) from exc
        raise InputError(path, f"cannot be read as a {kind} model: {first_line(exc)}") from exc


def _missing_class(exc: BaseException) -> Optional[str]:
    """The class Keras could not find, read from `exc` or the exceptions it was raised from (Keras 3's outer
    message only says a model "could not be deserialized properly")."""
    seen = 0
    while exc is not None and seen < 20:
        found = _MISSING_CLASS.search(str(exc))
        if found:
            return (found.group(1) or found.group(2)).rpartition(">")[2]
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None
