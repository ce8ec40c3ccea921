"""The search's budget, decided before it starts and never from a clock: each candidate's cost is estimated from the
model's file (its ops, multiply-accumulates and size, reporter.measure.cost) and the number of selection samples, and the
search may spend a share (`--search-share`) of what the bare calls of the seed guides would cost on the same model and
data, estimated the same way: TensorFlow's converter four times (float, DRQ, FIQ and the debugger's model), the
evaluation data through float, DRQ and FIQ one sample per invoke, and the calibration samples through the calibration
and the debugger. The same model and data therefore take the same candidates on any machine and at any load.

The constants are seconds measured on the reference machine (2 cores; benchmarks/profile_stages.py): estimates, good to
a factor of about two, that only need to rank the search's cost against the bare calls' on the same model."""

from __future__ import annotations

from dataclasses import dataclass

from reporter.measure.cost import Work

BUILD_S = 5e-3  # one candidate quantized from the calibrated model (mlir_quantize): fixed ...
BUILD_S_PER_OP = 1.7e-4  # ... per op ...
BUILD_S_PER_BYTE = 8e-8  # ... and per byte of the quantized model
RUN_S_PER_MAC = 2.0e-11  # one sample through a quantized model, batched: per multiply-accumulate ...
RUN_S_PER_OP = 1.5e-7  # ... and per op
INVOKE_S = 5e-5  # one invoke of one sample from Python (the seed guides evaluate one sample per invoke)
CONVERT_S = 4.0  # one TensorFlow conversion: fixed ...
CONVERT_S_PER_OP = 0.05  # ... and per op of the float model (a 303-op EfficientNet-B0: 19 s; a 67-op MobileNetV2: 7 s)
BARE_CONVERSIONS = 4  # float, DRQ, FIQ and the debugger's model
BARE_EVALUATED = 3  # float, DRQ and FIQ on the evaluation data
BARE_CALIBRATION_PASSES = 4  # FIQ's and the debugger's calibration, the debugger's two passes


@dataclass(frozen=True)
class Budget:
    """The search's budget in estimated seconds: `share` of `bare_s`, the bare calls' estimate; `candidate_s`, one
    candidate's estimate (built, then run on the selection samples)."""

    share: float
    bare_s: float
    candidate_s: float

    @property
    def seconds(self) -> float:
        return self.share * self.bare_s

    def candidates(self) -> int:
        """How many candidates the budget holds (at least one: FIQ itself is always measured)."""
        return max(1, int(self.seconds / self.candidate_s)) if self.candidate_s > 0 else 1 << 30


def per_sample_s(work: Work) -> float:
    """One sample through the model in a batch, estimated."""
    return RUN_S_PER_MAC * work.macs + RUN_S_PER_OP * work.ops


def candidate_s(work: Work, selection_samples: int) -> float:
    """One candidate, estimated: quantized from the calibrated model, then run on the selection samples."""
    build = BUILD_S + BUILD_S_PER_OP * work.ops + BUILD_S_PER_BYTE * work.size
    return build + selection_samples * per_sample_s(work)


def bare_s(work: Work, float_ops: int, evaluation_samples: int, calibration_samples: int) -> float:
    """The bare calls of the seed guides on the same model and data, estimated."""
    one = per_sample_s(work) + INVOKE_S
    samples = BARE_EVALUATED * evaluation_samples + BARE_CALIBRATION_PASSES * calibration_samples
    return BARE_CONVERSIONS * (CONVERT_S + CONVERT_S_PER_OP * float_ops) + samples * one


def budget(work: Work, float_ops: int, share: float, evaluation_samples: int, calibration_samples: int,
           selection_samples: int) -> Budget:
    return Budget(share, bare_s(work, float_ops, evaluation_samples, calibration_samples),
                  candidate_s(work, selection_samples))
