"""The accuracy target's one rule: how a model stands against its reference (float, or a diff's BASE) on one output,
on the report's one scale, and whether it meets the target on every labelled output. The decision, the gap, the
blamed variant's fix, every gate and the rule the run hands to the search and the blame read it, and nothing else
decides whether a model meets the accuracy target (the thresholds and the standings' names are
reporter.core.judgement's). `Acceptance` is the same target on the search's selection samples, and the paired test
that screens a candidate against another: the one object the search and the repair ladder are handed, which they
ask and never decide beside."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Protocol

import numpy as np

from reporter.core import judgement as jd
from reporter.core import statistics


@dataclass(frozen=True)
class Standing:
    """A model against its reference on one output, on the report's scale: the main metric's drop with its paired
    test, or, in a report without a main metric, its output's R² against float's output."""

    drop: Optional[float] = None  # reference minus the model on the main metric, oriented: positive is worse
    p_value: Optional[float] = None  # the paired test of that drop; None: not tested
    r2: Optional[float] = None  # 1 - output MSE / float's output variance (only where there is no main metric)


def standing(s: Standing, limit: Optional[float]) -> str:
    """How `s` stands against the accuracy target (judgement.NOT_WORSE ... LOSES). With --max-accuracy-drop (`limit`,
    0..1 of the main metric) a drop of at most the limit meets it and a larger one does not, whatever the noise (the
    user named the loss they accept); without, a drop within noise meets it and one beyond noise, or untested, does
    not."""
    if s.drop is None:
        if s.r2 is None:
            return jd.NOT_MEASURED
        return jd.CLOSE if jd.within(jd.DEFAULT_TARGET_R2, s.r2) else jd.LOSES
    if s.drop <= 0:
        return jd.NOT_WORSE
    if limit is not None:
        return jd.ALLOWED if jd.within(s.drop, limit) else jd.LOSES
    if s.p_value is not None and not jd.significant(s.p_value):
        return jd.NOISE
    return jd.LOSES


def meets_target(standings: Iterable[Standing], limit: Optional[float]) -> bool:
    """The one rule: a model meets the accuracy target when it stands within it on every labelled output (the main
    metric's first); nothing measured meets nothing."""
    found = list(standings)
    return bool(found) and all(standing(s, limit) in jd.MEETING for s in found)


class Scored(Protocol):
    """A candidate measured on the selection samples (reporter.search.engine.Evaluation): its score, higher is
    better, 1 as good as float, and each sample's figure."""

    score: float
    per_sample: np.ndarray


@dataclass(frozen=True)
class Acceptance:
    """The accuracy target on the search's selection samples, and the paired comparison of two candidates there: what
    the search (reporter.search.engine) and the repair ladder's screen (reporter.pipeline.repairs) ask; they measure and
    order, this decides. Built from the run's settings by reporter.findings.decision.TargetRule (`on_selection`,
    `screen`)."""

    target: float = jd.DEFAULT_TARGET_AGREEMENT  # the selection score to reach (higher is better, 1: as float)
    hard: bool = False  # a user's --max-accuracy-drop: any candidate at or above the target is accepted
    higher_is_better: bool = True  # how each sample's figure points
    t_test: bool = False  # figures paired by a t-test (a user's metric's values per sample or block)

    def reached(self, score: float) -> bool:
        """A selection score at the target (up to float rounding) or above it."""
        return jd.within(self.target, score)

    def worse(self, candidate: np.ndarray, reference: np.ndarray) -> bool:
        """`candidate`'s per-sample figures are worse than `reference`'s beyond noise, paired (statistics.paired_p at
        judgement.ALPHA, in the direction the figures point)."""
        candidate, reference = np.asarray(candidate), np.asarray(reference)
        if candidate.dtype == bool:
            gain = int(candidate.sum()) - int(reference.sum())
        else:
            gain = float((candidate.astype(np.float64) - reference.astype(np.float64)).mean())
        if (gain >= 0) if self.higher_is_better else (gain <= 0):
            return False
        return jd.significant(statistics.paired_p(candidate, reference, self.t_test))

    def better(self, candidate: np.ndarray, reference: np.ndarray) -> bool:
        """`candidate`'s per-sample figures are better than `reference`'s beyond noise, paired."""
        return self.worse(reference, candidate)

    def accepts(self, candidate: np.ndarray, reference: np.ndarray) -> bool:
        """The screen: `candidate` (each selection sample's figure) is better beyond noise than `reference`, the best
        model measured to miss the target. One that is not cannot be shown to do better than that one: the repair
        ladder does not measure it further."""
        return self.better(candidate, reference)

    def keeps(self, candidate: Scored, current: Scored, reference: Scored, best: Scored, start: Scored) -> bool:
        """The search's drop: `candidate` (the current set less some layers) may replace `current`. Under a user's
        hard target, once `reference` reached it, whenever the candidate reaches it too; else only when it is not
        worse beyond noise than `current` nor `reference`, and it keeps judgement.KEEP_GAIN_SHARE of what `best` won
        back over `start` (FIQ): on few samples no paired test calls anything worse, and drops judged step by step
        must not add up to losing the fix."""
        if self.hard and self.reached(reference.score):
            return self.reached(candidate.score)
        return (not self.worse(candidate.per_sample, current.per_sample)
                and not self.worse(candidate.per_sample, reference.per_sample)
                and jd.keeps_gain(candidate.score, best.score, start.score))

    def instead(self, candidate: Scored, top: Scored, start: Scored, cut_short: bool) -> bool:
        """A set the search measured may be recommended (against `top`, the best set measured): it reaches the target,
        or it keeps judgement.KEEP_GAIN_SHARE of what `top` won back over `start` and, when the budget cut the search
        short (`cut_short`), it is not worse than `top` beyond noise."""
        return self.reached(candidate.score) or (jd.keeps_gain(candidate.score, top.score, start.score)
                                                 and not (cut_short and self.worse(candidate.per_sample,
                                                                                   top.per_sample)))
