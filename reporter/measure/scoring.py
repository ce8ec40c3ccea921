"""The main metric of a run: the one number every verdict, gap, gate and fix is judged by, with its paired test.

* Classification and multi-label: the share of samples right (accuracy, exact-match accuracy); a sample is
  right or wrong, so two models are paired by McNemar's exact test and the interval is Wilson's.
* Dense (segmentation): mean IoU. It is not a mean over samples, so the interval and the paired test
  resample whole images (a seeded bootstrap over samples, the same resamples for every model), never pixels.
* A mask (a sigmoid or softmax output against targets in [0, 1]): mask IoU at the threshold, the same way.
* The user's metric (`--metric MODULE:FUNCTION`): whatever the function returns, called once per model on every
  sample (identical outputs are not scored twice). One that returns a value per sample is their mean, two models
  are paired sample by sample (a paired t) and its interval resamples those values; one that returns a number is
  called once more on each of a few blocks of the samples (batch means: the same seeded blocks for every model),
  and its interval and paired t-test read the blocks' values, never a call per resample.

`Score.measure(out)` reads one model's output on the evaluation data; `Score.compare(a, ref)` pairs two
measured models: the difference (positive: better, whichever way the metric points) and a p-value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import hashlib
import time

import numpy as np

from reporter.core import statistics as jd  # the tests and intervals (reporter.core.statistics)
from reporter.measure.task import Task, real
from reporter.model.report import MainMetric, PairedScore
from reporter.core.errors import InputError, one_line
from reporter.core.wall import wall

BOOTSTRAP_SEED = 20240601
BOOTSTRAP_DENSE = jd.BOOTSTRAP_DENSE  # resamples for mean IoU (vectorized: cheap)
BOOTSTRAP_USER = jd.BOOTSTRAP_USER  # resamples of a user's per-sample metric's values (no call of the function)
BLOCK_SEED = 20240602  # the blocks a user's scalar metric is called on (batch means): the same for every model


@dataclass
class Scored:
    """One model's main metric on the evaluation data."""

    value: float
    correct: Optional[np.ndarray] = None  # per sample right/wrong (share metrics read from samples)
    # the metric on each bootstrap resample (shared resamples), or for a user's metric that returns a number, on each
    # block of the samples (batch means: the same blocks for every model)
    boot: Optional[np.ndarray] = None
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


def block_split(n: int, blocks: Optional[int] = None) -> list[np.ndarray]:
    """The samples 0..n-1 split once into `blocks` (default judgement.block_count) disjoint blocks, seeded: every
    model of a run, and every run on the same data, is called on the same blocks."""
    blocks = jd.block_count(n) if blocks is None else blocks
    if blocks < 2:
        return []
    order = np.random.default_rng(BLOCK_SEED).permutation(n)
    return [np.sort(part) for part in np.array_split(order, blocks)]


