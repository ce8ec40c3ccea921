"""The `cpu` target (the default): LiteRT on a CPU.

Any scheme runs, float ops included; the latency measured here is the CPU's, so it counts beside size.
"""

from __future__ import annotations

from reporter.core.targets.base import Target

NAME = "cpu"
HELP = f"{NAME} (LiteRT on a CPU, any scheme, latency counts)"
TARGETS = (Target(NAME, "on a CPU", "a CPU"),)
