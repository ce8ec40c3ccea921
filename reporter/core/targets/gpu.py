"""The `gpu` target: a GPU delegate.

It computes in float16 or float32, so the float16 model (added to the run) or float itself runs there, read from the
tensor types. Host latency is not the GPU's, so size decides.
"""

from __future__ import annotations

from reporter.core import variants
from reporter.core.targets.base import Target
from reporter.core.targets.rules import float_compute

NAME = "gpu"
HELP = f"{NAME} (a GPU delegate: float16 or float32; adds float16)"
TARGETS = (Target(NAME, "on a GPU delegate", "a GPU delegate", runs=float_compute, adds=(variants.F16,), timed=False,
                  runs_not="a GPU delegate computes in float16 or float32 only"),)
