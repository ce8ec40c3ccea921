"""The comparison table's Pareto front, and the decision read from every model the report measured."""

import math

from reporter.findings.picks import Point, front

KB = 1024


def _points():
    # An EfficientNet-like run: FIQ small and wrong, 16x8 right but big and slow, the recommended model in
    # between, DRQ dominated by the recommended model (bigger, slower, less accurate).
    return [
        Point("fiq", 4700 * KB, 10.0, 0.763, False),
        Point("int16x8", 5100 * KB, 65.0, 0.807, True),
        Point("selective", 4800 * KB, 12.0, 0.801, True),
        Point("drq", 5000 * KB, 30.0, 0.790, True),
    ]


def test_front_leaves_out_only_models_beaten_on_every_axis():
    flags = dict(zip([p.name for p in _points()], front(_points())))
    assert flags == {"fiq": True, "int16x8": True, "selective": True, "drq": False}


def test_latency_is_ignored_when_a_model_was_not_timed():
    points = [Point("a", 10, None, 0.9, True), Point("b", 10, 1.0, 0.9, True), Point("c", 20, 0.5, 0.9, True)]
    assert front(points) == [True, True, False]  # c is bigger and no better once speed cannot count


def test_the_report_ships_a_model_from_every_model_it_measured(fixture_report):
    """Independently of the findings: every model measured is in the table; the shipped one is not worse than
    float by its own McNemar test, and no other such model is both smaller and faster beyond timing noise."""
    from scipy.stats import binomtest

    from reporter.pipeline import conclude

    report = fixture_report
    found = conclude.findings_of(report)
    rec = report.recommendation
    models = [v for v in report.variants] + [rec.selective] + \
        [a.model for a in rec.alternatives if a.model is not None and a.model.name != "alt_float"]
    models = [m for m in models if m.ok and m.metrics is not None]
    flt = report.variant("float").metrics

    def meets(m):
        if m.name == "float":
            return True
        paired = m.metrics.paired.get("float")
        b, c = paired.reference_only, paired.variant_only  # scipy's exact test, not the tool's judgement
        return (binomtest(c, b + c, 0.5).pvalue if b + c else 1.0) >= 0.05 \
            or m.metrics.accuracy >= flt.accuracy

    assert {t.name for t in found.tradeoff} == {m.name for m in models}
    quantized = [m for m in models if m.name != "float" and m.tensor_types.get("int8")]

    def slower_beyond_spread(m, ref):  # medians further apart than either model's own p90 - median
        spread = max(m.latency_ms.p90 - m.latency_ms.median, ref.latency_ms.p90 - ref.latency_ms.median)
        return m.latency_ms.median - ref.latency_ms.median > spread

    def doublings(m, small, fast):  # size over the smallest, latency over the fastest where slower beyond noise
        lat = math.log2(m.latency_ms.median / fast.latency_ms.median) if slower_beyond_spread(m, fast) else 0.0
        return math.log2(m.size_bytes / small.size_bytes) + lat

    pool = [m for m in quantized if meets(m)] + [report.variant("float")]
    small = min(pool, key=lambda m: m.size_bytes)
    fast = min(pool, key=lambda m: m.latency_ms.median)
    cost = {m.name: doublings(m, small, fast) for m in pool}
    cheapest = min(cost.values())
    ship = next(m for m in pool if m.name == found.decision.variant)
    assert meets(ship) and cost[ship.name] <= cheapest + 0.1
    assert [t.name for t in found.tradeoff if t.chosen] == [ship.name]
    assert found.headline[0].startswith("Keep float" if ship.name == "float" else "Ship ")
