"""The main metric of a run: the one number every verdict, gap, gate and fix is judged by, with its paired test.

* Classification and multi-label: the share of samples right (accuracy, exact-match accuracy); a sample is
  right or wrong, so two models are paired by McNemar's exact test and the interval is Wilson's.
* Dense (segmentation): mean IoU. It is not a mean over samples, so the interval and the paired test
  resample whole images (a seeded bootstrap over samples, the same resamples for every model), never pixels.
* A mask (a sigmoid or softmax output against targets in [0, 1]): mask IoU at the threshold, the same way.
* The user's metric (`--metric MODULE:FUNCTION`): whatever the function returns, bootstrapped the same way;
  one that returns a value per sample is their mean, and two models are paired sample by sample (a paired t).

`Score.measure(out)` reads one model's output on the evaluation data; `Score.compare(a, ref)` pairs two
measured models: the difference (positive: better, whichever way the metric points) and a p-value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from reporter.core import judgement as jd
from reporter.measure.task import Task, real
from reporter.model.report import MainMetric, PairedScore
from reporter.core.errors import InputError
from reporter.core.wall import wall

BOOTSTRAP_SEED = 20240601
BOOTSTRAP_DENSE = jd.BOOTSTRAP_DENSE  # resamples for mean IoU (vectorized: cheap)
BOOTSTRAP_USER = jd.BOOTSTRAP_USER  # resamples for a user's metric (one call of the function each)


@dataclass
class Scored:
    """One model's main metric on the evaluation data."""

    value: float
    correct: Optional[np.ndarray] = None  # per sample right/wrong (share metrics read from samples)
    boot: Optional[np.ndarray] = None  # the metric on each bootstrap resample (shared resamples)
    values: dict = None  # a user's metric: every value its function returned, by name
    per_sample: Optional[np.ndarray] = None  # a user's metric that returned one value per sample: those values


class Score:
    """The share of samples right (`Task.correct`): accuracy, or exact-match accuracy for multi-label. The kinds
    whose main metric is not a share subclass it in their module (reporter.measure.kinds: mean IoU, mask IoU)."""

    share = True
    higher_is_better = True
    bootstrapped = False

    def __init__(self, task: Optional[Task], y: np.ndarray, name: str = "accuracy"):
        self.task, self.y, self.name = task, y, name

    def measure(self, out) -> Scored:
        correct = self.task.correct(out, self.y)
        return Scored(float(correct.mean()) if correct.size else 0.0, correct=correct)

    def value(self, out) -> float:
        """The metric alone (no interval, no resamples): what the search's steps show."""
        correct = self.task.correct(out, self.y)
        return float(correct.mean()) if correct.size else 0.0

    def compare(self, a: Scored, ref: Scored) -> tuple[float, float]:
        """(a - ref, oriented so that positive is better; two-sided p-value of the paired test)."""
        if a.correct is not None and ref.correct is not None:
            return a.value - ref.value, jd.mcnemar_p(ref.correct, a.correct)
        if a.per_sample is not None and ref.per_sample is not None:
            delta = (a.value - ref.value) * (1 if self.higher_is_better else -1)
            return delta, paired_t_p(a.per_sample, ref.per_sample)
        d = a.boot - ref.boot
        if not self.higher_is_better:
            d = -d
        delta = (a.value - ref.value) * (1 if self.higher_is_better else -1)
        return delta, jd.bootstrap_p(d)

    def interval(self, s: Scored) -> tuple[float, float]:
        if s.correct is not None:
            return jd.wilson_interval(int(s.correct.sum()), len(s.correct))
        return jd.percentile_interval(s.boot)

    def main(self, s: Scored, paired: dict[str, tuple[float, float]]) -> Optional[MainMetric]:
        """The record the report keeps; None for accuracy (its McNemar counts are in `metrics.paired`)."""
        if not self.bootstrapped:
            return None
        low, high = self.interval(s)
        return MainMetric(self.name, s.value, self.higher_is_better, self.share, low, high,
                          {ref: PairedScore(d, p) for ref, (d, p) in paired.items()},
                          per_sample=s.per_sample is not None)