@dataclass
class MetricCost:
    """What the user's metric cost a run: its calls on every sample and on parts of them (blocks, the search's
    selection samples), the rows they read and their time; run.log states it after each model."""

    whole: int = 0
    parts: int = 0
    rows: int = 0
    seconds: float = 0.0

    def words(self) -> str:
        return (f"{self.whole + self.parts} calls ({self.whole} on every sample, {self.parts} on parts),"
                f" {self.rows:,} rows, {self.seconds:.2f} s")


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
    (an array of length n) is their mean, and two models are then paired sample by sample, not bootstrapped; one
    that returns a number is called once more on each block of `block_split` (batch means), and two models are
    paired block by block. Each model is called once on every sample: outputs already scored are not scored again."""

    bootstrapped = True
    paired_t = False  # set once a measurement returned one value per sample: the paired test is then a t-test
    meta: dict = {}  # the run's `meta_<name>` arrays by name (set by reporter.inputs.metric.user_score)

    def __init__(self, name: str, fn: Callable, y_true, n: int, higher_is_better: bool = True,
                 primary: Optional[str] = None):
        super().__init__(None, np.zeros(0), name)
        self.fn, self.y_true, self.primary, self.n = fn, y_true, primary, n
        self.higher_is_better = higher_is_better
        self.share = False
        self.weights = resample_weights(n, BOOTSTRAP_USER)  # a per-sample metric's values resampled: no call
        self.blocks = block_split(n)  # a scalar metric's batch means: one call per block
        self._blocks_kept = False  # the blocks held on a model: every later model is paired on the same ones
        self.cost = MetricCost()
        self.says_cost = True  # each model measured states the run's cost of the metric so far in run.log
        self.is_part = False  # on a part of the evaluation samples (`subset`): its calls are counted as parts
        self._whole: dict[bytes, dict] = {}  # the function's result on every sample, by the outputs' digest
        self._scored: dict[bytes, Scored] = {}

    def subset(self, idx: np.ndarray) -> "UserScore":
        """The same metric on the samples `idx` only (their labels and meta arrays; blocks of their own), its calls
        counted with this one's: what the search scores its candidates with on labelled selection samples."""
        idx = np.asarray(idx)

        def pick(a):
            return None if a is None else np.asarray(a)[idx]

        y = {k: pick(v) for k, v in self.y_true.items()} if isinstance(self.y_true, dict) else pick(self.y_true)
        part = UserScore(self.name, self.fn, y, len(idx), self.higher_is_better, self.primary)
        part.meta = {k: pick(v) for k, v in self.meta.items()}
        part.cost, part.says_cost, part.is_part = self.cost, False, True
        return part

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

        key = _digest(out) if idx is None else None
        if key is not None and key in self._whole:  # this model's outputs were scored already: no second call
            return self._whole[key]
        y = {k: pick(v) for k, v in self.y_true.items()} if isinstance(self.y_true, dict) else pick(self.y_true)
        pred = {k: pick(v) for k, v in out.items()} if isinstance(out, dict) else pick(out)
        meta = {k: pick(v) for k, v in self.declared_meta().items()}
        n = self.n if idx is None else len(idx)
        t0 = time.perf_counter()
        try:
            with wall(self.name, "the metric function", "a metric must return a number or a dict of numbers"):
                result = self.fn(y, pred, **meta)
        except InputError as exc:  # a metric's sys.exit is a failing metric: the run falls back, as for any error
            raise RuntimeError(exc.problem) from None
        finally:
            self.cost.seconds += time.perf_counter() - t0
            self.cost.rows += n
            if idx is None and not self.is_part:
                self.cost.whole += 1
            else:
                self.cost.parts += 1
        if isinstance(result, dict):
            if not result:
                raise ValueError(f"metric {self.name} returned an empty dict")
            found = {str(k): _numbers(self.name, k, v, n) for k, v in result.items()}
            found = {(f"{self.name} ({k})" if self.primary is not None else k): v for k, v in found.items()}
        else:
            found = {self.name: _numbers(self.name, None, result, n)}
        if key is not None:
            self._whole[key] = found
        return found

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
        key = _digest(out)
        if key in self._scored:
            return self._scored[key]
        results = self.results(out)
        values = {k: float(np.mean(v)) for k, v in results.items()}
        main = self.main_value(results)
        if np.ndim(main) == 1:  # one value per sample: the resamples are means, no further call of the function
            per = np.asarray(main, np.float64)
            self.paired_t = True
            scored = Scored(float(per.mean()), boot=self.weights @ per / max(len(per), 1), values=values,
                            per_sample=per)
        else:
            scored = Scored(self.main_value(values), boot=self._block_values(out), values=values)
        if self.says_cost:  # said in run.log: what the metric has cost the run so far
            print(f"--metric {self.name}: {self.cost.words()} so far this run")
        self._scored[key] = scored
        return scored

    def _block_values(self, out) -> np.ndarray:
        """The metric on each block of the samples (one call each). A metric that fails on a block of the first model
        measured (an AUC over a block with one class) is tried on half as many, larger blocks, down to 2; the blocks
        it then holds on are every later model's."""
        while True:
            try:
                found = np.array([self.main_value(self.values(out, idx)) for idx in self.blocks], np.float64)
            except Exception as exc:  # noqa: BLE001 - the user's function may raise anything on a part
                if self._blocks_kept or len(self.blocks) <= 2:
                    sizes = min(len(b) for b in self.blocks)
                    raise RuntimeError(f"{one_line(exc)} (on a block of {sizes} of the {self.n} samples: its interval"
                                       f" and paired test are read from {len(self.blocks)} blocks)") from exc
                self.blocks = block_split(self.n, len(self.blocks) // 2)
                continue
            self._blocks_kept = True
            return found

    def compare(self, a: Scored, ref: Scored) -> tuple[float, float]:
        """(a - ref, oriented so that positive is better; the paired t-test's p-value over the samples' values, or
        over the blocks' values of a metric that returns a number)."""
        delta = (a.value - ref.value) * (1 if self.higher_is_better else -1)
        if (a.per_sample is None) != (ref.per_sample is None):
            raise ValueError(f"metric {self.name} returned one value per sample for one model and one number for"
                             " another")
        if a.per_sample is not None:
            return delta, paired_t_p(a.per_sample, ref.per_sample)
        return delta, paired_t_p(a.boot, ref.boot)

    def interval(self, s: Scored) -> tuple[float, float]:
        if s.per_sample is not None:
            return jd.percentile_interval(s.boot)
        return jd.batch_means_interval(s.value, s.boot)

    def main(self, s: Scored, paired: dict[str, tuple[float, float]]) -> Optional[MainMetric]:
        low, high = (None if not np.isfinite(v) else v for v in self.interval(s))
        return MainMetric(self.name, s.value, self.higher_is_better, self.share, low, high,
                          {ref: PairedScore(d, p) for ref, (d, p) in paired.items()},
                          per_sample=s.per_sample is not None,
                          blocks=None if s.per_sample is not None else len(s.boot))


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


def _digest(out) -> bytes:
    """A digest of a model's outputs (one array, or a dict by output name): the key by which a model's outputs
    already scored are known again."""
    h = hashlib.blake2b(digest_size=20)
    for name, a in (sorted(out.items()) if isinstance(out, dict) else [("", out)]):
        a = np.ascontiguousarray(a)
        h.update(f"{name}|{a.shape}|{a.dtype.str}|".encode())
        h.update(a.tobytes())
    return h.digest()


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
