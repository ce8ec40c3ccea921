"""What a model's output is (--task): one entry per task kind, saying how it is read, measured and worded.

- `classification`: class scores (softmax), the top score is the class; accuracy, paired by McNemar.
- `binary`: one sigmoid unit, class 1 at or above the threshold; accuracy, paired by McNemar. report.json
  records it as "classification" with `model.binary_sigmoid`.
- `multilabel`: one sigmoid unit per label; exact-match accuracy (every label right), paired by McNemar.
- `segmentation`: class scores at every position (pixel, timestep); mean IoU, paired by a bootstrap over
  whole samples; its accuracy counts pixels.
- `regression`: values compared with the targets and with float; no main metric of its own.
- `mask`: a regression whose output is a mask (sigmoid or softmax values, targets 0/1 or in [0, 1] of its shape):
  compared with the targets and with float, and judged by mask IoU at the threshold (paired by a bootstrap over
  whole samples). Read from the labels only (--task does not name it); report.json records it as "regression"
  with `model.main_metric` "mask IoU".

Adding a kind is one entry here (and, if no existing reading fits, its reader in reporter.run.task_reading).
Code that differs by kind asks the entry (`of`, `recorded`, `reading`); it never compares kind names.
"""

from __future__ import annotations

from dataclasses import dataclass

# How a change of a kind's own main metric is tested for noise (reporter.measure.scoring does the testing).
MCNEMAR = "exact McNemar test on the paired predictions"
BOOTSTRAP = "paired bootstrap over whole samples"
MASK_IOU = "mask IoU"  # the mask kind's main metric (reporter.measure.scoring.MaskIoU measures it)


@dataclass(frozen=True)
class TaskKind:
    """One kind of output: how it is read, its main metric and paired test, and its words."""

    name: str  # what --task names and `Task.kind` returns
    words: str  # "Measured as ...": "a classifier"
    # How the output is read (reporter.measure.task.Task's flags): class scores, one sigmoid unit, a sigmoid per
    # label, class scores at every position. A kind without classes is compared with its targets and float.
    classes: bool = True
    binary_sigmoid: bool = False
    multilabel: bool = False
    dense: bool = False
    mask: bool = False  # no classes: values in [0, 1] judged as a mask (value >= threshold) against the targets'
    named: bool = True  # --task may name it (False: read from the labels only)
    stored_as: str = ""  # `model.task` in report.json (default: the name)
    main_metric: str = "accuracy"  # the metric every verdict reads ("": none; the output error against float)
    paired_test: str = MCNEMAR  # how a change of that metric is tested for noise
    accuracy_label: str = "Accuracy"  # `metrics.accuracy`'s row and second-metric name
    # What the verdicts call `metrics.accuracy` when they read it: a report with no main metric recorded (written
    # before `model.main_metric`, or its float not measured) is judged on this share.
    share_metric: str = "accuracy"
    unit: str = "samples"  # what a share of predictions counts ("predicts class 3 for 40 % of ...")
    counted_as: str = "classes"  # after the number of classes: "10 classes"
    class_count_compared: bool = True  # two reports' models differ when their numbers of classes do (diff)
    per_class_title: str = "Per class"
    per_class_columns: str = "precision / recall / F1"

    @property
    def recorded_name(self) -> str:
        return self.stored_as or self.name


KINDS: tuple[TaskKind, ...] = (
    TaskKind("classification", "a classifier"),
    TaskKind("binary", "a binary classifier", binary_sigmoid=True, stored_as="classification",
             class_count_compared=False),
    TaskKind("multilabel", "multi-label", multilabel=True, main_metric="exact-match accuracy",
             accuracy_label="Exact-match accuracy", share_metric="exact-match accuracy", counted_as="labels (multi-label)", class_count_compared=False,
             per_class_title="Per label",
             per_class_columns="precision / recall / F1 · accuracy · ROC AUC (coloured where the label's own McNemar"
                               " test against float is beyond noise)"),
    TaskKind("segmentation", "segmentation (a class at every position)", dense=True, main_metric="mean IoU",
             paired_test=BOOTSTRAP, accuracy_label="Pixel accuracy", unit="pixels",
             per_class_title="Per class, over pixels", per_class_columns="precision / recall / F1 · IoU"),
    TaskKind("regression", "a regression", classes=False, main_metric="", paired_test="",
             class_count_compared=False),
    TaskKind("mask", "a regression of a mask", classes=False, mask=True, named=False, stored_as="regression",
             main_metric=MASK_IOU, paired_test=BOOTSTRAP, accuracy_label="Mask IoU", share_metric=MASK_IOU,
             unit="pixels", class_count_compared=False),
)
NAMES: tuple[str, ...] = tuple(k.name for k in KINDS if k.named)  # what --task may name, in this order
_BY_NAME = {k.name: k for k in KINDS}


def of(name: str) -> TaskKind:
    """The kind --task and `Task.kind` name; KeyError for a name that is not one."""
    return _BY_NAME[name]


def reading(classes: bool, binary_sigmoid: bool = False, multilabel: bool = False, dense: bool = False,
            mask: bool = False) -> TaskKind:
    """The kind whose reading of the output this is (a Task's flags)."""
    flags = (classes, binary_sigmoid, multilabel, dense, mask)
    found = next((k for k in KINDS if (k.classes, k.binary_sigmoid, k.multilabel, k.dense, k.mask) == flags), None)
    if found is None:
        raise ValueError(f"no task kind reads an output as classes={classes}, binary_sigmoid={binary_sigmoid},"
                         f" multilabel={multilabel}, dense={dense}, mask={mask}")
    return found


def recorded(task: str, binary_sigmoid: bool, has_classes: bool) -> TaskKind:
    """The kind of a model as report.json records it: `model.task`, `model.binary_sigmoid` and whether it counts
    classes (`model.num_classes`). A name it does not hold reads as a classifier or a regression by its classes."""
    found = next((k for k in KINDS if k.recorded_name == task and k.binary_sigmoid == binary_sigmoid
                  and k.classes == has_classes), None)
    return found or reading(has_classes, binary_sigmoid and has_classes)
