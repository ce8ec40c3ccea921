"""The detection kind's rows and words (its figures: reporter.measure.kinds.detection.DetectionMetrics, read by name
here): mAP@0.5, COCO mAP, recall at IoU 0.5 in place of a classifier's rows, AP@0.5 per class, and what a clipping
classes output does to the class ids."""

from __future__ import annotations

from reporter.render.kinds import rows as kinds

NAME = "detection"


def per_class_rows(view, base) -> list:
    """Class id, labelled boxes, then AP@0.5 per variant, arrowed against float's."""
    return kinds.per_item_rows(view, NAME, "ap50_per_class",
                               [(str(c), f"{support:,}") for c, support in enumerate(base.boxes_per_class)])


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
    metrics=((kinds.figure(NAME, "map50"), "mAP@0.5"),
             (kinds.figure(NAME, "map"), "COCO mAP@[.5:.95]"),
             (kinds.figure(NAME, "recall50"), "Recall at IoU 0.5 (every detection the model returns)"),
             ("agreement_with_float", "Same classes as float (every detection of an image)")),
    in_place=True, per_class=per_class_rows, clipped=class_ids))