def resample_weights(n: int, resamples: int) -> np.ndarray:
    """(resamples, n): how often each sample is drawn in each bootstrap resample (seeded, so every model of a
    run, and every run on the same data, gets the same resamples)."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples) if n else np.zeros((resamples, 0), int)


class UserScore(Score):
    """The user's metric: `fn(y_true, y_pred, **meta) -> float | array | dict`, called with the labels as given and
    the raw outputs (for several outputs, dicts by output name, and a dict result keyed by output name), plus
    the per-sample arrays `meta_<name>` the function declares as parameters (`def auc(y_true, y_pred,
    anomaly)`; a `**kwargs` gets them all; undeclared ones are not passed). The main value is the float, the
    primary output's entry, or a one-output dict's first entry. A function that returns one value per sample
    (an array of length n) is their mean, and two models are then paired sample by sample, not bootstrapped."""

    bootstrapped = True
    paired_t = False  # set once a measurement returned one value per sample: the paired test is then a t-test
    meta: dict = {}  # the run's `meta_<name>` arrays by name (set by reporter.inputs.metric.user_score)

    def __init__(self, name: str, fn: Callable, y_true, n: int, higher_is_better: bool = True,
                 primary: Optional[str] = None):
        super().__init__(None, np.zeros(0), name)
        self.fn, self.y_true, self.primary, self.n = fn, y_true, primary, n
        self.higher_is_better = higher_is_better
        self.share = False
        self.weights = resample_weights(n, BOOTSTRAP_USER)
        self.indices = [np.repeat(np.arange(n), w) for w in self.weights]

    def declared_meta(self) -> dict:
        """The meta arrays the function takes: by the names of its parameters, or all of them for **kwargs."""
        import inspect

        try:
            params = inspect.signature(self.fn).parameters.values()
        except (TypeError, ValueError):
            return {}
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return dict(self.meta)
        names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        return {k: v for k, v in self.meta.items() if k in names}

    def results(self, out, idx: Optional[np.ndarray] = None) -> dict[str, np.ndarray]:
        """The function's result on every sample (or on the samples `idx`), as {name: a number, or one per
        sample}. The function gets read-only copies of the labels, outputs and meta arrays: one that writes into
        them raises (the run then says the metric failed), and none can change what the run measures after it."""
        def pick(a):
            return None if a is None else _read_only(a if idx is None else np.asarray(a)[idx])

        y = {k: pick(v) for k, v in self.y_true.items()} if isinstance(self.y_true, dict) else pick(self.y_true)
        pred = {k: pick(v) for k, v in out.items()} if isinstance(out, dict) else pick(out)
        meta = {k: pick(v) for k, v in self.declared_meta().items()}
        n = self.n if idx is None else len(idx)
        try:
            with wall(self.name, "the metric function", "a metric must return a number or a dict of numbers"):
                result = self.fn(y, pred, **meta)
        except InputError as exc:  # a metric's sys.exit is a failing metric: the run falls back, as for any error
            raise RuntimeError(exc.problem) from None
        if isinstance(result, dict):
            if not result:
                raise ValueError(f"metric {self.name} returned an empty dict")
            found = {str(k): _numbers(self.name, k, v, n) for k, v in result.items()}
            return {(f"{self.name} ({k})" if self.primary is not None else k): v for k, v in found.items()}
        return {self.name: _numbers(self.name, None, result, n)}

    def values(self, out, idx: Optional[np.ndarray] = None) -> dict[str, float]:
        """The function's result as {name: value}; a per-sample result is its mean."""
        return {k: float(np.mean(v)) for k, v in self.results(out, idx).items()}

    def main_value(self, values: dict):
        if self.primary is not None:
            key = f"{self.name} ({self.primary})"
            if key in values:
                return values[key]
            if self.name in values:
                return values[self.name]
            raise ValueError(f"metric {self.name} returned no value for the primary output {self.primary}"
                             f" (keys: {', '.join(values)})")
        return values.get(self.name, next(iter(values.values())))

    def value(self, out) -> float:
        return self.main_value(self.values(out))

    def measure(self, out) -> Scored:
        results = self.results(out)
        values = {k: float(np.mean(v)) for k, v in results.items()}
        main = self.main_value(results)
        if np.ndim(main) == 1:  # one value per sample: the resamples are means, no further call of the function
            per = np.asarray(main, np.float64)
            self.paired_t = True
            return Scored(float(per.mean()), boot=self.weights @ per / max(len(per), 1), values=values,
                          per_sample=per)
        boot = np.array([self.main_value(self.values(out, idx)) for idx in self.indices])
        return Scored(self.main_value(values), boot=boot, values=values)


def paired_t_p(a: np.ndarray, ref: np.ndarray) -> float:
    """Two-sided p-value of the paired t-test on two models' per-sample values of a metric. The paired t tests
    the very number the report shows (the mean difference), is deterministic and has no resampling floor;
    Wilcoxon's signed-rank test would test the median difference instead (it can call a model worse whose mean
    is better), and a sign-flip permutation test is exact only by enumerating 2^n flips (sampled, it has a floor
    again). With the hundreds of samples an evaluation set has, the mean difference is close to normal."""
    from scipy.stats import ttest_rel

    d = np.asarray(a, np.float64) - np.asarray(ref, np.float64)
    if d.size < 2 or not np.any(d):
        return 1.0
    if np.all(d == d[0]):  # the same nonzero change on every sample: no variance, beyond any noise
        return 0.0
    return float(ttest_rel(a, ref).pvalue)


def _read_only(a) -> np.ndarray:
    """A copy of `a` that cannot be written: a read-only view of a read-only copy, so that even setting
    `flags.writeable` back to True fails (and would change only the copy)."""
    copy = np.array(a, copy=True)
    copy.flags.writeable = False
    view = copy.view()
    view.flags.writeable = False
    return view


def _numbers(name: str, key, value, n: int):
    """A metric's result: a number (float), or one per sample (a 1-D float array of length `n`)."""
    if isinstance(value, (list, tuple, np.ndarray)) and np.ndim(value) >= 1:
        a = np.asarray(value)
        where = f"[{key!r}]" if key is not None else ""
        if a.ndim != 1 or len(a) != n:
            raise ValueError(f"metric {name}{where} returned an array of shape {a.shape}: a metric returns a number"
                             f" or one value per sample ({n})")
        a = np.array([_number(name, key, v) for v in a.tolist()], np.float64)
        return a
    return _number(name, key, value)


def _number(name: str, key, value) -> float:
    """One value a metric returned: a finite real number (reporter.measure.task.real, the check a plug-in task
    kind's numbers pass too); a ValueError naming the metric otherwise."""
    try:
        return real(value)
    except ValueError as exc:
        where = f"[{key!r}]" if key is not None else ""
        raise ValueError(f"metric {name}{where} returned {exc}") from None
