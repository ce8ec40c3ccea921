"""Judgement: when a difference is real, what counts as a gap, what the search aims at, how a change reads.

Every threshold and tolerance the pipeline, the search, the findings, `diff` and the rendered reports use lives
here, typed and tested; the statistical tests themselves are reporter.core.statistics' (numbers only), and this
module says at which level their p-values count. It computes (numbers, booleans, the names of a model's
standings) and writes no sentence of the report (the one left, the search target's description in
`selection_target`, is kept in report.json as the search's `target_text`). The one rule whether a model meets
the accuracy target, and the acceptance the search and the repair ladder are handed, are reporter.findings.rule's;
the findings decide what a report's numbers mean, and reporter.render reads only the constants here (its legend and
the sentences that state a threshold are written from them; its arrows' steps are reporter.render.steps').
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from reporter.core import statistics

ALPHA = 0.05  # significance level for paired tests
DEFAULT_TARGET_AGREEMENT = 0.99  # no --max-accuracy-drop: aim at 99 % agreement with float
DEFAULT_TARGET_R2 = 0.99  # regression: 1 - MSE / variance of the float output
TOLERANCE = 1e-12  # float rounding: a value within this of a limit counts as at the limit
KEEP_GAIN_SHARE = 0.5  # the search's pruning keeps at least this share of what its best model won back over FIQ


def within(value: float, limit: float) -> bool:
    """`value <= limit`, where a value equal to the limit up to float rounding is within it."""
    return value <= limit + TOLERANCE


def keeps_gain(score: float, best: float, start: float) -> bool:
    """A pruned candidate's selection score (higher is better) keeps at least KEEP_GAIN_SHARE of what the best
    model found won back over the search's start (FIQ): a paired test on few samples cannot call a large loss
    worse, and a prune must not give the fix away on that account."""
    gain = best - start
    return gain <= TOLERANCE or score - start >= KEEP_GAIN_SHARE * gain - TOLERANCE


CLIPPED_NOTABLE_SHARE = 0.001  # an integer output that clips at least this share of float's values: said


def clipping_notable(share: float) -> bool:
    """An integer output's range cuts off enough of float's values to say so (one in a thousand or more)."""
    return share >= CLIPPED_NOTABLE_SHARE


# An integer output a CONCATENATION joins from parts whose float spans differ by this factor or more shares one scale
# that fits none of them: said when the shared grid also rounds at least ROUNDED_TO_ZERO_NOTABLE of some part's
# nonzero values to 0 (an int16 output's finer grid may hold them all).
SHARED_SCALE_RATIO = 10.0
ROUNDED_TO_ZERO_NOTABLE = 0.01


def shared_scale_notable(ratio: float, zero_shares) -> bool:
    """The parts of one integer output differ in range by SHARED_SCALE_RATIO or more, and the grid they share rounds
    a notable share of some part's values to 0."""
    return ratio >= SHARED_SCALE_RATIO and any(share >= ROUNDED_TO_ZERO_NOTABLE for share in zero_shares)


def nonzero(value: float) -> bool:
    """A difference beyond float rounding."""
    return abs(value) > TOLERANCE


def positive_floor(value: float) -> float:
    """`value`, or the tolerance when it is smaller: a denominator that is never zero."""
    return max(value, TOLERANCE)


# --- the accuracy target: how a model can stand --------------------------------------------------------
# How a model stands against float (or a diff's BASE) on one output, on the report's one scale: the one rule that
# decides it is reporter.findings.rule's (`standing`, `meets_target`), which nothing outside reporter.findings calls.
NOT_MEASURED = "not_measured"  # the scale's figure was not measured: never judged on another scale
NOT_WORSE = "not_worse"  # at least as good
ALLOWED = "allowed"  # worse by at most --max-accuracy-drop
NOISE = "noise"  # worse within noise (the paired test), no --max-accuracy-drop given
CLOSE = "close"  # no main metric (unlabelled regression): output within 1 - DEFAULT_TARGET_R2 of float's variance
LOSES = "loses"  # worse beyond noise, beyond the allowed drop, or beyond the output-error target
MEETING = frozenset({NOT_WORSE, ALLOWED, NOISE, CLOSE})


def samples_differ(a: np.ndarray, b: np.ndarray) -> bool:
    """Two independent sets of per-sample figures (booleans: agreement with float; numbers) differ beyond noise:
    Fisher's exact test on the shares, or the Mann-Whitney U test on the numbers (statistics.independent_p), at
    ALPHA."""
    return significant(statistics.independent_p(a, b))


