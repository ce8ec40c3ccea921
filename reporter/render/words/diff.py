"""The words of `quant-report diff` (reporter.findings.diff decides it): each change's numbers, what changed in
a variant, a change of the model to ship (and of its target, verdict and gate), a model's headline, its notes on
samples and comparability, the gate's failures and the summary.

`word(diff)` fills every sentence field of the decided diff (diff.json keeps them); the templates read those,
and call `summary`, `main_header`, `main_cell`, `main_named_text`, `ship_cell` and `other_decision_lines` for the
cells made of several fields.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from reporter.core import variants
from reporter.core.formatting import (fmt_bytes, fmt_change, fmt_ms, fmt_percent, fmt_score, fmt_signed_bytes,
                                      fmt_signed_points, p_text)
from reporter.findings import diff as df
from reporter.findings.diff import Change, DecisionChange, Diff, GateFailure, ModelDiff, Run, Shipped, Task, VariantDiff
from reporter.model import findings as mf


def word(diff: Diff) -> Diff:
    """The decided diff with every sentence written."""
    worded = dataclasses.replace(diff, models=[_model(m) for m in diff.models])
    return dataclasses.replace(worded, gate_failures=[dataclasses.replace(f, message=gate_message(worded, f))
                                                      for f in diff.gate_failures])


def _model(m: ModelDiff) -> ModelDiff:
    found = [_variant(v) for v in m.variants]
    decided = dataclasses.replace(m.decision, lines=decision_lines(m.decision)) if m.decision is not None else None
    m = dataclasses.replace(m, variants=found, decision=decided)
    return dataclasses.replace(m, samples_note=samples_note(m), gap=gap(m), headline=headline(m), error=error(m),
                               gate_note=gate_note(m))


def _variant(v: VariantDiff) -> VariantDiff:
    v = dataclasses.replace(v, accuracy=_worded(v.accuracy), main=_worded(v.main), output_mse=_worded(v.output_mse),
                            size=_worded(v.size), latency=_worded(v.latency),
                            heads={output: _worded(c) for output, c in v.heads.items()})
    return dataclasses.replace(v, why=why(v))


def _worded(c: Optional[Change]) -> Optional[Change]:
    return dataclasses.replace(c, text=change_text(c)) if c is not None else None


# --- a change ----------------------------------------------------------------------------------------
def change_text(c: Change) -> str:
    """A quantity in BASE and NEW: "63.2 % → 29.8 % (−33.3 points, p < 0.001)", "9.2 KB → 6.5 KB"."""
    if c.kind == df.POINTS:
        return _points(c)
    if c.kind == df.SCORE:
        return (f"{fmt_score(c.base, c.share)} → {fmt_score(c.new, c.share)}"
                f" ({fmt_change(c.new - c.base, c.share)}, not tested: per-sample values are not stored)")
    if c.kind == df.OTHER_METRICS:
        return f"measured by {c.names[0]} in BASE and {c.names[1]} in NEW: not compared"
    if c.kind == df.OTHER_RUN_METRICS:
        return (f"{c.names[0]} {_score(c.base, c.base_share)} in BASE, {c.names[1]} {_score(c.new, c.share)} in NEW:"
                " not compared")
    if c.kind == df.VALUES:
        return f"{c.base:.3f} → {c.new:.3f}"
    if c.kind == df.MSE:
        return f"{c.base:.4g} → {c.new:.4g}"
    if c.kind == df.SIZE:
        return f"{fmt_bytes(c.base)} → {fmt_bytes(c.new)}"
    if c.kind == df.LATENCY:
        return f"{fmt_ms(c.base)} → {fmt_ms(c.new)}"
    raise ValueError(f"a change of unknown kind {c.kind!r}")


def _points(c: Change) -> str:
    """Accuracy in BASE and NEW, with McNemar's verdict when both runs measured the same samples."""
    if c.base is None or c.new is None:
        return f"{fmt_percent(c.base)} → {fmt_percent(c.new)}: not measured in both runs"
    if c.same_answers:
        return f"{fmt_percent(c.new)}, the same samples right"
    points = f"{fmt_percent(c.base)} → {fmt_percent(c.new)} ({fmt_signed_points(c.delta)} points"
    if c.p_value is None:
        return f"{points}, not tested)"
    return f"{points}, {p_text(c.p_value)})" + ("" if c.significant else ", within noise")


