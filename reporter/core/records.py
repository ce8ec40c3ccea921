"""Records that keep more than their file does: a field marked `unstored` carries a typed decision that the
words of a record read (reporter.render.words) but report.json and diff.json do not keep, so that a record's
sentence is made on the render side while the files read as before. `as_stored` is dataclasses.asdict without
those fields; reporter.model.decode knows no such field either (a file that has one is refused)."""

from __future__ import annotations

import copy
import dataclasses

_STORED = "stored"


def unstored(default):
    """A dataclass field with an immutable `default` that files do not keep."""
    return dataclasses.field(default=default, metadata={_STORED: False})


def is_stored(f: dataclasses.Field) -> bool:
    return f.metadata.get(_STORED, True)


def as_stored(value):
    """dataclasses.asdict(value) without the `unstored` fields (containers and copies as asdict makes them)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_stored(getattr(value, f.name)) for f in dataclasses.fields(value) if is_stored(f)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*[as_stored(v) for v in value])
    if isinstance(value, (list, tuple)):
        return type(value)(as_stored(v) for v in value)
    if isinstance(value, dict):
        return type(value)((as_stored(k), as_stored(v)) for k, v in value.items())
    return copy.deepcopy(value)
