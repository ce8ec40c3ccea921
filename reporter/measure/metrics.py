"""Quality metrics of a variant's predictions, computed with scikit-learn.

Outputs holding NaN or inf (a model that overflows, or divides by zero, on some samples) never make a metric
raise: such a sample predicts no class (reporter.measure.task.NO_CLASS), so it is wrong in accuracy, top-5
accuracy and kappa and ranks last in ROC AUC; errors against float are taken over the samples where both
outputs are finite; the run records how many samples were not (`VariantResult.nonfinite_outputs`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from reporter.core.arrays import chunks
from reporter.measure.task import NO_CLASS
from reporter.model.report import ClassMetrics, Metrics, OutputError, Paired, TargetError


def _skm():
    """sklearn.metrics, imported when first needed (2 s on a cold start; the pipeline preloads it in the
    background while TensorFlow converts: reporter.pipeline.preload)."""
    from sklearn import metrics

    return metrics

TOP_K = 5  # top-5 accuracy, for models with more classes than this


def classification(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    num_classes: int,
    float_pred: Optional[np.ndarray],
    scores: Optional[np.ndarray] = None,
) -> Metrics:
    """Accuracy, macro precision/recall/F1, balanced accuracy, kappa, per class and confusion.

    Macro averages are over the classes present in `y_true` (as balanced accuracy is, so macro
    recall equals it); `per_class` lists every class of the model. `scores` (N, num_classes), from
    reporter.measure.task.Task.scores, add top-5 accuracy (more than 5 classes) and ROC AUC (2 classes).
    """
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    labels = list(range(num_classes))
    p, r, f, s = _skm().precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=0)
    per_class = [
        ClassMetrics(label=i, precision=float(p[i]), recall=float(r[i]), f1=float(f[i]), support=int(s[i]))
        for i in labels
    ]
    present = [i for i in labels if s[i] > 0]
    macro = _skm().precision_recall_fscore_support(y_true, y_pred, labels=present, average="macro", zero_division=0)
    # A sample with NaN or inf outputs predicts NO_CLASS: a category of its own for kappa (a disagreement),
    # outside `labels` everywhere else (wrong for its true class, counted for no other).
    unscored = [NO_CLASS] if (y_pred == NO_CLASS).any() else []
    kappa = _skm().cohen_kappa_score(y_true, y_pred, labels=labels + unscored)
    return Metrics(
        accuracy=float(_skm().accuracy_score(y_true, y_pred)),
        precision=float(macro[0]),
        recall=float(macro[1]),
        f1=float(macro[2]),
        balanced_accuracy=float(_balanced_accuracy(y_true, y_pred)),
        # kappa is NaN when both raters use one class only; report 0 (no agreement beyond chance).
        cohen_kappa=0.0 if np.isnan(kappa) else float(kappa),
        agreement_with_float=None if float_pred is None else float(np.mean(y_pred == float_pred)),
        per_class=per_class,
        confusion_matrix=_skm().confusion_matrix(y_true, y_pred, labels=labels).tolist(),
        top5_accuracy=top_k_accuracy(y_true, scores, num_classes) if scores is not None else None,
        roc_auc=roc_auc(y_true, scores[:, 1]) if scores is not None and num_classes == 2 else None,
        classes_present=present,
    )


def multilabel(y_bits: np.ndarray, pred_bits: np.ndarray, float_bits: Optional[np.ndarray],
               scores: Optional[np.ndarray] = None) -> Metrics:
    """Multi-label quality (scikit-learn): exact-match (subset) accuracy, macro precision/recall/F1 over labels,
    micro F1, Hamming loss, per label precision/recall/F1 (support: positive samples), the per-label mean of
    balanced accuracy and kappa, and macro ROC AUC from the sigmoid scores. No argmax anywhere."""
    y, pred = np.asarray(y_bits, np.uint8), np.asarray(pred_bits, np.uint8)
    k = y.shape[1]
    p, r, f, s = _skm().precision_recall_fscore_support(y, pred, average=None, zero_division=0)
    macro = _skm().precision_recall_fscore_support(y, pred, average="macro", zero_division=0)
    per_label_kappa = [_skm().cohen_kappa_score(y[:, j], pred[:, j]) for j in range(k)]
    auc = None
    if scores is not None:
        try:
            auc = float(_skm().roc_auc_score(y, _ranked_last(y, scores), average="macro"))
        except ValueError:  # a label with one value only in the evaluation data
            auc = None
    return Metrics(
        accuracy=float(_skm().accuracy_score(y, pred)),
        precision=float(macro[0]),
        recall=float(macro[1]),
        f1=float(macro[2]),
        balanced_accuracy=float(np.mean([_balanced_accuracy(y[:, j], pred[:, j]) for j in range(k)])),
        cohen_kappa=float(np.mean([0.0 if np.isnan(v) else v for v in per_label_kappa])),
        agreement_with_float=None if float_bits is None else float(np.mean(np.all(pred == float_bits, axis=1))),
        per_class=[ClassMetrics(label=j, precision=float(p[j]), recall=float(r[j]), f1=float(f[j]), support=int(s[j]),
                                accuracy=float(np.mean(y[:, j] == pred[:, j])),
                                roc_auc=roc_auc(y[:, j], scores[:, j]) if scores is not None else None,
                                p_vs_float=None if float_bits is None else _label_p(y[:, j], pred[:, j], float_bits[:, j]))
                   for j in range(k)],
        confusion_matrix=[],
        roc_auc=auc,
        classes_present=[j for j in range(k) if s[j] > 0],
        hamming_loss=float(_skm().hamming_loss(y, pred)),
        micro_f1=float(_skm().f1_score(y, pred, average="micro", zero_division=0)),
    )


def dense(y: np.ndarray, pred: np.ndarray, num_classes: int, float_pred: Optional[np.ndarray]) -> Metrics:
    """Dense (per-pixel or per-timestep) classes, `y` and `pred` (N, positions) class ids: pixel accuracy,
    per class precision/recall/F1 over pixels, the pixel confusion matrix, balanced accuracy and kappa over
    pixels, and the share of pixels where the variant predicts float's class."""
    y, pred = np.asarray(y).reshape(len(y), -1), np.asarray(pred).reshape(len(pred), -1)
    labels = list(range(num_classes))
    cm = per_sample_confusion(y, pred, num_classes).sum(axis=0).reshape(num_classes, num_classes)
    tp = np.diag(cm).astype(np.float64)
    support, predicted = cm.sum(axis=1), cm.sum(axis=0)
    precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    recall = np.divide(tp, support, out=np.zeros_like(tp), where=support > 0)
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros_like(tp), where=denom > 0)
    present = [i for i in labels if support[i] > 0]
    flat_y, flat_pred = y.ravel(), pred.ravel()
    kappa = _skm().cohen_kappa_score(flat_y, flat_pred, labels=labels) if flat_y.size else 0.0
    total = int(cm.sum())
    return Metrics(
        accuracy=float(tp.sum() / total) if total else 0.0,
        precision=float(np.mean(precision[present])) if present else 0.0,
        recall=float(np.mean(recall[present])) if present else 0.0,
        f1=float(np.mean(f1[present])) if present else 0.0,
        balanced_accuracy=float(np.mean(recall[present])) if present else 0.0,
        cohen_kappa=0.0 if np.isnan(kappa) else float(kappa),
        agreement_with_float=None if float_pred is None else float(np.mean(pred == np.asarray(float_pred).reshape(pred.shape))),
        per_class=[ClassMetrics(label=i, precision=float(precision[i]), recall=float(recall[i]), f1=float(f1[i]),
                                support=int(support[i])) for i in labels],
        confusion_matrix=cm.astype(int).tolist(),
        classes_present=present,
    )


