"""The exit codes of every command, in one place (the CLI's --help and the README list them)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # every model reported (and passed the gate, if one was set)
    FAILED = 1  # a model, its input or a report format failed
    USAGE = 2  # the command line or the config file is wrong (nothing ran), or a requested gate cannot be applied
    GATE_FAILED = 3  # every model reported, but one lost more accuracy than the gate allows
    TERMINATED = 143  # stopped by SIGTERM (128 + 15, as a shell reports it): cleaned up; a batch wrote its index


MEANING = {
    ExitCode.OK: "every model reported (and passed the gate, if set)",
    ExitCode.FAILED: "a model, its input or a report format failed",
    ExitCode.USAGE: ("usage error: a bad flag, value or config file (nothing ran); or a requested gate cannot"
                     " be applied (BASE and NEW measured different data or tasks)"),
    ExitCode.GATE_FAILED: "the gate failed: a model lost more accuracy than --max-accuracy-drop allows",
    ExitCode.TERMINATED: "stopped by SIGTERM: staging folders removed, children stopped; a batch wrote its index",
}


def help_text() -> str:
    return "exit codes:\n" + "\n".join(f"  {int(code)}  {MEANING[code]}" for code in ExitCode)


def exit_code(failed: bool = False, gate_failed: bool = False, gate_not_applied: bool = False) -> int:
    """The one mapping from what happened to the exit code: a failure outranks a gate that could not be
    applied, which outranks a failed gate."""
    if failed:
        return int(ExitCode.FAILED)
    if gate_not_applied:
        return int(ExitCode.USAGE)
    return int(ExitCode.GATE_FAILED if gate_failed else ExitCode.OK)
