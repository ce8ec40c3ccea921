"""A target family added from outside the tool: an NPU that computes in float16 only.

tests/test_target_plugins.py registers it, as a user would; its accuracy is measured on LiteRT's reference kernels.
One module; registering it is one line, `targets.register(fp16_npu_target)`.
"""

from reporter.core import variants
from reporter.core.targets import REFERENCE, Target

NAME = "fp16-npu"
HELP = f"{NAME} (an NPU computing in float16 only; accuracy on LiteRT's reference kernels; adds float16)"


def float16_only(tensor_types, ops=None, op_types=None) -> bool:
    """Float16 weights ("other" tensors, as the tool counts float16) and no integer tensor: what it computes."""
    return bool(tensor_types.get("other")) and not any(tensor_types.get(k) for k in ("int8", "int16", "int4", "int2"))


TARGETS = (Target(NAME, "on a float16 NPU", "a float16 NPU", runs=float16_only,
                  runs_not="the NPU computes in float16 only", adds=(variants.F16,), timed=False, check=REFERENCE),)
