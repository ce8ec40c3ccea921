"""The batch runner: many models from one config file, each in its own worker process.

A worker that crashes or runs out of memory takes down only its own model. Reports are written
atomically by the pipeline, so an interrupted batch leaves complete reports only; `resume` skips
the models whose report is complete and whose inputs have not changed. Workers die with the driver
(reporter.core.lifetime); a driver stopped by SIGTERM or Ctrl-C stops its workers and still returns
every model's outcome (interrupted, not started), so that the index is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import queue as queue_mod
import shutil
import sys
import time
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from reporter import __version__
from reporter.run import settings
from reporter.batch.config import BatchConfig, ModelEntry
from reporter.core.files import clean_leftovers, folder_name
from reporter.batch.worker import FINGERPRINT_KEY, Job, Outcome, child, outcome as worker_outcome
from reporter.core.lifetime import Terminated



def fingerprint(entry: ModelEntry, max_accuracy_drop=None) -> str:
    """A hash of everything a report depends on: model bytes, data bytes, settings (the gate's limit is
    the search's target), tool version."""
    h = hashlib.sha256()
    h.update(f"quant-report {__version__}\n".encode())
    h.update(json.dumps({**entry.options, "max_accuracy_drop": max_accuracy_drop}, sort_keys=True).encode())
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


class Display:
    """Which model is at which stage, how many are done, elapsed time.

    On a terminal one status line is redrawn in place; otherwise (CI logs) plain lines are printed
    when a model starts a new stage and when it ends.
    """

    def __init__(self, total: int, stream=None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.quiet = quiet
        self.total = total
        self.done = 0
        self.failed = 0
        self.stages: dict[str, str] = {}
        self.t0 = time.monotonic()

    def _elapsed(self) -> str:
        s = int(time.monotonic() - self.t0)
        return f"{s // 60:02d}:{s % 60:02d}"

    def _line(self, text: str):
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\x1b[2K" + text + "\n")
            self._status()
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _status(self):
        if self.quiet or not self.tty:
            return
        running = ", ".join(f"{n}: {s}" for n, s in self.stages.items())
        text = f"[{self._elapsed()}] {self.done}/{self.total} done" + (f", {self.failed} failed" if self.failed else "")
        width = shutil.get_terminal_size((120, 20)).columns - 1
        self.stream.write("\r\x1b[2K" + (text + (" | " + running if running else ""))[:width])
        self.stream.flush()
        self._last_status = time.monotonic()

    def tick(self):
        """Keeps the elapsed time moving during long stages (terminal only, once a second)."""
        if self.tty and time.monotonic() - getattr(self, "_last_status", 0.0) >= 1.0:
            self._status()

    # In plain-line mode only these stages get a line; the measuring sub-steps would flood a CI log.
    MAJOR = ("starting", "load", "convert", "debug", "selective", "render")

    def stage(self, name: str, stage: str):
        self.stages[name] = stage
        if not self.tty and stage.split(" ")[0] in self.MAJOR:
            self._line(f"[{self._elapsed()}] {name}: {stage}")
        else:
            self._status()

    def finish(self, outcome: Outcome):
        self.stages.pop(outcome.name, None)
        self.done += 1
        if outcome.status == "failed":
            self.failed += 1
            text = f"FAILED at {outcome.stage}: {outcome.error} (log: {outcome.log})"
        elif outcome.status == "skipped":
            text = "unchanged, report kept (--resume)"
        else:
            text = f"done in {outcome.seconds:.1f} s"
        self._line(f"[{self._elapsed()}] {outcome.name}: {text}  ({self.done}/{self.total})")

    def close(self):
        if self.tty and not self.quiet:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


@dataclass
class BatchResult:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: str = ""  # "SIGTERM" or "SIGINT" when the batch was stopped before every model ran
    unfinished: tuple = ()  # the names of the models it stopped or never started


STOP_SECONDS = 15.0  # a stopped batch waits this long for its workers to clean up, then kills them


def run_batch(config: BatchConfig, out, jobs: int, resume: bool, display: Display, executor: str = "local",
              address=None, cpus_per_task: int = 1, shared_dir: bool = False) -> BatchResult:
    """Runs every model of `config` with at most `jobs` worker processes at once, or as Ray tasks
    (`executor="ray"`, reporter/batch/ray.py): the same worker function, outcomes and index either way.

    SIGTERM (`Terminated`) or Ctrl-C stops the workers (each removes its staging folder; one still busy after
    STOP_SECONDS is killed) and returns what finished, the other models marked as interrupted or not
    started, with `interrupted` set: the caller still writes the index."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    clean_stale(out)
    logs = out / "logs"
    t0 = time.perf_counter()
    outcomes: dict[str, Outcome] = {}
    lock_path = out / TIMING_LOCK
    interrupted = ""
    try:
        pending = _pending_jobs(config, out, resume, display, outcomes)
        # With more than one worker, models are timed one at a time (a lock file the workers share).
        workers = min(max(1, jobs), len(pending))
        if workers > 1:  # the cores are taken by the workers: no second process for conversions either
            pending = [dataclasses.replace(job, timing_lock=str(lock_path), side_converter=False,
                                           extra={"latency_timing": latency_timing_note(workers)})
                       for job in pending]
        if executor == "ray":
            from reporter.batch import ray as ray_batch

            with contextlib.closing(ray_batch.run(pending, out, display, jobs, address, cpus_per_task,
                                                  shared_dir)) as finished:
                for name, outcome in finished:
                    outcomes[name] = outcome
        else:
            _run_local(pending, outcomes, jobs, display, out)
    except (KeyboardInterrupt, Terminated) as exc:
        interrupted = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
        clean_stale(out)  # the staging folders of workers that had to be killed
    finally:
        lock_path.unlink(missing_ok=True)
        display.close()
    unfinished = tuple(e.name for e in config.models if e.name not in outcomes)
    for name in unfinished:
        outcomes[name] = _not_finished(name, interrupted or "stopped", display, out)
    if logs.is_dir() and not any(logs.iterdir()):
        logs.rmdir()
    return BatchResult([outcomes[e.name] for e in config.models], round(time.perf_counter() - t0, 2),
                       interrupted, unfinished)


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
                         "gate_variant": config.gate.variant} if config.gate else {})},
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


def _run_local(pending: list[Job], outcomes: dict, jobs: int, display: Display, out: Path):
    """The local pool: one spawned worker process per model, at most `jobs` at once. Interrupted, it stops
    the workers it started before the interruption goes on."""
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no TensorFlow state is shared
    messages = ctx.Queue()
    running: dict[str, tuple] = {}
    results: dict[str, dict] = {}
    try:
        _run_workers(ctx, messages, pending, running, results, outcomes, jobs, display, out)
    except BaseException:
        _stop_workers(messages, running, results, outcomes, display, out)
        raise
    finally:
        messages.close()


def _stop_workers(messages, running, results, outcomes, display, out):
    """Sends every running worker SIGTERM (it removes its staging folder and ends), kills one that has not
    ended after STOP_SECONDS, and records the outcome of any that finished meanwhile."""
    for proc, _ in running.values():
        with contextlib.suppress(Exception):
            proc.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    while any(proc.is_alive() for proc, _ in running.values()) and time.monotonic() < deadline:
        _drain(messages, results, display, timeout=0.2)  # a worker must not block on a full queue
    for name, (proc, job) in list(running.items()):
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        _drain(messages, results, display, timeout=0.0)
        if name in results:  # it finished just before it was told to stop
            outcomes[name] = worker_outcome(job, results[name], proc.exitcode, display.stages.get(name, "start"),
                                            out)
            display.stages.pop(name, None)


def _run_workers(ctx, messages, pending, running, results, outcomes, jobs, display, out):
    while pending or running:
        while pending and len(running) < max(1, jobs):
            job = pending.pop(0)
            proc = ctx.Process(target=child, args=(os.getpid(), job, messages), name=f"quant-report:{job.name}")
            proc.start()
            running[job.name] = (proc, job)
            display.stage(job.name, "starting")
        _drain(messages, results, display, timeout=0.2)
        display.tick()
        for name, (proc, job) in list(running.items()):
            if proc.is_alive():
                continue
            proc.join()
            if name not in results:  # the worker may have sent its result just before exiting
                _drain(messages, results, display, timeout=1.0)
            outcome = worker_outcome(job, results.get(name), proc.exitcode, display.stages.get(name, "start"), out)
            outcomes[name] = outcome
            del running[name]
            display.finish(outcome)


def _drain(messages, results, display, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            kind, name, payload = messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue_mod.Empty:
            return
        if kind == "stage":
            display.stage(name, payload)
        elif kind == "done":
            results[name] = payload
