"""The bounds of the figures report.json carries, declared once and given to each record's fields with `figure`.

A bound says what a figure can be: a share from 0 to 1, a size or a count (a whole number >= 0), a latency, a
ratio between two models. reporter.model.decode checks every field that carries one when a report.json is read,
and refuses a value beyond it in one line naming the field: "variants[1].size_bytes is -5: must be a size in
bytes (a whole number >= 0)". A bound on a list or dict field holds for every number in it (None skipped).

The bounds are loose on purpose: only a value no run can measure exceeds them (a real run writes only values
inside them, so a report the tool wrote always reads back). docs/report-json.md lists them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import dataclass
from typing import Optional, Union

# The metadata key of a field's bound (a Bound; By or PartOf when it depends on another field of the record).
BOUND = "bound"

MAX_INT = 2**63 - 1  # what JSON integers this tool reads (reporter.model.decode.loads)
# One inference timed for longer than this (about 11.6 days) is not a measurement; nor a run of that length.
MAX_LATENCY_MS = 1e9
MAX_SECONDS = 1e9
# A size or latency against float's (VariantFinding.size_ratio, .latency_ratio): a .tflite file holds at least a few
# hundred bytes and no model measured here reaches 100 GB, and one invoke takes at least a microsecond and none
# measured on every evaluation sample takes 1,000 s; so no two models of a run (the base model's included) are
# 1e9 times apart. Beyond that a ratio is made up, not measured.
MAX_RATIO = 1e9


@dataclass(frozen=True)
class Bound:
    """A figure's range (both ends included) and what it must be, in the words of the refusal."""

    low: float
    high: float
    must_be: str  # "a share from 0 to 1"
    whole: bool = False  # a count: a whole number (also when stored as a float, e.g. 30.0)
    # What null reads as, for a required figure report.json writes null when it is not finite (JSON has no inf);
    # None: null is refused (or, for an optional field, means not measured).
    null: Optional[float] = None

    def allows(self, value: Union[int, float]) -> bool:
        return self.low <= value <= self.high and (not self.whole or float(value).is_integer())


@dataclass(frozen=True)
class By:
    """A bound chosen by another field of the same record: `cases` maps that field's value to the bound (`otherwise`
    when none matches; None: any finite number, as the type already says)."""

    field: str
    cases: tuple[tuple[object, Bound], ...]
    otherwise: Optional[Bound] = None

    def bound(self, record: dict) -> Optional[Bound]:
        """The bound for a record whose fields (decoded, defaults filled in) are `record`."""
        value = record.get(self.field)
        return next((b for v, b in self.cases if v == value), self.otherwise)


@dataclass(frozen=True)
class PartOf:
    """A count of part of what another field of the same record counts: from 0 to that field's value."""

    field: str  # "elements"

    def bound(self, record: dict) -> Optional[Bound]:
        whole = record.get(self.field)
        if isinstance(whole, bool) or not isinstance(whole, int):
            return COUNT  # the whole is checked by its own field's bound
        return Bound(0, whole, f"a count (a whole number) from 0 to {self.field} ({whole:,})", whole=True)


SHARE = Bound(0, 1, "a share from 0 to 1")
P_VALUE = Bound(0, 1, "a p-value from 0 to 1")
KAPPA = Bound(-1, 1, "a kappa from -1 to 1")
COSINE = Bound(-1, 1, "a cosine from -1 to 1")
R2 = Bound(-math.inf, 1, "an R² of at most 1")
NON_NEGATIVE = Bound(0, math.inf, "a number >= 0")  # errors (MSE, MAE, RMSE), variances, scales, ranges
# An error that can overflow (the Quantization Debugger's per-layer MSE, computed in float32, and its RMSE/scale):
# written null when it is inf (or NaN), read back as inf, the worst error, so that a re-render ranks it as the run did.
ERROR_OR_INF = Bound(0, math.inf, "a number >= 0, or null (not finite: read as inf)", null=math.inf)
COUNT = Bound(0, MAX_INT, "a count (a whole number >= 0)", whole=True)
INDEX = Bound(0, MAX_INT, "an index (a whole number >= 0)", whole=True)
CULPRIT_INDEX = Bound(-1, MAX_INT, "a layer's index (a whole number >= 0, or -1: not among the debugger's layers)",
                      whole=True)
