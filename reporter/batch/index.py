"""The batch index: one row per model comparing its main metric, size, latency, suspects and the gate.

Written as index.json (the data), index.html (self-contained) and index.md, atomically. Models are grouped by
their main metric and its direction (accuracy, mean IoU, a user's `auc` or `recon_mse`): a column never holds
two metrics, and index.json keeps each row's numbers under the metric's own name.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import markupsafe

from reporter.core.version import __version__
from reporter.batch.runner import BatchResult
from reporter.batch.worker import Outcome
from reporter.batch.config import BatchConfig
from reporter.findings.gate import Gate
from reporter.core.exit_codes import exit_code
from reporter.render.formats import FILE_NAMES, environment, templates_dir, write_atomic
from reporter.pipeline.conclude import check_gate as check, load_report
from reporter.core.formatting import NOT_MEASURED, fmt_bytes, fmt_change, fmt_metric, fmt_ms, fmt_number, fmt_percent, fmt_points
from reporter.core import variants
from reporter.core.variants import short

INDEX_SCHEMA_VERSION = 2  # 2: `scores` by metric name; `accuracy` only for accuracy


@dataclass(frozen=True)
class IndexRow:
    name: str
    status: str  # "ok", "failed" or "skipped" (kept from an earlier run)
    folder: str
    links: dict  # format -> relative path, for the files that exist
    accuracy: dict  # variant -> accuracy (or exact-match accuracy) for float, drq, fiq, selective; {} otherwise
    size_bytes: dict
    latency_ms: dict  # variant -> median
    accuracy_drop: Optional[float]  # float - gate variant (or FIQ) accuracy; None when the metric is another
    suspects: Optional[int]
    gap_recovered: Optional[float]
    gate: Optional[dict]  # {passed, variant, limit, drop, message}
    stage: str = ""
    error: str = ""
    log: str = ""
    seconds: float = 0.0
    peak_rss_mb: Optional[float] = None
    verdict: str = ""  # the report's first headline sentence
    # variant -> {measurement: error} for the measurements of a built variant that failed (its value is
    # missing above and shown as "not measured")
    not_measured: dict = dataclasses.field(default_factory=dict)
    metric: str = "accuracy"  # the main metric the row's numbers are: accuracy, mean IoU, the user's metric
    metric_share: bool = True  # a share (0..1); else a number in the metric's own units
    metric_plain: bool = True  # the share of samples right (Report.metric_plain): the column needs no metric name
    higher_is_better: bool = True  # the main metric's direction
    scores: dict = dataclasses.field(default_factory=dict)  # {metric name: {variant: value}}
    metric_drop: Optional[float] = None  # float - gate variant on the main metric, oriented (positive: worse)
    npu_estimate_ms: Optional[float] = None  # an Ethos-U target: Vela's estimated time of the model shipped


def _row(out: Path, outcome: Outcome, gate: Optional[Gate]) -> IndexRow:
    folder = out / outcome.folder
    base = dict(name=outcome.name, status=outcome.status, folder=outcome.folder, stage=outcome.stage,
                error=outcome.error, log=outcome.log, seconds=outcome.seconds, peak_rss_mb=outcome.peak_rss_mb)
    report = None
    if outcome.status != "failed" and (folder / "report.json").is_file():
        try:
            report = load_report(folder / "report.json")
        except (ValueError, TypeError, KeyError) as exc:
            base.update(status="failed", stage="index", error=f"report.json unreadable: {exc}")
    if report is None:
        return IndexRow(links={}, accuracy={}, size_bytes={}, latency_ms={}, accuracy_drop=None, suspects=None,
                        gap_recovered=None, gate=None, **base)
    found = report.findings  # every number and verdict below comes from the report's findings
    metric, share = report.metric()
    flt = report.variant(variants.FLOAT)
    main = flt.metrics.main if flt is not None and flt.metrics is not None else None
    ok = [f for f in found.variants if f.ok and f.name != variants.RULE]
    values = {f.name: f.accuracy for f in ok if f.accuracy is not None}  # the main metric, whatever it is
    is_accuracy = report.metric_plain()  # a classifier's accuracy: the index's `accuracy` column
    by_target = gate is not None and not gate.variant and found.gate is not None  # the run's gate by --target
    gated = found.gate.variant if by_target else (gate.variant if gate and gate.variant else variants.GATE_DEFAULT)
    target = found.variant(gated)
    drop = -target.vs_float.delta if target is not None and target.vs_float is not None else None
    if gate is None:
        gate_result = None
    else:
        gate_result = dataclasses.asdict(found.gate if by_target else check(report, gate if gate.variant else
                                                                                 Gate(gate.max_accuracy_drop)))
    return IndexRow(
        links={fmt: f"{outcome.folder}/{FILE_NAMES[fmt]}" for fmt in FILE_NAMES if (folder / FILE_NAMES[fmt]).is_file()},
        accuracy=values if is_accuracy else {},
        scores={metric: values} if values else {},
        higher_is_better=main.higher_is_better if main is not None else True,
        metric_drop=drop,
        size_bytes={f.name: f.size_bytes for f in ok},
        latency_ms={f.name: f.latency_ms for f in ok if f.latency_ms is not None},
        accuracy_drop=drop if is_accuracy else None,
        suspects=sum(1 for layer in report.layers if layer.suspect) if report.layers else None,
        gap_recovered=found.fix.share_of_gap if found.fix else None,
        gate=gate_result,
        verdict=found.headline[0] if found.headline else "",
        not_measured={f.name: dict(f.not_measured) for f in ok if f.not_measured},
        metric=metric, metric_share=share, metric_plain=is_accuracy,
        npu_estimate_ms=next((f.inference_ms for f in found.decision.hardware.tools.values()  # an NPU compiler's
                              if getattr(f, "inference_ms", None) is not None), None)  # estimate of the model shipped
        if found.decision is not None and found.decision.hardware is not None else None,
        **base,
    )


@dataclass(frozen=True)
class Index:
    schema_version: int
    generated_at: str
    tool_version: str
    config: str
    gate: Optional[dict]
    seconds: float
    rows: list[IndexRow]

    @property
    def failed(self) -> list[IndexRow]:
        return [r for r in self.rows if r.status == "failed"]

    @property
    def gate_failures(self) -> list[IndexRow]:
        return [r for r in self.rows if r.status != "failed" and r.gate and not r.gate["passed"]]

    @property
    def exit_code(self) -> int:
        return exit_code(failed=bool(self.failed), gate_failed=bool(self.gate_failures))

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["exit_code"] = self.exit_code
        return json.dumps(data, indent=2) + "\n"


def build(config: BatchConfig, out, result: BatchResult) -> Index:
    out = Path(out)
    return Index(
        schema_version=INDEX_SCHEMA_VERSION,
        generated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__,
        config=str(config.path),
        gate=dataclasses.asdict(config.gate) if config.gate else None,
        seconds=result.seconds,
        rows=[_row(out, o, config.gate) for o in result.outcomes],
    )


class IndexView:
    """Formatted cells for the index templates."""

    # Their accuracy; the first three's size; FIQ's latency.
    VARIANTS = (variants.FLOAT, variants.DRQ, variants.FIQ, variants.SELECTIVE)

    @property
    def accuracy_labels(self) -> list[str]:
        """The accuracy columns' variant names, from reporter.core.variants."""
        return [short(v) for v in self.VARIANTS]

    @property
    def size_labels(self) -> list[str]:
        return [short(v) for v in self.VARIANTS[:3]]

    @property
    def npu_column(self) -> bool:
        """A batch that targets an Ethos-U NPU: a column for Vela's estimated time of each model shipped."""
        return any(r.npu_estimate_ms is not None for r in self.index.rows)

    @property
    def fiq_label(self) -> str:
        return short(variants.FIQ)

    def __init__(self, index: Index):
        self.index = index

    @property
    def rows(self):
        """Every reported row's cells, in the order of the config (failed rows carry only their error)."""
        return [self._cells(r) for r in self.index.rows]

    @property
    def groups(self) -> list[dict]:
        """One table per main metric and direction, in order of first appearance: its title, column labels and
        the cells of its reported rows. A column never mixes metrics."""
        found: dict = {}
        for r in self.index.rows:
            if r.status == "failed":
                continue
            key = (r.metric, r.higher_is_better, r.metric_share)
            found.setdefault(key, []).append(self._cells(r))
        return [{"title": metric_title(*key), "metric": key[0], "labels": [f"{short(v)} {key[0]}" for v in
                 self.VARIANTS], "drop_label": self._drop_label(*key), "rows": rows} for key, rows in found.items()]

    def _cells(self, r: IndexRow) -> dict:
        gate = ""
        if r.gate:
            gate = "pass" if r.gate["passed"] else "FAIL"
        gated = self.index.gate["variant"] if self.index.gate else variants.GATE_DEFAULT
        values = r.scores.get(r.metric, r.accuracy)
        return {
            "row": r,
            "metric": "" if r.metric_plain else r.metric,
            "accuracy": [NOT_MEASURED if _missing(r, v, "metrics") else
                         (fmt_metric if r.metric_share else fmt_number)(values.get(v)) for v in self.VARIANTS],
            "size": [fmt_bytes(r.size_bytes.get(v)) if r.size_bytes.get(v) else "–" for v in self.VARIANTS[:3]],
            # a built FIQ without a latency: its timing failed or was skipped (latency runs 0)
            "latency": NOT_MEASURED
            if variants.FIQ in r.size_bytes and r.latency_ms.get(variants.FIQ) is None
            else fmt_ms(r.latency_ms.get(variants.FIQ)),
            "drop": _drop_cell(r, _missing(r, gated, "metrics") or _missing(r, variants.FLOAT, "metrics")),
            "npu": fmt_ms(r.npu_estimate_ms) if r.npu_estimate_ms is not None else "–",
            "suspects": "–" if r.suspects is None else str(r.suspects),
            "gap": fmt_percent(r.gap_recovered, 0),
            "gate": gate,
            "gate_message": r.gate["message"] if r.gate else "",
        }

    def _drop_label(self, metric: str, higher_is_better: bool, share: bool) -> str:
        variant = self.index.gate["variant"] if self.index.gate else variants.GATE_DEFAULT
        unit = "points" if share else metric
        return f"{short(variant)} vs float ({unit}, + is better)"

    @property
    def summary(self) -> str:
        n = len(self.index.rows)
        failed = len(self.index.failed)
        gated = len(self.index.gate_failures)
        parts = [f"{n} model{'s' if n != 1 else ''}", f"{n - failed} reported"]
        if failed:
            parts.append(f"{failed} failed")
        if self.index.gate:
            parts.append("gate passed" if not gated else f"{gated} failed the gate")
        return ", ".join(parts)

    @property
    def drop_label(self) -> str:
        variant = self.index.gate["variant"] if self.index.gate else variants.GATE_DEFAULT
        return f"{short(variant)} vs float"

    @property
    def seconds_text(self) -> str:
        return f"{self.index.seconds:.1f} s"

    @property
    def gate_text(self) -> str:
        g = self.index.gate
        if not g:
            return ""
        return f"{g['variant']} may lose at most {g['max_accuracy_drop'] * 100:.1f} accuracy points against float"


