"""The run's settings as report.json keeps them: one frozen, typed record.

Every reader (the findings, the decision, the words, the views) reads a field by name, so a misspelt setting is
an AttributeError in the code, never a silent default; and a report.json whose `settings` holds a key this
version does not know is refused in one line naming it (reporter.model.decode refuses unknown fields).
The values are what `reporter.run.settings.RunSettings.recorded` writes; a field added later has a default,
so older files still read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

# Written only when set (a batch's notes, a gate on one variant): not listed when empty.
WHEN_SET = frozenset({"gate_variant", "latency_timing", "inputs_sha256"})


@dataclass(frozen=True)
class Settings:
    variants: list[str] = field(default_factory=list)
    calibration_samples: Optional[int] = None
    suspect_threshold: Optional[float] = None
    first_layers: Optional[int] = None
    latency_runs: Optional[int] = None
    recommend: Optional[str] = None
    search_budget: Optional[int] = None
    selection_samples: Optional[int] = None
    keep_float: list[str] = field(default_factory=list)
    keep_float_ops: list[str] = field(default_factory=list)
    recipe: list[str] = field(default_factory=list)
    target: Optional[str] = None  # None in reports written before --target: judged for a CPU
    primary_output: Optional[str] = None
    threshold: Optional[float] = None
    task: list[str] = field(default_factory=list)
    metric: Optional[str] = None
    metric_mode: Optional[str] = None
    trust_model: Optional[bool] = None
    custom_objects: Optional[str] = None
    base_model: Optional[str] = None  # a quantization-aware model's float base: post-training quantization beside QAT
    max_accuracy_drop: Optional[float] = None  # the accuracy target's allowed drop (0..1), and the gate's limit
    gate_variant: Optional[str] = None  # the variant the gate checks; None: the model decided for --target
    latency_timing: Optional[str] = None  # a batch's note on how latency was timed beside other runs
    inputs_sha256: Optional[str] = None  # a batch: the fingerprint of the inputs the run read (--resume)

    def items(self) -> list[tuple[str, object]]:
        """(name, value) of every setting as the run recorded it, in order; those written only when set skipped
        when they were not."""
        return [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)
                if not (f.name in WHEN_SET and getattr(self, f.name) is None)]