def _score(value: Optional[float], share: bool) -> str:
    return fmt_score(value, share) if value is not None else "not measured"


# --- a variant ---------------------------------------------------------------------------------------
def why(v: VariantDiff) -> list[str]:
    """What changed in a variant (`VariantDiff.reasons`), in words."""
    return [_reason(v, code, output) for code, output in v.reasons]


def _reason(v: VariantDiff, code: str, output: str) -> str:
    simple = {df.ADDED: "added", df.REMOVED: "removed", df.FAILED_IN_BASE: "failed in BASE",
              df.FAILED_IN_NEW: "failed in NEW"}
    if code in simple:
        return simple[code]
    if code == df.MEASURED_APART:
        return f"measured by {v.accuracy.names[0]} in BASE and {v.accuracy.names[1]} in NEW"
    if code in (df.NOT_COMPARED, df.ACCURACY_CHANGED):
        if not output:
            return v.accuracy.text if code == df.NOT_COMPARED else f"{v.metric} {v.accuracy.text}"
        what = f"output {output}" if code == df.NOT_COMPARED else f"output {output} accuracy"
        return f"{what} {v.heads[output].text}"
    if code == df.OUTPUT_ERROR_CHANGED:
        return f"output MSE vs float {v.output_mse.text}"
    if code == df.SIZE_CHANGED:
        return f"size {fmt_signed_bytes(v.size.delta)}"
    if code == df.LATENCY_CHANGED:
        return f"latency {v.latency.new / v.latency.base:.2f}x"
    raise ValueError(f"a variant changed for an unknown reason {code!r}")


def main_label(v: VariantDiff) -> str:
    """The secondary metric's column name: BASE's, or "BASE's → NEW's" when the two runs differ."""
    if v.new_main_metric and v.new_main_metric != v.main_metric:
        return f"{v.main_metric} → {v.new_main_metric}"
    return v.main_metric


def main_named_text(v: VariantDiff) -> str:
    """The secondary metric with its name beside each run's value ("ROC AUC 0.991 → Top-5 accuracy 0.950")."""
    if v.main is None:
        return ""
    if v.new_main_metric and v.new_main_metric != v.main_metric:
        return f"{v.main_metric} {v.main.base:.3f} → {v.new_main_metric} {v.main.new:.3f}"
    return f"{v.main_metric} {v.main.text}"


# --- the decision ------------------------------------------------------------------------------------
# The decision's verdict (findings.decision.why), as the diff's line says it.
VERDICTS = {
    mf.MEETS: "a quantized model meets the accuracy target",
    mf.FLOAT_CHEAPER: "float kept: cheaper here than the quantized models that meet the accuracy target",
    mf.NONE_MEETS: "no quantized model meets the accuracy target",
    mf.NO_CANDIDATE: "no quantized model for the target was measured",
    mf.FLOAT_DEGENERATE: "float answers one class for every sample: nothing judged",
}


def decision_lines(d: DecisionChange, ship: bool = True) -> list[str]:
    """What of a model's decision changed (`DecisionChange.changed`), one line each; [] when nothing did:
    "Model to ship: FIQ with 2 ops in float (cpu) → LiteRT static int8, input normalization on the host (int8)",
    "Target: BASE's → NEW's" (only when the same model ships: the ship line names both targets), "Verdict: ...",
    "Gate: passed → FAILED". Without `ship`, the ship line is left out (a batch table's cell holds it)."""
    lines = []
    if df.SHIP_CHANGED in d.changed:
        if ship:
            lines.append(f"Model to ship: {ship_change(d)}")
    elif df.TARGET_CHANGED in d.changed:
        lines.append(f"Target: {d.base.target} → {d.new.target}")
    if df.VERDICT_CHANGED in d.changed:
        lines.append(f"Verdict: {_verdict(d.base.why)} → {_verdict(d.new.why)}")
    if df.GATE_CHANGED in d.changed:
        lines.append(f"Gate: {_gate(d.base)} → {_gate(d.new)}")
    return lines


