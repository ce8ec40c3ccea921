"""The decision (issue 35): one model to ship for the run's --target, from every model measured.

Pure tests on a stored report (tests/fixtures/report.json, the breast-cancer MLP) whose variants are given the
sizes, latencies and paired counts of the cases users met: a tie within noise is no win, a model that loses
beyond noise is not shipped however small, what runs on integer-only hardware is read from the tensor types,
a GPU ships float16, and the gate by target fails when no model for the target meets the limit.
"""

import dataclasses

import pytest

from reporter.core import targets, variants
from reporter.findings import decision as choice
from reporter.model.report import Latency, Paired
from reporter.render import words

FLOAT_TYPES = {"int8": 0, "int16": 0, "int32": 0, "float32": 15, "other": 0, "total": 15}
FIQ_TYPES = {"int8": 12, "int16": 0, "int32": 3, "float32": 2, "other": 0, "total": 17}  # float in and out
INT8_TYPES = {"int8": 12, "int16": 0, "int32": 3, "float32": 0, "other": 0, "total": 15}
DRQ_TYPES = {"int8": 3, "int16": 0, "int32": 0, "float32": 12, "other": 0, "total": 15}  # int8 weights
F16_TYPES = {"int8": 0, "int16": 0, "int32": 0, "float32": 12, "other": 3, "total": 15}  # float16 weights


def _variant(report, name, size, latency_us, paired=None, types=None, like=variants.FIQ):
    base = report.variant(like)
    metrics = base.metrics
    if paired is not None:
        n = report.dataset.num_eval
        acc = report.variant(variants.FLOAT).metrics.accuracy + (paired[1] - paired[0]) / n
        metrics = dataclasses.replace(metrics, accuracy=acc, paired={variants.FLOAT: Paired(*paired)})
    return dataclasses.replace(base, name=name, size_bytes=size, latency_ms=Latency(latency_us / 1000, latency_us / 1000, 5),
                               metrics=metrics, tensor_types=types or FIQ_TYPES, fix=None)


def _report(fixture_report, models, **settings):
    flt = dataclasses.replace(fixture_report.variant(variants.FLOAT), size_bytes=100_000,
                              latency_ms=Latency(0.030, 0.030, 5), tensor_types=FLOAT_TYPES)
    return dataclasses.replace(fixture_report, variants=[flt, *models], recommendation=None, findings=None,
                               settings=dataclasses.replace(fixture_report.settings, **settings))


def test_a_tie_within_noise_is_no_win_the_cheaper_model_ships(fixture_report):
    # The segmentation case: DRQ 0.1 points ahead of FIQ (within noise) but 1.7x slower; FIQ 6 % bigger.
    drq = _variant(fixture_report, variants.DRQ, 50_000, 39, paired=(1, 1), types=DRQ_TYPES)
    fiq = _variant(fixture_report, variants.FIQ, 53_000, 23, paired=(2, 1))
    d = choice.decide(_report(fixture_report, [drq, fiq]))
    assert (d.target, d.variant, d.meets_target) == (targets.CPU, variants.FIQ, True)
    assert d.runner_up == variants.DRQ  # smaller: it trades differently


def test_a_model_that_loses_beyond_noise_is_not_shipped_however_small(fixture_report):
    drq = _variant(fixture_report, variants.DRQ, 30_000, 30, paired=(0, 0), types=DRQ_TYPES)
    fiq = _variant(fixture_report, variants.FIQ, 25_000, 12, paired=(20, 0))  # McNemar p < 0.001
    d = choice.decide(_report(fixture_report, [drq, fiq]))
    assert d.variant == variants.DRQ and d.runner_up == ""
    # With an allowed drop that covers FIQ's loss, FIQ is within the target and cheaper: it ships.
    drop = 20 / fixture_report.dataset.num_eval + 0.001
    d = choice.decide(_report(fixture_report, [drq, fiq], max_accuracy_drop=drop))
    assert d.variant == variants.FIQ and d.runner_up == variants.DRQ


def test_a_model_the_converter_quantized_nothing_of_is_not_shipped_as_quantized(fixture_report):
    drq = _variant(fixture_report, variants.DRQ, 100_000, 30, paired=(0, 0), types=FLOAT_TYPES)  # DRQ kept float
    fiq = _variant(fixture_report, variants.FIQ, 25_000, 60, paired=(0, 0))
    d = choice.decide(_report(fixture_report, [drq, fiq]))
    assert d.variant == variants.FIQ and d.runner_up == ""


