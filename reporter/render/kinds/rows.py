"""A kind's rows in the quality views and its words (`FigureRows`), and their registry by kind name
(reporter.render.kinds)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

_ROWS: dict[str, "FigureRows"] = {}


@dataclass(frozen=True)
class FigureRows:
    """A kind's rows and words: metric rows (label, and the value read from a variant's Metrics: a function, or the name of
    a Metrics field), whether they stand in place of a classifier's, and its per-class table or per-class words."""

    metrics: tuple = ()  # ((value of Metrics or field name, label), ...)
    in_place: bool = False  # the classifier's rows are not shown (a detector's packed boxes have no precision)
    # its own per-class table: (the quality view, the first measured variant's figures) -> rows
    per_class: Optional[Callable] = None
    # words added to class i's cell of the classifier's per-class table: (its figures, i) -> " · 0.53"
    per_class_text: Optional[Callable] = None
    # words after the sentence of a clipping output of the kind's model: (the ClippedOutput, classes) -> " Class ..."
    clipped: Optional[Callable] = None


def register(name: str, rows: FigureRows) -> FigureRows:
    """The rows of the kind `name`'s figures. Returns them."""
    _ROWS[name] = rows
    return rows


def unregister(name: str) -> None:
    """Take the rows of the kind `name` out (a test's kind, after the test)."""
    _ROWS.pop(name, None)


def of(name: str) -> Optional[FigureRows]:
    """The rows and words of the kind `name` (None: it declares none)."""
    return _ROWS.get(name)


def shown(metrics_of) -> list[tuple[str, FigureRows]]:
    """(kind name, its rows) for every kind whose figures one of `metrics_of` (Metrics or None) holds, in the order
    registered."""
    held = {name for m in metrics_of if m is not None for name in m.figures}
    return [(name, rows) for name, rows in _ROWS.items() if name in held]