def ship_change(d: DecisionChange) -> str:
    """"A (cpu) → B (int8)"; "A → B (cpu)" on one target."""
    if d.base.target == d.new.target:
        return f"{_ship(d.base)} → {_ship(d.new)} ({d.new.target})"
    return f"{_ship(d.base)} ({d.base.target}) → {_ship(d.new)} ({d.new.target})"


def _ship(s: Shipped) -> str:
    return s.label or s.variant or "nothing"


def _verdict(why: str) -> str:
    return VERDICTS.get(why, why)


def _gate(s: Shipped) -> str:
    return "none asked for" if s.gate is None else "passed" if s.gate else "FAILED"


def ship_cell(m: ModelDiff) -> str:
    """A batch table's "Model to ship" cell: the change, or "–" when the same model ships."""
    return ship_change(m.decision) if m.decision is not None and df.SHIP_CHANGED in m.decision.changed else "–"


def other_decision_lines(m: ModelDiff) -> list[str]:
    """The decision's lines a batch table's "Model to ship" cell does not hold (target, verdict, gate)."""
    return decision_lines(m.decision, ship=False) if m.decision is not None else []


# --- a model -----------------------------------------------------------------------------------------
def main_header(m: ModelDiff) -> str:
    """The secondary metric's column name for a model's changed variants: theirs when they all agree."""
    labels = {main_label(v) for v in m.changed if v.main is not None}
    return labels.pop() if len(labels) == 1 else "Main metric"


def main_cell(m: ModelDiff, v: VariantDiff) -> str:
    """`v`'s secondary metric under `main_header`: the values, named when the header cannot name them."""
    if v.main is None:
        return "–"
    return v.main.text if main_label(v) == main_header(m) else main_named_text(v)


def headline(m: ModelDiff) -> str:
    """A model's change in one line (its variants' `why` written first)."""
    if m.status == "added":
        return f"{m.name}: new in NEW; " + _brief(m.new_run)
    if m.status == "removed":
        return f"{m.name}: not in NEW (was: {_brief(m.base_run)})"
    if m.status != "compared":
        return ""
    layers = m.float_layers_added or m.float_layers_removed
    if not m.changed and not layers:
        # The decision's change has lines of its own, said first.
        return f"{m.name}: no {'variant ' if m.decision_changed else ''}change beyond noise."
    bits = [f"{v.label} {'; '.join(v.why)}" for v in m.changed if v.why]
    if layers:
        bits.append(f"layers kept in float: {m.base_run.float_layers} → {m.new_run.float_layers}")
    return f"{m.name}: " + "; ".join(bits) + "."


def _brief(run: Run) -> str:
    if run.fiq is not None:
        return f"{variants.short(variants.FIQ)} {run.fiq.metric} {fmt_score(run.fiq.value, run.fiq.share)}"
    return f"{run.variants} variants"


def error(m: ModelDiff) -> str:
    """Why a model has no diff: it failed in BASE, in NEW or in both."""
    if m.status != "failed":
        return ""
    if m.base_error is not None and m.new_error is not None:
        return f"failed in BASE ({m.base_error}) and in NEW ({m.new_error})"
    if m.base_error is not None:
        return f"failed in BASE: {m.base_error}" + ("; not in NEW" if m.new_run is None else "")
    return f"failed in NEW: {m.new_error}" + ("; not in BASE" if m.base_run is None else "")


def samples_note(m: ModelDiff) -> str:
    """Why the accuracy changes of a model are not tested: other data, or a report that does not record them;
    and BASE's name for the model when two single reports name it differently."""
    note = ""
    if m.status == "compared":
        b, n = m.base_run, m.new_run
        if m.same_samples is False:
            note = (f"The evaluation data differ ({b.num_eval:,} samples from {b.source} in BASE,"
                    f" {n.num_eval:,} from {n.source} in NEW): accuracy changes mix the model's and the"
                    " data's, and no significance is computed.")
        elif m.same_samples is None:
            note = (f"BASE or NEW does not record which samples were evaluated (a report written before"
                    f" quant-report stored it; {b.num_eval:,} and {n.num_eval:,} samples): changes are shown"
                    " without a significance test.")
    if m.base_name:
        note = (f"Named {m.base_name} in BASE and {m.name} in NEW. " + note).strip()
    return note


