"""The batch index: one row per model comparing accuracy, size, latency, suspects and the gate.

Written as index.json (the data), index.html (self-contained) and index.md, atomically.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import markupsafe

from reporter import __version__
from reporter.batch.runner import BatchResult
from reporter.batch.worker import Outcome
from reporter.batch.config import BatchConfig
from reporter.findings.gate import Gate
from reporter.core.exit_codes import exit_code
from reporter.render.words.gate import check
from reporter.render.formats import FILE_NAMES, environment, templates_dir, write_atomic
from reporter.render import load_report
from reporter.findings.derive import metric_of
from reporter.core.formatting import NOT_MEASURED, fmt_bytes, fmt_change, fmt_metric, fmt_ms, fmt_number, fmt_percent, fmt_points
from reporter.core import variants
from reporter.core.variants import short

INDEX_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class IndexRow:
    name: str
    status: str  # "ok", "failed" or "skipped" (kept from an earlier run)
    folder: str
    links: dict  # format -> relative path, for the files that exist
    accuracy: dict  # variant -> the main metric (accuracy, or `metric`) for float, drq, fiq, selective
    size_bytes: dict
    latency_ms: dict  # variant -> median
    accuracy_drop: Optional[float]  # float - gate variant (or FIQ) accuracy
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
    metric, share = metric_of(report)
    ok = [f for f in found.variants if f.ok and f.name != variants.RULE]
    accuracy = {f.name: f.accuracy for f in ok if f.accuracy is not None}
    target = found.variant(gate.variant if gate else variants.GATE_DEFAULT)
    drop = -target.vs_float.delta if target is not None and target.vs_float is not None else None
    gate_result = dataclasses.asdict(check(report, gate)) if gate else None
    return IndexRow(
        links={fmt: f"{outcome.folder}/{FILE_NAMES[fmt]}" for fmt in FILE_NAMES if (folder / FILE_NAMES[fmt]).is_file()},
        accuracy=accuracy,
        size_bytes={f.name: f.size_bytes for f in ok},
        latency_ms={f.name: f.latency_ms for f in ok if f.latency_ms is not None},
        accuracy_drop=drop,
        suspects=sum(1 for layer in report.layers if layer.suspect) if report.layers else None,
        gap_recovered=found.fix.share_of_gap if found.fix else None,
        gate=gate_result,
        verdict=found.headline[0] if found.headline else "",
        not_measured={f.name: dict(f.not_measured) for f in ok if f.not_measured},
        metric=metric, metric_share=share,
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
    def fiq_label(self) -> str:
        return short(variants.FIQ)

    def __init__(self, index: Index):
        self.index = index

    @property
    def rows(self):
        out = []
        for r in self.index.rows:
            gate = ""
            if r.gate:
                gate = "pass" if r.gate["passed"] else "FAIL"
            gated = self.index.gate["variant"] if self.index.gate else variants.GATE_DEFAULT
            out.append({
                "row": r,
                "metric": "" if r.metric == "accuracy" else r.metric,
                "accuracy": [NOT_MEASURED if _missing(r, v, "metrics") else
                             (fmt_metric if r.metric_share else fmt_number)(r.accuracy.get(v)) for v in self.VARIANTS],
                "size": [fmt_bytes(r.size_bytes.get(v)) if r.size_bytes.get(v) else "–" for v in self.VARIANTS[:3]],
                # a built FIQ without a latency: its timing failed or was skipped (latency runs 0)
                "latency": NOT_MEASURED
                if variants.FIQ in r.size_bytes and r.latency_ms.get(variants.FIQ) is None
                else fmt_ms(r.latency_ms.get(variants.FIQ)),
                "drop": (NOT_MEASURED if _missing(r, gated, "metrics") or _missing(r, variants.FLOAT, "metrics") else "–")
                if r.accuracy_drop is None else (fmt_points(-r.accuracy_drop) if r.metric_share
                                                 else fmt_change(-r.accuracy_drop, False)),
                "suspects": "–" if r.suspects is None else str(r.suspects),
                "gap": fmt_percent(r.gap_recovered, 0),
                "gate": gate,
                "gate_message": r.gate["message"] if r.gate else "",
            })
        return out

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
        return f"{short(variant)} vs float (points)"

    @property
    def seconds_text(self) -> str:
        return f"{self.index.seconds:.1f} s"

    @property
    def gate_text(self) -> str:
        g = self.index.gate
        if not g:
            return ""
        return f"{g['variant']} may lose at most {g['max_accuracy_drop'] * 100:.1f} accuracy points against float"


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