def per_sample_confusion(y: np.ndarray, pred: np.ndarray, num_classes: int) -> np.ndarray:
    """(N, num_classes * num_classes) int64: each sample's confusion matrix over its positions (rows: true),
    flattened, so that a bootstrap over samples only sums rows."""
    y, pred = np.asarray(y).reshape(len(y), -1), np.asarray(pred).reshape(len(pred), -1)
    k = num_classes
    # A position whose outputs hold NaN or inf (NO_CLASS) is wrong: counted as the next class, not its own.
    pred = np.where(pred == NO_CLASS, (y.astype(np.int64) + 1) % k, pred)
    codes = y.astype(np.int64) * k + pred.astype(np.int64) + (np.arange(len(y)) * k * k)[:, None]
    return np.bincount(codes.ravel(), minlength=len(y) * k * k).reshape(len(y), k * k)


def mask_counts(predicted: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """(N, 2) int64: each sample's intersection and union of its predicted and true masks ((N, values) bool,
    reporter.measure.kinds.mask.in_mask), so that a bootstrap over samples only sums rows."""
    predicted, truth = np.asarray(predicted, bool), np.asarray(truth, bool)
    return np.stack([(predicted & truth).sum(axis=1), (predicted | truth).sum(axis=1)], axis=1).astype(np.int64)


def mask_iou(counts: np.ndarray) -> np.ndarray:
    """Mask IoU of each row of summed counts (M, 2) (intersection, union) from `mask_counts`: intersection /
    union over every value of every sample summed (not a mean over samples); 0 where the union is empty (as
    segmentation's mean IoU)."""
    counts = np.asarray(counts, np.float64).reshape(-1, 2)
    return np.divide(counts[:, 0], counts[:, 1], out=np.zeros(len(counts)), where=counts[:, 1] > 0)


def _label_p(y: np.ndarray, pred: np.ndarray, float_pred: np.ndarray) -> float:
    """One label's exact McNemar p-value: which samples this model and float get right on it."""
    from reporter.core.statistics import mcnemar_p

    return mcnemar_p(pred == y, float_pred == y)


def top_k_accuracy(y_true: np.ndarray, scores: np.ndarray, num_classes: int, k: int = TOP_K) -> Optional[float]:
    """Share of samples whose true label is among the k highest scores; None for k classes or fewer."""
    if num_classes <= k:
        return None
    finite = np.isfinite(scores).all(axis=1)  # a sample with NaN or inf scores is wrong
    if not finite.any():
        return 0.0
    right = _skm().top_k_accuracy_score(np.asarray(y_true)[finite], scores[finite], k=k,
                                        labels=list(range(num_classes)), normalize=False)
    return float(right / len(finite))


def roc_auc(y_true: np.ndarray, positive_score: np.ndarray) -> Optional[float]:
    """ROC AUC of the class-1 score; None when the labels hold one class only (AUC is undefined)."""
    if len(np.unique(y_true)) < 2:
        return None
    return float(_skm().roc_auc_score(y_true, _ranked_last(y_true, positive_score)))


def _ranked_last(y_true: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """`scores` (N,) or (N, labels) with each NaN or inf score replaced by the worst it could be for its sample
    (below every finite score for a positive, above for a negative), so that ROC AUC counts it wrong."""
    scores = np.asarray(scores, np.float64)
    finite = np.isfinite(scores)
    if finite.all():
        return scores
    low = scores[finite].min() - 1.0 if finite.any() else 0.0
    high = scores[finite].max() + 1.0 if finite.any() else 1.0
    positive = np.asarray(y_true).reshape(scores.shape) == 1
    return np.where(finite, scores, np.where(positive, low, high))


def paired(y_true: np.ndarray, reference_pred: np.ndarray, pred: np.ndarray) -> Paired:
    """Discordant counts of two classifiers on the same samples (for McNemar's test)."""
    return paired_correct(np.asarray(reference_pred) == y_true, np.asarray(pred) == y_true)


def paired_correct(reference_ok: np.ndarray, ok: np.ndarray) -> Paired:
    """Discordant counts of two models from which samples each gets right (for McNemar's test)."""
    ref_ok, ok = np.asarray(reference_ok, bool), np.asarray(ok, bool)
    return Paired(reference_only=int(np.sum(ref_ok & ~ok)), variant_only=int(np.sum(~ref_ok & ok)))


def _balanced_accuracy(y_true, y_pred) -> float:
    import warnings

    with warnings.catch_warnings():
        # sklearn warns when y_pred holds classes absent from y_true; the value is still right.
        warnings.simplefilter("ignore")
        return _skm().balanced_accuracy_score(y_true, y_pred)


def output_error(outputs: np.ndarray, float_outputs: np.ndarray) -> OutputError:
    """Error of a variant's raw output against the float variant's output, over the samples where both outputs
    are finite (the others are counted in `VariantResult.nonfinite_outputs`); a ValueError when there is none."""
    mine, ref = np.asarray(outputs, np.float64), np.asarray(float_outputs, np.float64)
    mine, ref = mine.reshape(len(mine), -1), ref.reshape(len(ref), -1)
    both = np.isfinite(mine).all(axis=1) & np.isfinite(ref).all(axis=1)
    if not both.any():
        raise ValueError(f"none of the {len(both):,} samples has finite outputs in both this model and float")
    diff = mine[both] - ref[both]
    return OutputError(mse=float(np.mean(diff**2)), max_abs_error=float(np.max(np.abs(diff))),
                       float_variance=float(np.var(ref[both])))


def target_error(outputs: np.ndarray, targets: np.ndarray) -> TargetError:
    """Error of a regression output against its targets (same number of values per sample), over the samples
    whose output is finite: MAE, RMSE and R² = 1 - residual sum of squares / the targets' sum of squares about
    each value's mean (scikit-learn's variance-weighted R², except that errors on a value whose target never
    varies still count; None when no target varies); a ValueError when the shapes differ or no output is
    finite."""
    mine, ref = np.asarray(outputs, np.float64), np.asarray(targets, np.float64)
    mine, ref = mine.reshape(len(mine), -1), ref.reshape(len(ref), -1)
    if mine.shape != ref.shape:
        raise ValueError(f"targets of shape {ref.shape} for outputs of shape {mine.shape}")
    ok = np.isfinite(mine).all(axis=1) & np.isfinite(ref).all(axis=1)
    if not ok.any():
        raise ValueError(f"none of the {len(ok):,} samples has finite outputs and targets")
    mine, ref = mine[ok], ref[ok]
    diff = mine - ref
    total = float(((ref - ref.mean(axis=0)) ** 2).sum())
    r2 = 1.0 - float((diff**2).sum()) / total if total > 0 else None
    return TargetError(mae=float(np.mean(np.abs(diff))), rmse=float(np.sqrt(np.mean(diff**2))), r2=r2)


def pack_correct(correct: np.ndarray) -> str:
    """Which samples are right, as base64 of numpy.packbits (1 bit a sample)."""
    import base64

    return base64.b64encode(np.packbits(np.asarray(correct, dtype=bool)).tobytes()).decode("ascii")


def unpack_correct(text: str, n: int) -> Optional[np.ndarray]:
    """The booleans `pack_correct` stored for `n` samples; None when nothing (or the wrong length) was stored."""
    import base64

    if not text:
        return None
    bits = np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8))
    if len(bits) < n or len(bits) - n >= 8:
        return None
    return bits[:n].astype(bool)


def fingerprint(x, y: np.ndarray) -> str:
    """sha256 of the evaluation inputs (one array, or Inputs: each input by name, in name order) and
    labels, their shapes and dtypes."""
    import hashlib

    from reporter.measure.signature import Inputs

    h = hashlib.sha256()
    arrays = [x]
    if isinstance(x, Inputs):
        single = x.single()
        arrays = [single] if single is not None else [x[k] for k in sorted(x.names)]
    for a in (*arrays, *([] if y is None else [y])):  # no labels (a user's metric without them): the inputs
        h.update(f"{a.shape}|{a.dtype.str}|".encode())
        for part in chunks(a):  # a memory-mapped array stays on disk
            h.update(np.ascontiguousarray(part).tobytes())
    return h.hexdigest()