def metric_scale(reference: float) -> float:
    """The unit of a user's metric's selection score: float's value on the selection samples (1 when it is 0), so
    that the score, 1 - (float's value - the candidate's) / this, reads as agreement does (1: as good as float)."""
    return abs(float(reference)) if nonzero(reference) else 1.0


def selection_target(max_accuracy_drop: Optional[float], classification: bool,
                     metric: Optional[tuple[str, float]] = None) -> tuple[float, str]:
    """The selection score the search aims at, and how the report words it. `metric`: the user's metric's name and
    float's value of it on the selection samples, when the search chooses on that metric (relative to float's,
    `metric_scale`): within 1 - DEFAULT_TARGET_AGREEMENT of float's value, or --max-accuracy-drop in its units."""
    if metric is not None:
        name, reference = metric
        if max_accuracy_drop is not None:
            return 1.0 - max_accuracy_drop / metric_scale(reference), \
                f"{name} at most {max_accuracy_drop:g} worse than float's on the selection samples" \
                f" (--max-accuracy-drop {max_accuracy_drop:g})"
        return DEFAULT_TARGET_AGREEMENT, \
            f"{name} within {1 - DEFAULT_TARGET_AGREEMENT:.0%} of float's on the selection samples"
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
EXTREME_INPUT = 1e6  # inputs beyond this magnitude are named as a likely cause when a built model cannot run
DEGENERATE_SHARE = 0.95  # predicting one class for this share of samples (dense: positions) may be degenerate,
DEGENERATE_OTHERS_RATIO = 0.25  # when it predicts the other classes at most this share as often as the labels hold them


def degenerate(predicted: float, labelled: float) -> bool:
    """A model that predicts one class for a share `predicted` of the samples (of the positions, for a dense output),
    a class the labels hold for a share `labelled`, answers that class whatever its input: it predicts it for at
    least DEGENERATE_SHARE, and every other class together less than DEGENERATE_OTHERS_RATIO as often as the labels
    hold them. The predicted share alone would call a faithful model of imbalanced data degenerate (a face map whose
    labels are 99 % background predicts background for about 99 % of its cells); what gives a stuck model away is
    that it has stopped predicting the other classes the labels do hold (FIQ answering class 1 for every sample of
    balanced labels, or a face map finding no face where the labels hold 1 %). A model predicting the other classes
    about as often as they occur, more often, or somewhat less, is not degenerate; one whose labels hold that one
    class alone cannot predict the others less often than the labels and is not either."""
    return predicted >= DEGENERATE_SHARE - TOLERANCE and \
        1.0 - predicted < DEGENERATE_OTHERS_RATIO * (1.0 - labelled) - TOLERANCE
# A scheme that stores less than this share of the model's weight values below float32 "quantized almost nothing"
# (said in its verdict, whatever its size column shows): e.g. a blockwise int4 recipe that only takes fully
# connected layers, on a convolutional net.
ALMOST_NOTHING_SHARE = 0.10
DRQ_MIN_WEIGHT_ELEMENTS = 1024  # the converter's default: smaller weight tensors stay float under DRQ
# A layer's range this many times the median range is wide: a hint for the rule (findings), and a region of the
# search's grows through it (reporter.search.engine.region_moves).
WIDE_RANGE_FACTOR = 10.0


def significant(p_value: float) -> bool:
    """A paired test's p-value below ALPHA: a difference beyond noise."""
    return p_value < ALPHA


def accuracy_differs(is_significant: Optional[bool], delta: float) -> bool:
    """An accuracy difference that counts: significant in its paired test or, when it was not tested
    (`is_significant` None), any difference beyond float rounding."""
    return bool(is_significant) or (is_significant is None and nonzero(delta))


def worse_beyond_noise(is_significant: Optional[bool], delta: float) -> bool:
    """A paired comparison that shows a loss: significant and negative (an untested one shows none)."""
    return bool(is_significant) and delta < 0


MIN_TIMED_RUNS = 10  # fewer timed runs than this tell no spread: their latencies are never "faster" or "slower"


# A model timed within this many times an empty invoke on this host (a one-op model, timed the same way:
# Latency.overhead) is mostly the interpreter's overhead and the timer's resolution: its latency is shown, never
# compared ("faster", "slower", the decision's cost), so the same model on the same host gets the same words.
TIMING_FLOOR_FACTOR = 10


