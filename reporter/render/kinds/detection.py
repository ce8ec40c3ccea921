"""The detection kind's rows and words (its figures: reporter.measure.kinds.detection.DetectionMetrics, read by name
here): mAP@0.5, COCO mAP, recall at IoU 0.5 in place of a classifier's rows, AP@0.5 per class, and what a clipping
classes output does to the class ids."""

from __future__ import annotations

from reporter.core.formatting import NOT_MEASURED
from reporter.render.kinds import rows as kinds

NAME = "detection"


def _figure(field: str):
    """A detector's figure `field` of a variant's Metrics (None without them)."""
    def read(metrics):
        found = metrics.figures.get(NAME) if metrics is not None else None
        return getattr(found, field) if found is not None else None
    return read


def per_class_rows(view, base) -> list:
    """Class id, labelled boxes, then AP@0.5 per variant, arrowed against float's."""
    from reporter.render.views.common import Cell, Row, metric_arrow, tone  # the views import the kinds' rows

    basis = view.basis
    flt = basis.float.metrics.figures.get(NAME) if basis.float.metrics else None
    rows = []
    for c, support in enumerate(base.boxes_per_class):
        cells = [Cell(f"{support:,}")]
        for v in basis.ok_columns:
            det = v.metrics.figures.get(NAME) if v.metrics else None
            if det is None:
                cells.append(Cell(NOT_MEASURED))
                continue
            ap = det.ap50_per_class[c] if c < len(det.ap50_per_class) else None
            ref = flt.ap50_per_class[c] if flt is not None and c < len(flt.ap50_per_class) else None
            arrow = "" if v is basis.float else metric_arrow(ap, ref)
            shade = tone(arrow, higher_is_better=True) if view.beyond_noise(v.name) else "neutral"
            cells.append(Cell("–" if ap is None else f"{ap:.2f}", arrow, shade))
        rows.append(Row(str(c), cells))
    return rows


def class_ids(clip, num_classes) -> str:
    """A detector's class ids read from a clipping output: rounded to whole numbers, so that every class above the
    range's top reads as the top one ("" for any other output, or a range that holds every class)."""
    top = int(round(clip.high))
    if clip.part != "classes" or num_classes is None or top >= num_classes - 1:
        return ""
    above = f"class {num_classes - 1}" if top == num_classes - 2 else f"classes {top + 1} to {num_classes - 1}"
    return f" Class ids are read rounded to whole numbers, so {above} read{'s' if top == num_classes - 2 else ''} as" \
           f" class {top}."


ROWS = kinds.register(NAME, kinds.FigureRows(
    metrics=((_figure("map50"), "mAP@0.5"),
             (_figure("map"), "COCO mAP@[.5:.95]"),
             (_figure("recall50"), "Recall at IoU 0.5 (every detection the model returns)"),
             ("agreement_with_float", "Same classes as float (every detection of an image)")),
    in_place=True, per_class=per_class_rows, clipped=class_ids))