CLASS_ID = Bound(0, MAX_INT, "a class id (a whole number >= 0)", whole=True)
SIZE = Bound(0, MAX_INT, "a size in bytes (a whole number >= 0)", whole=True)
KIB = Bound(0, MAX_INT / 1024, "a size in KiB (>= 0)")
LATENCY = Bound(0, MAX_LATENCY_MS, f"a latency in ms from 0 to {MAX_LATENCY_MS:g}")
SECONDS = Bound(0, MAX_SECONDS, f"a duration in seconds from 0 to {MAX_SECONDS:g}")
RATIO = Bound(1 / MAX_RATIO, MAX_RATIO, f"a ratio from {1 / MAX_RATIO:g} to {MAX_RATIO:g}")
# judgement.latency_step: 0 a tie, -1 / +1 faster / slower, -2 / +2 more than COUNT_BIG_RATIO times
LATENCY_STEP = Bound(-2, 2, "a latency step (-2, -1, 0, 1 or 2)", whole=True)
CLOCK = Bound(0, 1e6, "a clock in MHz from 0 to 1e6")
QUANT_STEPS = Bound(0, 2**32, "a number of quantization steps from 0 to 2**32")
SEARCH_SHARE = Bound(0, 100, "a share of the seed calls from 0 to 100")  # --search-share: its setting's range
# A main metric: a share (accuracy, mean IoU, mAP@0.5) when its record says so; else the user's, any finite number.
SHARE_IF_SHARE = By("share", ((True, SHARE),))
SCORE_SHARE = By("score_share", ((True, SHARE),))  # a variant's finding: its main metric, by `score_share`
# One output's finding, by what it measures: an accuracy or an agreement with float (a share), or an output MSE.
HEAD_VALUE = By("measure", (("output MSE", NON_NEGATIVE),), otherwise=SHARE)


def figure(bound: Union[Bound, By, PartOf], default: object = dataclasses.MISSING,
           default_factory: object = dataclasses.MISSING) -> dataclasses.Field:
    """A dataclass field carrying `bound` (required when given no default)."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={BOUND: bound})


def bound_of(f: dataclasses.Field, record: dict) -> Optional[Bound]:
    """The bound field `f` carries for a record whose fields are `record` (None: no bound)."""
    bound = f.metadata.get(BOUND)
    return bound if bound is None or isinstance(bound, Bound) else bound.bound(record)


def described(bound: Union[Bound, By, PartOf]) -> str:
    """What a field carrying `bound` must be, in the words of the documentation."""
    if isinstance(bound, Bound):
        return bound.must_be
    if isinstance(bound, PartOf):
        return f"a count (a whole number) from 0 to `{bound.field}`"
    cases = [f"{b.must_be} when `{bound.field}` is {json.dumps(v)}" for v, b in bound.cases]
    return "; ".join(cases) + f"; else {bound.otherwise.must_be if bound.otherwise else 'any finite number'}"


def markdown(root: type) -> str:
    """The bounds of every record reachable from dataclass `root` (the report), as a Markdown table: one row per
    bound, the fields that carry it (docs/report-json.md holds it; tests/test_report_figure_bounds.py checks it)."""
    rows: dict[str, list[str]] = {}
    seen, todo = set(), [root]
    while todo:
        tp = todo.pop(0)
        if tp in seen:
            continue
        seen.add(tp)
        hints = typing.get_type_hints(tp)
        for f in dataclasses.fields(tp):
            if BOUND in f.metadata:
                rows.setdefault(described(f.metadata[BOUND]), []).append(f"`{tp.__name__}.{f.name}`")
            todo.extend(_records(hints[f.name]))
    lines = ["| must be | fields |", "|---|---|"]
    return "\n".join(lines + [f"| {must} | {', '.join(fields)} |" for must, fields in rows.items()]) + "\n"


def _records(tp) -> list[type]:
    """The dataclasses a field of type `tp` holds (in Optional, list and dict too)."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return [tp]
    if isinstance(tp, type) and hasattr(tp, "record_types"):  # records declared by plug-ins (model.figures)
        return tp.record_types()
    return [r for arg in typing.get_args(tp) for r in _records(arg)]
