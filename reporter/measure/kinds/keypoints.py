"""The keypoint kind: heatmaps or coordinates of K keypoints per image, judged by PCK@0.1 and OKS.

Outputs (without the batch; leading axes of length 1 are ignored, so MoveNet's [1, 1, 17, 3] is [17, 3]):

    heatmaps     (H, W, K), H and W above 1: keypoint k at the centre of its heatmap's top cell, normalized:
                 ((row + 0.5) / H, (column + 0.5) / W); no offsets are read (a second offsets output is not joined)
    coordinates  (K, 2) or (K, 3): y, x normalized to 0..1 [, a score, not read by the figures]

Labels: `y_keypoints` (n, K, 2), y and x normalized to 0..1, or (n, K, 3) whose third column is the visibility: 0
is "not labelled" (that keypoint is not scored and its coordinates are not read), any value above 0 is labelled (as
COCO's 1 "labelled, not visible" and 2 "visible" both are). The one array `y_keypoints` is read as keypoints with no
flag (reporter.inputs.labels asks `join_labels`); any labels of that shape are with `--task keypoints`.

The figures, per image, over its labelled keypoints, in normalized coordinates:
* the figure's box: the bounding box of the image's labelled keypoints; a box of zero area (one labelled keypoint,
  or all on one line) is replaced by the whole image (diagonal sqrt(2), area 1);
* PCK@0.1 (the main metric, a share): a keypoint is right when it lies within 0.1 x the box's diagonal of its label;
  pooled over every labelled keypoint of every image;
* OKS, COCO's formula: the mean over labelled keypoints of exp(-d^2 / (2 * area * (2 * sigma)^2)), area the box's;
  sigma COCO's person sigmas when K = 17, else 0.05 for every keypoint (the figures record says which). Mean OKS
  is over the images with at least one labelled keypoint.
PCK@0.1 is paired by a bootstrap over whole images (each image's right and labelled keypoints resampled together).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from reporter.core.errors import InputError
from reporter.measure.kinds.base import Example, Kind, LabelSource, TaskReading, check_normalized, choices
from reporter.measure.scoring import BOOTSTRAP_DENSE, Score, Scored, resample_weights
from reporter.measure.signature import Port
from reporter.measure.task import Task
from reporter.model import figures
from reporter.model.bounds import COUNT, NON_NEGATIVE, SHARE, figure
from reporter.model.report import Metrics

NAME = "keypoints"
LABELS = "keypoints"  # the label array y_keypoints
PCK = "PCK@0.1"
ALPHA = 0.1  # PCK's radius, as a share of the figure's box diagonal
EQUAL_SIGMA = 0.05  # OKS's sigma of every keypoint when K is not COCO's 17
# COCO's person keypoint sigmas (nose, eyes, ears, shoulders, elbows, wrists, hips, knees, ankles), cocoeval.py
COCO_SIGMAS = (0.026, 0.025, 0.025, 0.035, 0.035, 0.079, 0.079, 0.072, 0.072, 0.062, 0.062, 0.107, 0.107,
               0.087, 0.087, 0.089, 0.089)
# Normalized labels may overshoot [0, 1] by this much (a keypoint on the image's edge, rounded) and still be read.
TOLERANCE = 0.01


@dataclass(frozen=True)
class KeypointMetrics:
    """A keypoint model's figures (report.json's `metrics.figures.keypoints`): PCK@0.1 over every labelled keypoint
    (the main metric), mean OKS over the images with one, PCK@0.1 per keypoint (None: never labelled), the labelled
    keypoints per keypoint, and OKS's sigma per keypoint (`coco_sigmas`: COCO's 17, else EQUAL_SIGMA each)."""

    pck: float = figure(SHARE)
    oks: float = figure(SHARE)
    pck_per_keypoint: list[Optional[float]] = figure(SHARE, default_factory=list)
    labelled_per_keypoint: list[int] = figure(COUNT, default_factory=list)
    sigmas: list[float] = figure(NON_NEGATIVE, default_factory=list)
    coco_sigmas: bool = False


@dataclass(frozen=True)
class KeypointTask(Task):
    """A keypoint output's task: `num_classes` is K; `grid` the heatmaps' (H, W), () for coordinates."""

    grid: tuple = ()


class _Joined(np.ndarray):
    """`y_keypoints` as reporter.inputs.labels hands it on (the one label array of a one-output model): marked, so
    that `detect` reads it as keypoints and never an array `y` of the same shape (a heatmap's user metric's)."""


# --- the output's layout ------------------------------------------------------------------------------------
def layout(dims: tuple) -> Optional[tuple]:
    """("heatmaps", K, (H, W)) or ("coordinates", K, columns) for an output of shape `dims` (without the batch, the
    leading axes of length 1 dropped); None for one that is neither."""
    dims = tuple(int(d) for d in dims)
    while len(dims) > 2 and dims[0] == 1:
        dims = dims[1:]
    if len(dims) == 3 and dims[0] > 1 and dims[1] > 1 and dims[2] >= 1:
        return "heatmaps", dims[2], dims[:2]
    if len(dims) == 2 and dims[1] in (2, 3) and dims[0] >= 1:
        return "coordinates", dims[0], dims[1]
    return None


def _dims(port: Port) -> tuple:
    return tuple(port.allocated or port.shape)[1:]


def sigmas(k: int) -> np.ndarray:
    """OKS's sigma of each of `k` keypoints: COCO's person sigmas for 17, else EQUAL_SIGMA each."""
    return np.array(COCO_SIGMAS if k == len(COCO_SIGMAS) else (EQUAL_SIGMA,) * k, np.float64)


def _grid(task: Task, values: int) -> tuple:
    """The heatmaps' (H, W) of a task; for a task made without them (an output without labels), a square grid."""
    grid = getattr(task, "grid", ())
    if grid:
        return tuple(grid)
    cells = values // task.num_classes
    side = int(round(cells ** 0.5))
    if side * side != cells:
        raise ValueError(f"heatmaps of {cells} cells per keypoint: their height and width are not known")
    return side, side