def timing_floor(overhead: float) -> float:
    """The latency under which this host cannot tell models apart (ms): TIMING_FLOOR_FACTOR empty invokes."""
    return TIMING_FLOOR_FACTOR * overhead


def below_timing_floor(median: Optional[float], overhead: float) -> bool:
    return median is not None and overhead > 0 and median < timing_floor(overhead)


def timing_spread(median: float, p90: Optional[float], runs: int, overhead: float = 0.0) -> Optional[float]:
    """A latency's 90th percentile as the spread `faster` reads; None (no claim) when too few runs were timed to
    tell it, or when the model runs under this host's timing floor (`below_timing_floor`)."""
    return p90 if runs >= MIN_TIMED_RUNS and not below_timing_floor(median, overhead) else None


def faster(a_median: Optional[float], a_p90: Optional[float], b_median: Optional[float],
           b_p90: Optional[float]) -> bool:
    """A model timed at `a_median` (90th percentile `a_p90`) is faster than one at `b_median` beyond timing noise:
    their medians lie further apart than either model's own spread over its repeated runs (p90 - median). The
    decision's cost, its tie-break and every sentence that says "faster" or "slower" read this one rule."""
    if not a_median or not b_median or a_median >= b_median or a_p90 is None or b_p90 is None:
        return False  # a spread not measured (too few runs): no claim
    spread = max(a_p90 - a_median, b_p90 - b_median, 0.0)
    return b_median - a_median > spread


def latency_step(a_median: Optional[float], a_p90: Optional[float], b_median: Optional[float],
                 b_p90: Optional[float]) -> Optional[int]:
    """`a`'s latency against `b`'s, by `faster` (spreads as `timing_spread` gives them): 0 neither is faster beyond
    timing noise (a tie), -1 / +1 faster / slower, -2 / +2 more than COUNT_BIG_RATIO times; None when either
    was not timed or its spread tells nothing (too few runs, under the host's timing floor: `timing_spread`), so no
    claim is made. Every table cell, arrow and colour for latency reads this, as the sentences read `faster`."""
    if not a_median or not b_median or a_p90 is None or b_p90 is None:
        return None
    if faster(a_median, a_p90, b_median, b_p90):
        return -2 if b_median / a_median > COUNT_BIG_RATIO else -1
    if faster(b_median, b_p90, a_median, a_p90):
        return 2 if a_median / b_median > COUNT_BIG_RATIO else 1
    return 0


def output_error_changed(base_mse: float, new_mse: float) -> bool:
    """`diff`: an output MSE that moved beyond float rounding, relative to BASE's."""
    return nonzero((new_mse - base_mse) / positive_floor(abs(base_mse)))


def latency_changed(base_ms: float, new_ms: float) -> bool:
    """`diff`: a latency LATENCY_CHANGE_RATIO times slower or faster than in BASE, and by at least
    LATENCY_CHANGE_MIN_MS."""
    ratio = new_ms / base_ms
    return (ratio >= LATENCY_CHANGE_RATIO or ratio <= 1 / LATENCY_CHANGE_RATIO) \
        and abs(new_ms - base_ms) >= LATENCY_CHANGE_MIN_MS


# --- how a variant's change against float reads in the report's tables (reporter.render.steps) ---------
METRIC_SAME_POINTS = 0.5  # a metric within this many points (of 100) of float's reads as the same: "~"
METRIC_BIG_POINTS = 5.0  # a metric more than this many points from float's: a big change (double arrow)
COUNT_BIG_RATIO = 2.0  # a count, size or latency more than this many times float's (or less than 1/this): big
SAME_RATIO = 0.005  # a size or latency ratio within this of 1 reads as the same ("1.0x" would show no change)
PERCENT_RATIO = 0.05  # a size ratio within this of 1 is worded as a percentage: "1.0x smaller" reads as no change
BINARY_THRESHOLD = 0.5  # a sigmoid output (binary or multi-label): class 1 where the output is at least this
# A multi-label output with more labels than this per sample is judged per label (micro-F1 over every label of every
# sample, bootstrapped over whole samples), not by exact match: a sample is all right with probability p^L for a
# per-label accuracy p, so at 32 labels a model 98 % right per label is exactly right on only 52 % of samples, and at
# thousands (a piano roll's frames x pitches) on none, float included; exact match then measures L, not the model.
MANY_LABELS = 32
SUSPECT_THRESHOLD = 0.7  # the rmse/scale rule's default: a layer above this RMSE/scale is flagged


