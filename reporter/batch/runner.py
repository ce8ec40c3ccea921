"""The batch runner: many models from one config file, each in its own worker process or Ray task.

A worker that crashes or runs out of memory takes down only its own model. Reports are written
atomically by the pipeline, so an interrupted batch leaves complete reports only; `resume` skips
the models whose report is complete and whose inputs have not changed. Workers die with the driver
(reporter.core.lifetime); a driver stopped by SIGTERM or Ctrl-C stops its workers and still returns
every model's outcome (interrupted, not started), so that the index is written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from reporter.core.version import __version__
from reporter.batch.config import BatchConfig, ModelEntry
from reporter.batch.display import Display
from reporter.batch.executor import BatchOptions, Executor
from reporter.batch.worker import FINGERPRINT_KEY, Job, Outcome
from reporter.core.files import check_replaceable, clean_leftovers, folder_name
from reporter.core.errors import UsageError
from reporter.core.lifetime import Terminated
from reporter.inputs import settings


def fingerprint(entry: ModelEntry, max_accuracy_drop=None) -> str:
    """A hash of everything a report depends on: model bytes, data bytes, settings (the gate's limit is
    the search's target), tool version."""
    h = hashlib.sha256()
    h.update(f"quant-report {__version__}\n".encode())
    h.update(json.dumps({**entry.options, "max_accuracy_drop": max_accuracy_drop}, sort_keys=True).encode())
    if isinstance(entry.path, str):  # package.module:function: the spec is all we can know without running it
        h.update(entry.path.encode())
        paths = []
    else:
        paths = [entry.path] if entry.path.is_file() else sorted(p for p in entry.path.rglob("*") if p.is_file())
    for p in paths:
        h.update(str(p.relative_to(entry.path) if p != entry.path else p.name).encode())
        h.update(_file_digest(p))
    data = Path(entry.data)
    if data.is_file():
        h.update(_file_digest(data))
    else:  # package.module:function: the spec is all we can know without running it
        h.update(entry.data.encode())
    return h.hexdigest()


def _file_digest(path: Path) -> bytes:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.digest()


def is_complete(out: Path, entry: ModelEntry, fp: str) -> bool:
    """True when out/NAME/ holds a report made from exactly these inputs."""
    report = out / folder_name(entry.name) / "report.json"
    from reporter.model.decode import loads as bounded_loads  # depth and number size bounded

    try:
        data = bounded_loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    found = data.get("settings") if isinstance(data, dict) else None  # anything else: not a complete report
    return isinstance(found, dict) and found.get(FINGERPRINT_KEY) == fp


def clean_stale(out: Path) -> list[Path]:
    """Removes the temporary folders interrupted runs left behind (never a complete report, nor the staging
    folder of a run still going)."""
    return clean_leftovers(out)


TIMING_LOCK = ".timing.lock"  # in the output folder while a batch with more than one worker runs


def latency_timing_note(workers: int) -> str:
    """How latency was timed in a batch of `workers` processes, recorded in each report's settings."""
    return (f"one model timed at a time across {workers} worker processes; the other workers' conversions and"
            " evaluations may run on other cores meanwhile")


@dataclass
class BatchResult:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: str = ""  # "SIGTERM" or "SIGINT" when the batch was stopped before every model ran
    unfinished: tuple = ()  # the names of the models it stopped or never started


def run_batch(config: BatchConfig, options: BatchOptions, pool: Executor) -> BatchResult:
    """Runs every model of `config` with `pool`: at most `options.jobs` worker processes at once (LocalPool), or
    as Ray tasks (RayPool, reporter/batch/ray.py): the same worker function, outcomes and index either way.

    SIGTERM (`Terminated`) or Ctrl-C stops the workers (each removes its staging folder; one still busy after
    executor.STOP_SECONDS is killed) and returns what finished, the other models marked as interrupted or not
    started, with `interrupted` set: the caller still writes the index."""
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    clean_stale(out)
    display = pool.display
    logs = out / "logs"
    t0 = time.perf_counter()
    outcomes: dict[str, Outcome] = {}
    lock_path = out / TIMING_LOCK
    interrupted = ""
    try:
        check_folders(config, out, options.resume)  # before any model runs and anything is removed
        pending = _pending_jobs(config, out, options.resume, display, outcomes)
        # With more than one worker, models are timed one at a time (a lock file the workers share).
        workers = min(max(1, options.jobs), len(pending))
        if workers > 1:  # the cores are taken by the workers: no second process for conversions either
            pending = [dataclasses.replace(job, timing_lock=str(lock_path), side_converter=False,
                                           extra={"latency_timing": latency_timing_note(workers)})
                       for job in pending]
        pool.run(pending)
    except (KeyboardInterrupt, Terminated) as exc:
        interrupted = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
        clean_stale(out)  # the staging folders of workers that had to be killed
    finally:
        outcomes.update(pool.outcomes)
        lock_path.unlink(missing_ok=True)
        display.close()
    unfinished = tuple(e.name for e in config.models if e.name not in outcomes)
    for name in unfinished:
        outcomes[name] = _not_finished(name, interrupted or "stopped", display, out)
    if logs.is_dir() and not any(logs.iterdir()):
        logs.rmdir()
    return BatchResult([outcomes[e.name] for e in config.models], round(time.perf_counter() - t0, 2),
                       interrupted, unfinished)


def check_folders(config: BatchConfig, out: Path, resume: bool):
    """Raises UsageError naming the first model whose report folder the batch must not replace: a folder
    quant-report did not write, or one holding a model, base model or data file of the batch."""
    inputs = [p for e in config.models for p in (e.path, e.options.get("base_model"), e.data)]
    gate = config.gate.max_accuracy_drop if config.gate else None
    check_index_replaceable(out)
    for entry in config.models:
        if not (resume and is_complete(out, entry, fingerprint(entry, gate))):  # --resume keeps it as it is
            check_replaceable(out, entry.name, inputs)


INDEX_FILES = ("index.json", "index.html", "index.md")  # what a batch writes into --out beside the report folders


def check_index_replaceable(out: Path):
    """Raises UsageError when `out` holds an index file (index.json, .html or .md) that no batch of quant-report
    wrote: a batch index is replaced only beside an index.json that reads as one (its schema version, tool version
    and rows), never because of a file name a user's folder may hold."""
    present = [name for name in INDEX_FILES if os.path.lexists(out / name)]
    if not present:
        return
    if not _our_index(out / "index.json"):
        raise UsageError(f"{out / present[0]}: exists and is not a batch index quant-report wrote; it is left as it"
                         " is: choose another --out, or remove it yourself")


def _our_index(path: Path) -> bool:
    """Whether `path` is a regular file holding a batch index quant-report wrote (checked by its keys)."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"schema_version", "tool_version", "rows"} <= data.keys() \
        and isinstance(data["rows"], list)


def _pending_jobs(config: BatchConfig, out: Path, resume: bool, display: Display, outcomes: dict) -> list[Job]:
    """The jobs to run; the models skipped by --resume go straight into `outcomes`."""
    logs = out / "logs"
    pending = []
    for entry in config.models:
        fp = fingerprint(entry, config.gate.max_accuracy_drop if config.gate else None)
        folder = folder_name(entry.name)
        if resume and is_complete(out, entry, fp):
            (logs / f"{folder}.log").unlink(missing_ok=True)  # a run killed after its report was swapped in
            outcomes[entry.name] = Outcome(entry.name, "skipped", folder)
            display.finish(outcomes[entry.name])
            continue
        log = logs / f"{folder}.log"
        log.unlink(missing_ok=True)
        pending.append(Job(
            name=entry.name, model=str(entry.path), data=entry.data, out=str(out),
            shown=tuple(entry.shown),  # the paths as the config file gives them, for the report
            options={**settings.from_toml(entry.options),
                     # the gate's limit is also the search's target (the same --max-accuracy-drop as `run`)
                     **({"max_accuracy_drop": config.gate.max_accuracy_drop,
                         "gate_variant": config.gate.variant or None} if config.gate else {})},
            fingerprint=fp, log=str(log), config_dir=str(config.path.parent.resolve()),
        ))
    return pending


def _not_finished(name: str, how: str, display: Display, out: Path) -> Outcome:
    """The index entry of a model a stopped batch did not finish: interrupted while it ran, or not started."""
    folder = folder_name(name)
    log = out / "logs" / f"{folder}.log"
    rel_log = str(log.relative_to(out)) if log.is_file() else ""
    if name in display.stages:  # started (or queued on Ray) and not finished
        return Outcome(name, "failed", folder, stage=display.stages[name],
                       error=f"interrupted: the batch was stopped ({how}) while this model ran", log=rel_log)
    return Outcome(name, "failed", folder, stage="not started",
                   error=f"not run: the batch was stopped ({how}) before this model started")
