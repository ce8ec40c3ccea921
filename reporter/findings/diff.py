"""Two runs compared: what a change did to each model and variant (`quant-report diff BASE NEW`).

BASE and NEW are report.json files, report folders, or batch output folders (their index.json), matched
by model name. Accuracy changes are tested on the same samples with McNemar (each report stores which
samples every variant gets right, and a fingerprint of the evaluation data); where the samples differ
or an older report did not store them, the report says so and tests nothing. Two runs measured on different
data, or of different tasks or main metrics, are shown side by side, each number under its own run's metric
name, and never gated (`ModelDiff.gate_note` says why). What counts as a change is
reporter.core.judgement's; variant names are reporter.core.variants'. Pure: no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from reporter.core import judgement as jd
from reporter.core import variants
from reporter.core.errors import QuantReportError
from reporter.core.formatting import (fmt_bytes, fmt_change, fmt_ms, fmt_percent, fmt_score, fmt_signed_bytes,
                                      fmt_signed_points)
from reporter.core.variants import short
from reporter.measure.metrics import unpack_correct
from reporter.model.decode import JSONLimitError, got, kind, show_string
from reporter.model.decode import loads as bounded_loads
from reporter.model.report import Report, VariantResult
from reporter.findings.basis import metric_of
from reporter.findings.gate import Loss, failing

DIFF_SCHEMA_VERSION = 1


class DiffError(QuantReportError):
    """BASE or NEW cannot be read as quant-report results."""


# --- the records -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Change:
    """One quantity in BASE and NEW."""

    base: Optional[float]
    new: Optional[float]
    delta: Optional[float]
    p_value: Optional[float] = None  # McNemar on the same samples (accuracy only)
    significant: Optional[bool] = None  # None: not tested (other samples, or not stored)
    text: str = ""


@dataclass(frozen=True)
class VariantDiff:
    name: str
    label: str
    status: str  # "changed", "unchanged", "added", "removed", "failed" (in either run)
    accuracy: Optional[Change] = None
    main_metric: str = ""  # the secondary metric's name in BASE (ROC AUC, top-5 accuracy, macro F1)
    main: Optional[Change] = None
    output_mse: Optional[Change] = None  # a model whose output is not class scores
    size: Optional[Change] = None
    latency: Optional[Change] = None
    why: list[str] = field(default_factory=list)  # what changed, in words
    error: str = ""
    heads: dict[str, Change] = field(default_factory=dict)  # several outputs: each labelled one's accuracy
    metric: str = ""  # what `accuracy` measures: "accuracy", "mean IoU", the user's metric ("" when not measured)
    new_main_metric: str = ""  # the secondary metric's name in NEW ("" when the same as BASE's)
    base_metric: str = ""  # what `accuracy` measures in BASE, when not the same as in NEW

    @property
    def main_label(self) -> str:
        """The secondary metric's column name: BASE's, or "BASE's → NEW's" when the two runs differ."""
        if self.new_main_metric and self.new_main_metric != self.main_metric:
            return f"{self.main_metric} → {self.new_main_metric}"
        return self.main_metric

    @property
    def main_named_text(self) -> str:
        """The secondary metric with its name beside each run's value ("ROC AUC 0.991 → Top-5 accuracy 0.950")."""
        if self.main is None:
            return ""
        if self.new_main_metric and self.new_main_metric != self.main_metric:
            return f"{self.main_metric} {self.main.base:.3f} → {self.new_main_metric} {self.main.new:.3f}"
        return f"{self.main_metric} {self.main.text}"


