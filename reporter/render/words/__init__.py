"""The sentences of the findings: reporter.findings decides, these modules word it, one module per section
(`comparison`: a paired difference, which the others quote; `verdicts`: each variant's line, blamed layer
and output cells; `recommendation`: the gap's reason, the recommendation's sentence, kept layers, fix,
lighter schemes and the comparison table's scores; `decision`: the model to ship for the target; `headline`:
the story told first; `notices`: warnings and hints;
`gate`: the gate's line; `diff`: `quant-report diff`'s). A wording change touches no decision, and every
format reads the same words.

`attach` gives a measured report its findings, decided and worded, as report.json keeps them; the pipeline
calls it once, and reporter.render.load_report for a report.json whose findings an older version dropped.
"""

from __future__ import annotations

import dataclasses

from reporter.findings.basis import columns
from reporter.findings.derive import Decisions, decide
from reporter.model.findings import Findings
from reporter.model.report import Report
from reporter.render.words import comparison, decision, gate, headline, notices, recommendation, verdicts


def attach(report: Report) -> Report:
    """The report with its findings, and the recommendation's sentence taken from them."""
    found = findings_of(report)
    rec = report.recommendation
    if rec is not None:
        rec = dataclasses.replace(rec, summary=found.recommendation)
    return dataclasses.replace(report, recommendation=rec, findings=found)


def findings_of(report: Report) -> Findings:
    """The findings of a measured report, decided and worded. Pure: same report, same findings."""
    return word(report, decide(report))


def word(report: Report, decided: Decisions) -> Findings:
    """The decided findings with every sentence written."""
    decided = comparison.worded(decided)  # every comparison's difference first: the sentences quote them
    found = decided.findings
    found = dataclasses.replace(
        found, gap=dataclasses.replace(found.gap, reason=recommendation.gap_reason(report, found.gap, found.decision)),
        heads=[dataclasses.replace(h, text=verdicts.head_cell(h)) for h in found.heads],
        tradeoff=[dataclasses.replace(t, score_text=recommendation.score_text(t)) for t in found.tradeoff])
    results = {v.name: v for v in columns(report)}
    found_variants = []
    for f in found.variants:
        v = results[f.name]
        blame = dataclasses.replace(f.blame, text=verdicts.blame(report, v, f.blame)) if f.blame else None
        found_variants.append(dataclasses.replace(f, verdict=verdicts.verdict(report, v, f), blame=blame))
    culprits = [dataclasses.replace(c, reasons=[dataclasses.replace(r, text=recommendation.reason_text(report, r))
                                                for r in c.reasons]) for c in found.culprits]
    rec = report.recommendation
    alternatives = [dataclasses.replace(a, text=recommendation.alternative_text(alt, a))
                    for alt, a in zip(rec.alternatives if rec else [], found.alternatives)]
    fix = found.fix
    if fix is not None:
        fix = dataclasses.replace(fix, text=recommendation.fix_text(report, fix, found.gap))
    found = dataclasses.replace(
        found, variants=found_variants, culprits=culprits, alternatives=alternatives, fix=fix,
        warnings=[notices.notice(report, n) for n in decided.warnings],
        hints=[notices.notice(report, n) for n in decided.hints],
        gate=gate.finding(report, found, decided.gate) if decided.gate is not None else None)
    if found.decision is not None:
        found = dataclasses.replace(found, decision=dataclasses.replace(
            found.decision, reason=decision.sentence(report, found, found.decision)))
    sentence = recommendation.sentence(report, found)
    nonfinite = next((n for n in decided.warnings if n.code == "nonfinite_outputs"), None)
    return dataclasses.replace(found, recommendation=sentence,
                               headline=headline.headline(report, found, sentence, nonfinite))