def test_a_recurrent_models_bool_tensor_is_no_quantization(fixture_report):
    """A GRU's loop keeps a bool tensor ("other"): with the weights read per op type and none below float32, DRQ is
    float by another name, never shipped; the sentence says why nothing quantized was measured."""
    from reporter.model.variant import WeightCoverage

    loop = dict(FLOAT_TYPES, other=1, total=16)
    kept = {"FULLY_CONNECTED": WeightCoverage(3, 0, 700, 0), "WHILE": WeightCoverage(2, 0, 768, 0)}
    drq = dataclasses.replace(_variant(fixture_report, variants.DRQ, 100_000, 30, paired=(0, 0), types=loop),
                              weight_coverage=kept)
    f16 = dataclasses.replace(_variant(fixture_report, variants.F16, 60_000, 30, paired=(0, 0), types=loop),
                              weight_coverage={"FULLY_CONNECTED": WeightCoverage(3, 3, 700, 700)})
    assert not targets.quantized(drq.tensor_types, drq.weight_coverage)
    assert targets.quantized(f16.tensor_types, f16.weight_coverage)  # float16 weights are quantization
    assert targets.quantized(drq.tensor_types)  # a report without weight coverage reads "other" as before
    assert choice.decide(_report(fixture_report, [drq, f16])).variant == variants.F16
    found = words.findings_of(_report(fixture_report, [drq]))
    assert found.decision.variant == variants.FLOAT
    assert "(DRQ quantized nothing)" in found.decision.reason


def test_integer_only_hardware_runs_only_integer_only_models(fixture_report):
    fiq = _variant(fixture_report, variants.FIQ, 25_000, 12, paired=(0, 0))  # float input and output
    io8 = _variant(fixture_report, variants.INT8_IO, 25_000, 12, paired=(1, 0), types=INT8_TYPES)
    d = choice.decide(_report(fixture_report, [fiq, io8], target=targets.INT8))
    assert (d.variant, d.meets_target, d.candidates, d.file) == (variants.INT8_IO, True, 1, "int8_io.tflite")
    # The int8 I/O model collapses: nothing ships, FIQ (float I/O) is what would meet the target elsewhere.
    io8 = _variant(fixture_report, variants.INT8_IO, 25_000, 12, paired=(30, 0), types=INT8_TYPES)
    report = _report(fixture_report, [fiq, io8], target=targets.INT8, max_accuracy_drop=0.01)
    d = choice.decide(report)
    assert (d.variant, d.meets_target, d.runner_up, d.would_meet) == ("", False, variants.INT8_IO, variants.FIQ)
    found = words.findings_of(report)
    assert found.gate is not None and not found.gate.passed
    assert "no quantized model on integer-only hardware meets the limit" in found.gate.message
    assert found.headline[0].startswith("Nothing to ship on integer-only hardware")


def test_a_gpu_ships_float16_and_a_cpu_gate_holds_the_shipped_model(fixture_report):
    f16 = _variant(fixture_report, variants.F16, 50_000, 30, paired=(0, 0), types=F16_TYPES)
    fiq = _variant(fixture_report, variants.FIQ, 25_000, 12, paired=(0, 0))
    d = choice.decide(_report(fixture_report, [f16, fiq], target=targets.GPU))
    assert d.variant == variants.F16 and d.candidates == 1
    report = _report(fixture_report, [f16, fiq], max_accuracy_drop=0.02)
    found = words.findings_of(report)
    assert found.decision.variant == variants.FIQ and found.gate.passed and found.gate.variant == variants.FIQ
    assert found.headline[0].startswith("Ship Full integer (FIQ) on a CPU")


@pytest.mark.parametrize("target", targets.TARGETS)
def test_no_model_for_the_target_meets_the_limit_keeps_float_or_ships_nothing(fixture_report, target):
    models = [_variant(fixture_report, name, 25_000, 12, paired=(25, 0), types=types)
              for name, types in ((variants.FIQ, FIQ_TYPES), (variants.INT8_IO, INT8_TYPES),
                                  (variants.F16, F16_TYPES))]
    found = words.findings_of(_report(fixture_report, models, target=target, max_accuracy_drop=0.01))
    d = found.decision
    assert not d.meets_target and not found.gate.passed
    assert d.variant == ("" if target == targets.INT8 else variants.FLOAT)
    assert d.runner_up  # the closest model for the target is named


