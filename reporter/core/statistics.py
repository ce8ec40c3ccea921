"""Statistics: the paired and independent tests, resampling p-values and intervals the measurements and the findings
read. It computes numbers only: what counts as a difference (the significance level, the accuracy target) is policy,
reporter.core.judgement's and reporter.findings'."""

from __future__ import annotations

import numpy as np

def mcnemar_p(a: np.ndarray, b: np.ndarray) -> float:
    """Exact McNemar test on paired booleans (e.g. "correct" per sample): two-sided p-value."""
    from scipy.stats import binomtest

    a, b = np.asarray(a, bool), np.asarray(b, bool)
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


BOOTSTRAP_DENSE = 1000  # resamples for mean IoU (vectorized: cheap)
BOOTSTRAP_USER = 200  # resamples of a user's per-sample metric's values (their means: no call of the function)
# A user's metric that returns one number for the whole set is called once on every sample and once on each of
# USER_BLOCKS blocks of the samples (batch means: one more pass over the rows), never once per resample; a block
# holds at least MIN_BLOCK_SAMPLES samples (fewer blocks when the data are few).
USER_BLOCKS = 20
MIN_BLOCK_SAMPLES = 10
# A resampling test's p-value has a floor: with B resamples none on the far side of zero means only p < 1/(B+1).
# `bootstrap_p` returns exactly that bound then, and `p_text` shows it as "p < 1/(B+1)", never as a value.
RESAMPLE_COUNTS = (BOOTSTRAP_USER, BOOTSTRAP_DENSE)


def bootstrap_p(differences: np.ndarray) -> float:
    """Two-sided p-value of a paired bootstrap: `differences` holds (variant - reference) on each resample;
    the share of resamples on the far side of zero, doubled (with the +1 correction, never 0). When no
    resample is on the far side, the floor 1/(B+1): the true p is below it, and `p_text` says so."""
    d = np.asarray(differences, np.float64)
    if d.size == 0 or not np.any(d):
        return 1.0
    tail = min(int(np.sum(d <= 0)), int(np.sum(d >= 0)))
    if tail == 0:
        return resample_floor(d.size)
    return float(min(1.0, 2.0 * (tail + 1) / (d.size + 1)))


def resample_floor(resamples: int) -> float:
    """The smallest p-value `resamples` resamples can tell: 1/(B+1)."""
    return 1.0 / (resamples + 1)


def is_resample_floor(p_value: float) -> bool:
    """A p-value that is a resampling test's floor (no resample on the far side), not a measured value."""
    return any(abs(p_value - resample_floor(b)) < 1e-15 for b in RESAMPLE_COUNTS)


def block_count(n: int) -> int:
    """The blocks a user's scalar metric is called on for `n` samples (batch means): USER_BLOCKS, fewer so that each
    holds MIN_BLOCK_SAMPLES, at least 2; 0 below 4 samples (no spread can be read from fewer)."""
    if n < 4:
        return 0
    return int(min(USER_BLOCKS, max(2, n // MIN_BLOCK_SAMPLES)))


def batch_means_interval(value: float, blocks: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The batch-means interval of a metric whose value on every sample is `value` and on each of G disjoint blocks
    of the samples `blocks`: value ± t(G-1)·sd(blocks)/√G (nan, nan with fewer than 2 blocks)."""
    from scipy.stats import t

    b = np.asarray(blocks, np.float64)
    if b.size < 2:
        return float("nan"), float("nan")
    half = float(t.ppf((1 + confidence) / 2, b.size - 1) * b.std(ddof=1) / np.sqrt(b.size))
    return float(value) - half, float(value) + half


def independent_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value that two independent sets of per-sample figures (booleans: agreement with float; numbers)
    differ: Fisher's exact test on the shares, or the Mann-Whitney U test on the numbers; 1.0 when either is empty
    or every number is the same."""
    a, b = np.asarray(a), np.asarray(b)
    if a.size == 0 or b.size == 0:
        return 1.0
    if a.dtype == bool and b.dtype == bool:
        from scipy.stats import fisher_exact

        table = [[int(a.sum()), int(a.size - a.sum())], [int(b.sum()), int(b.size - b.sum())]]
        return float(fisher_exact(table).pvalue)
    from scipy.stats import mannwhitneyu

    a, b = a.astype(np.float64), b.astype(np.float64)
    if np.ptp(np.r_[a, b]) == 0:
        return 1.0
    return float(mannwhitneyu(a, b).pvalue)


def paired_p(candidate: np.ndarray, reference: np.ndarray, t_test: bool = False) -> float:
    """Two-sided p-value of the paired difference between `candidate` and `reference`, per sample. Booleans
    (agreement with float): exact McNemar. Numbers: Wilcoxon signed rank, or with `t_test` the paired t-test (a
    user's metric: its values per sample or per block); the same nonzero change on every sample or block has no
    variance and is beyond any noise (0.0). 1.0 when nothing changed (or, for the t-test, fewer than 2 values)."""
    candidate, reference = np.asarray(candidate), np.asarray(reference)
    if candidate.dtype == bool:
        return mcnemar_p(candidate, reference)
    diff = candidate.astype(np.float64) - reference.astype(np.float64)
    if not np.any(diff):
        return 1.0
    if t_test:
        if diff.size < 2:
            return 1.0
        if np.all(diff == diff[0]):
            return 0.0
        from scipy.stats import ttest_1samp

        return float(ttest_1samp(diff, 0.0).pvalue)
    from scipy.stats import wilcoxon

    return float(wilcoxon(diff).pvalue)


def percentile_interval(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The bootstrap percentile interval of a metric from its values on the resamples."""
    v = np.asarray(values, np.float64)
    if v.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.percentile(v, [(1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100])
    return float(lo), float(hi)


def mcnemar_p_counts(reference_only: int, variant_only: int) -> float:
    """Exact McNemar p-value from the discordant counts of two paired classifiers."""
    from scipy.stats import binomtest

    n = reference_only + variant_only
    if n == 0:
        return 1.0
    return float(binomtest(reference_only, n, 0.5).pvalue)


def wilson_interval(correct: int, total: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval on a proportion (e.g. accuracy)."""
    from scipy.stats import binomtest

    if total <= 0:
        return 0.0, 1.0
    ci = binomtest(int(correct), int(total)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)
