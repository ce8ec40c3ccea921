"""The `int8` target: integer-only hardware, as the TFLite int8 specification says.

NPUs, Edge TPU-class accelerators: every tensor int8 (int32 bias), int8 input and output, no float op; int16 only
where the int8 kernel needs it. A detector's postprocess (reporter.core.targets.rules.HOST_OPS, with the
DEQUANTIZE/QUANTIZE ops around it) runs on the host CPU, as the Edge TPU compiler leaves it: the rule reads the
network before it (its accuracy is measured with the postprocess as the host runs it). Which models qualify is read
from the measured tensor types, never from a variant's name. Each is run with LiteRT's reference kernels (what
TFLite Micro and many NPUs implement): its accuracy there is the one decided on, and the candidates' agreement with
the default kernels is stated. Host latency says nothing of the device's, so size decides; the repair ladder climbs
when no integer-only model meets the target.
"""

from __future__ import annotations

from reporter.core import variants
from reporter.core.targets.base import REFERENCE, Target
from reporter.core.targets.rules import int8_spec

NAME = "int8"
HELP = (f"{NAME} (the TFLite int8 specification; accuracy on LiteRT's reference kernels; adds the int8 I/O"
        " variant)")
TARGETS = (Target(NAME, "on integer-only hardware", "integer-only hardware (int8 spec)", runs=int8_spec,
                  runs_not="integer-only hardware runs no float op, and int16 only where the int8 kernel needs it",
                  adds=(variants.INT8_IO,), timed=False, check=REFERENCE, reference_kernels=True,
                  integer_hardware=True),)
