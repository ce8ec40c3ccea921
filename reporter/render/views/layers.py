"""Section 3, per-layer errors: the debugger's (or the comparison's) layer table with the layers that
matter first, and every quantized variant against float, tensor by tensor."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from reporter.core.formatting import fmt_number
from reporter.core.variants import short
from reporter.model.report import RMSE_OVER_SCALE_IDEAL, LayerStat
from reporter.render.views.common import Basis


ELLIPSIS = "\u2026"
MIN_KEPT = 3  # characters kept on each side of the "…" for a piece of text to be taken for a shortened name


def report_names(report) -> tuple[str, ...]:
    """Every one-line text the report holds (tensor names among them), sorted: the full names that the shortened
    ones in its prose and tables stand for (the search's step labels keep only a name's head and tail)."""
    found = set()

    def walk(value):
        if isinstance(value, str):
            if MIN_KEPT < len(value) <= 2000 and "\n" not in value and ELLIPSIS not in value:
                found.add(value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                walk(getattr(value, f.name))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(key)
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(report)
    return tuple(sorted(found))


def _overlap_before(text: str, end: int, start: int, name: str) -> int:
    """The longest head of `name` that `text[:end]` ends with (not reaching before `start`); 0 if none."""
    for h in range(min(len(name) - 1, end - start), 0, -1):
        if text.startswith(name[:h], end - h):
            return h
    return 0


def _overlap_after(text: str, begin: int, name: str, limit: int) -> int:
    """The longest tail of `name` (at most `limit` long) that `text[begin:]` starts with; 0 if none."""
    for t in range(min(limit, len(text) - begin), 0, -1):
        if text.startswith(name[len(name) - t:], begin):
            return t
    return 0


def name_pieces(text: str, names) -> tuple[tuple[str, str], ...]:
    """`text` cut into (piece, full name) pairs: a piece that is a name shortened in the middle with "…" (its head,
    "…", its tail) carries the one of `names` it stands for, every other piece "" (their concatenation is `text`)."""
    pieces, start = [], 0
    i = text.find(ELLIPSIS)
    while i >= 0:
        before, after = text[max(start, i - MIN_KEPT):i], text[i + 1:i + 1 + MIN_KEPT]
        best = None  # (kept characters, -len(name), name, head)
        if len(before) == MIN_KEPT and len(after) == MIN_KEPT:
            for name in names:
                if before not in name or after not in name:
                    continue
                h = _overlap_before(text, i, start, name)
                if h < MIN_KEPT:
                    continue
                t = _overlap_after(text, i + 1, name, len(name) - h - 1)
                if t >= MIN_KEPT and (best is None or (h + t, -len(name)) > best[:2]):
                    best = (h + t, -len(name), name, h)
        if best is not None:
            kept, _, name, h = best
            if i - h > start:
                pieces.append((text[start:i - h], ""))
            end = i + 1 + kept - h
            pieces.append((text[i - h:end], name))
            start = end
        i = text.find(ELLIPSIS, max(i + 1, start))
    if start < len(text) or not pieces:
        pieces.append((text[start:], ""))
    return tuple(pieces)


@dataclass(frozen=True)
class LayerRow:
    layer: LayerStat
    num_elements: str
    scale: str
    range: str
    rmse_over_scale: str
    max_abs_error: str
    reasons: str
    propagated: str = "–"
    kept: bool = False  # in the recommended model's float layers


@dataclass(frozen=True)
class SchemeErrorRow:
    index: int
    op: str
    tensor: str
    snr: str
    snr_drop: str
    cosine: str
    weight_snr: str
    blamed: bool


@dataclass(frozen=True)
class SchemeErrors:
    """One quantized variant's per-layer error against float."""

    name: str
    label: str
    rows: list  # SchemeErrorRow, the layers that lose the most SNR first (at most SCHEME_ROWS)
    total: int
    csv: str  # the file beside the report with every row
    summary: str  # what the comparison covered, and the finding when the variant loses accuracy
    error: str = ""

    @property
    def truncated(self) -> bool:
        """Some of the variant's rows are only in its CSV file."""
        return bool(self.rows) and self.total > len(self.rows)