def decode(task: Task, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(coordinates (N, K, 2) y, x normalized; scores (N, K)) of an output's rows. Heatmaps: each keypoint at its
    channel's top cell's centre, its score that cell's value; coordinates: as given, the score column if any (else
    1). A keypoint whose values hold NaN or inf is at NaN."""
    out = np.asarray(out, np.float64)
    out = out.reshape(len(out), -1)
    n, k = len(out), task.num_classes
    if not getattr(task, "grid", ()) and out.shape[1] in (2 * k, 3 * k):  # heatmaps have at least 4 cells
        rows = out.reshape(n, k, -1)
        coords = rows[..., :2].copy()
        found = np.ones((n, k)) if rows.shape[2] == 2 else rows[..., 2].copy()
        bad = ~np.isfinite(coords).all(axis=-1)  # a NaN score leaves the keypoint where it is
    else:
        h, w = _grid(task, out.shape[1])
        maps = out.reshape(n, h * w, k)
        bad = ~np.isfinite(maps).all(axis=1)
        cell = np.where(np.isfinite(maps), maps, -np.inf).argmax(axis=1)  # (N, K)
        coords = np.stack([(cell // w + 0.5) / h, (cell % w + 0.5) / w], axis=-1)
        found = np.take_along_axis(maps, cell[:, None, :], axis=1)[:, 0, :]
    coords[bad] = np.nan
    return coords, found


def unpack_labels(task: Task, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(keypoints (N, K, 2), labelled (N, K) bool) from the labels as the reading keeps them (rows of K x 2 or 3)."""
    y = np.asarray(y, np.float64)
    rows = y.reshape(len(y), task.num_classes, -1)
    labelled = np.ones(rows.shape[:2], bool) if rows.shape[2] == 2 else rows[..., 2] > 0
    return rows[..., :2], labelled


