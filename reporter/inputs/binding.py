"""Binding the data to the model: each array matched to one of its inputs by name and cast to that input's type."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from reporter.core.arrays import chunks
from reporter.core.errors import InputError
from reporter.measure.signature import Port, Signature
from reporter.model.data import Dataset, Inputs


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
