"""An output's task kind for a run: --task by output name, and each output of several read from its labels.

Reading a kind from an output and its labels is reporter.measure.kinds.reading's (`read_task`), each kind's own
check of labels the user named it for is its module's `recognise`.
"""

from __future__ import annotations

from typing import Optional

from reporter.core import tasks
from reporter.core.errors import InputError
from reporter.measure.kinds.base import LabelSource, TaskReading
from reporter.measure.kinds.reading import read_task
from reporter.measure.measurer import HeadSpec
from reporter.measure.signature import Signature
from reporter.measure.task import Task
from reporter.inputs.labels import Head
from reporter.inputs.settings import RunSettings

__all__ = ["LabelSource", "TaskReading", "forced_tasks", "head_spec", "read_task"]


def forced_tasks(s: RunSettings, sig: Signature, model_path) -> dict[str, str]:
    """--task by output name: "KIND" alone names the primary output's (the only one's) task; "OUTPUT=KIND"
    must name an output."""
    given = s.tasks()
    names = [p.name for p in sig.outputs]
    unknown = [n for n in given if n and n not in names]
    if unknown:
        raise InputError(model_path, f"--task {unknown[0]}=...: the model has no output {unknown[0]} (outputs:"
                                     f" {', '.join(names)})")
    found = {n: k for n, k in given.items() if n}
    if "" in given:
        lead = s.primary_output or names[0]
        if len(names) > 1 and not s.primary_output:
            raise InputError(model_path, f"--task {given['']}: the model has {len(names)} outputs"
                                         f" ({', '.join(names)}); say which, e.g. --task {names[0]}={given['']}")
        found.setdefault(lead, given[""])
    return found


def head_spec(head: Head, source: str, made_by: str, threshold: float, forced: Optional[str] = None) -> HeadSpec:
    """What an output of a model with several outputs means: from its labels (classes, binary sigmoid,
    regression), or without labels from its width and the op that makes it (`made_by`): class scores, one
    sigmoid unit (LOGISTIC), or a value compared with float."""
    size = head.port.size
    y = head.y
    if y is not None:
        reading = read_task(LabelSource(y, head.labels_are_classes, source, f"y_{head.port.name}"), head.port,
                            made_by, threshold, forced)
        task, y = reading.task.as_head(), reading.y
    elif forced is not None:
        shape = tuple(head.port.allocated or head.port.shape)[1:]
        task = Task.of(tasks.of(forced), size, shape, threshold)
    elif size == 1 and made_by == "LOGISTIC":
        task = Task(tasks.of("binary"), 2, threshold)
    elif size > 1 and made_by == "LOGISTIC":
        task = Task(tasks.of("multilabel"), size, threshold)
    else:
        task = Task(tasks.of("classification"), size) if size > 1 else Task(tasks.of("regression"))
    return HeadSpec(head.port.name, head.port.key, task, y, head.primary)
