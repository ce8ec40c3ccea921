"""The words of a paired comparison (reporter.findings.basis.compare decides it): "−32.5 points, p < 0.001",
"within noise: +0.9 points, p = 1". Every verdict, fix, lighter scheme, output and trade-off point that
compares two variants reads them; `worded` writes them into every comparison of the findings at once."""

from __future__ import annotations

import dataclasses

from reporter.core.formatting import fmt_change, fmt_points, p_text
from reporter.model.findings import OTHER_METRICS, SCORE, Comparison


def text(c: Comparison) -> str:
    """The difference with its paired test's verdict."""
    if c.measure == OTHER_METRICS:
        return "not comparable: measured by different metrics"
    if c.measure == SCORE:
        change = fmt_change(c.delta if c.higher_is_better else -c.delta, c.share)
        if c.p_value is None:
            return f"{change}, significance not recorded"
        if c.same:
            return f"{change}: the same value"
        if not c.significant:
            return f"within noise: {change}, {p_text(c.p_value)}"
        return f"{change}, {p_text(c.p_value)}"
    points = f"{fmt_points(c.delta)} points"
    if c.p_value is None:
        return f"{points}, significance not recorded"
    if c.same:
        return "±0.0 points, the same samples right"
    if not c.significant:
        return f"within noise: {points}, {p_text(c.p_value)}"
    return f"{points}, {p_text(c.p_value)}"


def worse_words(amount: str) -> str:
    """How a worse model is said: "loses 4.3 points" for a share (accuracy, mean IoU), "is worse by 0.2433 of
    recon_mse" for any other metric, which may point either way (never "loses" an error)."""
    return f"loses {amount}" if "points" in amount else f"is worse by {amount}"


def worded(value):
    """`value` (findings, a record, a list or dict of them) with the text of every comparison in it written."""
    if isinstance(value, Comparison):
        return dataclasses.replace(value, text=text(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: worded(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    if isinstance(value, list):
        return [worded(v) for v in value]
    if isinstance(value, dict):
        return {k: worded(v) for k, v in value.items()}
    return value
