"""Findings: verdicts, significance, gap, culprits and the headline, on reports shaped like the ones
users bring (a one-sample change, a regression output, a false alarm, a collapsed FIQ, missing
classes). No TensorFlow: reports are built from the saved fixture and changed field by field."""

import dataclasses
import math
from pathlib import Path

import pytest

from reporter.pipeline.conclude import report_from_json, with_findings
from reporter.pipeline import conclude
from reporter.core import judgement
from reporter.core import statistics
from reporter.render import formats as render
from reporter.model.report import GapStatus, OutputError, Paired, Report
from reporter.render.view import ReportView

FIXTURE = Path(__file__).parent / "fixtures" / "report.json"


@pytest.fixture(scope="module")
def base() -> Report:
    """The breast-cancer report: float 95.6 %, FIQ 63.2 % (every sample class 1), the search's fix 95.6 %."""
    return report_from_json(FIXTURE.read_text())


def changed(report: Report, variants: dict = None, **fields) -> Report:
    """A copy with some variants' fields replaced (name -> changes, "selective" included); findings
    are derived again from the changed report."""
    variants = variants or {}
    new = [dataclasses.replace(v, **variants.get(v.name, {})) for v in report.variants]
    rec = fields.pop("recommendation", report.recommendation)
    if rec is not None and rec.selective is not None and "selective" in variants:
        rec = dataclasses.replace(rec, selective=dataclasses.replace(rec.selective, **variants["selective"]))
    r = dataclasses.replace(report, variants=new, recommendation=rec, findings=None, **fields)
    return dataclasses.replace(r, findings=conclude.findings_of(r))


def with_metrics(report: Report, name: str, **changes) -> dict:
    v = report.variant(name)
    return {name: {"metrics": dataclasses.replace(v.metrics, **changes)}}


