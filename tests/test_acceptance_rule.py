"""The accuracy target the findings hand the search and the repair ladder (reporter.findings.rule.Acceptance, built by
reporter.findings.decision.TargetRule): its paired tests against scipy's, the search obeying the object it is handed,
the search's target from the run's --max-accuracy-drop, and the user-metric notice read from the kind, not a name."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.stats import binomtest, ttest_1samp, wilcoxon

from reporter.core import judgement, variants
from reporter.findings import notices
from reporter.findings.decision import TargetRule
from reporter.findings.rule import Acceptance
from reporter.model.variant import MainMetric
from reporter.search import engine as srch


def _mcnemar(a: np.ndarray, b: np.ndarray) -> float:
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    return binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0


@pytest.mark.parametrize("lost", [3, 5, 6, 9])
def test_a_candidate_is_worse_exactly_when_mcnemar_says_so(lost):
    """Each selection sample's agreement with float: worse beyond noise when the exact McNemar test (scipy's binomial
    test on the discordant samples) is below 0.05 and the candidate agrees less; the screen accepts the other way."""
    ref = np.ones(200, bool)
    cand = ref.copy()
    cand[:lost] = False
    expected = bool(_mcnemar(cand, ref) < 0.05)
    assert Acceptance().worse(cand, ref) is expected
    assert Acceptance().accepts(ref, cand) is expected
    assert not Acceptance().worse(ref, cand)  # better is never worse


def test_numbers_are_paired_by_wilcoxon_or_a_t_test_in_the_direction_they_point():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=60)
    cand = ref - 0.3 + rng.normal(scale=0.5, size=60)  # lower: worse when higher is better
    assert Acceptance().worse(cand, ref) is bool(wilcoxon(cand - ref).pvalue < 0.05)
    assert Acceptance(t_test=True).worse(cand, ref) is bool(ttest_1samp(cand - ref, 0.0).pvalue < 0.05)
    assert not Acceptance(higher_is_better=False).worse(cand, ref)  # lower is better there


def test_the_search_asks_the_acceptance_it_is_handed():
    """An acceptance that calls FIQ at its target stops the search on FIQ; the same candidates with a target FIQ misses
    are searched: the search decides neither itself."""
    layers = [srch.Layer(f"L{i}", "FULLY_CONNECTED", 0.1, None, 1.0) for i in range(4)]

    def evaluate(nodes):
        right = np.ones(100, bool)
        right[: 0 if "L2" in nodes else 10] = False
        return srch.Evaluation(frozenset(nodes), float(right.mean()), right, 1000 + len(nodes))

    met = srch.search(layers, evaluate, srch.Policy(Acceptance(0.9)))
    assert met.target_met and met.evaluations == 1 and met.chosen.nodes == frozenset()
    missed = srch.search(layers, evaluate, srch.Policy(Acceptance(0.99)))
    assert missed.target_met and missed.chosen.nodes == {"L2"}


@pytest.mark.parametrize("limit", [None, 0.02])
def test_the_search_target_is_the_runs_allowed_drop_or_99_percent_agreement(limit):
    accept, words = TargetRule("cpu", limit, True).on_selection(True)
    assert accept.target == pytest.approx(1 - limit if limit is not None else judgement.DEFAULT_TARGET_AGREEMENT)
    assert accept.hard is (limit is not None) and words
    metric_accept, _ = TargetRule("cpu", limit, True).on_selection(True, ("recon", 2.0))
    assert metric_accept.t_test and metric_accept.target == pytest.approx(
        1 - limit / 2.0 if limit is not None else judgement.DEFAULT_TARGET_AGREEMENT)


def test_a_failed_user_metric_is_never_said_to_be_used(fixture_report):
    """--metric given, but the main metric left is the task kind's own (its fallback): the report says the user's
    metric was not used, whatever that kind's metric is called."""
    flt = fixture_report.variant(variants.FLOAT)
    kind_main = fixture_report.model.task_kind.main_metric
    for name, fact in ((kind_main, "user_metric_failed"), ("recon_loss", "user_metric")):
        main = MainMetric(name, 0.9)
        report = dataclasses.replace(
            fixture_report, settings=dataclasses.replace(fixture_report.settings, metric="metric.py:recon"),
            variants=[dataclasses.replace(flt, metrics=dataclasses.replace(flt.metrics, main=main))]
            + [v for v in fixture_report.variants if v.name != variants.FLOAT])
        found = {f.code for f in notices.hints(report, report.findings.gap)}
        assert fact in found and ({"user_metric", "user_metric_failed"} - {fact}).isdisjoint(found), (name, found)
