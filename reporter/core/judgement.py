"""Judgement: when a difference is real, what counts as a gap, what the search aims at.

Every threshold and statistical test the pipeline and the search use lives here, typed and tested,
so that no other module decides what a number means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

ALPHA = 0.05  # significance level for paired tests
DEFAULT_TARGET_AGREEMENT = 0.99  # no --max-accuracy-drop: aim at 99 % agreement with float
DEFAULT_TARGET_R2 = 0.99  # regression: 1 - MSE / variance of the float output
RECOVERED_SHARE = 0.99  # share of the accuracy gap that counts as recovered in full
TOLERANCE = 1e-12  # float rounding: a value within this of a limit counts as at the limit


def within(value: float, limit: float) -> bool:
    """`value <= limit`, where a value equal to the limit up to float rounding is within it."""
    return value <= limit + TOLERANCE


def nonzero(value: float) -> bool:
    """A difference beyond float rounding."""
    return abs(value) > TOLERANCE


def positive_floor(value: float) -> float:
    """`value`, or the tolerance when it is smaller: a denominator that is never zero."""
    return max(value, TOLERANCE)


def gate_passes(drop: float, limit: float) -> bool:
    """The accuracy gate's one rule, for `run`, `batch` and `diff`: a drop (0..1) of at most `limit` passes."""
    return within(drop, limit)


def mcnemar_p(a: np.ndarray, b: np.ndarray) -> float:
    """Exact McNemar test on paired booleans (e.g. "correct" per sample): two-sided p-value."""
    from scipy.stats import binomtest

    a, b = np.asarray(a, bool), np.asarray(b, bool)
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def paired_worse(candidate: np.ndarray, reference: np.ndarray, higher_is_better: bool) -> bool:
    """True when `candidate` is worse than `reference` beyond noise, per sample and paired.

    Booleans (agreement with float): exact McNemar. Numbers (squared error): Wilcoxon signed rank.
    """
    candidate, reference = np.asarray(candidate), np.asarray(reference)
    if candidate.dtype == bool:
        if higher_is_better and candidate.sum() >= reference.sum():
            return False
        if not higher_is_better and candidate.sum() <= reference.sum():
            return False
        return mcnemar_p(candidate, reference) < ALPHA
    diff = candidate.astype(np.float64) - reference.astype(np.float64)
    mean = diff.mean()
    if (mean <= 0 if not higher_is_better else mean >= 0) or not np.any(diff):
        return False
    from scipy.stats import wilcoxon

    return float(wilcoxon(diff).pvalue) < ALPHA


def paired_better(candidate: np.ndarray, reference: np.ndarray, higher_is_better: bool) -> bool:
    return paired_worse(reference, candidate, higher_is_better)


@dataclass(frozen=True)
class Gap:
    """Whether FIQ lost accuracy against float on the evaluation data, beyond noise."""

    status: str  # "gap", "no_gap" or "not_measurable" (before the fix); "recovered" / "open" after
    drop: Optional[float] = None  # float accuracy - FIQ accuracy
    p_value: Optional[float] = None  # exact McNemar, float vs FIQ correctness
    reason: str = ""


def fiq_gap(y, float_pred, fiq_pred, max_accuracy_drop: Optional[float]) -> Gap:
    """`gap` when FIQ is less accurate than float beyond noise (and beyond the allowed drop)."""
    return accuracy_gap(y, float_pred, fiq_pred, max_accuracy_drop, "FIQ")


def accuracy_gap(y, float_pred, pred, max_accuracy_drop: Optional[float], name: str) -> Gap:
    """`gap` when the variant called `name` is less accurate than float beyond noise (and beyond the
    allowed drop); `no_gap` otherwise, with the reason."""
    if y is None or float_pred is None or pred is None:
        return Gap("not_measurable", reason="the model's output is not class scores, so there is no accuracy")
    f_ok, q_ok = float_pred == y, pred == y
    drop = float(f_ok.mean() - q_ok.mean())
    p = mcnemar_p(f_ok, q_ok)
    if drop <= 0:
        return Gap("no_gap", drop, p, f"{name} is at least as accurate as float")
    if max_accuracy_drop is not None and within(drop, max_accuracy_drop):
        return Gap("no_gap", drop, p, f"the drop is within --max-accuracy-drop {max_accuracy_drop:g}")
    if p >= ALPHA:
        return Gap("no_gap", drop, p, f"the drop is within noise (McNemar p = {p:.2g})")
    return Gap("gap", drop, p, f"{name} loses {drop * 100:.1f} points (McNemar p = {p:.2g})")