def exact_mcnemar(b: int, c: int) -> float:
    """Two-sided exact binomial test of b against b + c at 1/2, written out."""
    n = b + c
    tail = sum(math.comb(n, i) for i in range(0, min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def test_mcnemar_and_wilson_agree_with_their_formulas():
    for b, c in ((7, 2), (1, 0), (37, 0), (10, 10), (0, 3)):
        assert statistics.mcnemar_p_counts(b, c) == pytest.approx(exact_mcnemar(b, c))
    k, n, z = 109, 114, 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low, high = statistics.wilson_interval(k, n)
    assert (low, high) == pytest.approx((centre - half, centre + half))


def test_a_one_sample_change_reads_within_noise_not_as_a_loss(base):
    flt = base.variant("float").metrics
    r = changed(base, with_metrics(base, "drq", accuracy=flt.accuracy - 1 / 114,
                                   paired={"float": Paired(reference_only=1, variant_only=0)}))
    drq = r.findings.variant("drq")
    assert drq.direction == "same" and drq.vs_float.significant is False
    assert drq.vs_float.p_value == pytest.approx(1.0)
    assert drq.vs_float.text == "within noise: −0.9 points, p = 1"
    v = ReportView(r)
    accuracy_row = next(row for row in v.metric_rows if row.label == "Accuracy")
    assert accuracy_row.cells[1].arrow == "↓" and accuracy_row.cells[1].tone == "neutral"
    md = render.render_md(r).decode()
    assert "| DRQ |" in md and "within noise: −0.9 points, p = 1" in md


def test_a_significant_collapse_names_the_culprits_and_the_fix(base):
    r = changed(base, {**with_metrics(base, "fiq", paired={"float": Paired(37, 0)}),
                       "selective": {"metrics": dataclasses.replace(
                           base.recommendation.selective.metrics,
                           paired={"float": Paired(0, 0), "fiq": Paired(0, 37)})}})
    f = r.findings
    fiq = f.variant("fiq")
    assert fiq.direction == "worse" and fiq.vs_float.p_value == pytest.approx(exact_mcnemar(37, 0))
    assert fiq.degenerate is not None and fiq.degenerate.label == 1 and fiq.degenerate.share == 1.0
    assert f.gap.status == "recovered" and f.gap.p_value == pytest.approx(exact_mcnemar(37, 0))
    assert [c.op for c in f.culprits] == ["SUB", "MUL"] and {c.layer for c in f.culprits} == {"normalization_1"}
    needed = [reason for c in f.culprits for reason in c.reasons if reason.kind == "needed"]
    assert len(needed) == 2 and all(reason.value > 0 for reason in needed)
    assert f.fix.points_won_back == pytest.approx(37 / 114) and f.fix.share_of_gap == pytest.approx(1.0)
    assert f.fix.vs_fiq.significant and f.fix.vs_float.significant is False
    story = " ".join(f.headline)
    assert "FIQ loses 32.5 accuracy points against float (95.6 % → 63.2 %, p < 0.001)" in story
    assert "predicts class 1 for 100 % of samples" in story
    assert "the SUB and MUL of layer normalization_1" in story and "wins back 32.5 points (100 % of the gap)" in story
    # The before/after table compares the fix with FIQ (green: it helps) and with float (within noise).
    rows = {row.label: row for row in ReportView(r).before_after_rows}
    vs_fiq, vs_float = rows["Accuracy"].cells[3], rows["Accuracy"].cells[4]
    assert vs_fiq.tone == "good" and vs_fiq.text.startswith("+32.5 points")
    assert vs_float.tone == "neutral" and "the same samples right" in vs_float.text


def test_no_gap_with_a_flagged_layer_is_a_false_alarm_not_a_fix(base):
    layers = [dataclasses.replace(layer, suspect=layer.index == 2, reasons=["rmse/scale 63.5 > 0.7"] * (layer.index == 2))
              for layer in base.layers]
    rec = dataclasses.replace(base.recommendation, selective=None, denylisted_nodes=[], code="", search=None,
                              gap=GapStatus("no_gap", 0.0, 1.0, 0.0, "FIQ is at least as accurate as float"),
                              summary="FIQ needs no fix.")
    flt = base.variant("float").metrics
    r = changed(base, with_metrics(base, "fiq", accuracy=flt.accuracy, confusion_matrix=flt.confusion_matrix,
                                   paired={"float": Paired(0, 0)}), layers=layers, recommendation=rec)
    f = r.findings
    assert f.gap.status == "no_gap" and f.culprits == [] and f.fix is None
    assert [h.code for h in f.hints] == ["rule_false_alarm"]
    assert "no layer needs to stay in float" in f.headline[1]  # after the model to ship
    html = render.render_html(r).decode()
    assert "Layers to keep in float" not in html and "Reproduce the search's model" not in html


def test_a_regression_output_gets_no_gap_sentences(base):
    """A model whose output is not class scores (run with --first-layers 1): the gap cannot be
    computed, so no sentence may say FIQ is as accurate as float or that a gap was recovered."""
    model = dataclasses.replace(base.model, num_classes=None, task="regression")
    errs = {"float": None, "drq": OutputError(0.01, 0.2), "fiq": OutputError(4.0, 9.0)}
    variants = {name: {"metrics": None, "output_error": err} for name, err in errs.items()}
    variants["selective"] = {"metrics": None, "output_error": OutputError(0.02, 0.3), "accuracy_gap_recovered": None}
    rec = dataclasses.replace(base.recommendation, search=None, method="rule", gap=GapStatus(
        "not_measurable", reason="the model's output is not class scores, so there is no accuracy"))
    r = changed(base, variants, model=model, recommendation=rec)
    f = r.findings
    assert f.task == "regression" and f.gap.status == "not_measurable"
    assert f.fix.status == "measured" and f.fix.output_mse == 0.02 and f.fix.fiq_output_mse == 4.0
    story = " ".join(f.headline)
    assert "accuracy is not measured" in story and "from MSE 4 to 0.02" in story
    for text in (story, render.render_md(r).decode()):
        assert "as accurate" not in text and "of the gap" not in text
    from reporter.findings.gate import Gate
    from reporter.pipeline.conclude import check_gate as check

    gate = check(r, Gate(0.05, "fiq"))
    assert not gate.passed and "not class scores" in gate.message


@pytest.mark.parametrize("largest,words", [
    (960, "the largest weight tensor has 960 elements, under the converter's minimum of 1,024"),
    (1024, "DRQ quantized no weight although the largest weight tensor has 1,024 elements"),
])
def test_drq_size_note_says_what_was_measured(base, largest, words):
    r = changed(base, model=dataclasses.replace(base.model, largest_weight_elements=largest))
    assert words in r.findings.variant("drq").verdict


def test_missing_classes_are_warned_and_latency_that_matters_is_told(base):
    fiq_lat = base.variant("float").latency_ms
    slow = dataclasses.replace(fiq_lat, median=fiq_lat.median * 8)
    r = changed(base, {**with_metrics(base, "float", classes_present=[1]), "fiq": {"latency_ms": slow}})
    assert [w.code for w in r.findings.warnings] == ["classes_missing"]
    assert "no samples of 1 of the model's 2 classes (0)" in r.findings.warnings[0].text
    assert "FIQ runs 8.0x slower than float" in r.findings.headline[-1]
    same = changed(base, {"fiq": {"latency_ms": dataclasses.replace(fiq_lat, median=fiq_lat.median * 1.2)}})
    assert not any("FIQ runs" in line for line in same.findings.headline)


def test_findings_are_stored_in_report_json_as_they_were_derived(base):
    again = report_from_json(base.to_json())
    assert again.findings == base.findings and again.findings is not None


def _mcnemar(paired: dict) -> float:
    """scipy's exact binomial test of the variant's wins among the discordant pairs (1 when there are none)."""
    from scipy.stats import binomtest

    b, c = paired["reference_only"], paired["variant_only"]
    return binomtest(c, b + c, 0.5).pvalue if b + c else 1.0


def test_findings_derived_for_a_file_without_them_match_an_independent_reading_of_its_measurements():
    """A report.json whose findings were dropped (an older version's) gets them derived when read; each is checked
    against what numpy and scipy compute from the stored measurements alone: accuracy from the confusion matrix,
    its Wilson interval, the size ratio, the paired McNemar test against float and its direction, the gap, the fix
    and the collapse onto one class."""
    import json

    import numpy as np
    from scipy.stats import binomtest

    data = json.loads(FIXTURE.read_text())
    data.pop("findings")
    found = with_findings(Report.from_dict(data)).findings
    assert found is not None
    measured = {v["name"]: v for v in data["variants"]}
    measured["selective"] = data["recommendation"]["selective"]
    cms = {name: np.array(v["metrics"]["confusion_matrix"]) for name, v in measured.items()}
    acc = {name: float(np.trace(cm) / cm.sum()) for name, cm in cms.items()}
    size = {name: v["size_bytes"] for name, v in measured.items()}
    for name, v in measured.items():
        f = found.variant(name)
        cm = cms[name]
        assert f.accuracy == pytest.approx(acc[name], abs=1e-12), name
        wilson = binomtest(int(np.trace(cm)), int(cm.sum())).proportion_ci(0.95, method="wilson")
        assert (f.accuracy_low, f.accuracy_high) == pytest.approx((wilson.low, wilson.high), abs=1e-9), name
        assert f.size_bytes == size[name] and f.size_ratio == pytest.approx(size[name] / size["float"]), name
        if name == "float":
            continue
        p = _mcnemar(v["metrics"]["paired"]["float"])
        assert f.vs_float.p_value == pytest.approx(p, rel=1e-9), name
        assert f.vs_float.delta == pytest.approx(acc[name] - acc["float"], abs=1e-12), name
        assert f.vs_float.significant == (p < 0.05), name
        expected = "same" if p >= 0.05 else ("worse" if acc[name] < acc["float"] else "better")
        assert f.direction == expected, (name, p)
        predicted = cm.sum(axis=0) / cm.sum()  # share of samples predicted as each class
        float_predicted = cms["float"].sum(axis=0) / cms["float"].sum()
        collapsed = predicted.max() >= 0.95 and float_predicted.max() < 0.95
        assert (f.degenerate is not None) == collapsed, name
        if collapsed:
            assert f.degenerate.label == int(predicted.argmax()) and f.degenerate.share == pytest.approx(predicted.max())
    # the float-to-FIQ gap and the fix that closes it, from the same counts
    fiq_p = _mcnemar(measured["fiq"]["metrics"]["paired"]["float"])
    assert found.gap.fiq_drop == pytest.approx(acc["float"] - acc["fiq"], abs=1e-12)
    assert found.gap.p_value == pytest.approx(fiq_p, rel=1e-9) and fiq_p < 0.05
    fix = found.fix
    assert fix.layers == len(data["recommendation"]["denylisted_nodes"])
    assert fix.accuracy == pytest.approx(acc["selective"], abs=1e-12)
    assert fix.points_won_back == pytest.approx(acc["selective"] - acc["fiq"], abs=1e-12)
    assert fix.share_of_gap == pytest.approx((acc["selective"] - acc["fiq"]) / (acc["float"] - acc["fiq"]))
    assert fix.size_cost_bytes == size["selective"] - size["fiq"]
    assert fix.vs_fiq.p_value == pytest.approx(_mcnemar(measured["selective"]["metrics"]["paired"]["fiq"]), rel=1e-9)
    assert fix.vs_float.p_value == pytest.approx(_mcnemar(measured["selective"]["metrics"]["paired"]["float"]))
    # the comparison table: each model meets the accuracy target when it is not worse than float beyond noise
    for row in found.tradeoff:
        if row.name == "float":
            assert row.meets_target
            continue
        p = _mcnemar(measured[row.name]["metrics"]["paired"]["float"])
        assert row.meets_target == (p >= 0.05 or acc[row.name] >= acc["float"]), (row.name, p)
        assert row.size_bytes == size[row.name] and row.score == pytest.approx(acc[row.name], abs=1e-12)


def test_the_gate_reads_the_findings(base):
    from reporter.batch.config import Gate
    from reporter.pipeline.conclude import check_gate as check

    result = check(base, Gate(0.02, "fiq"))
    assert not result.passed and result.drop == pytest.approx(37 / 114)
    assert "fiq accuracy drop 32.5 points" in result.message and "exceeds the limit of 2.0" in result.message
    assert check(base, Gate(0.02, "selective")).passed
    assert not check(base, Gate(0.02, "f16")).passed  # not built: the gate cannot pass


@pytest.mark.parametrize("target_met,words", [
    # FIQ loses 32.5 points on the evaluation data: a target met on the selection samples is said as such only
    (True, "FIQ meets the search's target (agree with float on at least 99% of samples) on its 355 selection samples"
           " (x_calib) but misses the accuracy target on the evaluation data"),
    (False, "No float layer changed FIQ measurably on"),
])
def test_a_search_that_keeps_nothing_says_why(base, target_met, words):
    rec = base.recommendation
    rec = dataclasses.replace(rec, selective=None, denylisted_nodes=[], code="",
                              search=dataclasses.replace(rec.search, target_met=target_met),
                              gap=dataclasses.replace(rec.gap, status="gap"))
    r = changed(base, recommendation=rec)
    assert r.findings.fix.status == "not_built" and r.findings.culprits == []
    assert r.findings.recommendation.startswith(words)


def test_one_rule_decides_whether_a_model_meets_the_accuracy_target():
    """reporter.findings.rule.standing / meets_target: the one rule the decision, the gap, the blame fix and every
    gate read. With --max-accuracy-drop the limit decides whatever the noise; without, the paired test does; an
    untested loss, and nothing measured, never meet; every labelled output must."""
    from reporter.findings import rule

    S = rule.Standing
    assert rule.standing(S(-0.01, 0.001), None) == "not_worse"
    assert rule.standing(S(0.005, 0.001), 0.01) == "allowed"
    assert rule.standing(S(0.05, 0.2), 0.02) == "loses"  # beyond the limit, though within noise
    assert rule.standing(S(0.05, 0.3), None) == "noise"
    assert rule.standing(S(0.05, 0.001), None) == "loses"
    assert rule.standing(S(0.05, None), None) == "loses"  # a drop whose significance was not recorded
    assert rule.standing(S(), None) == "not_measured"
    assert rule.standing(S(r2=0.995), None) == "close" and rule.standing(S(r2=0.9), None) == "loses"
    assert rule.meets_target([S(0.0, 1.0), S(0.004, 0.5)], 0.01)
    assert not rule.meets_target([S(0.0, 1.0), S(0.02, 0.5)], 0.01)  # one labelled output misses
    assert not rule.meets_target([], None)


def test_size_words_read_the_judgement_ratios(monkeypatch):
    from reporter.render.words.verdicts import size_words as _size_words

    assert _size_words(0.97) == "3 % smaller than float"
    monkeypatch.setattr(judgement, "PERCENT_RATIO", 0.01)
    assert _size_words(0.97) == "1.0x smaller than float"


def _alternative_16x8(report: Report, size_delta: int, lost: int):
    """The recommended layers in 16x8: `size_delta` bytes against the recommended model, right on `lost` fewer
    samples than it (and than float), paired."""
    from reporter.model.report import Alternative

    sel = report.recommendation.selective
    n = report.dataset.num_eval
    acc = sel.metrics.accuracy - lost / n
    paired = {"float": Paired(lost, 0), "selective": Paired(lost, 0)}
    model = dataclasses.replace(sel, name="alt_int16x8", size_bytes=sel.size_bytes + size_delta, converter="LiteRT Quantizer",
                                metrics=dataclasses.replace(sel.metrics, accuracy=acc, paired=paired))
    return Alternative("int16x8", list(report.recommendation.denylisted_nodes), model)


@pytest.mark.parametrize("size_delta, lost, lighter", [(-1000, 1, True), (-1000, 20, False), (+100, 0, False)])
def test_the_same_layers_in_16x8_are_lighter_only_when_as_good_and_smaller(base, size_delta, lost, lighter):
    """The recommended layers in 16x8 are an option of the one comparison table: lighter than the recommended
    model only when smaller and not worse beyond noise; the decision ships it only when it meets the target and is
    the cheapest, and no separate "pick" sentence competes with the decision."""
    rec = dataclasses.replace(base.recommendation, alternatives=[_alternative_16x8(base, size_delta, lost)])
    found = changed(base, recommendation=rec).findings
    status = next(a.status for a in found.alternatives if a.scheme == "int16x8")
    assert (status == "lighter") == lighter
    row = next(t for t in found.tradeoff if t.name == "alt_int16x8")
    assert row.meets_target == (lost < 6)  # 20 samples lost is beyond noise (McNemar)
    assert not any("pick" in line for line in found.headline)
    assert sum(line.startswith(("Ship ", "Keep ")) for line in found.headline) == 1  # the decision, once


def test_a_measured_variant_that_closes_the_gap_is_named_instead_of_giving_up(base):
    """No float layer helped, but the whole model in 16x8 is within noise of float: the report says so, never
    "FIQ stays as it is"."""
    flt = base.variant("float")
    whole = dataclasses.replace(flt, name="int16x8", size_bytes=flt.size_bytes // 2, converter="LiteRT Quantizer",
                                metrics=dataclasses.replace(flt.metrics, paired={"float": Paired(1, 0)}),
                                tensor_types={**flt.tensor_types, "int16": 10, "int8": 5})
    rec = dataclasses.replace(base.recommendation, denylisted_nodes=[], selective=None, alternatives=[],
                              search=dataclasses.replace(base.recommendation.search, target_met=False))
    found = changed(dataclasses.replace(base, variants=[*base.variants, whole]), recommendation=rec).findings
    assert "FIQ stays as it is" not in found.recommendation
    assert found.decision.variant == "int16x8" and found.headline[0].startswith("Ship 16x8")
    whole_row = next(t for t in found.tradeoff if t.name == "int16x8")  # and it is on the trade-off, meeting the target
    assert whole_row.meets_target and whole_row.pareto
    assert not next(t for t in found.tradeoff if t.name == "fiq").meets_target
    without = changed(base, recommendation=rec).findings  # DRQ quantized nothing and FIQ loses: float is kept
    assert without.decision.variant == "float" and not without.decision.meets_target


@pytest.mark.parametrize("sample", ["breast_cancer_mlp", "digits_cnn"])
def test_the_gap_the_search_measured_is_worded_from_its_figures_as_the_search_once_worded_it(sample):
    """The search keeps its gap's figures (Recommendation.gap), not a sentence: the words are written from them, and
    say what the search's own words said when it still wrote them (the sample report's gap as written at 08a7aca,
    kept in tests/fixtures/search_gap_words.json: the gap recovered, and no gap)."""
    import json

    frozen = json.loads((Path(__file__).parent / "fixtures" / "search_gap_words.json").read_text())[sample]
    path = Path(__file__).parents[1] / "sample_reports" / sample / "report.json"
    data = json.loads(path.read_text())
    figures = ("status", "drop", "p_value", "fiq_drop")
    assert {k: data["recommendation"]["gap"][k] for k in figures} == {k: frozen[k] for k in figures}
    said = frozen["reason"]
    assert said in ("the search's model is as good as float", "FIQ is at least as good as float")
    stored = report_from_json(path.read_text()).findings
    data["recommendation"]["gap"]["reason"] = ""
    data.pop("findings")
    found = with_findings(Report.from_dict(data)).findings
    assert found.gap.reason == said == stored.gap.reason
    assert found.recommendation == stored.recommendation and found.headline == stored.headline


def test_the_gap_words_say_each_standing_as_the_search_said_it():
    """Every way the search's gap stood, worded from its figures as the search worded it (its sentences, copied)."""
    from reporter.core import judgement as jd
    from reporter.render.words.recommendation import Scale, searched_words

    def said(status, standing, drop=0.043, p=0.3, limit=None):
        return searched_words(status, standing, drop, p, limit, Scale("accuracy", True, "McNemar"))

    assert said("no_gap", jd.NOT_WORSE, -0.01) == "FIQ is at least as good as float"
    assert said("no_gap", jd.ALLOWED, limit=0.05) == "the drop is within --max-accuracy-drop 0.05"
    assert said("no_gap", jd.NOISE) == "the drop is within noise (McNemar p = 0.3)"
    assert said("gap", jd.LOSES, p=None) == "FIQ loses 4.3 points (McNemar not tested)"
    assert said("recovered", jd.NOT_WORSE, 0.0) == "the search's model is as good as float"
    assert said("recovered", jd.NOISE) == "4.3 points below float, within noise: McNemar p = 0.3"
    assert said("recovered", jd.ALLOWED, limit=0.05) == "4.3 points below float: within --max-accuracy-drop 0.05"
    assert said("open", jd.LOSES, p=0.001) == "the search's model still loses 4.3 points, McNemar p = 0.001"
