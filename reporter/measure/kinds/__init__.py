"""Task kinds as plug-ins: one module per kind behind one protocol (base.Kind), registered in one line each."""

from reporter.core.tasks import kinds, names, of, recorded, register, unregister
from reporter.measure.kinds import binary, classification, detection, mask, multilabel, regression, segmentation
from reporter.measure.kinds import keypoints
from reporter.measure.kinds import yolo

# The built-in kinds, in the order --task lists them and `recorded` prefers them (regression before mask: both
# are recorded as "regression"). A kind of one's own is `register(MyKind())`.
register(classification.KIND)
register(binary.KIND)
register(multilabel.KIND)
register(yolo.KIND)  # before segmentation, which would read a one-class v8 [5, A]'s labels (rows of 5) per position
register(segmentation.KIND)
register(regression.KIND)
register(mask.KIND)
register(detection.KIND)
register(keypoints.KIND)

__all__ = ["kinds", "names", "of", "recorded", "register", "unregister"]
