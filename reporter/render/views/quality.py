"""Section 1, quality on the evaluation data: every metric per variant arrowed against float (coloured
only where the accuracy change is beyond noise), per-class scores, or the output error of a model whose
output is not class scores, and one verdict per variant."""

from __future__ import annotations

from functools import cached_property

from reporter.core import tasks, variants
from reporter.core.formatting import NOT_MEASURED, capital, fmt_metric, fmt_number
from reporter.render import kinds as kind_rows
from reporter.render.views.common import DIRECTION_TONES, Basis, Cell, Row, metric_arrow, threshold_words, tone

METRICS = (
    ("accuracy", ""),  # "": the kind's own name for it (TaskKind.accuracy_label: "Accuracy", "Pixel accuracy")
    ("precision", "Precision (macro)"),
    ("recall", "Recall (macro)"),
    ("f1", "F1 (macro)"),
    ("balanced_accuracy", "Balanced accuracy"),
    ("cohen_kappa", "Cohen's kappa"),
    ("agreement_with_float", "Agreement with float"),
)
OPTIONAL_METRICS = (("top5_accuracy", "Top-5 accuracy"), ("roc_auc", "ROC AUC"),  # shown when measured
                    ("micro_f1", "F1 (micro)"), ("hamming_loss", "Hamming loss (lower is better)"))
LOWER_IS_BETTER = {"hamming_loss"}
# A task kind's own rows (mean IoU, a detector's mAP) are its view module's: reporter.render.kinds.


def _metric(metrics, key):
    """`metrics`' value `key`: a field's name, or a kind's reading of it (reporter.render.kinds); None without."""
    if callable(key):
        return key(metrics)
    return getattr(metrics, key) if metrics is not None else None