def gap(m: ModelDiff) -> str:
    """FIQ's gap status (with the searched layers kept in float) when it changed: "recovered → open"."""
    if m.status != "compared" or m.base_run.gap == m.new_run.gap:
        return ""
    return f"{m.base_run.gap or 'none'} → {m.new_run.gap or 'none'}"


def gate_note(m: ModelDiff) -> str:
    """Why BASE's numbers are no baseline for NEW's (`ModelDiff.incomparable`), as the line the diff shows;
    "" when they are comparable."""
    if not m.incomparable:
        return ""
    b, n = m.base_run, m.new_run
    words = {df.OTHER_DATA: "were measured on different data (fingerprints differ)",
             df.OTHER_SAMPLE_COUNT: f"were measured on different data ({b.num_eval:,} and {n.num_eval:,} evaluation"
                                    " samples)",
             df.OTHER_TASK: f"measure different tasks ({task(b.task)} in BASE, {task(n.task)} in NEW)",
             df.OTHER_METRIC: f"are judged by different metrics ({b.metric} in BASE, {n.metric} in NEW)"}
    return f"BASE and NEW {' and '.join(words[r] for r in m.incomparable)}: compared without a gate"


def task(t: Task) -> str:
    """A model's task in words, its outputs' too when it has several: "10-class classification"."""
    words = f"{t.num_classes}-class {t.kind}" if t.num_classes else t.kind
    if t.outputs:
        words += " (outputs " + ", ".join(f"{name}: {kind}" for name, kind in t.outputs) + ")"
    return words


# --- the diff ----------------------------------------------------------------------------------------
def gate_message(diff: Diff, f: GateFailure) -> str:
    """"mlp: FIQ accuracy 63.2 % → 29.8 % (−33.3 points; limit 1.0 points)"."""
    m = diff.model(f.model)
    v = m.variant(f.variant)
    change = v.heads[f.output] if f.output else v.accuracy
    limit = diff.max_accuracy_drop
    what = f" output {f.output}" if f.output else ""
    if not v.metric or m.new_run is None or m.new_run.plain or what:
        words = (f"accuracy {fmt_percent(f.base)} → {fmt_percent(f.new)} ({fmt_signed_points(-f.drop)}"
                 f" points; limit {limit * 100:.1f} points)")
    else:
        words = f"{v.metric} {change.text}; limit {limit:g}"
    return f"{m.name}: {v.label}{what} {words}"


def summary(diff: Diff) -> str:
    """"2 models compared, 1 changed; 1 added; another model to ship for mlp; gate FAILED (limit: 1.0 accuracy
    points below BASE)"."""
    compared = diff.compared
    changed = [m for m in compared if m.any_change]
    parts = [f"{len(compared)} model{'s' if len(compared) != 1 else ''} compared, {len(changed)} changed"]
    for status, said in (("added", "added"), ("removed", "removed"), ("failed", "failed in a run")):
        n = sum(1 for m in diff.models if m.status == status)
        if n:
            parts.append(f"{n} {said}")
    shipped = [m.name for m in compared if m.decision is not None and df.SHIP_CHANGED in m.decision.changed]
    if shipped:
        parts.append(f"another model to ship for {', '.join(shipped) if len(shipped) <= 3 else len(shipped)}")
    if diff.max_accuracy_drop is not None:
        ungated = len(diff.ungated)
        if compared and ungated == len(compared):
            parts.append("gate not applied (BASE and NEW are not comparable)")
        else:
            parts.append(f"gate {'passed' if diff.gate_passed else 'FAILED'}"
                         f" (limit: {diff.max_accuracy_drop * 100:.1f} accuracy points below BASE)")
            if ungated:
                parts.append(f"{ungated} model{'s' if ungated != 1 else ''} not comparable, not gated")
    return "; ".join(parts)
