"""Section 2, the recommendation: what to keep in float and why, its measured effect before and after,
the rmse/scale rule against the search, and the search's facts and trade-off."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

from reporter.core.formatting import (NOT_MEASURED, capital, fmt_bytes, fmt_metric, fmt_ms, fmt_number, fmt_percent,
                                      fmt_score, fmt_signed_bytes, or_missing)
from reporter.core import targets, variants
from reporter.core.variants import SEARCH_METHOD
from reporter.model.report import SearchStep, VariantResult
from reporter.render.views.common import Basis, Cell, Row, latency_cell_words, ratio_tone, ratio_words, step_tone
from reporter.render.words.recommendation import SCHEME_NAMES
from reporter.render.words.decision import why_not
from reporter.render.words.verdicts import size_change


@dataclass(frozen=True)
class KeptRow:
    """One layer of the recommendation, with why it is there."""

    index: str
    op: str
    tensor: str
    rmse_over_scale: str
    range: str
    why: str
    layer: str = ""


@dataclass(frozen=True)
class TradeoffRow:
    float_layers: int
    change: str
    size: str
    selection: str
    accuracy: str
    latency: str
    pareto: bool
    chosen: bool
    rule: bool = False


@dataclass(frozen=True)
class Candidate:
    """One model of the search's trade-off table, as measured: a step of the search, the rule's pick or the
    recommended layers in a lighter scheme (`rule`: a comparison row, never on the front or the pick)."""

    nodes: list[str]  # its float layers
    change: str
    size_bytes: int
    selection: Optional[float]  # the search's selection score
    accuracy: Optional[float]  # the main metric on the evaluation data
    mse: Optional[float]  # the output MSE against float, for a model without a main metric
    latency_ms: Optional[float]
    pareto: bool = False
    chosen: bool = False
    rule: bool = False

    @classmethod
    def of_step(cls, st: SearchStep) -> "Candidate":
        """A candidate the search measured."""
        change = st.change if st.phase != variants.FIQ else "FIQ (nothing in float)"
        return cls(st.denylisted_nodes, change, st.size_bytes, st.selection_score, st.accuracy, st.output_mse,
                   st.latency_ms, st.pareto, st.chosen)

    @classmethod
    def of_model(cls, nodes: list[str], change: str, m: VariantResult,
                 selection: Optional[float] = None) -> "Candidate":
        """A model the table compares with the search's candidates (the rule's pick, a lighter scheme)."""
        return cls(nodes, change, m.size_bytes, selection, m.metrics.score if m.metrics else None,
                   m.output_error.mse if m.output_error else None, m.latency_ms.median if m.latency_ms else None,
                   rule=True)


@dataclass(frozen=True)
class OptionRow:
    """One model measured, in the one comparison table the decision is read against."""

    model: str
    score: str
    vs_float: str
    size: str
    latency: str
    runs: str  # on the target, as built
    meets: str  # the accuracy target
    role: str  # "ship", "runner-up" or ""
    pareto: bool
    chosen: bool


class RecommendationView:
    """The recommendation's sentence, kept layers, before/after table, rule comparison and search."""

    BEFORE_AFTER_COLUMNS = ("Float", "FIQ", "Recommended", "Recommended vs FIQ", "Recommended vs float")

    def __init__(self, basis: Basis):
        self.basis = basis

    @property
    def sentence(self) -> str:
        """What the recommendation keeps in float and what that model measured."""
        return self.basis.findings.recommendation

    @cached_property
    def kept_rows(self) -> list[KeptRow]:
        """The recommended float layers (the findings' culprits), with the measured reason for each."""
        rows = []
        by_name = {layer.tensor_name: layer for layer in self.basis.report.layers}
        for c in self.basis.findings.culprits:
            if not c.kept:
                continue
            layer = by_name.get(c.tensor)
            rows.append(KeptRow(
                index=str(c.index) if c.index >= 0 else "–", op=c.op or "–", tensor=c.tensor,
                rmse_over_scale=f"{layer.rmse_over_scale:.3f}" if layer else "–",
                range=fmt_number(layer.range) if layer else "–",
                why="; ".join(r.text for r in c.reasons) or "–", layer=c.layer))
        return rows

    @property
    def before_after_columns(self) -> list[str]:
        return list(self.BEFORE_AFTER_COLUMNS)

    @cached_property
    def before_after_rows(self) -> list[Row]:
        """Float, FIQ and the recommended model, then the recommended model against FIQ and against
        float: each change coloured by whether it helps, and only when it is beyond noise."""
        basis = self.basis
        rec = basis.report.recommendation
        fix = basis.findings.fix
        if not rec or not rec.selective or not rec.selective.ok or fix is None:
            return []
        flt, fiq, sel = basis.float, basis.report.variant(variants.FIQ), rec.selective
        if flt is None or fiq is None or not fiq.ok:
            return []
        rows = []
        if basis.scored and sel.metrics:
            def comparison_cell(c):
                if c is None:
                    return Cell("–")
                return Cell(c.text, "", "neutral" if not c.significant else ("good" if c.delta > 0 else "bad"))
            metric, share = basis.metric
            rows.append(Row(capital(metric),
                            [Cell(fmt_score(v.metrics.score, share) if v.metrics else NOT_MEASURED)
                             for v in (flt, fiq, sel)]
                            + [comparison_cell(fix.vs_fiq), comparison_cell(fix.vs_float)]))
            if fix.share_of_gap is not None:
                rows.append(Row("Share of the gap won back", [Cell(""), Cell("0 %"), Cell(fmt_percent(fix.share_of_gap, 0))]
                                + [Cell(""), Cell("")]))
        elif sel.output_error and fiq.output_error:
            mse = (fiq.output_error.mse, sel.output_error.mse)
            ratio = mse[1] / mse[0] if mse[0] else None
            rows.append(Row("Output MSE vs float", [Cell("0"), Cell(fmt_number(mse[0])), Cell(fmt_number(mse[1])),
                                                    Cell(ratio_words(ratio, "lower", "higher"), "",
                                                         ratio_tone(ratio, 0.0)),
                                                    Cell("")]))
        lat = [v.latency_ms.median if v.latency_ms else None for v in (flt, fiq, sel)]
        for label, get, fmt, toned in (
            ("Size", lambda v: v.size_bytes, fmt_bytes, True),
            ("Latency, median", None, fmt_ms, True),
            ("Float32 tensors", lambda v: None if v.not_measured("ops") else v.tensor_types.get("float32", 0),
             lambda n: f"{n:,}", False),
        ):
            if get is None:  # latency: against FIQ and float by the timing-noise rule the decision reads
                found = basis.findings.variant(sel.name)
                against = ((found.latency_vs_fiq, fiq), (found.latency_vs_float, flt)) if found is not None else \
                    ((None, fiq), (None, flt))
                rows.append(Row(label, [Cell(or_missing(x, fmt)) for x in lat] + [
                    Cell(latency_cell_words(step, sel, other) or "–", "", step_tone(step))
                    for step, other in against]))
                continue
            values = [get(v) for v in (flt, fiq, sel)]
            cells = [Cell(or_missing(x, fmt)) for x in values]
            for ref in (values[1], values[0]):
                ratio = values[2] / ref if values[2] is not None and ref else None
                if label == "Size":
                    text = fmt_signed_bytes(values[2] - ref) if ref is not None else "–"
                    if ratio is not None:
                        text += f" ({size_change(ratio)})"
                else:
                    text = f"{values[2] - ref:+,}".replace("-", "−") if ref is not None and values[2] is not None else "–"
                cells.append(Cell(text, "", ratio_tone(ratio, 0.0) if toned else "neutral"))
            rows.append(Row(label, cells))
        return rows

    @property
    def rule_comparison(self) -> str:
        """"the rmse/scale rule: 3 layers, -37 % of the gap; the search: 2 layers, 100 %"."""
        rec = self.basis.report.recommendation
        if not rec or not rec.rule or not rec.selective or rec.method != SEARCH_METHOD:
            return ""
        rule = rec.rule
        n_rule, n = len(rule.denylisted_nodes), len(rec.denylisted_nodes)
        offered = self.basis.findings.fix is not None  # a gap within noise: nothing won back to share

        def result(v, share):
            if v is None or not v.ok:
                return "not built" if v is None else f"failed ({v.error})"
            if share is not None and offered:
                return f"{fmt_percent(share, 0)} of the gap, {fmt_bytes(v.size_bytes)}"
            return fmt_bytes(v.size_bytes)

        if n_rule == 0:
            return f"The rmse/scale rule (threshold {rule.threshold:g}) flags no layer; the search keeps {n}."
        return (f"The rmse/scale rule: {n_rule} layer{'s' if n_rule != 1 else ''},"
                f" {result(rule.selective, rule.accuracy_gap_recovered)}; the search: {n} layer{'s' if n != 1 else ''},"
                f" {result(rec.selective, rec.selective.accuracy_gap_recovered)}.")

    # --- the search and its trade-off ------------------------------------------------------------
    @property
    def search(self):
        rec = self.basis.report.recommendation
        return rec.search if rec else None

    @property
    def search_facts(self) -> list[tuple[str, str]]:
        """The search's settings and outcome, as term and text."""
        search = self.search
        if not search:
            return []
        sd = search.selection_data
        where = ("x_calib, the calibration samples among them (too few remained beyond them; not evaluation"
                 " samples)" if sd.source == "x_calib" and sd.overlaps_calibration else
                 "x_calib beyond the calibration samples (unlabelled; not evaluation samples)" if sd.source == "x_calib"
                 else f"a seeded half of the evaluation data ({sd.heldout_num:,} samples held out)")
        facts = [
            ("Chosen on", f"{sd.num_samples:,} samples of {where}; score: {sd.score}"),
            ("Reported on", f"the {self.basis.report.dataset.num_eval:,} evaluation samples"),
            ("Can detect", f"a change of {sd.detectable * 100:.1f} points of agreement with float or more (the fewest"
                           f" samples, all changing one way, an exact McNemar test calls significant among"
                           f" {sd.num_samples:,}); smaller effects are not measurable here, so more selection samples"
                           f" (--selection-samples, more x_calib) can reveal them" if sd.detectable is not None else
             "the search compares candidates with a paired test on these samples"),
            ("Target", f"{search.target_text}: {'met' if search.target_met else 'NOT met'} (on the selection samples)"),
            ("Stopped because", search.stop_reason or "–"),
            ("Cost", f"{search.evaluations} candidate models (budget {search.budget}) in {search.seconds:.2f} s,"
                     f" {search.seconds_per_candidate * 1000:.0f} ms each"),
        ]
        if search.cost is not None:
            c = search.cost
            bound = "it bounds the search" if c.candidates < search.budget else "--search-budget bounds the search"
            facts.append(("Budget", f"--search-share {c.share:g} of the bare seed calls, estimated before the search"
                                    f" from the model's ops and multiply-accumulates: {c.candidates:,} candidates at"
                                    f" about {c.candidate_seconds:.2g} s each against the bare calls' {c.bare_seconds:.0f}"
                                    f" s ({bound}; the same candidates on any machine)"))
        if sd.overlaps_evaluation and sd.heldout_accuracy:
            h = sd.heldout_accuracy
            flt, fiq, sel = (fmt_metric(h.get(name)) for name in (variants.FLOAT, variants.FIQ, variants.SELECTIVE))
            facts.append(("Held-out check", f"on the {sd.heldout_num:,} evaluation samples the search did not see:"
                                            f" float {flt}, FIQ {fiq}, recommended {sel}"))
        rec = self.basis.report.recommendation
        if rec.quantizer_note:
            facts.append(("Note", rec.quantizer_note))
        return facts

    @cached_property
    def tradeoff_rows(self) -> list[TradeoffRow]:
        """Each distinct candidate the search measured, fewest float layers first, then the rule's pick."""
        search = self.search
        if not search:
            return []
        unique = {}
        for step in search.steps:
            key = tuple(step.denylisted_nodes)
            if key not in unique or step.chosen:
                unique[key] = step
        steps = sorted(unique.values(), key=lambda st: (len(st.denylisted_nodes), st.size_bytes))
        rows = [self._tradeoff_row(Candidate.of_step(st)) for st in steps]
        rec = self.basis.report.recommendation
        rule = rec.rule
        if rule and rule.selective and rule.selective.ok:
            rows.append(self._tradeoff_row(Candidate.of_model(
                rule.denylisted_nodes, "the rmse/scale rule's pick", rule.selective, rule.selection_score)))
        for alt in rec.alternatives:
            m = alt.model
            if m is None or not m.ok:
                continue
            rows.append(self._tradeoff_row(Candidate.of_model(
                alt.layers, f"the recommended layers in {SCHEME_NAMES[alt.scheme]} ({m.converter})", m)))
        return rows

    @property
    def off_front(self) -> int:
        """Candidates neither on the Pareto front nor the pick nor a comparison: the PDF leaves them out."""
        return sum(1 for row in self.tradeoff_rows if not (row.pareto or row.chosen or row.rule))

    @property
    def tradeoff_label(self) -> str:
        """The trade-off table's quality column: the main metric on the evaluation data, or the output MSE."""
        if not self.basis.scored:
            return "Output MSE"
        metric = self.basis.metric[0]
        return capital(metric)

    @property
    def tradeoff_eval_label(self) -> str:
        """The search table's quality column: measured on the evaluation data for the models the report shows
        (the pick, the rule's, the lighter schemes), not for every candidate."""
        return self.tradeoff_label + " (evaluation)"

    def _tradeoff_row(self, c: Candidate) -> TradeoffRow:
        return TradeoffRow(
            float_layers=len(c.nodes), change=c.change, size=fmt_bytes(c.size_bytes),
            selection="–" if c.selection is None else f"{c.selection:.3f}",
            accuracy=(fmt_metric(c.accuracy) if self.basis.metric[1] else fmt_number(c.accuracy)) if self.basis.scored
            else fmt_number(c.mse),
            latency=or_missing(c.latency_ms, fmt_ms), pareto=c.pareto, chosen=c.chosen, rule=c.rule)

    @cached_property
    def option_rows(self) -> list[OptionRow]:
        """Every model measured: float (the reference) first, the shipped model and the runner-up next, then the
        rest smallest first."""
        decision = self.basis.findings.decision
        order = [variants.FLOAT] + ([decision.variant, decision.runner_up] if decision is not None else [])
        points = sorted(self.basis.findings.tradeoff, key=lambda t: (
            order.index(t.name) if t.name in order else len(order), t.size_bytes, t.name))
        return [OptionRow(model=t.label, score=t.score_text,
                          vs_float=t.vs_float.text if t.vs_float else ("reference" if t.name == variants.FLOAT
                                                                       else NOT_MEASURED),
                          size=fmt_bytes(t.size_bytes), latency=or_missing(t.latency_ms, fmt_ms),
                          runs="not tried" if t.runs_on_target is None else "yes" if t.runs_on_target else "no",
                          meets="yes" if t.meets_target else "no",
                          role=", ".join([*t.picks, *([why_not(t.why)] if why_not(t.why) and not t.picks else [])]),
                          pareto=t.pareto, chosen=t.chosen) for t in points]

    @property
    def target_words(self) -> str:
        """The target's column header: "Runs on a CPU (LiteRT)"."""
        decision = self.basis.findings.decision
        return "Runs on " + targets.of(decision.target if decision else targets.DEFAULT).hardware

    @property
    def target_text(self) -> str:
        """The accuracy target in words: "not worse than float beyond noise", or the allowed drop."""
        limit = self.basis.report.settings.max_accuracy_drop
        if limit is None:
            return "not worse than float beyond noise"
        allowed = f"{limit * 100:.1f} points" if self.basis.metric[1] else fmt_number(limit)
        return f"at most {allowed} below float (--max-accuracy-drop)"

    @property
    def priorities(self) -> str:
        """What the target weighs among the models that meet the accuracy target."""
        decision = self.basis.findings.decision
        if decision is not None and not targets.of(decision.target).timed:
            return "by size: latency on this machine is not the target's"
        return ("size and latency, each in doublings; a latency counts only when its median is further from the"
                " fastest's than either model's own spread (p90 minus median over its timed runs); costs within"
                f" {targets.COST_SAME:g} doublings are a tie, won by the more accurate model beyond noise, then the"
                " smaller")

    @property
    def alternative_lines(self) -> list[str]:
        """What each lighter scheme for the recommended layers measured, or why it has no row."""
        return [a.text for a in self.basis.findings.alternatives]