def metric_title(metric: str, higher_is_better: bool, share: bool) -> str:
    """A group's heading: the metric and which way is better ("accuracy (higher is better)")."""
    return f"{metric} ({'higher' if higher_is_better else 'lower'} is better{', a share' if share else ''})"


def _drop_cell(r: IndexRow, missing: bool) -> str:
    """The gated variant against float on the row's main metric, oriented so that + is better: points of 100 for a
    share, the metric's own units otherwise."""
    drop = r.metric_drop if r.metric_drop is not None else r.accuracy_drop
    if drop is None:
        return NOT_MEASURED if missing else "–"
    return fmt_points(-drop) if r.metric_share else fmt_change(-drop, False)


def _missing(row: IndexRow, variant: str, measurement: str) -> bool:
    return measurement in row.not_measured.get(variant, {})


def write(index: Index, out) -> list[Path]:
    out = Path(out)
    view = IndexView(index)
    css = markupsafe.Markup((templates_dir() / "report.css").read_text(encoding="utf-8"))
    html = environment(True).get_template("index.html.j2").render(v=view, i=index, css=css)
    md = environment(False).get_template("index.md.j2").render(v=view, i=index)
    written = []
    for name, data in (("index.json", index.to_json()), ("index.html", html), ("index.md", md)):
        write_atomic(out / name, data.encode("utf-8"))
        written.append(out / name)
    return written
