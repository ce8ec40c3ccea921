"""How a batch runs its models: one interface, `run(jobs)`, for the local pool and the Ray pool.

An executor runs each job's worker (reporter.batch.worker) and records every model's `Outcome` in `outcomes`
as it finishes, showing it on the display. Interrupted (SIGTERM, Ctrl-C), it stops what it started and
raises: `outcomes` then holds what finished, so that the index is still written. The command line chooses
the executor (`--executor local` or `ray`); reporter.batch.runner runs the batch with either.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue as queue_mod
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from reporter.batch.display import Display
from reporter.batch.worker import Job, Outcome, child, outcome as worker_outcome

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
    """The local pool: one spawned worker process per model, at most `options.jobs` at once. Interrupted, it
    stops the workers it started before the interruption goes on."""

    def __init__(self, options: BatchOptions, display: Display):
        super().__init__(options, display)
        self._messages = None
        self._running: dict[str, tuple] = {}  # model name -> (worker process, job)
        self._results: dict[str, dict] = {}  # model name -> what its worker reported when it was done

    def run(self, jobs: list[Job]) -> None:
        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no TensorFlow state is shared
        self._messages = ctx.Queue()
        try:
            self._run_workers(ctx, list(jobs))
        except BaseException:
            self._stop_workers()
            raise
        finally:
            self._messages.close()

    def _stop_workers(self):
        """Sends every running worker SIGTERM (it removes its staging folder and ends), kills one that has not
        ended after STOP_SECONDS, and records the outcome of any that finished meanwhile."""
        running, display = self._running, self.display
        for proc, _ in running.values():
            with contextlib.suppress(Exception):
                proc.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        while any(proc.is_alive() for proc, _ in running.values()) and time.monotonic() < deadline:
            self._drain(timeout=0.2)  # a worker must not block on a full queue
        for name, (proc, job) in list(running.items()):
            if proc.is_alive():
                proc.kill()
            proc.join(5)
            self._drain(timeout=0.0)
            if name in self._results:  # it finished just before it was told to stop
                self.outcomes[name] = worker_outcome(job, self._results[name], proc.exitcode,
                                                     display.stages.get(name, "start"), Path(job.out))
                display.stages.pop(name, None)

    def _run_workers(self, ctx, pending: list[Job]):
        running, display = self._running, self.display
        while pending or running:
            while pending and len(running) < max(1, self.options.jobs):
                job = pending.pop(0)
                proc = ctx.Process(target=child, args=(os.getpid(), job, self._messages),
                                   name=f"quant-report:{job.name}")
                proc.start()
                running[job.name] = (proc, job)
                display.stage(job.name, "starting")
            self._drain(timeout=0.2)
            display.tick()
            for name, (proc, job) in list(running.items()):
                if proc.is_alive():
                    continue
                proc.join()
                if name not in self._results:  # the worker may have sent its result just before exiting
                    self._drain(timeout=1.0)
                outcome = worker_outcome(job, self._results.get(name), proc.exitcode,
                                         display.stages.get(name, "start"), Path(job.out))
                self.outcomes[name] = outcome
                del running[name]
                display.finish(outcome)

    def _drain(self, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            try:
                kind, name, payload = self._messages.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue_mod.Empty:
                return
            if kind == "stage":
                self.display.stage(name, payload)
            elif kind == "done":
                self._results[name] = payload
