"""How numbers read in every report: bytes, milliseconds, points, percentages. No judgement here."""

from __future__ import annotations

from typing import Optional


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
    return "–" if x is None else f"{x * 100:.{digits}f} %"


def fmt_points(delta: float) -> str:
    """Accuracy difference in points of 100, always signed."""
    points = delta * 100.0
    if abs(points) < 0.05:
        return "±0.0"
    return f"{points:+.1f}".replace("-", "−")


def fmt_number(x: Optional[float]) -> str:
    """A debugger statistic: 4 significant digits, scientific only when very small or large."""
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.3e}"
    return f"{x:.4g}"


def size_ratio_text(size: int, ref: int) -> str:
    if size == ref:
        return "same size as float"
    if size < ref:
        return f"{ref / size:.1f}x smaller than float"
    return f"{size / ref:.1f}x larger than float"