@dataclass(frozen=True)
class ModelDiff:
    name: str
    status: str  # "compared", "added", "removed", "failed" (in either run)
    same_samples: Optional[bool] = None  # None: cannot tell (an older report stored no fingerprint)
    samples_note: str = ""
    variants: list[VariantDiff] = field(default_factory=list)
    float_layers_added: list[str] = field(default_factory=list)
    float_layers_removed: list[str] = field(default_factory=list)
    gap: str = ""  # the recommended model's gap status, "recovered → open"
    headline: str = ""
    error: str = ""
    # Why BASE and NEW are not comparable (other data, task or main metric), so that no gate applies to this
    # model: "" when they are.
    gate_note: str = ""

    @property
    def gated(self) -> bool:
        return self.status == "compared" and not self.gate_note

    @property
    def main_header(self) -> str:
        """The secondary metric's column name for this model's changed variants: theirs when they all agree."""
        labels = {v.main_label for v in self.changed if v.main is not None}
        return labels.pop() if len(labels) == 1 else "Main metric"

    def main_cell(self, v: VariantDiff) -> str:
        """`v`'s secondary metric under `main_header`: the values, named when the header cannot name them."""
        if v.main is None:
            return "–"
        return v.main.text if v.main_label == self.main_header else v.main_named_text

    @property
    def changed(self) -> list[VariantDiff]:
        return [v for v in self.variants if v.status != "unchanged"]

    @property
    def unchanged(self) -> list[VariantDiff]:
        return [v for v in self.variants if v.status == "unchanged"]

    def variant(self, name: str) -> Optional[VariantDiff]:
        return next((v for v in self.variants if v.name == name), None)

    @property
    def fiq(self) -> Optional[VariantDiff]:
        return self.variant(variants.FIQ)

    @property
    def recommended(self) -> Optional[VariantDiff]:
        return self.variant(variants.SELECTIVE)


@dataclass(frozen=True)
class GateFailure:
    model: str
    variant: str
    base: float
    new: float
    drop: float
    message: str


@dataclass(frozen=True)
class Diff:
    schema_version: int
    base: str
    new: str
    models: list[ModelDiff]
    max_accuracy_drop: Optional[float] = None
    gate_failures: list[GateFailure] = field(default_factory=list)

    @property
    def gate_passed(self) -> Optional[bool]:
        return None if self.max_accuracy_drop is None else not self.gate_failures

    @property
    def ungated(self) -> list[ModelDiff]:
        """Models compared without the gate: BASE and NEW measured different data, tasks or main metrics."""
        return [m for m in self.models if m.status == "compared" and m.gate_note]

    @property
    def summary(self) -> str:
        compared = [m for m in self.models if m.status == "compared"]
        changed = [m for m in compared if m.changed or m.float_layers_added or m.float_layers_removed]
        parts = [f"{len(compared)} model{'s' if len(compared) != 1 else ''} compared, {len(changed)} changed"]
        for status, word in (("added", "added"), ("removed", "removed"), ("failed", "failed in a run")):
            n = sum(1 for m in self.models if m.status == status)
            if n:
                parts.append(f"{n} {word}")
        if self.max_accuracy_drop is not None:
            ungated = len(self.ungated)
            if compared and ungated == len(compared):
                parts.append("gate not applied (BASE and NEW are not comparable)")
            else:
                parts.append(f"gate {'passed' if self.gate_passed else 'FAILED'}"
                             f" (limit: {self.max_accuracy_drop * 100:.1f} accuracy points below BASE)")
                if ungated:
                    parts.append(f"{ungated} model{'s' if ungated != 1 else ''} not comparable, not gated")
        return "; ".join(parts)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, allow_nan=False) + "\n"


# --- reading a side ------------------------------------------------------------------------------------
def load_side(path) -> tuple[dict[str, Report], dict[str, str]]:
    """The reports of one side by model name, and the models that failed there (name -> error)."""
    path = Path(path)
    if not path.exists():
        raise DiffError(f"{path}: no such file or folder")
    if path.is_dir():
        if (path / "index.json").is_file():
            return _from_index(path / "index.json")
        if (path / "report.json").is_file():
            path = path / "report.json"
        else:
            raise DiffError(f"{path}: neither a report folder (report.json) nor a batch folder (index.json)")
    if path.name == "index.json":
        return _from_index(path)
    report = _read_report(path)
    return {report.model.name: report}, {}


