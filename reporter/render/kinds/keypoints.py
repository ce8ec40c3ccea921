"""The keypoint kind's rows (its figures: reporter.measure.kinds.keypoints.KeypointMetrics, read by name here):
PCK@0.1, mean OKS and the keypoints float's agree on, in place of a classifier's rows, and PCK@0.1 per keypoint
beside each keypoint's OKS sigma."""

from __future__ import annotations

from reporter.render.kinds import rows as kinds

NAME = "keypoints"


def per_keypoint_rows(view, base) -> list:
    """Keypoint (and its OKS sigma), labelled keypoints, then PCK@0.1 per variant, arrowed against float's."""
    heads = [(f"{i}" + (f" (σ {base.sigmas[i]:.3f})" if i < len(base.sigmas) else ""), f"{labelled:,}")
             for i, labelled in enumerate(base.labelled_per_keypoint)]
    return kinds.per_item_rows(view, NAME, "pck_per_keypoint", heads)


ROWS = kinds.register(NAME, kinds.FigureRows(
    metrics=((kinds.figure(NAME, "pck"), "PCK@0.1 (within 0.1 of the figure's box diagonal)"),
             (kinds.figure(NAME, "oks"), "Mean OKS"),
             ("agreement_with_float", "Same keypoints as float (within 0.1 of float's figure)")),
    in_place=True, per_class=per_keypoint_rows))
