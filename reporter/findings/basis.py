"""What every finding stands on: the variants judged, the main metric they are judged by, and the paired
comparison of one variant with another (its words are reporter.render.words.comparison's). Pure: no TensorFlow,
no files."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reporter.core import judgement as jd
from reporter.core import statistics
from reporter.core import variants
from reporter.model.findings import OTHER_METRICS, SCORE, Comparison
from reporter.model.report import layer_of  # noqa: F401 - read from here by the findings

if TYPE_CHECKING:  # pragma: no cover
    from reporter.model.report import Metrics, Report


def columns(report: "Report") -> list:
    """The variants the findings judge (reporter.model.report.Report.columns)."""
    return report.columns()


def metric_of(report: "Report") -> tuple[str, bool]:
    """The main metric's name and whether it is a share (Report.metric)."""
    return report.metric()


def measurable(report: "Report") -> bool:
    """The report has a main metric to judge by (Report.measurable)."""
    return report.measurable()


def compare(metrics: "Metrics", ref_metrics: "Metrics", reference: str) -> Comparison:
    """The main metric's difference (positive: better) with its paired test (exact McNemar on samples right,
    or the paired bootstrap of mean IoU or a user's metric); reporter.render.words.comparison words it."""
    main = metrics.main
    if main is not None or ref_metrics.main is not None:
        if main is None or ref_metrics.main is None or main.name != ref_metrics.main.name:
            return Comparison(reference, 0.0, None, None, "", measure=OTHER_METRICS)
        raw = main.value - ref_metrics.main.value
        delta = raw if main.higher_is_better else -raw
        how = dict(measure=SCORE, share=main.share, higher_is_better=main.higher_is_better)
        paired_score = main.paired.get(reference)
        if paired_score is None:
            return Comparison(reference, delta, None, None, "", **how)
        p = paired_score.p_value
        if not jd.nonzero(raw) and p >= jd.ALPHA:
            return Comparison(reference, delta, p, False, "", same=True, **how)
        return Comparison(reference, delta, p, bool(jd.significant(p)), "", **how)
    delta = metrics.accuracy - ref_metrics.accuracy
    paired = metrics.paired.get(reference) if metrics.paired else None
    if paired is None:
        return Comparison(reference, delta, None, None, "")
    p = statistics.mcnemar_p_counts(paired.reference_only, paired.variant_only)
    if paired.reference_only == paired.variant_only == 0:
        return Comparison(reference, delta, p, False, "", same=True)
    return Comparison(reference, delta, p, bool(jd.significant(p)), "")
