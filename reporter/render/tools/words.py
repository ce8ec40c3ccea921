"""What a target tool's own figures (reporter.model.hardware: `OnTarget.tools`) add to the views and the words.

A tool's render module (one per tool that keeps figures) subclasses `ToolWords` and registers it in one line,
`register(name, words)`, under the tool's name (its figures' key); the "On the target" view and the decision's
words ask for every tool whose figures a model holds and lay out what it gives, never naming a tool.
"""

from __future__ import annotations

import re
from typing import Optional

from reporter.core.formatting import fmt_percent

_WORDS: dict[str, "ToolWords"] = {}
SOURCE = re.compile(r"\S+\.(?:cc|cpp|c|h)\b(?::\d+)?\s*")  # a C++ source file and line, as a tool's reason prints it


class ToolWords:
    """A tool's cells and sentences; each says nothing by default."""

    def cell(self, figures) -> str:
        """The "On the target" table's figures cell of one model."""
        return ""

    def rows(self, figures) -> list[str]:
        """The lines under a model's row (Vela: each op it leaves on the CPU, "OP: reason")."""
        return []

    def shipped(self, figures) -> str:
        """The headline's sentence on the shipped model, as the tool found it ("" for none)."""
        return ""

    def judged(self, options) -> str:
        """Sentences on the judged options (reporter.model.findings.Option) the tool found something of."""
        return ""

    def kept_off(self, options) -> tuple[set, list[str]]:
        """The options whose reason for not running there the tool words itself (by name), and those clauses."""
        return set(), []

    def reason(self, text: str) -> str:
        """The tool's own reason `text` in the user's terms, "" when it is not one the tool knows."""
        return ""


def register(name: str, words: ToolWords) -> ToolWords:
    """The words of the tool `name`'s figures. Returns them."""
    _WORDS[name] = words
    return words


def unregister(name: str) -> None:
    _WORDS.pop(name, None)


def of(name: str) -> Optional[ToolWords]:
    """The words of the tool `name`; None for a tool this version does not know (its figures are not shown)."""
    return _WORDS.get(name)


def held(tools) -> list[tuple[ToolWords, object]]:
    """(its words, its figures) for every registered tool whose figures `tools` (OnTarget.tools or None) holds."""
    return [(_WORDS[name], figures) for name, figures in (tools or {}).items() if name in _WORDS]


def grouped(pairs: list[tuple[str, str]]) -> list[str]:
    """"A, B and C: <reason>": the models one reason keeps off the target named together, each reason once."""
    by_reason: dict[str, list[str]] = {}
    for label, reason in pairs:
        by_reason.setdefault(reason, []).append(label)
    out = []
    for reason, labels in by_reason.items():
        names = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + f" and {labels[-1]}"
        out.append(f"{names}: {reason}")
    return out


def fine_share(share: float) -> str:
    """A share near 1 with the digits that tell it from 1: "99.96 %", never a rounded "100.0 %"."""
    if 0.999 <= share < 1:
        return f"{min(share * 100, 99.99):.2f} %"
    return fmt_percent(share)


def every() -> list[ToolWords]:
    """Every registered tool's words, in the order registered."""
    return list(_WORDS.values())