def after_fix(gap: Gap, y, float_pred, fixed_pred, max_accuracy_drop: Optional[float]) -> Gap:
    """The gap's status once the recommended model is measured: `recovered` or `open`."""
    if gap.status != "gap" or fixed_pred is None:
        return gap
    f_ok, s_ok = float_pred == y, fixed_pred == y
    drop = float(f_ok.mean() - s_ok.mean())
    p = mcnemar_p(f_ok, s_ok)
    share = 1 - drop / gap.drop if gap.drop else None
    if drop <= 0:
        return Gap("recovered", drop, p, "the recommended model is as accurate as float")
    if p >= ALPHA:
        return Gap("recovered", drop, p, f"{drop * 100:.1f} points below float, within noise: McNemar p = {p:.2g}")
    if max_accuracy_drop is not None and within(drop, max_accuracy_drop):
        return Gap("recovered", drop, p, f"{drop * 100:.1f} points below float: within --max-accuracy-drop"
                                         f" {max_accuracy_drop:g}")
    if share is not None and share >= RECOVERED_SHARE:
        return Gap("recovered", drop, p, f"{drop * 100:.1f} points below float, {share:.1%} of the gap won back")
    return Gap("open", drop, p, f"the recommended model still loses {drop * 100:.1f} points, McNemar p = {p:.2g}")


def selection_target(max_accuracy_drop: Optional[float], classification: bool) -> tuple[float, str]:
    """The selection score the search aims at, and how the report words it."""
    if not classification:
        return DEFAULT_TARGET_R2, f"output within {1 - DEFAULT_TARGET_R2:.0%} of the float output's variance"
    if max_accuracy_drop is not None:
        # Disagreeing with float on a share d of samples bounds the accuracy drop by d.
        return 1.0 - max_accuracy_drop, f"agree with float on at least {1 - max_accuracy_drop:.1%} of samples" \
                                        f" (--max-accuracy-drop {max_accuracy_drop:g})"
    return DEFAULT_TARGET_AGREEMENT, f"agree with float on at least {DEFAULT_TARGET_AGREEMENT:.0%} of samples"


# --- what the report says about a variant --------------------------------------------------------
CONFIDENCE = 0.95  # intervals on accuracy (Wilson)
LATENCY_NOTABLE_RATIO = 1.5  # a variant this many times slower than float: said in the verdict
LATENCY_CHANGE_RATIO = 1.5  # `diff`: a variant this many times slower or faster than in BASE has changed,
LATENCY_CHANGE_MIN_MS = 0.05  # and by at least this much: microsecond timings of tiny models jump run to run
DEGENERATE_SHARE = 0.95  # predicting one class for this share of samples (when float does not)
DRQ_MIN_WEIGHT_ELEMENTS = 1024  # the converter's default: smaller weight tensors stay float under DRQ
WIDE_RANGE_FACTOR = 10.0  # a layer's range this many times the median range: a hint for the rule


def mcnemar_p_counts(reference_only: int, variant_only: int) -> float:
    """Exact McNemar p-value from the discordant counts of two paired classifiers."""
    from scipy.stats import binomtest

    n = reference_only + variant_only
    if n == 0:
        return 1.0
    return float(binomtest(reference_only, n, 0.5).pvalue)


def wilson_interval(correct: int, total: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval on a proportion (e.g. accuracy)."""
    from scipy.stats import binomtest

    if total <= 0:
        return 0.0, 1.0
    ci = binomtest(int(correct), int(total)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def significant(p_value: float) -> bool:
    return p_value < ALPHA


def p_text(p_value: float) -> str:
    """"p < 0.001" or "p = 0.62": two significant digits."""
    return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.2g}"
