"""How numbers read in every report: bytes, milliseconds, points, percentages, names. No judgement here
(what a number means is reporter.core.judgement's)."""

from __future__ import annotations

from typing import Callable, Optional

from reporter.core import judgement as jd
from reporter.core import statistics

# A value a built model should have but does not (its measurement failed, or latency was skipped): never a
# blank or a zero, which would read as a measured value.
NOT_MEASURED = "not measured"


def or_missing(value, fmt: Callable) -> str:
    """`value` formatted, or "not measured" (a built model's value that is missing is never blank)."""
    return NOT_MEASURED if value is None else fmt(value)


def fmt_bytes(n: Optional[float]) -> str:
    if n is None:
        return "–"
    n = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} GB"  # pragma: no cover


def fmt_signed_bytes(n: Optional[int]) -> str:
    if n is None:
        return "–"
    return ("+" if n >= 0 else "−") + fmt_bytes(abs(n))


def fmt_ms(ms: Optional[float]) -> str:
    """Latency with three significant digits; tiny models run in microseconds."""
    if ms is None:
        return "–"
    if ms < 1:
        return f"{ms * 1000:.3g} µs"
    return f"{ms:.3g} ms"


def fmt_metric(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.3f}"


def fmt_mse(mse: float, float_variance: Optional[float] = None) -> str:
    """An output MSE with the scale to read it on: its share of the float output's variance."""
    if float_variance:
        if mse == 0:
            return "MSE 0 (no error)"
        share = mse / float_variance
        words = "< 0.01 %" if share < 0.0001 else fmt_percent(share, 2)
        return f"MSE {fmt_number(mse)} ({words} of the float output's variance)"
    return f"MSE {fmt_number(mse)}"


def fmt_percent(x: Optional[float], digits: int = 1) -> str:
    """A share as a percentage; one that rounds to zero is "0 %", never "-0 %" (a loss too small to show)."""
    if x is None:
        return "–"
    text = f"{x * 100:.{digits}f}"
    return f"{abs(float(text)):.{digits}f} %" if float(text) == 0 else f"{text} %"


def fmt_points(delta: float) -> str:
    """Accuracy difference in points of 100, always signed; one that rounds to zero is "±0.0"."""
    if abs(delta * 100.0) < 0.05:
        return "±0.0"
    return fmt_signed_points(delta)


def fmt_signed_points(delta: float) -> str:
    """Accuracy difference in points of 100 with its sign as computed: "+0.0", "−1.5"."""
    return f"{delta * 100.0:+.1f}".replace("-", "−")


def fmt_score(x: Optional[float], share: bool = True) -> str:
    """A main metric's value: a share in percent ("85.3 %"), any other number with 4 significant digits."""
    return fmt_percent(x) if share else fmt_number(x)


def fmt_amount(delta: float, share: bool = True, metric: str = "accuracy", plain: bool = True) -> str:
    """How much a main metric moved, unsigned: "4.3 points" (`plain`: the share of samples right, as
    Report.metric_plain says), "4.3 points of mean IoU", "0.0123 of top2" (a metric that is not a share)."""
    if share:
        return f"{abs(delta) * 100:.1f} points" + ("" if plain else f" of {metric}")
    return f"{fmt_number(abs(delta))} of {metric}"


def fmt_change(delta: float, share: bool = True) -> str:
    """A main metric's signed difference: "+1.5 points" / "±0.0 points", or "+0.0123" for a metric that is
    not a share."""
    if share:
        return f"{fmt_points(delta)} points"
    if delta == 0:
        return "±0"
    return ("+" if delta > 0 else "−") + fmt_number(abs(delta))


def fmt_number(x: Optional[float]) -> str:
    """A debugger statistic: 4 significant digits, scientific only when very small or large."""
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.3e}"
    return f"{x:.4g}"


def capital(name: str) -> str:
    """`name` opening a sentence or a row: its first letter in capitals, unless its second already is (mAP@0.5,
    mIoU: a name spelled so keeps its spelling)."""
    return name if name[1:2].isupper() else name[:1].upper() + name[1:]


def shorten(name: str, limit: int = 60) -> str:
    """A long tensor name shortened in the middle (the full name goes in a title or a code span)."""
    if len(name) <= limit:
        return name
    head = (limit - 1) * 2 // 5
    return name[:head] + "…" + name[len(name) - (limit - 1 - head):]


def p_text(p_value: float) -> str:
    """"p = 0.62": two significant digits, or as many more as it takes for the shown value to be on the same
    side of judgement.ALPHA as the value itself ("p = 0.0498", never "p = 0.05" for a significant p); "p < 0.005"
    for a resampling test's floor 1/(B+1); "p < 0.001" below that."""
    if statistics.is_resample_floor(p_value):
        return f"p < {p_value:.2g}"
    if p_value < 0.001:
        return "p < 0.001"
    return f"p = {p_digits(p_value)}"


def p_digits(p_value: float) -> str:
    """`p_value` with two significant digits, or more until the shown number decides significance as the value
    does (shown < ALPHA exactly when p < ALPHA)."""
    for digits in range(2, 8):
        shown = f"{p_value:.{digits}g}"
        if (float(shown) < jd.ALPHA) == jd.significant(p_value) and float(shown) != jd.ALPHA:
            return shown
    return repr(p_value)