class LayersView:
    """The layer tables and the per-variant tensor comparisons."""

    TOP_LAYERS = 15  # with more layers than this, the top ones first and the full table after
    SCHEME_ROWS = 10  # per variant; every row is in its CSV file

    def __init__(self, basis: Basis):
        self.basis = basis

    @cached_property
    def names(self) -> tuple[str, ...]:
        """The report's full names, for `name_pieces` (the HTML titles each shortened name with its full name)."""
        return report_names(self.basis.report)

    def name_pieces(self, text: str) -> tuple[tuple[str, str], ...]:
        """`text` cut around the shortened names in it, each with its full name (see `name_pieces`)."""
        return name_pieces(str(text), self.names) if ELLIPSIS in str(text) else ((str(text), ""),)

    @property
    def threshold_text(self) -> str:
        """The rmse/scale rule's threshold in this report."""
        rec = self.basis.report.recommendation
        return f"{rec.threshold:g}" if rec else ""

    @property
    def rmse_ideal(self) -> str:
        return f"{RMSE_OVER_SCALE_IDEAL:.3f}"

    @property
    def layers_from_comparison(self) -> bool:
        """The FIQ layer table comes from comparing LiteRT Quantizer's model with float, not from TF's debugger."""
        rec = self.basis.report.recommendation
        return rec is not None and rec.quantizer == "litert-quantizer"

    @cached_property
    def kept_names(self) -> set:
        rec = self.basis.report.recommendation
        return set(rec.denylisted_nodes) if rec and rec.selective else set()

    @cached_property
    def layer_rows(self) -> list[LayerRow]:
        return [
            LayerRow(
                layer=layer,
                num_elements=f"{layer.num_elements:,.0f}",
                scale=fmt_number(layer.scale),
                range=fmt_number(layer.range),
                rmse_over_scale=f"{layer.rmse_over_scale:.3f}",
                max_abs_error=fmt_number(layer.max_abs_error),
                reasons="; ".join(layer.reasons),
                propagated="–" if layer.propagated_rmse_over_scale is None else f"{layer.propagated_rmse_over_scale:.3f}",
                kept=layer.tensor_name in self.kept_names,
            )
            for layer in self.basis.report.layers
        ]

    @cached_property
    def top_layer_rows(self) -> list[LayerRow]:
        """Kept layers first, then the largest local or propagated error, in model order."""
        rows = self.layer_rows
        if len(rows) <= self.TOP_LAYERS:
            return rows

        def weight(row):
            layer = row.layer
            return (row.kept, layer.suspect, max(layer.rmse_over_scale, layer.propagated_rmse_over_scale or 0.0))

        top = sorted(rows, key=weight, reverse=True)[: self.TOP_LAYERS]
        return sorted(top, key=lambda row: row.layer.index)

    @property
    def layers_truncated(self) -> bool:
        return len(self.layer_rows) > len(self.top_layer_rows)

    @cached_property
    def scheme_errors(self) -> list[SchemeErrors]:
        """Every quantized variant against float, tensor by tensor (any converter, any scheme)."""
        out = []
        for v in self.basis.report.variants:
            errors = v.layer_errors
            if errors is None:
                continue
            label = short(v.name)
            if errors.error:
                out.append(SchemeErrors(v.name, label, [], 0, "", "", error=errors.error))
                continue
            if all(e.snr_db is None for e in errors.layers):
                out.append(SchemeErrors(v.name, label, [], len(errors.layers), f"layer_errors_{v.name}.csv",
                                        f"Every one of the {len(errors.layers)} op outputs compared equals float's"
                                        f" exactly on {errors.samples} samples: quantization changed nothing"
                                        " this comparison can see."))
                continue
            found = self.basis.findings.variant(v.name)
            blames = found is not None and found.blame is not None  # only a variant that loses accuracy blames
            order = sorted(errors.layers, key=lambda e: (e.tensor_name != errors.culprit, not e.error_starts_here,
                                                         -(e.snr_drop_db if e.snr_drop_db is not None else -1e9),
                                                         e.index))
            rows = [SchemeErrorRow(
                index=e.index, op=e.op_name, tensor=e.tensor_name,
                snr="no error" if e.snr_db is None else f"{e.snr_db:.1f}",
                snr_drop="all of it" if e.error_starts_here else
                ("–" if e.snr_drop_db is None else f"{e.snr_drop_db:+.1f}".replace("-", "−")),
                cosine="not finite" if e.cosine is None else f"{e.cosine:.4f}",
                weight_snr="–" if e.weight_snr_db is None else f"{e.weight_snr_db:.1f}",
                blamed=e.tensor_name == errors.culprit and blames) for e in order[: self.SCHEME_ROWS]]
            covered = (errors.note.rstrip(".") + ".") if errors.note else (
                f"{len(errors.layers)} op outputs compared on {errors.samples} calibration samples"
                + (f"; {errors.unmatched} could not be matched with a float tensor" if errors.unmatched else "") + ".")
            summary = (found.blame.text + " " if found and found.blame else "") + covered
            out.append(SchemeErrors(v.name, label, rows, len(errors.layers), f"layer_errors_{v.name}.csv", summary))
        return out
