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


def figure(kind: str, field: str) -> Callable:
    """A metric row's value: the kind `kind`'s figure `field` of a variant's Metrics (None without them)."""
    def read(metrics):
        found = metrics.figures.get(kind) if metrics is not None else None
        return getattr(found, field) if found is not None else None
    return read


def per_item_rows(view, kind: str, field: str, heads: list[tuple[str, str]]) -> list:
    """A table of one figure per item (a class's AP@0.5, a keypoint's PCK): for each item, its head cells (`heads`:
    (row label, first cell), e.g. ("3", "120" labelled boxes)), then the kind's list `field` at that item per variant,
    arrowed against float's and coloured only where the variant differs from float beyond noise."""
    from reporter.core.formatting import NOT_MEASURED
    from reporter.render.views.common import Cell, Row, metric_arrow, tone  # the views import the kinds' rows

    basis = view.basis
    flt = basis.float.metrics.figures.get(kind) if basis.float.metrics else None
    reference = getattr(flt, field) if flt is not None else []
    rows = []
    for i, (label, first) in enumerate(heads):
        cells = [Cell(first)]
        for v in basis.ok_columns:
            found = v.metrics.figures.get(kind) if v.metrics else None
            if found is None:
                cells.append(Cell(NOT_MEASURED))
                continue
            values = getattr(found, field)
            value = values[i] if i < len(values) else None
            ref = reference[i] if i < len(reference) else None
            arrow = "" if v is basis.float else metric_arrow(value, ref)
            shade = tone(arrow, higher_is_better=True) if view.beyond_noise(v.name) else "neutral"
            cells.append(Cell("–" if value is None else f"{value:.2f}", arrow, shade))
        rows.append(Row(label, cells))
    return rows


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
