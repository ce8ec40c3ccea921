"""The keypoint kind's rows (its figures: reporter.measure.kinds.keypoints.KeypointMetrics, read by name here):
PCK@0.1, mean OKS and the keypoints float's agree on, in place of a classifier's rows, and PCK@0.1 per keypoint
beside each keypoint's OKS sigma."""

from __future__ import annotations

from reporter.core.formatting import NOT_MEASURED
from reporter.render.kinds import rows as kinds

NAME = "keypoints"


def _figure(field: str):
    """A keypoint model's figure `field` of a variant's Metrics (None without them)."""
    def read(metrics):
        found = metrics.figures.get(NAME) if metrics is not None else None
        return getattr(found, field) if found is not None else None
    return read


def per_keypoint_rows(view, base) -> list:
    """Keypoint (and its OKS sigma), labelled keypoints, then PCK@0.1 per variant, arrowed against float's."""
    from reporter.render.views.common import Cell, Row, metric_arrow, tone  # the views import the kinds' rows

    basis = view.basis
    flt = basis.float.metrics.figures.get(NAME) if basis.float.metrics else None
    rows = []
    for k, labelled in enumerate(base.labelled_per_keypoint):
        cells = [Cell(f"{labelled:,}")]
        for v in basis.ok_columns:
            found = v.metrics.figures.get(NAME) if v.metrics else None
            if found is None:
                cells.append(Cell(NOT_MEASURED))
                continue
            pck = found.pck_per_keypoint[k] if k < len(found.pck_per_keypoint) else None
            ref = flt.pck_per_keypoint[k] if flt is not None and k < len(flt.pck_per_keypoint) else None
            arrow = "" if v is basis.float else metric_arrow(pck, ref)
            shade = tone(arrow, higher_is_better=True) if view.beyond_noise(v.name) else "neutral"
            cells.append(Cell("–" if pck is None else f"{pck:.2f}", arrow, shade))
        sigma = f" (σ {base.sigmas[k]:.3f})" if k < len(base.sigmas) else ""
        rows.append(Row(f"{k}{sigma}", cells))
    return rows


ROWS = kinds.register(NAME, kinds.FigureRows(
    metrics=((_figure("pck"), "PCK@0.1 (within 0.1 of the figure's box diagonal)"),
             (_figure("oks"), "Mean OKS"),
             ("agreement_with_float", "Same keypoints as float (within 0.1 of float's figure)")),
    in_place=True, per_class=per_keypoint_rows))