def boxes(points: np.ndarray, labelled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(diagonal (N,), area (N,)) of each image's figure box: the box of its labelled `points`, the whole image
    (sqrt(2), 1) where that box has zero area or no point is labelled."""
    mask = labelled[..., None] & np.isfinite(points)
    low = np.where(mask, points, np.inf).min(axis=1)
    high = np.where(mask, points, -np.inf).max(axis=1)
    span = np.where(mask.any(axis=1), high - low, 0.0)  # (N, 2) height, width
    area = span[:, 0] * span[:, 1]
    flat = ~(area > 0)
    return np.where(flat, np.sqrt(2.0), np.hypot(span[:, 0], span[:, 1])), np.where(flat, 1.0, area)


def per_image(task: Task, out: np.ndarray, y: np.ndarray) -> dict:
    """Each image's figures: `hits` (N, K) bool (labelled and within ALPHA of the box's diagonal), `labelled`
    (N, K), `oks` (N,) (NaN for an image with no labelled keypoint)."""
    pred, _ = decode(task, out)
    truth, labelled = unpack_labels(task, y)
    diagonal, area = boxes(truth, labelled)
    d2 = ((pred - truth) ** 2).sum(axis=-1)
    d2 = np.where(np.isfinite(d2), d2, np.inf)
    hits = labelled & (np.sqrt(d2) <= ALPHA * diagonal[:, None])
    k2 = (2 * sigmas(task.num_classes)) ** 2
    similarity = np.exp(-d2 / (2 * area[:, None] * k2[None, :]))
    count = labelled.sum(axis=1)
    oks = np.divide((similarity * labelled).sum(axis=1), count, out=np.full(len(count), np.nan), where=count > 0)
    return {"hits": hits, "labelled": labelled, "oks": oks}


def agreement_of(task: Task, out: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """(N,) the share of each image's K keypoints within ALPHA of the reference's (float's), the figure's box being
    the reference's K keypoints' (the whole image where it is flat)."""
    mine, _ = decode(task, out)
    theirs, _ = decode(task, ref)
    finite = np.isfinite(theirs).all(axis=-1)
    diagonal, _ = boxes(theirs, finite)
    d = np.sqrt(((mine - theirs) ** 2).sum(axis=-1))
    return np.mean(np.where(np.isfinite(d), d, np.inf) <= ALPHA * diagonal[:, None], axis=1)


# --- the kind -----------------------------------------------------------------------------------------------
class Keypoints(Kind):
    """K keypoints per image (heatmaps or coordinates) against their labelled positions."""

    name = NAME
    words = "a keypoint model"
    main_metric = PCK
    paired_test = ("paired bootstrap over whole images of PCK@0.1 (each image's right and labelled keypoints"
                   " resampled together)")
    accuracy_label = PCK
    share_metric = PCK
    plain_points = False  # "4.3 points of PCK@0.1"
    unit = "keypoints"
    counted_as = "keypoints"
    per_class_title = "Per keypoint (σ: its OKS sigma)"
    per_class_columns = "PCK@0.1"
    top_class = False  # a heatmap's top cell is a position, not a class
    sample_correct = False  # a share of keypoints, paired by a bootstrap over whole images

    # --- recognising --------------------------------------------------------------------------------------
    def join_labels(self, labels: dict, port: Port, source) -> Optional[np.ndarray]:
        """`y_keypoints`, the one label array of a one-output model, marked as keypoints; None for any other labels,
        or when the output is itself named keypoints and is no keypoint output (its labels, as they always were)."""
        if set(labels) != {LABELS} or (port.name == LABELS and layout(_dims(port)) is None):
            return None
        return np.asarray(labels[LABELS][0]).view(_Joined)

    def detect(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> Optional[TaskReading]:
        return self.recognise(labels, port, threshold, made_by) if isinstance(labels.y, _Joined) else None

    def examples(self, rng, n: int) -> list[Example]:
        return [_example(rng, n)]

    def recognise(self, labels: LabelSource, port: Port, threshold: float, made_by: str = "") -> TaskReading:
        what = f"y_{LABELS}" if isinstance(labels.y, _Joined) else labels.what
        y, source, dims = np.asarray(labels.y), labels.source, _dims(port)
        found = layout(dims)
        if found is None:
            raise InputError(source, f"'{what}' holds keypoints but output {port.name} has shape {dims}: a keypoint"
                                     " output is heatmaps (height, width, K) or coordinates (K, 2) or (K, 3): y, x"
                                     f" normalized[, score]{choices()}")
        form, k, extra = found
        if y.ndim != 3 or y.shape[1] != k or y.shape[2] not in (2, 3):
            raise InputError(source, f"'{what}' has shape {y.shape} but output {port.name} has shape {dims} ({k}"
                                     f" keypoints): expected ({len(y)}, {k}, 2) (y, x normalized to 0..1) or"
                                     f" ({len(y)}, {k}, 3) with a visibility column (0: not labelled){choices()}")
        y = y.astype(np.float64)
        labelled = np.ones(y.shape[:2], bool) if y.shape[2] == 2 else np.isfinite(y[..., 2]) & (y[..., 2] > 0)
        if y.shape[2] == 3 and not np.all(np.isfinite(y[..., 2])):
            raise InputError(source, f"'{what}' holds NaN or inf in its visibility column (0: not labelled)")
        if not labelled.any():
            raise InputError(source, f"'{what}' labels no keypoint in any of the {len(y):,} images (every visibility"
                                     " is 0): there is nothing to measure PCK against")
        check_normalized(y[..., :2][labelled], source, what, "keypoints", TOLERANCE)
        rows = np.where(np.isfinite(y), y, 0.0)  # an unlabelled keypoint's NaN: never read, kept finite
        read = (f"{k} heatmaps of {extra[0]}x{extra[1]}, each keypoint at its heatmap's top cell's centre,"
                if form == "heatmaps" else
                f"{k} keypoints as coordinates (y, x normalized{', score' if extra == 3 else ''})")
        visibility = ", a visibility of 0 not scored" if y.shape[2] == 3 else ""
        sigma = ("COCO's person sigmas" if k == len(COCO_SIGMAS) else f"equal sigmas of {EQUAL_SIGMA:g}")
        task = KeypointTask(self, k, threshold, grid=tuple(extra) if form == "heatmaps" else ())
        return TaskReading(rows.reshape(len(y), -1).astype(np.float32), task,
                           f"output {port.name} holds {read} and '{what}' {k} keypoints per image, y and x normalized"
                           f"{visibility}: judged by PCK@0.1, a keypoint right within 0.1 of the diagonal of the box"
                           " of the image's labelled keypoints (of the whole image where that box is flat), and by"
                           f" mean OKS with {sigma} and that box's area as the scale")

    def classes_of(self, size: int, shape: tuple) -> Optional[int]:
        found = layout(shape)
        return None if found is None else found[1]

    # --- reading outputs ----------------------------------------------------------------------------------
    def predict(self, task: Task, out: np.ndarray) -> np.ndarray:
        """(N, K * 2) each keypoint's y, x (NaN where the output holds NaN or inf)."""
        coords, _ = decode(task, out)
        return coords.reshape(len(coords), -1)

    def scores(self, task: Task, out: np.ndarray) -> np.ndarray:
        """(N, K) each keypoint's score: its heatmap's top value, or the coordinates' score column (else 1)."""
        return decode(task, out)[1]

    def decode(self, task: Task, y: np.ndarray) -> np.ndarray:
        """The labels as given: (N, K, 2) or (N, K, 3)."""
        y = np.asarray(y)
        return y.reshape(len(y), task.num_classes, -1)

    def agreement(self, task: Task, out: np.ndarray, ref: np.ndarray) -> np.ndarray:
        return agreement_of(task, out, ref)

    def correct(self, task: Task, out: np.ndarray, y: np.ndarray) -> None:
        return None  # a share of keypoints, paired by a bootstrap over images

    # --- measuring ----------------------------------------------------------------------------------------
    def metrics(self, task: Task, y: np.ndarray, out: np.ndarray, float_out: Optional[np.ndarray]) -> Metrics:
        found = per_image(task, out, y)
        hits, labelled = found["hits"], found["labelled"]
        per_k = labelled.sum(axis=0)
        right_k = hits.sum(axis=0)
        agree = None if float_out is None else float(np.mean(agreement_of(task, out, float_out)))
        k = task.num_classes
        oks = found["oks"][np.isfinite(found["oks"])]
        mine = KeypointMetrics(pck=_share(hits.sum(), labelled.sum()), oks=float(oks.mean()) if oks.size else 0.0,
                               pck_per_keypoint=[float(r / c) if c else None for r, c in zip(right_k, per_k)],
                               labelled_per_keypoint=[int(c) for c in per_k],
                               sigmas=[float(s) for s in sigmas(k)], coco_sigmas=k == len(COCO_SIGMAS))
        return Metrics(agreement_with_float=agree, figures=figures.Figures({NAME: mine}))

    def score(self, task: Task, y: np.ndarray) -> Score:
        return PckScore(task, y)


class PckScore(Score):
    """PCK@0.1 over every labelled keypoint; its interval and paired test from a bootstrap over whole images."""

    bootstrapped = True

    def __init__(self, task: Task, y: np.ndarray):
        super().__init__(task, y, PCK)
        self.weights = resample_weights(len(y), BOOTSTRAP_DENSE)

    def counts(self, out) -> np.ndarray:
        """(N, 2): each image's right and labelled keypoints."""
        found = per_image(self.task, out, self.y)
        return np.stack([found["hits"].sum(axis=1), found["labelled"].sum(axis=1)], axis=1).astype(np.float64)

    def value(self, out) -> float:
        return _share(*self.counts(out).sum(axis=0))

    def measure(self, out) -> Scored:
        per = self.counts(out)
        boot = self.weights @ per
        return Scored(_share(*per.sum(axis=0)), boot=np.divide(boot[:, 0], boot[:, 1], out=np.zeros(len(boot)),
                                                                where=boot[:, 1] > 0))


def _share(right, total) -> float:
    """right / total; 0 on images without a labelled keypoint (a part of the evaluation data may have none)."""
    return float(right / total) if total else 0.0


KIND = Keypoints()
figures.register(NAME, KeypointMetrics)


# --- its example for the conformance checks (reporter.testing.check_kind) -------------------------------------
def _example(rng, n: int, k: int = 5, side: int = 8) -> Example:
    """Heatmaps (side, side, K) peaking near each of K labelled keypoints (y_keypoints: y, x normalized)."""
    y = rng.uniform(0.05, 0.95, (n, k, 2)).astype(np.float32)

    def heatmaps(jitter: float):
        centres = np.clip(y + rng.normal(scale=jitter, size=y.shape), 0, 1)
        grid = (np.arange(side) + 0.5) / side
        d2 = (grid[None, :, None, None] - centres[:, None, None, :, 0]) ** 2 + \
             (grid[None, None, :, None] - centres[:, None, None, :, 1]) ** 2
        return np.exp(-d2 / 0.01).astype(np.float32)

    return Example("keypoint heatmaps", (side, side, k), "", None, heatmaps(0.02), heatmaps(0.06),
                   labels_are_classes=False, arrays={"keypoints": y})
