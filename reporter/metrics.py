"""Quality metrics of a variant's predictions, computed with scikit-learn."""

from __future__ import annotations

from typing import Optional

import numpy as np
from sklearn import metrics as skm

from reporter.report import ClassMetrics, Metrics, OutputError


def classification(
    y_true: np.ndarray, y_pred: np.ndarray, num_classes: int, float_pred: Optional[np.ndarray]
) -> Metrics:
    """Accuracy, macro precision/recall/F1, balanced accuracy, kappa, per class and confusion."""
    labels = list(range(num_classes))
    p, r, f, s = skm.precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=0)
    per_class = [
        ClassMetrics(label=i, precision=float(p[i]), recall=float(r[i]), f1=float(f[i]), support=int(s[i]))
        for i in labels
    ]
    macro = skm.precision_recall_fscore_support(y_true, y_pred, labels=labels, average="macro", zero_division=0)
    kappa = skm.cohen_kappa_score(y_true, y_pred, labels=labels)
    return Metrics(
        accuracy=float(skm.accuracy_score(y_true, y_pred)),
        precision=float(macro[0]),
        recall=float(macro[1]),
        f1=float(macro[2]),
        balanced_accuracy=float(_balanced_accuracy(y_true, y_pred)),
        # kappa is NaN when both raters use one class only; report 0 (no agreement beyond chance).
        cohen_kappa=0.0 if np.isnan(kappa) else float(kappa),
        agreement_with_float=None if float_pred is None else float(np.mean(y_pred == float_pred)),
        per_class=per_class,
        confusion_matrix=skm.confusion_matrix(y_true, y_pred, labels=labels).tolist(),
    )


def _balanced_accuracy(y_true, y_pred) -> float:
    import warnings

    with warnings.catch_warnings():
        # sklearn warns when y_pred holds classes absent from y_true; the value is still right.
        warnings.simplefilter("ignore")
        return skm.balanced_accuracy_score(y_true, y_pred)


def output_error(outputs: np.ndarray, float_outputs: np.ndarray) -> OutputError:
    """Error of a variant's raw output against the float variant's output."""
    diff = outputs.astype(np.float64) - float_outputs.astype(np.float64)
    return OutputError(mse=float(np.mean(diff**2)), max_abs_error=float(np.max(np.abs(diff))))
