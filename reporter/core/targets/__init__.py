"""Where the shipped model runs (--target): the registry of target plug-ins, one module per family.

Each family module of `FAMILIES` declares its targets (reporter.core.targets.base.Target: what runs there, how
accuracy is measured there, the cost, the words) and its --target help; registering a family is one line of
`FAMILIES` (or `register(module)`). Every list of targets the tool shows (the --target help and choices, the error
naming the known ones) is read from here, and code that differs by target asks its Target, never its name. Pure and
typed: reporter.findings.decision reads these rules; reporter.inputs.settings offers the names.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Optional

from reporter.core.targets import cpu, ethos_u, gpu, int8, micro
from reporter.core.targets.base import (COST_SAME, DEFAULT_KERNELS, REFERENCE_KERNELS,  # noqa: F401
                                        REFERENCE, REFERENCE_SAMPLES, Check, Checked, Target, Tools)
from reporter.core.targets.rules import (HOST_OPS, INT16_STATE_OPS, INTEGER_KEYS, SUB_BYTE_KEYS, anything,  # noqa: F401
                                         float_compute, int8_spec, integer_only, integer_tensors, on_host,
                                         quantized)

FAMILIES: list[ModuleType] = [cpu, int8, gpu, micro, ethos_u]  # each: TARGETS (Target, ...) and HELP (str)

CPU, INT8, GPU = cpu.NAME, int8.NAME, gpu.NAME  # the targets code and tests name; the rest are read from the registry
DEFAULT = CPU
REGISTRY: dict[str, Target] = {}


def _index() -> None:
    REGISTRY.clear()
    REGISTRY.update((t.name, t) for family in FAMILIES for t in family.TARGETS)


_index()


def register(family: ModuleType) -> None:
    """One more family of targets (a module with TARGETS and HELP), offered by --target from now on."""
    clash = [t.name for t in family.TARGETS if t.name in REGISTRY]
    if clash:
        raise ValueError(f"targets already registered: {', '.join(clash)}")
    FAMILIES.append(family)
    _index()


def unregister(family: ModuleType) -> None:
    FAMILIES.remove(family)
    _index()


class _Names(Sequence):
    """The registered targets' names, read from the registry when asked (a family registered later is offered)."""

    def __getitem__(self, index):
        return tuple(REGISTRY)[index]

    def __len__(self) -> int:
        return len(REGISTRY)

    def __contains__(self, name) -> bool:
        return name in REGISTRY

    def __repr__(self) -> str:
        return repr(tuple(REGISTRY))


TARGETS = _Names()


def reference_kernels_run_by() -> str:
    """Who runs LiteRT's reference kernels, in words: the runtimes the families declare (REFERENCE_RUNTIME) and many
    NPUs ("what TFLite Micro and many NPUs implement")."""
    runtimes = [f.REFERENCE_RUNTIME for f in FAMILIES if getattr(f, "REFERENCE_RUNTIME", "")]
    return "what " + " and ".join([*runtimes, "many NPUs"]) + " implement"


def help_text() -> str:
    """--target's help: each family's own words, in the registry's order."""
    return "where the shipped model runs: " + ", ".join(f.HELP for f in FAMILIES) + f" (default: {DEFAULT})"


def of(name: Optional[str]) -> Target:
    """The target called `name`; a CPU for None (reports written before --target) or a name this version does not
    know (a hand-edited report.json)."""
    return REGISTRY.get(name or DEFAULT, REGISTRY[DEFAULT])
