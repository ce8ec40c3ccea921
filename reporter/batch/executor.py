"""How a batch runs its models: one interface, `run(jobs)`, for the local pool and the Ray pool.

An executor runs each job's worker (reporter.batch.worker) and records every model's `Outcome` in `outcomes`
as it finishes, showing it on the display. Interrupted (SIGTERM, Ctrl-C), it stops what it started and
raises: `outcomes` then holds what finished, so that the index is still written. The command line chooses
the executor (`--executor local` or `ray`); reporter.batch.runner runs the batch with either.
"""

from __future__ import annotations

import contextlib
import queue as queue_mod
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from reporter.batch.display import Display
from reporter.batch.worker import Job, Outcome, in_worker, listen, outcome as worker_outcome
from reporter.core import children

STOP_SECONDS = 15.0  # a stopped batch waits this long for its workers to clean up, then kills them


@dataclass(frozen=True)
class BatchOptions:
    """The batch's knobs from the command line (and the config file's [batch] table)."""

    out: Path  # the output folder: a folder per model, the index, logs/
    jobs: int = 1  # models run at once (Ray: the CPUs of a local Ray instance, per task)
    resume: bool = False  # skip the models whose complete report exists and whose inputs have not changed
    executor: str = "local"  # "local" (worker processes) or "ray" (one Ray task per model)
    address: Optional[str] = None  # Ray: the cluster to join (None: a local Ray instance)
    cpus_per_task: int = 1  # Ray: CPUs reserved for each model
    shared_dir: bool = False  # Ray: every node sees `out` at the same path: tasks write their reports there


class Executor:
    """Runs a batch's jobs (`run`) and records their outcomes by model name (`outcomes`)."""

    def __init__(self, options: BatchOptions, display: Display):
        self.options, self.display = options, display
        self.outcomes: dict[str, Outcome] = {}

    def run(self, jobs: list[Job]) -> None:
        raise NotImplementedError

    def _finished(self, outcome: Outcome) -> None:
        self.outcomes[outcome.name] = outcome
        self.display.finish(outcome)


class LocalPool(Executor):
    """The local pool: one worker process (reporter.core.children.Child) per model, at most `options.jobs` at once.
    Interrupted, it stops the workers it started before the interruption goes on."""

    def __init__(self, options: BatchOptions, display: Display):
        super().__init__(options, display)
        self._messages = None
        self._running: dict[str, tuple] = {}  # model name -> (worker, its call's future, job)

    def run(self, jobs: list[Job]) -> None:
        self._messages = children.message_queue()  # stages, from every worker
        try:
            self._run_workers(list(jobs))
        except BaseException:
            self._stop_workers()
            raise
        finally:
            self._messages.close()

    def _start(self, job: Job):
        worker = children.Child(f"the worker of {job.name}", initializer=listen, initargs=(self._messages,),
                                name=f"quant-report:{job.name}", daemon=False)  # a fresh interpreter per model
        self._running[job.name] = (worker, worker.submit(in_worker, job), job)
        self.display.stage(job.name, "starting")

    def _run_workers(self, pending: list[Job]):
        while pending or self._running:
            while pending and len(self._running) < max(1, self.options.jobs):
                self._start(pending.pop(0))
            self._drain(timeout=0.2)
            self.display.tick()
            for name, (worker, future, job) in list(self._running.items()):
                if future.done():
                    self._finish(name, worker, future, job)

    def _finish(self, name: str, worker: children.Child, future, job: Job):
        """The model's outcome, from what its worker returned, or how the worker died."""
        result = future.result() if future.done() and not future.cancelled() and future.exception() is None \
            else None
        worker.close()
        self._drain(timeout=0.0)
        outcome = worker_outcome(job, result, worker.exitcode, self.display.stages.get(name, "start"),
                                 Path(job.out))
        del self._running[name]
        self._finished(outcome)

    def _stop_workers(self):
        """Sends every running worker SIGTERM (it removes its staging folder and ends), kills one that has not
        ended after STOP_SECONDS, and records the outcome of any that finished meanwhile."""
        for worker, _, _ in self._running.values():
            with contextlib.suppress(Exception):
                worker.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        while any(w.alive() for w, _, _ in self._running.values()) and time.monotonic() < deadline:
            self._drain(timeout=0.2)  # a worker must not block on a full queue
        for name, (worker, future, job) in list(self._running.items()):
            if worker.alive():
                worker.kill()
            worker.close()
            self._drain(timeout=0.0)
            if future.done() and not future.cancelled() and future.exception() is None:  # finished just before
                self.outcomes[name] = worker_outcome(job, future.result(), worker.exitcode,
                                                     self.display.stages.get(name, "start"), Path(job.out))
                self.display.stages.pop(name, None)

    def _drain(self, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            try:
                kind, name, payload = self._messages.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue_mod.Empty:
                return
            if kind == "stage":
                self.display.stage(name, payload)
