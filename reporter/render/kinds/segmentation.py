"""The segmentation kind's rows (its figures: reporter.measure.kinds.segmentation.SegmentationMetrics, read by name
here): mean IoU beside pixel accuracy, and each class's IoU after its precision / recall / F1."""

from __future__ import annotations

from reporter.render.kinds import rows as kinds

NAME = "segmentation"


def _mean_iou(metrics):
    found = metrics.figures.get(NAME) if metrics is not None else None
    return found.mean_iou if found is not None else None


def _class_iou(found, i: int) -> str:
    """" · 0.53" (class i's IoU; "–" for a class neither labelled nor predicted); "" without IoU per class."""
    iou = found.iou_per_class
    if iou is None:
        return ""
    return " · " + ("–" if iou[i] is None else f"{iou[i]:.2f}")


ROWS = kinds.register(NAME, kinds.FigureRows(metrics=((_mean_iou, "Mean IoU"),), per_class_text=_class_iou))
