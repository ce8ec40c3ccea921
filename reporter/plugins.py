"""The composition root: the built-in plug-ins (task kinds, targets, repair rungs) registered by the entry points.

The registries sit low (reporter.core.tasks, reporter.core.targets, reporter.convert.rungs) and never import the
plug-ins above them; the command line, the Python API and, through reporter.core.children and the Ray pool, every
child process they start call `register_builtins()` first.
"""

from __future__ import annotations

from reporter.core import children


def register_builtins() -> None:
    """Registers the built-in task kinds, targets and repair rungs in this process and in every child it starts from
    now on; a second call does nothing."""
    from reporter.convert import rungs  # noqa: F401 - its REGISTRY holds the built-in rungs, in ladder order
    from reporter.core import targets  # noqa: F401 - its FAMILIES hold the built-in targets
    from reporter.measure import kinds  # noqa: F401 - importing it registers the built-in kinds in core.tasks

    children.at_start(register_builtins)
