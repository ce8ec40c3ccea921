"""Opening the user's model: a Keras 3 .keras file, a legacy .h5 file, a SavedModel folder or a float .tflite.

Every problem becomes an InputError naming the file, raised before anything is written.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from reporter.core.errors import InputError, first_line, storage_problem
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


MODEL_KINDS = "a Keras 3 .keras file, a legacy .h5 file, a SavedModel folder or a float .tflite file"
TFLITE_IDENTIFIER = b"TFL3"  # a TFLite flatbuffer's file identifier, bytes 4-8
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
            raise InputError(path, f"cannot load SavedModel: {first_line(exc)}") from exc
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
        raise InputError(path, f"cannot read the TFLite model: {first_line(exc)}") from exc
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
        raise InputError(path, f"cannot be read as a {kind} model: {first_line(exc)}") from exc


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