def detectable_share(n: int) -> Optional[float]:
    """The smallest share of `n` paired samples whose change an exact two-sided McNemar test can call
    significant: every discordant sample changing the same way, as few as give p < ALPHA (6 of them at 0.05).
    None when `n` is too small for any change to be significant."""
    k = 1
    while k <= n:
        if statistics.mcnemar_p_counts(k, 0) < ALPHA:
            return k / n
        k += 1
    return None


# --- the search: spread-out loss -------------------------------------------------------------------
# A loss has a compact cause when a set of at most SPREAD_MAX_SHARE of the debugged layers, kept in float, reaches
# the search's target or wins back at least SPREAD_RECOVER_SHARE of the way from FIQ to it. The share is the same
# half a prune must keep of what the best model won back (KEEP_GAIN_SHARE): a set that wins back less leaves most
# of the loss outside it, and is not its cause. When the moves with the strongest evidence show no compact cause,
# the loss is spread across the network: the search stops, and whole-model schemes answer (reporter.search.engine).
SPREAD_MAX_SHARE = 0.10
SPREAD_RECOVER_SHARE = KEEP_GAIN_SHARE
# Below this many debugged layers a tenth of them is a couple of ops, and the whole search costs little: it runs.
SPREAD_MIN_LAYERS = 50
SPREAD_PROBES = 8  # compact moves measured alone before the search decides (the evidence's best first)
SPREAD_GROUP_PROBES = 4  # of them at most this many regions and groups; singles and tensors fill the rest
# When no compact set is the cause, the search measures sets beyond the cap before it calls the loss spread out: the
# debugger's chains of wide-range ops as units (at most SPREAD_CHAIN_PROBES, the widest first), and regions along the
# graph's order as Polygraphy's `debug precision` bisects them: the first and the last SPREAD_REGION_MAX_SHARE of the
# ops, then, in each half that is a cause, the shortest prefix (or suffix) that still is one (spread_region_probes).
SPREAD_CHAIN_PROBES = 3
SPREAD_REGION_MAX_SHARE = 0.5  # a region of more than half of the ops in float is not a fix of a few layers


def grow_within_budget(candidates: int) -> bool:
    """The search's selection data may grow (recommend.grown) only when the budget still holds, at the grown size, what
    a large model's spread check measures first (FIQ, SPREAD_PROBES compact sets and their union, the chains and the
    two halves): more samples per candidate must not leave too few candidates to say anything."""
    return candidates >= 1 + SPREAD_PROBES + 1 + SPREAD_CHAIN_PROBES + 2


def spread_region_probes(layers: int) -> int:
    """The most regions measured among `layers` debugged ops: the two halves, and a bisection of each down to one op
    (ceil(log2) of the half's length each): 16 for 135 ops, 18 for 300."""
    half = max(1, int(SPREAD_REGION_MAX_SHARE * layers + TOLERANCE))
    return 2 + 2 * int(np.ceil(np.log2(half))) if half > 1 else 2


def compact_limit(layers: int) -> Optional[int]:
    """The most layers a compact cause holds among `layers` debugged layers (SPREAD_MAX_SHARE of them); None when
    the model is too small for the search to stop early on a spread-out loss."""
    if layers < SPREAD_MIN_LAYERS:
        return None
    return max(1, int(SPREAD_MAX_SHARE * layers + TOLERANCE))


def compact_cause(score: float, start: float, target: float) -> bool:
    """A selection score (higher is better) of a compact set in float that makes it the loss's cause: it reaches the
    target, or wins back at least SPREAD_RECOVER_SHARE of the way from FIQ's `start` to the target."""
    return within(target, score) or score - start >= SPREAD_RECOVER_SHARE * (target - start) - TOLERANCE


def selection_too_small(to_win: float, samples: int) -> bool:
    """The gap the search must close on the selection samples (`to_win`: the target's agreement with float minus
    FIQ's, as a share of samples) is near what `samples` paired samples can detect: a set that wins back half of it
    (SPREAD_RECOVER_SHARE, what makes a compact cause and what a prune keeps) would change fewer samples than the
    smallest change a paired test can show, so neither a cause nor its absence would be measured. A gap of zero or
    less (FIQ meets the target there, though the evaluation data show a loss) is below it too."""
    share = detectable_share(samples)
    return share is None or SPREAD_RECOVER_SHARE * to_win < share - TOLERANCE
