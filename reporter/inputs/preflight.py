"""Checking, without TensorFlow, that the model and the data exist and are of a kind quant-report reads."""

from __future__ import annotations

import zipfile
from pathlib import Path

from reporter.core.errors import InputError
from reporter.inputs import headers
from reporter.inputs.data_loading import DATA_KINDS, TEXT_SUFFIXES, is_callable_spec
from reporter.inputs.model_loading import MODEL_KINDS, NOT_A_KERAS_ZIP, TFLITE_IDENTIFIER


HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"  # what every HDF5 file (a legacy .h5 Keras model) starts with


def check_model_file(model):
    """The model file or folder exists and is of a kind quant-report reads (InputError naming it otherwise)."""
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
    elif path.suffix.lower() == ".keras" and not zipfile.is_zipfile(path):
        raise InputError(path, NOT_A_KERAS_ZIP)
    elif path.suffix.lower() == ".h5":
        with open(path, "rb") as f:
            if f.read(8) != HDF5_SIGNATURE:
                raise InputError(path, "not an HDF5 file (no HDF5 signature): the file is damaged")


def preflight(model, data):
    """Checks, without TensorFlow, that the model and the data exist and are of a kind quant-report
    reads; raises InputError naming the file and saying what it must be."""
    check_model_file(model)
    spec = str(data)
    if is_callable_spec(spec):
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
        kind = TEXT_SUFFIXES.get(data_path.suffix.lower(), "not an .npz archive")
        raise InputError(data_path, f"{kind}: DATA must be {DATA_KINDS}")
