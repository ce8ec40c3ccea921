"""The trade-off's three named picks and its Pareto front: what a reader takes without reading the table."""

from reporter.findings.picks import BALANCED, MOST_ACCURATE, SMALLEST, Point, front, picks

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


def test_three_picks_name_the_models_a_reader_would_choose():
    chosen = picks(_points())
    assert chosen[MOST_ACCURATE] == "int16x8"
    assert chosen[SMALLEST] == "selective"  # FIQ is smaller but misses the target
    assert chosen[BALANCED] == "selective"  # near-smallest, near-fastest and within noise of the best


def test_no_smallest_pick_when_nothing_meets_the_target():
    points = [Point("fiq", 100, 1.0, 0.5, False), Point("drq", 200, 2.0, 0.6, False)]
    chosen = picks(points)
    assert SMALLEST not in chosen
    assert chosen[MOST_ACCURATE] == "drq"
    assert chosen[BALANCED] in ("fiq", "drq")


def test_the_report_picks_from_every_quantized_model_it_measured(fixture_report):
    """Independently of the findings: the smallest model whose paired test against float shows no loss, and
    the most accurate model, from the variants, the recommended model and its alternatives."""
    from reporter.core import judgement as jd

    report = fixture_report
    rec = report.recommendation
    models = [v for v in report.variants if v.name != "float"] + [rec.selective] + \
        [a.model for a in rec.alternatives if a.model is not None and a.model.name != "alt_float"]
    models = [m for m in models if m.ok and m.metrics is not None]
    flt = report.variant("float").metrics
    no_loss = []
    for m in models:
        paired = m.metrics.paired["float"]
        p = jd.mcnemar_p_counts(paired.reference_only, paired.variant_only)
        if p >= 0.05 or m.metrics.accuracy >= flt.accuracy:
            no_loss.append(m)
    by_pick = {pick: t.name for t in report.findings.tradeoff for pick in t.picks}
    assert {t.name for t in report.findings.tradeoff} == {m.name for m in models}
    assert by_pick[SMALLEST] == min(no_loss, key=lambda m: m.size_bytes).name
    assert by_pick[MOST_ACCURATE] == max(models, key=lambda m: (m.metrics.accuracy, -m.size_bytes)).name
    assert [t.name for t in report.findings.tradeoff if t.chosen] == ["selective"]
