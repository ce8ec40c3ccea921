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
from dataclasses import dataclass, field
from typing import Optional

from reporter.core import schema
from reporter.model.decode import OutOfBounds

# Written only when set (a batch's notes, a gate on one variant, the plug-ins a run loaded): not listed when empty.
WHEN_SET = frozenset({"gate_variant", "latency_timing", "inputs_sha256", "micro_arena", "plugin"})


# The recorded settings read back with their declaration's check: the numbers (a choice or a list a later version
# renamed must not make an older report unreadable).
CHECKED_ON_READ = tuple(s for s in schema.recorded() if s.kind in ("int", "number"))


@dataclass(frozen=True)
class Settings:
    """The run's settings as report.json keeps them: one field per setting reporter.core.schema.recorded() lists (the
    run's, the gate's, a batch's notes), in its order and typed by schema.record_type (None, or an empty list, when
    an older report lacks it); a test holds the fields to the declarations."""

    variants: list[str] = field(default_factory=list)
    calibration_samples: Optional[int] = None
    suspect_threshold: Optional[float] = None
    first_layers: Optional[int] = None
    latency_runs: Optional[int] = None
    recommend: Optional[str] = None
    search_budget: Optional[int] = None
    search_share: Optional[float] = None
    selection_samples: Optional[int] = None
    keep_float: list[str] = field(default_factory=list)
    keep_float_ops: list[str] = field(default_factory=list)
    recipe: list[str] = field(default_factory=list)
    target: Optional[str] = None
    primary_output: Optional[str] = None
    threshold: Optional[float] = None
    plugin: list[str] = field(default_factory=list)  # the plug-ins the run loaded (--plugin): what `render` needs
    task: list[str] = field(default_factory=list)
    metric: Optional[str] = None
    metric_mode: Optional[str] = None
    trust_model: Optional[bool] = None
    custom_objects: Optional[str] = None
    base_model: Optional[str] = None
    micro_arena: Optional[int] = None
    max_accuracy_drop: Optional[float] = None
    gate_variant: Optional[str] = None
    latency_timing: Optional[str] = None
    inputs_sha256: Optional[str] = None

    def __post_init__(self) -> None:
        """OutOfBounds (as a figure beyond its bound) naming the first int or number setting its declaration refuses
        (None: an older report's absent setting, or one written only when set)."""
        for setting in CHECKED_ON_READ:
            value = getattr(self, setting.name)
            if value is not None and not setting.check(value):
                raise OutOfBounds(f"settings.{setting.name}", value, setting.must_be)

    def items(self) -> list[tuple[str, object]]:
        """(name, value) of every setting as the run recorded it, in order; those written only when set skipped
        when they were not."""
        return [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)
                if not (f.name in WHEN_SET and getattr(self, f.name) in (None, []))]
