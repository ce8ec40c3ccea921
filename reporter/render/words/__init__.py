"""The sentences of the findings: reporter.findings decides, these modules word it, one module per section
(`comparison`: a paired difference, which the others quote; `verdicts`: each variant's line, blamed layer
and output cells; `recommendation`: the gap's reason, the recommendation's sentence, kept layers, fix,
lighter schemes and the comparison table's scores; `decision`: the model to ship for the target; `headline`:
the story told first; `notices`: warnings and hints;
`gate`: the gate's line; `diff`: `quant-report diff`'s). A wording change touches no decision, and every
format reads the same words.

`word` writes the sentences of findings decided by reporter.findings.derive; reporter.pipeline.conclude calls both (the
pipeline once per run, and the readers of a report.json whose findings an older version dropped). Nothing here
decides: the words read the decided records.
"""

from __future__ import annotations

import dataclasses

from reporter.findings.derive import Decisions  # the record `word` reads (decided by reporter.findings.derive)
from reporter.model.findings import Findings
from reporter.model.report import Report
from reporter.render.words import comparison, decision, gate, headline, notices, recommendation, verdicts


def word(report: Report, decided: Decisions) -> Findings:
    """The decided findings with every sentence written."""
    decided = comparison.worded(decided)  # every comparison's difference first: the sentences quote them
    found = decided.findings
    report = dataclasses.replace(report, findings=found)  # the words read the decided records through the report
    found = dataclasses.replace(
        found, gap=dataclasses.replace(found.gap, reason=recommendation.gap_reason(report, found.gap, found.decision)),
        heads=[dataclasses.replace(h, text=verdicts.head_cell(h)) for h in found.heads],
        tradeoff=[dataclasses.replace(t, score_text=recommendation.score_text(t)) for t in found.tradeoff])
    results = {v.name: v for v in report.columns()}
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
        warnings=notices.worded(report, decided.warnings),
        hints=[notices.notice(report, n) for n in decided.hints],
        gate=gate.finding(report, found, decided.gate) if decided.gate is not None else None)
    if found.decision is not None:
        found = dataclasses.replace(found, decision=dataclasses.replace(
            found.decision, reason=decision.sentence(report, found, found.decision)))
    sentence = recommendation.sentence(report, found)
    nonfinite = next((n for n in decided.warnings if n.code == "nonfinite_outputs"), None)
    return dataclasses.replace(found, recommendation=sentence,
                               headline=headline.headline(report, found, sentence, nonfinite))