def _read_report(path: Path) -> Report:
    """A report.json read and migrated (its findings are not needed: the diff compares measurements)."""
    try:
        return Report.from_json(path.read_text(encoding="utf-8"))
    except JSONLimitError as exc:
        raise DiffError(f"{path}: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DiffError(f"{path}: not a JSON file ({exc})") from None
    except OSError as exc:
        raise DiffError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    except (ValueError, TypeError, KeyError, RecursionError, OverflowError) as exc:
        raise DiffError(f"{path}: not a quant-report report.json ({exc})") from None


def _index_rows(path: Path) -> list[dict]:
    """index.json's rows, each checked: an object with a `name` (a non-empty string, once) and a `folder`
    inside the batch folder; DiffError naming the file and the row otherwise."""
    try:
        data = bounded_loads(path.read_text(encoding="utf-8"))
    except JSONLimitError as exc:
        raise DiffError(f"{path}: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DiffError(f"{path}: not a JSON file ({exc})") from None
    except OSError as exc:
        raise DiffError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if not isinstance(data, dict) or "rows" not in data:
        raise DiffError(f"{path}: not a quant-report index.json (no \"rows\" list)")
    rows = data["rows"]
    if not isinstance(rows, list):
        raise DiffError(f"{path}: not a quant-report index.json (rows: expected a list, got {kind(rows)})")
    seen = set()
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DiffError(f"{path}: rows[{i}]: expected an object, got {kind(row)}")
        name = row.get("name")
        if not isinstance(name, str) or not name.strip():
            problem = "required field is missing" if "name" not in row else f"expected a model name, got {got(name)}"
            raise DiffError(f"{path}: rows[{i}].name: {problem}")
        if name in seen:
            raise DiffError(f"{path}: rows[{i}].name: {show_string(name)} appears twice")
        seen.add(name)
        for key in ("folder", "status", "error"):
            if row.get(key) is not None and not isinstance(row[key], str):
                raise DiffError(f"{path}: rows[{i}].{key}: expected a string, got {got(row[key])}")
        folder = row.get("folder") or ""
        parts = Path(folder).parts
        if Path(folder).is_absolute() or ".." in parts or "\\" in folder or any(not p.isprintable() for p in folder):
            raise DiffError(f"{path}: rows[{i}].folder: {show_string(folder)} is not a folder inside"
                            f" {path.parent}")
    return rows


def _from_index(path: Path) -> tuple[dict[str, Report], dict[str, str]]:
    reports, failed = {}, {}
    for row in _index_rows(path):
        name, folder = row["name"], row.get("folder") or ""
        report_path = path.parent / folder / "report.json"
        if row.get("status") == "failed" or not folder or not report_path.is_file():
            failed[name] = row.get("error") or "no report.json"
            continue
        reports[name] = _read_report(report_path)
    return reports, failed


# --- comparing -----------------------------------------------------------------------------------------
def compare(base_path, new_path, max_accuracy_drop: Optional[float] = None) -> Diff:
    base, base_failed = load_side(base_path)
    new, new_failed = load_side(new_path)
    renamed = ""
    if _single(base_path) and _single(new_path) and len(base) == len(new) == 1 and set(base) != set(new):
        # Two single reports are compared whatever their names (a model renamed between runs).
        (old_name, report), = base.items()
        renamed = f"Named {old_name} in BASE and {next(iter(new))} in NEW. "
        base = {next(iter(new)): report}
    names = list(dict.fromkeys([*base, *base_failed, *new, *new_failed]))
    models = [_model(name, base.get(name), new.get(name), base_failed.get(name), new_failed.get(name))
              for name in sorted(names)]
    if renamed:
        models = [dataclasses.replace(m, samples_note=(renamed + m.samples_note).strip()) for m in models]
    failures = _gate_failures(models, max_accuracy_drop) if max_accuracy_drop is not None else []
    return Diff(DIFF_SCHEMA_VERSION, str(base_path), str(new_path), models, max_accuracy_drop, failures)


def _gate_failures(models: list[ModelDiff], limit: float) -> list[GateFailure]:
    """The gate against BASE (reporter.findings.gate.failing): every variant's main metric and each labelled
    output's accuracy, where both runs measured it, in the models BASE and NEW can be compared on."""
    out = []
    for m in models:
        if not m.gated:  # other data, task or main metric: BASE's numbers are no baseline for NEW's
            continue
        for v in m.variants:
            changes = {"": v.accuracy, **v.heads}
            losses = [Loss(v.name, -c.delta, c.p_value, output=output) for output, c in changes.items()
                      if c is not None and c.base is not None and c.new is not None and c.delta is not None]
            for loss in failing(losses, limit):
                a = changes[loss.output]
                what = f" output {loss.output}" if loss.output else ""
                if v.metric in ("", "accuracy") or what:
                    words = (f"accuracy {fmt_percent(a.base)} → {fmt_percent(a.new)} ({fmt_signed_points(-loss.drop)}"
                             f" points; limit {limit * 100:.1f} points)")
                else:
                    words = f"{v.metric} {a.text}; limit {limit:g}"
                out.append(GateFailure(m.name, v.name, a.base, a.new, loss.drop, f"{m.name}: {v.label}{what} {words}"))
    return out


def _single(path) -> bool:
    """A report.json or a report folder, not a batch."""
    path = Path(path)
    return not (path.name == "index.json" or (path.is_dir() and (path / "index.json").is_file()))


def _variants(report: Report) -> dict[str, VariantResult]:
    found = {v.name: v for v in report.variants}
    rec = report.recommendation
    if rec and rec.selective:
        found[variants.SELECTIVE] = rec.selective
    return found


def _samples(base: Report, new: Report) -> tuple[Optional[bool], str]:
    b, n = base.dataset, new.dataset
    if b.fingerprint and n.fingerprint:
        if b.fingerprint == n.fingerprint:
            return True, ""
        return False, (f"The evaluation data differ ({b.num_eval:,} samples from {b.source} in BASE,"
                       f" {n.num_eval:,} from {n.source} in NEW): accuracy changes mix the model's and the"
                       " data's, and no significance is computed.")
    return None, (f"BASE or NEW does not record which samples were evaluated (a report written before"
                  f" quant-report stored it; {b.num_eval:,} and {n.num_eval:,} samples): changes are shown"
                  " without a significance test.")


def _not_comparable(base: Report, new: Report) -> str:
    """Why BASE's numbers are no baseline for NEW's (other data, task or main metric), as the line the diff
    shows; "" when they are comparable."""
    reasons = []
    b, n = base.dataset, new.dataset
    if b.fingerprint and n.fingerprint:
        if b.fingerprint != n.fingerprint:
            reasons.append("were measured on different data (fingerprints differ)")
    elif b.num_eval != n.num_eval:  # an older report without a fingerprint: the sample counts still tell
        reasons.append(f"were measured on different data ({b.num_eval:,} and {n.num_eval:,} evaluation samples)")
    bt, nt = _task(base), _task(new)
    if bt != nt:
        reasons.append(f"measure different tasks ({bt} in BASE, {nt} in NEW)")
    (bm, _), (nm, _) = metric_of(base), metric_of(new)
    if bm != nm:
        reasons.append(f"are judged by different metrics ({bm} in BASE, {nm} in NEW)")
    return f"BASE and NEW {' and '.join(reasons)}: compared without a gate" if reasons else ""


def _task(report: Report) -> str:
    """The task of a report's model in words, its outputs' too when it has several."""
    model = report.model
    task = "binary" if model.binary_sigmoid else model.task
    if task in ("classification", "segmentation") and model.num_classes:
        task = f"{model.num_classes}-class {task}"
    if model.outputs:
        task += " (outputs " + ", ".join(f"{o.name}: {'binary' if o.task == 'binary' else o.task}"
                                          for o in model.outputs) + ")"
    return task


def _model(name, base: Optional[Report], new: Optional[Report], base_error, new_error) -> ModelDiff:
    if base is None and new is None:
        return ModelDiff(name, "failed", error=f"failed in BASE ({base_error}) and in NEW ({new_error})")
    if base is None:
        if base_error:
            return ModelDiff(name, "failed", error=f"failed in BASE: {base_error}")
        return ModelDiff(name, "added", headline=f"{name}: new in NEW; " + _brief(new))
    if new is None:
        if new_error:
            return ModelDiff(name, "failed", error=f"failed in NEW: {new_error}")
        return ModelDiff(name, "removed", headline=f"{name}: not in NEW (was: {_brief(base)})")
    same, note = _samples(base, new)
    gate_note = _not_comparable(base, new)
    bv, nv = _variants(base), _variants(new)
    order = [v for v in [*bv, *nv] if v in bv or v in nv]
    metrics = (metric_of(base)[0], metric_of(new)[0])
    variants = [_variant(v, bv.get(v), nv.get(v), same, base.dataset.num_eval, metrics)
                for v in dict.fromkeys(order)]
    b_layers = _kept(base)
    n_layers = _kept(new)
    added = [n for n in n_layers if n not in b_layers]
    removed = [n for n in b_layers if n not in n_layers]
    gap = ""
    bg, ng = _gap(base), _gap(new)
    if bg != ng:
        gap = f"{bg or 'none'} → {ng or 'none'}"
    changed = [v for v in variants if v.status != "unchanged"]
    if not changed and not added and not removed:
        headline = f"{name}: no change beyond noise."
    else:
        bits = [f"{v.label} {'; '.join(v.why)}" for v in changed if v.why]
        if added or removed:
            bits.append(f"layers kept in float: {len(b_layers)} → {len(n_layers)}")
        headline = f"{name}: " + "; ".join(bits) + "."
    return ModelDiff(name, "compared", same, note, variants, added, removed, gap, headline, gate_note=gate_note)


def _brief(report: Report) -> str:
    fiq = report.variant(variants.FIQ)
    if fiq is not None and fiq.ok and fiq.metrics:
        return f"FIQ {metric_name(fiq)} {fmt_score(fiq.metrics.score, fiq.metrics.share)}"
    return f"{len(report.variants)} variants"


def _kept(report: Report) -> list[str]:
    rec = report.recommendation
    return list(rec.denylisted_nodes) if rec and rec.selective else []


def _gap(report: Report) -> str:
    rec = report.recommendation
    return rec.gap.status if rec and rec.gap else ""


def _variant(name: str, b: Optional[VariantResult], n: Optional[VariantResult], same: Optional[bool],
             num_eval: int, metrics: tuple[str, str] = ("", "")) -> VariantDiff:
    """One variant in BASE and NEW; `metrics`: what each run's main numbers are (accuracy, mean IoU, ...)."""
    label = short(name)
    if b is None:
        return VariantDiff(name, label, "added", why=["added"])
    if n is None:
        return VariantDiff(name, label, "removed", why=["removed"])
    if not b.ok or not n.ok:
        which = "BASE" if not b.ok else "NEW"
        err = (b.error if not b.ok else n.error) or ""
        return VariantDiff(name, label, "failed", why=[f"failed in {which}"], error=err)
    why = []
    accuracy = main = mse = None
    main_label = new_main_label = base_metric = ""
    if b.metrics and n.metrics:
        if metrics[0] != metrics[1]:  # each number under its own run's metric name; never one delta of two
            base_metric = metrics[0]
            accuracy = Change(b.metrics.score, n.metrics.score, None, None, None,
                              f"{metrics[0]} {_score(b)} in BASE, {metrics[1]} {_score(n)} in NEW: not compared")
            why.append(f"measured by {metrics[0]} in BASE and {metrics[1]} in NEW")
        else:
            accuracy = _accuracy(b, n, same, num_eval)
            if accuracy.delta is None:
                why.append(accuracy.text)
            elif jd.accuracy_differs(accuracy.significant, accuracy.delta):
                why.append(f"{metric_name(n)} {accuracy.text}")
        main_label, new_main_label, bm, nm = _main(b), _main(n), _main_value(b), _main_value(n)
        if bm is not None and nm is not None:
            same_metric = main_label == new_main_label
            main = Change(bm, nm, nm - bm if same_metric else None, text=f"{bm:.3f} → {nm:.3f}")
    elif b.output_error and n.output_error:
        d = n.output_error.mse - b.output_error.mse
        mse = Change(b.output_error.mse, n.output_error.mse, d, text=f"{b.output_error.mse:.4g} → {n.output_error.mse:.4g}")
        if jd.output_error_changed(b.output_error.mse, n.output_error.mse):
            why.append(f"output MSE vs float {mse.text}")
    size = None
    if b.size_bytes and n.size_bytes:
        size = Change(b.size_bytes, n.size_bytes, n.size_bytes - b.size_bytes,
                      text=f"{fmt_bytes(b.size_bytes)} → {fmt_bytes(n.size_bytes)}")
        if n.size_bytes != b.size_bytes:
            why.append(f"size {fmt_signed_bytes(n.size_bytes - b.size_bytes)}")
    latency = None
    if b.latency_ms and n.latency_ms and b.latency_ms.median > 0:
        ratio = n.latency_ms.median / b.latency_ms.median
        latency = Change(b.latency_ms.median, n.latency_ms.median, n.latency_ms.median - b.latency_ms.median,
                         text=f"{fmt_ms(b.latency_ms.median)} → {fmt_ms(n.latency_ms.median)}")
        if jd.latency_changed(b.latency_ms.median, n.latency_ms.median):
            why.append(f"latency {ratio:.2f}x")
    heads = {}
    for output, bh in b.heads.items():  # several outputs: each labelled one, on the same samples
        nh = n.heads.get(output)
        if bh.metrics is not None and nh is not None and nh.metrics is not None:
            heads[output] = _accuracy_of(bh.metrics, nh.metrics, same, num_eval)
            if heads[output].delta is None:
                why.append(f"output {output} {heads[output].text}")
            elif jd.accuracy_differs(heads[output].significant, heads[output].delta):
                why.append(f"output {output} accuracy {heads[output].text}")
    return VariantDiff(name, label, "changed" if why else "unchanged", accuracy, main_label, main, mse, size,
                       latency, why, heads=heads, metric=metric_name(n) if n.metrics else "",
                       new_main_metric=new_main_label if new_main_label != main_label else "",
                       base_metric=base_metric)


def _score(v: VariantResult) -> str:
    m = v.metrics
    return fmt_score(m.score, m.share) if m.score is not None else "not measured"


def _accuracy(b: VariantResult, n: VariantResult, same: Optional[bool], num_eval: int) -> Change:
    return _accuracy_of(b.metrics, n.metrics, same, num_eval)


def _accuracy_of(b_metrics, n_metrics, same: Optional[bool], num_eval: int) -> Change:
    """Accuracy in BASE and NEW, with McNemar when both runs measured the same samples."""
    b, n = b_metrics, n_metrics
    if b.main is not None or n.main is not None:
        return _main_change(b, n)
    ba, na = b.accuracy, n.accuracy
    if ba is None or na is None:  # not measured in one run: nothing to compare or gate
        return Change(ba, na, None, None, None, f"{fmt_percent(ba)} → {fmt_percent(na)}: not measured in both runs")
    delta = na - ba
    points = f"{fmt_percent(ba)} → {fmt_percent(na)} ({fmt_signed_points(delta)} points"
    if same:
        b_ok, n_ok = _correct(b.correct_bits, num_eval), _correct(n.correct_bits, num_eval)
        if b_ok is not None and n_ok is not None:
            p = jd.mcnemar_p(b_ok, n_ok)
            if not (b_ok != n_ok).any():
                return Change(ba, na, delta, p, False, f"{fmt_percent(na)}: right on exactly the same samples")
            sig = jd.significant(p)
            text = f"{points}, {jd.p_text(p)})" + ("" if sig else ", within noise")
            return Change(ba, na, delta, p, sig, text)
    return Change(ba, na, delta, None, None, f"{points}, not tested)")


def _correct(bits: str, num_eval: int):
    """Which samples a variant got right, or None when not stored or not readable (not base64)."""
    try:
        return unpack_correct(bits, num_eval)
    except ValueError:  # binascii.Error: a damaged report; the change is shown untested
        return None


def _main_change(b, n) -> Change:
    """A main metric other than accuracy (mean IoU, the user's metric) in BASE and NEW: its per-sample values
    are not stored, so the change is shown untested (any change counts); `delta` is positive when better."""
    if b.main is None or n.main is None or b.main.name != n.main.name:
        names = [m.main.name if m.main else "accuracy" for m in (b, n)]
        return Change(b.score, n.score, None, None, None, f"measured by {names[0]} in BASE and {names[1]} in NEW:"
                                                          " not compared")
    raw = n.main.value - b.main.value
    delta = raw if n.main.higher_is_better else -raw
    text = (f"{fmt_score(b.main.value, n.main.share)} → {fmt_score(n.main.value, n.main.share)}"
            f" ({fmt_change(raw, n.main.share)}, not tested: per-sample values are not stored)")
    return Change(b.main.value, n.main.value, delta, None, None if jd.nonzero(raw) else False, text)


def metric_name(v: VariantResult) -> str:
    """What a variant's main numbers are: "accuracy", or the main metric's name."""
    return v.metrics.main.name if v.metrics is not None and v.metrics.main is not None else "accuracy"


def _main(v: VariantResult) -> str:
    m = v.metrics
    return "ROC AUC" if m.roc_auc is not None else "Top-5 accuracy" if m.top5_accuracy is not None else "F1 (macro)"


def _main_value(v: VariantResult) -> Optional[float]:
    m = v.metrics
    return m.roc_auc if m.roc_auc is not None else m.top5_accuracy if m.top5_accuracy is not None else m.f1