class QualityView:
    """The metric, per-class and output-error tables, the verdicts, and the thresholds the arrows use."""

    def __init__(self, basis: Basis):
        self.basis = basis

    @property
    def thresholds(self):
        """The arrows' and the colours' thresholds, worded for the section's introduction."""
        return threshold_words()

    @property
    def metric_name(self) -> str:
        return self.basis.metric[0]

    @property
    def test_words(self) -> str:
        """How a change of the main metric is tested for noise."""
        flt = self.basis.float
        if flt is not None and flt.metrics is not None and flt.metrics.main is not None:
            if flt.metrics.main.per_sample:
                return "paired t-test over the per-sample values"
            if flt.metrics.main.blocks:  # a user's metric that returns a number: batch means
                return f"paired t-test over {flt.metrics.main.blocks} blocks of samples"
            kind = self.basis.report.model.task_kind  # its own main metric: its own words (a detector's images)
            return kind.paired_test if flt.metrics.main.name == kind.main_metric else tasks.BOOTSTRAP
        return tasks.MCNEMAR

    @property
    def verdicts(self) -> list[str]:
        """One line per variant against float (the float reference itself is not repeated)."""
        return [v.verdict for v in self.basis.findings.variants if v.name != variants.FLOAT]

    def beyond_noise(self, name: str) -> bool:
        """Whether the variant's accuracy differs from float's beyond noise: only then are its
        metric changes coloured."""
        f = self.basis.findings.variant(name)
        return f is not None and f.direction in ("worse", "better")

    @cached_property
    def metric_rows(self) -> list[Row]:
        """Each metric per variant, arrowed against float; coloured only when the variant's accuracy
        differs from float's beyond noise (exact McNemar), so a one-sample change is never a win."""
        basis = self.basis
        if not basis.scored:
            return []
        ref = basis.float
        keys = list(METRICS) if basis.is_classification else []
        own = kind_rows.shown(v.metrics for v in basis.ok_columns)
        for _, kind in own:
            if kind.in_place:
                keys = list(kind.metrics)
        for key, label in OPTIONAL_METRICS:
            if any(v.metrics and getattr(v.metrics, key) is not None for v in basis.ok_columns):
                keys.insert(1, (key, label))
        for _, kind in own:
            if not kind.in_place:
                for row in kind.metrics:
                    keys.insert(1, row)
        rows = self._user_rows()
        for key, label in keys:
            cells = []
            for v in basis.ok_columns:
                if v.metrics is None and v.not_measured("metrics"):
                    cells.append(Cell(NOT_MEASURED))
                    continue
                value = _metric(v.metrics, key)
                ref_value = _metric(ref.metrics, key) if ref else None
                arrow = "" if v is ref else metric_arrow(value, ref_value)
                better_up = key not in LOWER_IS_BETTER
                shade = tone(arrow, higher_is_better=better_up) if self.beyond_noise(v.name) else "neutral"
                cells.append(Cell(fmt_metric(value), arrow, shade))
            label = label or basis.report.model.task_kind.accuracy_label
            rows.append(Row(label, cells))
        cells = []
        for v in basis.ok_columns:
            f = basis.findings.variant(v.name)
            if v.not_measured("metrics"):
                text = f"{NOT_MEASURED}: {v.not_measured('metrics')}"
            elif v is ref:
                text = "reference"
            elif f and f.vs_float:
                text = f.vs_float.text
            else:
                text = f"float {NOT_MEASURED}" if basis.float_quality_missing else "–"
            cells.append(Cell(text, "", DIRECTION_TONES.get(f.direction if f else "", "neutral")))
        metric = self.metric_name
        test = ("McNemar" if self.test_words.endswith("predictions") else
                "paired t-test" if self.test_words.startswith("paired t") else "paired bootstrap")
        rows.append(Row(f"{capital(metric)} vs float ({test})", cells, wrap=True))
        return rows

    def _user_rows(self) -> list[Row]:
        """The user's metric (every value its function returned), first, arrowed the way it points."""
        basis = self.basis
        names = list(dict.fromkeys(k for v in basis.ok_columns if v.metrics for k in v.metrics.user))
        ref = basis.float.metrics.user if basis.float and basis.float.metrics else {}
        main = basis.float.metrics.main if basis.float and basis.float.metrics else None
        up = main.higher_is_better if main is not None else True
        rows = []
        for name in names:
            cells = []
            for v in basis.ok_columns:
                if v.not_measured("user_metric"):
                    cells.append(Cell(NOT_MEASURED))
                    continue
                value = v.metrics.user.get(name) if v.metrics else None
                arrow = "" if v is basis.float else metric_arrow(value, ref.get(name))
                shade = tone(arrow, higher_is_better=up) if self.beyond_noise(v.name) else "neutral"
                cells.append(Cell(fmt_number(value), arrow, shade))
            rows.append(Row(f"{name} (your metric{', lower is better' if not up else ''})", cells))
        return rows

    @cached_property
    def head_rows(self) -> list[Row]:
        """A model with several outputs: one row per output, each variant's accuracy against that output's
        labels [its Wilson interval] (with its paired test against float), or without labels its agreement with float's class or
        its error against float's output; red where the output is less accurate than float beyond noise."""
        found = self.basis.findings.heads
        if not found:
            return []
        by = {(h.output, h.variant): h for h in found}
        rows = []
        for o in self.basis.report.model.outputs:
            cells = []
            measure = ""
            for v in self.basis.ok_columns:
                h = by.get((o.name, v.name))
                measure = measure or (h.measure if h else "")
                text = NOT_MEASURED if h is None else ("reference" if v is self.basis.float and not h.text else h.text)
                head = v.heads.get(o.name)
                if head is not None and head.target_error is not None:  # a regression head against its targets
                    text = _against_target(head.target_error) + ("" if text == "reference" else f"; vs float {text}")
                    measure = "against its targets, and output MSE vs float"
                cells.append(Cell(text, "", "bad" if h is not None and h.worse else "neutral"))
            label = f"{o.name} ({measure}{', leads the report' if o.primary else ''})"
            rows.append(Row(label, cells, wrap=True))
        return rows

    @cached_property
    def target_rows(self) -> list[Row]:
        """A regression output with targets: each variant's MAE, RMSE and R² against them."""
        basis = self.basis
        if basis.is_classification or not any(v.target_error is not None for v in basis.ok_columns):
            return []
        rows = []
        for key, label in (("mae", "MAE vs target"), ("rmse", "RMSE vs target"), ("r2", "R² vs target")):
            cells = []
            for v in basis.ok_columns:
                value = getattr(v.target_error, key) if v.target_error else None
                cells.append(Cell(NOT_MEASURED if v.not_measured("target_error") or value is None
                                  else fmt_number(value)))
            rows.append(Row(label, cells))
        return rows

    @cached_property
    def output_error_rows(self) -> list[Row]:
        basis = self.basis
        if basis.is_classification:
            return []
        rows = list(self.target_rows)
        for key, label in (("mse", "Output MSE vs float"), ("max_abs_error", "Max abs error vs float")):
            cells = []
            for v in basis.ok_columns:
                value = getattr(v.output_error, key) if v.output_error else (0.0 if v is basis.float else None)
                cells.append(Cell(NOT_MEASURED if v.not_measured("output_error") else fmt_number(value)))
            rows.append(Row(label, cells))
        return rows

    @property
    def per_class_title(self) -> str:
        return self.basis.report.model.task_kind.per_class_title

    @property
    def per_class_columns(self) -> str:
        return self.basis.report.model.task_kind.per_class_columns

    @cached_property
    def per_class_rows(self) -> list[Row]:
        """Class, support, then "precision / recall / F1" per variant, F1 arrowed against float."""
        basis = self.basis
        if not basis.is_classification or not basis.float:
            return []
        # The classes and their support are the data's: any measured variant has them.
        measured = [v for v in basis.ok_columns if v.metrics is not None]
        if not measured:
            return []
        for name, kind in kind_rows.shown([measured[0].metrics]):
            if kind.per_class is not None:  # the kind's own table (a detector's AP@0.5 per class)
                return kind.per_class(self, measured[0].metrics.figures[name])
        flt = basis.float.metrics.per_class if basis.float.metrics else None
        rows = []
        for i, base in enumerate(measured[0].metrics.per_class):
            cells = [Cell(f"{base.support:,}")]
            for v in basis.ok_columns:
                if v.metrics is None:
                    cells.append(Cell(NOT_MEASURED))
                    continue
                c = v.metrics.per_class[i]
                arrow = "" if v is basis.float or flt is None else metric_arrow(c.f1, flt[i].f1)
                text = f"{c.precision:.2f} / {c.recall:.2f} / {c.f1:.2f}"
                for name, kind in kind_rows.shown([v.metrics]):
                    if kind.per_class_text is not None:  # the kind's words for the class (segmentation's IoU)
                        text += kind.per_class_text(v.metrics.figures[name], i)
                beyond = self.beyond_noise(v.name)
                if c.accuracy is not None:  # multi-label: the label's accuracy, ROC AUC, and its own paired test
                    text += f" · {c.accuracy:.2f} · " + ("–" if c.roc_auc is None else f"{c.roc_auc:.2f}")
                    found = basis.findings.variant(v.name)
                    beyond = found is not None and i in found.labels_beyond_noise
                    arrow = "" if v is basis.float or flt is None else metric_arrow(c.accuracy, flt[i].accuracy)
                cells.append(Cell(text, arrow, tone(arrow, higher_is_better=True) if beyond else "neutral"))
            rows.append(Row(str(base.label), cells))
        return rows


def _against_target(t) -> str:
    """A regression output against its targets, in a few words: "MAE 0.035 · RMSE 0.053 · R² 0.91"."""
    return f"MAE {fmt_number(t.mae)} · RMSE {fmt_number(t.rmse)}" + ("" if t.r2 is None else f" · R² {t.r2:.3f}")
