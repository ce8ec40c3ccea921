"""A Keras model opened by the side process, described to the run instead of loaded there twice.

A run with a side process (reporter.convert.side) has it load the Keras model and export it to the SavedModel every
conversion reads. The run itself needs of the model only its inputs and outputs (names and shapes, to bind the data
and name the outputs) and the batch it is exported with before its first conversion; loading it too took a
MobileNetV2's run 1.2 s, and an EfficientNet-B0's 1.5 s, of the two cores its two TensorFlow imports and the side
process's load and export already share. So the side process opens the model as the run would (`describe`, the same
`open_model`) and returns those facts; its export (`export_described`) exports the model it opened. The run gets a
`LoadedModel` whose `keras_model` answers from the facts and loads the model here only if something asks for more
(the export, when the side process's failed). Whenever the side process cannot describe the model (it is refused, needs
a custom class, converts through a tf_keras twin, or the side process died) the run loads it itself, with the errors
`model_loading` gives.
"""

from __future__ import annotations

import functools
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Optional

from reporter.inputs import model_loading
from reporter.inputs.model_loading import LoadedModel

_OPENED: dict = {}  # in the side process: the model `describe` opened, for `export_described` (one at a time)


def _opened(model_path: str, trust: bool, custom_objects: Optional[str], code_dir: Optional[str],
            target: Optional[str]) -> LoadedModel:
    key = (model_path, trust, custom_objects, code_dir, target)
    if key not in _OPENED:
        _OPENED.clear()
        _OPENED[key] = model_loading.open_model(model_path, trust=trust, custom_objects=custom_objects,
                                                code_dir=code_dir, target=target)
    return _OPENED[key]


def _dims(shape) -> Optional[tuple]:
    try:
        return tuple(None if d is None else int(d) for d in shape)
    except (TypeError, ValueError):  # an unknown rank
        return None


def _tensors(model, attribute: str) -> Optional[list]:
    """(name, shape) of each of the model's symbolic inputs or outputs; None when it has none to read (a subclassed
    model)."""
    try:
        found = list(getattr(model, attribute) or [])
    except Exception:  # noqa: BLE001 - a model whose tensors cannot be read this way: the run checks it later
        return None
    return [(str(getattr(t, "name", "")), _dims(t.shape)) for t in found]


def describe(model_path: str, trust: bool, custom_objects: Optional[str] = None, code_dir: Optional[str] = None,
             target: Optional[str] = None) -> dict:
    """In the side process: the Keras model opened as the run opens it, described (what `DescribedModel` answers);
    {"twin": True} for a model the run converts through a tf_keras twin (the run loads that one itself)."""
    loaded = _opened(model_path, trust, custom_objects, code_dir, target)
    if loaded.keras3_model is not None or loaded.format not in ("keras", "h5"):
        return {"twin": True}
    model = loaded.keras_model
    try:
        names = list(getattr(model, "output_names", None) or [])
    except Exception:  # noqa: BLE001 - none: the run names the outputs from the converted model's signature
        names = []
    return {"format": loaded.format, "static_batch": loaded.static_batch, "inputs": _tensors(model, "inputs"),
            "outputs": _tensors(model, "outputs"), "output_names": [str(n) for n in names]}


def export_described(model_path: str, trust: bool, folder: str, custom_objects: Optional[str] = None,
                     code_dir: Optional[str] = None, target: Optional[str] = None) -> str:
    """In the side process: the model `describe` opened (opened now if it did not), exported into `folder` with the
    run's batch; then let go."""
    try:
        _opened(model_path, trust, custom_objects, code_dir, target).make_converter.export(folder)
    finally:
        _OPENED.clear()
    return folder


class DescribedModel:
    """The Keras model as the side process described it: `inputs`, `outputs` (each with `name` and `shape`) and
    `output_names` from the facts; `real()` (and any other attribute) loads the model in this process."""

    def __init__(self, facts: dict, load: Callable[[], object]):
        self._facts, self._load, self._model = facts, load, None
        for key in ("inputs", "outputs"):  # none to read (a subclassed model): none here either, as the run reads it
            setattr(self, key, [SimpleNamespace(name=name, shape=shape) for name, shape in facts.get(key) or []])
        self.output_names = list(facts.get("output_names") or [])

    def real(self):
        """The Keras model, loaded here on first use."""
        if self._model is None:
            self._model = self._load()
        return self._model

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.real(), name)


def load_described(path, facts: Callable[[], dict], **opening) -> LoadedModel:
    """The run's LoadedModel of a .keras or .h5 file the side process opened: `facts()` waits for its description.
    `model_loading.load_model(path, **opening)` (the model loaded here; `opening`: its trust, scratch,
    custom_objects, code_dir and target) when it could not describe it or the model needs a twin."""
    path = Path(path)
    try:
        found = facts()
    except Exception:  # noqa: BLE001 - the side process could not open it: opened here, which says why
        traceback.print_exc()  # into run.log
        found = None
    if not found or found.get("twin"):
        return model_loading.load_model(path, **opening)
    trust = opening.get("trust", False)
    if opening.get("custom_objects"):  # registered here too, for a load here (the export, if the side's fails)
        model_loading.import_custom_objects(opening["custom_objects"], trust, opening.get("code_dir"))
    model = DescribedModel(found, functools.partial(model_loading.read_keras, path, trust))
    why = found["static_batch"]
    export = model_loading.export_keras if found["format"] == "keras" else model_loading.export_legacy

    def export_here(folder: str) -> None:
        export(model.real(), folder, batch1=bool(why))

    loaded = LoadedModel(path, found["format"], model_loading.traced_once(model, export_here, opening.get("scratch")),
                         model, static_batch=why)
    if why:
        print(model_loading.STATIC_BATCH_LINE.format(name=path.name, why=why), file=sys.stderr)
    return loaded
