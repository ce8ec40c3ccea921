"""How an integer-only model's outputs agree between LiteRT's default kernels and its reference kernels, as
report.json stores it (the int8 target's shipped model: reference kernels are what TFLite Micro and many NPUs
implement, and they may round differently from XNNPACK's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reporter.model.bounds import COUNT, QUANT_STEPS, SHARE, figure


@dataclass(frozen=True)
class ReferenceAgreement:
    samples: int = figure(COUNT)  # evaluation samples run with both kernel sets
    # share of output values (every output, sample and position) the two give alike
    identical_share: float = figure(SHARE)
    # the largest difference, in steps of the output's quantization scale (0: identical)
    max_steps: float = figure(QUANT_STEPS)
    # class-score outputs: share of samples with the same top class
    top1_agreement: Optional[float] = figure(SHARE, None)
