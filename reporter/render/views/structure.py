"""Section 4, model structure: tensor types, size and latency, and operators per variant, each arrowed
against the float model."""

from __future__ import annotations

from functools import cached_property

from reporter.core.formatting import NOT_MEASURED, fmt_bytes, fmt_ms, fmt_percent, or_missing
from reporter.core.targets import SUB_BYTE_KEYS
from reporter.render.views.common import ARROWS, Basis, Cell, Row, count_arrow, tone

TENSOR_TYPES = (("int8", "Int8"), ("int16", "Int16"), ("int32", "Int32"), ("float32", "Float32"),
                ("other", "Other"), ("total", "Total"))


class StructureView:
    """The tensor-type, size-and-latency and operator tables."""

    def __init__(self, basis: Basis):
        self.basis = basis

    @cached_property
    def tensor_rows(self) -> list[Row]:
        ref = self.basis.float
        rows = []
        ref_ok = ref is not None and not ref.not_measured("ops")
        sub_byte = [(key, key.capitalize()) for key in SUB_BYTE_KEYS
                    if any(v.tensor_types.get(key) for v in self.basis.ok_columns)]  # rows only where there are some
        for key, label in TENSOR_TYPES[:1] + tuple(sub_byte) + TENSOR_TYPES[1:]:
            cells = []
            for v in self.basis.ok_columns:
                if v.not_measured("ops"):
                    cells.append(Cell(NOT_MEASURED))
                    continue
                value = v.tensor_types.get(key, 0)
                arrow = "" if v is ref or not ref_ok else count_arrow(value, ref.tensor_types.get(key, 0))
                cells.append(Cell(f"{value:,}", arrow))
            rows.append(Row(label, cells))
        return rows

    @cached_property
    def size_latency_rows(self) -> list[Row]:
        ref = self.basis.float

        def cells(get, fmt, arrow_of):
            out = []
            for v in self.basis.ok_columns:
                arrow = "" if v is ref or ref is None else arrow_of(v)
                out.append(Cell(or_missing(get(v), fmt), arrow, tone(arrow, higher_is_better=False)))
            return out

        def latency_arrow(v):  # the timing-noise rule (the findings'): medians further apart than either's spread
            found = self.basis.findings.variant(v.name)
            step = found.latency_vs_float if found is not None else None
            return "" if step is None else ARROWS[step]

        size = lambda v: v.size_bytes  # noqa: E731
        return [
            Row("Size", cells(size, fmt_bytes, lambda v: count_arrow(size(v), size(ref)))),
            Row("Latency, median", cells(lambda v: v.latency_ms.median if v.latency_ms else None, fmt_ms,
                                         latency_arrow)),
            Row("Latency, p90", cells(lambda v: v.latency_ms.p90 if v.latency_ms else None, fmt_ms,
                                      lambda v: "")),  # the spread the median's arrow weighs, not judged on its own
        ]

    @cached_property
    def weight_rows(self) -> list[Row]:
        """Per op type, each model's weight tensors stored below float32 out of those it has ("2 of 3"), then the
        share of the weight values; no rows when no model's weights were read (reports written before)."""
        columns = self.basis.ok_columns
        names = sorted({op for v in columns for op in v.weight_coverage})
        if not names:
            return []
        rows = []
        for op in names:
            cells = []
            for v in columns:
                c = v.weight_coverage.get(op)
                cells.append(Cell(NOT_MEASURED if v.not_measured("ops") else f"{c.quantized} of {c.tensors}"
                                  if c is not None else "·"))
            rows.append(Row(op, cells))
        rows.append(Row("Weight values", [Cell(NOT_MEASURED if v.not_measured("ops") else fmt_percent(v.weights_share(), 0))
                                          for v in columns]))
        return rows

    @cached_property
    def op_rows(self) -> list[Row]:
        names = sorted({op for v in self.basis.ok_columns for op in v.ops})
        ref = self.basis.float
        ref_ok = ref is not None and not ref.not_measured("ops")
        rows = []
        for op in names:
            cells = []
            for v in self.basis.ok_columns:
                if v.not_measured("ops"):
                    cells.append(Cell(NOT_MEASURED))
                    continue
                value = v.ops.get(op, 0)
                arrow = "" if v is ref or not ref_ok else count_arrow(value, ref.ops.get(op, 0))
                cells.append(Cell(f"{value:,}" if value else "·", arrow))
            rows.append(Row(op, cells))
        return rows