def test_on_a_cpu_float_is_kept_when_every_quantized_model_costs_more_there(fixture_report):
    # The LSTM case: FIQ 2.4x smaller but 7x slower than float (74 µs against 10.6 µs per sample).
    fiq = _variant(fixture_report, variants.FIQ, 42_000, 74, paired=(0, 0))
    report = _report(fixture_report, [fiq], max_accuracy_drop=0.01)
    report = dataclasses.replace(report, variants=[dataclasses.replace(
        report.variants[0], latency_ms=Latency(0.0106, 0.0106, 5)), fiq])
    found = words.findings_of(report)
    d = found.decision
    assert (d.variant, d.runner_up, d.meets_target) == (variants.FLOAT, variants.FIQ, True)
    assert found.gate.passed  # float loses nothing
    assert found.headline[0].startswith("Keep float on a CPU") and "7.0x slower" in found.headline[0]
    # The same model on integer-only hardware or a GPU: host latency is not the target's, and float is no option.
    assert choice.decide(dataclasses.replace(report, settings=dataclasses.replace(report.settings, target=targets.GPU))).variant \
        == variants.FLOAT  # no float16 model measured: float32 is what a GPU delegate runs


def test_latency_decides_only_beyond_its_own_timing_spread(fixture_report):
    # A tiny MLP: FIQ 1.4x smaller than float and 2x slower (0.65 µs apart). Whether that difference is noise is read
    # from the models' own repeated timings (p90 against median), not from a fixed microsecond floor.
    fiq = _variant(fixture_report, variants.FIQ, 70_000, 1.3, paired=(0, 0))

    def decided(float_p90_ms, fiq_p90_ms):
        timed = dataclasses.replace(fiq, latency_ms=Latency(0.0013, fiq_p90_ms, 50))
        report = _report(fixture_report, [timed])
        report = dataclasses.replace(report, variants=[dataclasses.replace(
            report.variants[0], latency_ms=Latency(0.00065, float_p90_ms, 50)), timed])
        return words.findings_of(report)

    noisy = decided(0.0016, 0.0020)  # spreads of 0.95 and 0.7 µs: 0.65 µs apart is within them, so size decides
    assert noisy.decision.variant == variants.FIQ and "as fast as float" in noisy.headline[0]
    steady = decided(0.00070, 0.00135)  # spreads of 0.05 µs: float is faster beyond noise, and costs less
    assert steady.decision.variant == variants.FLOAT and steady.decision.why == "float_cheaper"
    assert "2.0x slower" in steady.headline[0]  # the sentence reads the decision's rule


def test_a_spread_out_loss_is_answered_by_a_whole_model_scheme_without_a_layer_table(fixture_report):
    """The search stopped on a spread-out loss (EfficientNet-like): no layer kept, so no table of float layers; the
    report says the loss is spread, and the model to ship comes from the whole-model schemes (DRQ within noise)."""
    from reporter.render.views.recommendation import RecommendationView
    from reporter.render.views.common import Basis

    reason = ("FIQ's loss is spread across the network: no set of at most 25 ops (10% of 255) reaches the target"
              " or wins back 50% of the way to it")
    rec = fixture_report.recommendation
    rec = dataclasses.replace(rec, selective=None, denylisted_nodes=[], code="", alternatives=[], rule=None,
                              search=dataclasses.replace(rec.search, spread=True, target_met=False,
                                                         stop_reason=reason))
    drq = _variant(fixture_report, variants.DRQ, 30_000, 40, paired=(2, 1), types=DRQ_TYPES)
    fiq = _variant(fixture_report, variants.FIQ, 25_000, 30, paired=(20, 2))
    report = dataclasses.replace(_report(fixture_report, [drq, fiq]), recommendation=rec)
    report = words.attach(report)
    found = report.findings
    assert found.decision.variant == variants.DRQ and found.headline[0].startswith("Ship Dynamic range (DRQ)")
    assert found.recommendation.startswith(reason) and found.culprits == []
    view = RecommendationView(Basis(report))
    assert view.kept_rows == [] and [row.model for row in view.option_rows][:2] == ["Float", "Dynamic range (DRQ)"]
