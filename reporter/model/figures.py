"""A task kind's own figures in report.json: `Metrics.figures`, a map of frozen records by kind name.

A kind declares its figures record (a frozen dataclass, each figure bounded by reporter.model.bounds.figure) and
registers it in its own module with one call, `register(name, Record)` (run when the composition root,
reporter.plugins, imports the kinds); report.json's `metrics.figures.<name>`
is decoded as that record, its bounds checked like any field's. The records of the core never name a kind.
"""

from __future__ import annotations

_RECORDS: dict[str, type] = {}
_REPLACED: dict[str, tuple[str, "str | None"]] = {}  # an old Metrics field -> (kind, its field; None: the record)


def register(name: str, record: type, replaces: "dict[str, str | None] | None" = None) -> type:
    """Declare `record` (a frozen dataclass) as the figures of the kind `name`: `Metrics.figures[name]`; `replaces`:
    the `metrics` fields of report.json files written before `metrics.figures` that held them (old field -> its
    field in the record, None for the whole record), moved into the map when such a file is read. Returns it;
    a ValueError for a name already declared with another record."""
    if _RECORDS.get(name, record) is not record:
        raise ValueError(f"the figures of task kind {name!r} are already declared ({_RECORDS[name].__name__})")
    _RECORDS[name] = record
    _REPLACED.update({old: (name, new) for old, new in (replaces or {}).items()})
    return record


def replaced() -> dict[str, tuple[str, "str | None"]]:
    """The old `metrics` fields the declared records replace: old field -> (kind name, its field; None: the record)."""
    return dict(_REPLACED)


def unregister(name: str) -> None:
    """Take the figures of the kind `name` out (a test's kind, after the test)."""
    _RECORDS.pop(name, None)
    for old in [k for k, (kind, _) in _REPLACED.items() if kind == name]:
        del _REPLACED[old]


def records() -> dict[str, type]:
    """Every declared figures record, by kind name (the kinds' modules declare theirs when the entry point registers
    the built-in plug-ins: reporter.plugins)."""
    return dict(_RECORDS)


class Figures(dict):
    """`Metrics.figures`: {kind name: its figures record}; read from report.json through the declared records."""

    @classmethod
    def decode_json(cls, value, path: str) -> "Figures":
        """The map from parsed JSON, each entry decoded as its kind's record (a DecodeError naming the first entry
        that is not one, or a kind that declares no figures)."""
        from reporter.model.decode import DecodeError, decode, got, key_path

        if not isinstance(value, dict):
            raise DecodeError(path, f"expected an object, got {got(value)}")
        known = records()
        out = cls()
        for name, entry in value.items():
            if name not in known:
                raise DecodeError(key_path(path, name), "no task kind declares these figures")
            out[name] = decode(known[name], entry, key_path(path, name))
        return out

    @classmethod
    def record_types(cls) -> list[type]:
        """The declared records (what reporter.model.bounds.markdown walks)."""
        return list(records().values())
