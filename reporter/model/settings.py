"""The run's settings as report.json keeps them: one frozen, typed record.

Every reader (the findings, the decision, the words, the views) reads a field by name, so a misspelt setting is
an AttributeError in the code, never a silent default; and a report.json whose `settings` holds a key this
version does not know is refused in one line naming it (reporter.model.decode refuses unknown fields).
The values are what `reporter.inputs.settings.RunSettings.recorded` writes; a field added later has a default,
so older files still read. Every int and number setting is read back with its declaration's own check (bounds
included: reporter.core.schema), the check the run applied when it accepted the value: what a run writes, `render`
and `diff` read, and a hand-edited value beyond the bounds is refused in one line naming it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field

from reporter.core import schema
from reporter.model.decode import OutOfBounds

# Written only when set (a batch's notes, a gate on one variant): not listed when empty.
WHEN_SET = frozenset({"gate_variant", "latency_timing", "inputs_sha256", "micro_arena"})


def _field(setting: schema.Setting) -> tuple:
    """A declared setting as a field of the record: its type, and None (or an empty list) when a report lacks it."""
    empty = field(default_factory=list) if setting.kind == "list" else None
    return setting.name, schema.record_type(setting), empty


class _Items:
    def items(self) -> list[tuple[str, object]]:
        """(name, value) of every setting as the run recorded it, in order; those written only when set skipped
        when they were not."""
        return [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)
                if not (f.name in WHEN_SET and getattr(self, f.name) is None)]


# The recorded settings read back with their declaration's check: the numbers (a choice or a list a later version
# renamed must not make an older report unreadable).
CHECKED_ON_READ = tuple(s for s in schema.recorded() if s.kind in ("int", "number"))


def _check(self):
    """OutOfBounds (as a figure beyond its bound) naming the first int or number setting its declaration refuses
    (None: an older report's absent setting, or one written only when set)."""
    for setting in CHECKED_ON_READ:
        value = getattr(self, setting.name)
        if value is not None and not setting.check(value):
            raise OutOfBounds(f"settings.{setting.name}", value, setting.must_be)


# One field per setting report.json records (reporter.core.schema.recorded: the run's, the gate's, a batch's notes),
# typed and ordered by its declaration.
Settings = dataclasses.make_dataclass("Settings", [_field(s) for s in schema.recorded()], bases=(_Items,),
                                      frozen=True, namespace={"__module__": __name__, "__post_init__": _check})
Settings.__doc__ = "The run's settings as report.json keeps them (reporter.core.schema: one field per setting)."
