"""How an integer-only model's outputs agree between LiteRT's default kernels and its reference kernels, as
report.json stores it (the int8 target's shipped model: reference kernels are what TFLite Micro and many NPUs
implement, and they may round differently from XNNPACK's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class ReferenceAgreement:
    samples: int  # evaluation samples run with both kernel sets
    identical_share: float  # share of output values (every output, sample and position) the two give alike
    max_steps: float  # the largest difference, in steps of the output's quantization scale (0: identical)
    top1_agreement: Optional[float] = None  # class-score outputs: share of samples with the same top class
