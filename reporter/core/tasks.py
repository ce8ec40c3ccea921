"""What a model's output is (--task): the task-kind protocol's declared part, and the registry of kinds.

A kind is one module of reporter.measure.kinds (classification, binary, multilabel, segmentation, regression,
mask), one `TaskKind` subclass there: what it declares here (its name, words, how report.json records it, its
main metric and paired test) is what the report's records, findings and render read, without TensorFlow; how
it reads labels and outputs and measures them is reporter.measure.kinds.base.Kind's part of the protocol.

Registering a kind is one line, `register(MyKind())` (reporter.measure.kinds.register is the same function).
The registry never loads kinds itself: the entry points fill it (reporter.plugins.register_builtins imports
reporter.measure.kinds, which registers the built-in ones), so nothing here reaches the layers above.
Code that differs by kind asks the kind object (`of`, `recorded`, `Task.kind`); it never compares kind names.
"""

from __future__ import annotations

from dataclasses import dataclass

# How a change of a kind's own main metric is tested for noise (reporter.measure.scoring does the testing).
MCNEMAR = "exact McNemar test on the paired predictions"
BOOTSTRAP = "paired bootstrap over whole samples"


@dataclass(frozen=True)
class Record:
    """How report.json records a kind: `model.task` and `model.binary_sigmoid` (the format old reports keep)."""

    task: str
    binary_sigmoid: bool = False


class TaskKind:
    """One kind of output, as the report names and words it. Subclass it (through reporter.measure.kinds.base.Kind)
    and set these class attributes; the defaults are a classifier's."""

    name: str = ""  # what --task names and `Task.kind.name` returns
    words: str = ""  # "Measured as ...": "a classifier"
    named: bool = True  # --task may name it (False: read from the labels only)
    has_classes: bool = True  # counts classes (`model.num_classes`); else compared with its targets and float
    main_metric: str = "accuracy"  # the metric every verdict reads ("": none; the output error against float)
    paired_test: str = MCNEMAR  # how a change of that metric is tested for noise
    accuracy_label: str = "Accuracy"  # `metrics.accuracy`'s row and second-metric name
    # What the verdicts call `metrics.accuracy` when they read it: a report with no main metric recorded (written
    # before `model.main_metric`, or its float not measured) is judged on this share.
    share_metric: str = "accuracy"
    # That share is the share of samples right (a classifier's accuracy): its moves are said in plain points ("4.3
    # accuracy points"), not "4.3 points of mAP@0.5". Words ask this (Report.metric_plain); they never compare names.
    plain_points: bool = True
    unit: str = "samples"  # what a share of predictions counts ("predicts class 3 for 40 % of ...")
    counted_as: str = "classes"  # after the number of classes: "10 classes"
    class_count_compared: bool = True  # two reports' models differ when their numbers of classes do (diff)
    # Its output row is class scores whose top one is the prediction: two kernel sets' "same top class" is said.
    # (Not for a sigmoid per label, nor a detector's packed boxes, classes and scores.)
    top_class: bool = True
    per_class_title: str = "Per class"
    per_class_columns: str = "precision / recall / F1"

    @property
    def record(self) -> Record:
        """`model.task` (and `model.binary_sigmoid`) in report.json: the kind's name unless it says otherwise."""
        return Record(self.name)

    @property
    def recorded_name(self) -> str:
        return self.record.task

    def __repr__(self) -> str:
        return f"<task kind {self.name}>"


_KINDS: dict[str, TaskKind] = {}


def register(kind: TaskKind) -> TaskKind:
    """Add `kind` to the registry (after the kinds already there: `recorded` prefers the earlier of two kinds
    recorded alike); a ValueError for a name already taken. Returns the kind."""
    if not kind.name:
        raise ValueError(f"{type(kind).__name__} has no name")
    if kind.name in _KINDS:
        raise ValueError(f"a task kind named {kind.name!r} is already registered")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Take the kind `name` out of the registry (a test's kind, after the test)."""
    _KINDS.pop(name, None)


def _kinds() -> dict[str, TaskKind]:
    if not _KINDS:  # a program error, not the user's: a process that skipped its entry point's registration
        raise RuntimeError("no task kind is registered: call reporter.plugins.register_builtins() first (the"
                           " command line, the Python API and the children they start do)")
    return _KINDS


def kinds() -> tuple[TaskKind, ...]:
    """Every registered kind, in the order registered."""
    return tuple(_kinds().values())


def names() -> tuple[str, ...]:
    """What --task may name, in the registry's order."""
    return tuple(k.name for k in kinds() if k.named)


def of(name: str) -> TaskKind:
    """The kind --task and `Task.kind` name; KeyError for a name that is not one."""
    return _kinds()[name]


class Unloaded(TaskKind):
    """A kind report.json records that no kind registered here records: a plug-in's (--plugin) this process has not
    loaded. Never a classifier by default: it stands for the kind with what the report stores of it (its name, its
    main metric's name, whether it counts classes); its words, verdicts and figures are the report's own, as stored.
    `render` shows such a report and says which plug-in made it; `diff` and `--baseline` refuse to compare it."""

    named = False
    plain_points = False  # its share is its own metric's: "4.3 points of top-2 accuracy"

    def __init__(self, task: str, has_classes: bool, main_metric: str = ""):
        self.name = task
        self.words = f"a {task} model (a plug-in's kind, not loaded here)"
        self.has_classes = has_classes
        if main_metric:
            self.main_metric = self.share_metric = main_metric
            self.accuracy_label = main_metric[:1].upper() + main_metric[1:]


def recorded(task: str, binary_sigmoid: bool, has_classes: bool, main_metric: str = "") -> TaskKind:
    """The kind of a model as report.json records it: `model.task`, `model.binary_sigmoid` and whether it counts
    classes (`model.num_classes`). A name some kind records, but not with these classes, reads as the first kind
    recorded as a classifier (or, without classes, a regression) that counts classes as the record does. A name no
    kind records is a plug-in's not loaded here: `Unloaded`, with the report's `main_metric`, never a classifier."""
    if not any(k.record.task == task for k in kinds()):
        return Unloaded(task, has_classes, main_metric)
    binary_sigmoid = binary_sigmoid and has_classes
    for name in (task, "classification" if has_classes else "regression"):
        found = next((k for k in kinds() if k.record == Record(name, binary_sigmoid) and k.has_classes == has_classes),
                     None)
        if found is not None:
            return found
    raise KeyError(f"no task kind is recorded as {task!r} (binary_sigmoid={binary_sigmoid}, classes={has_classes})")


def __getattr__(name: str):
    """`NAMES` and `KINDS`, read from the registry when asked (a kind registered later is in them)."""
    if name == "NAMES":
        return names()
    if name == "KINDS":
        return kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
