"""The batch on a Ray cluster: each model is one Ray task running the local pool's worker function.

Ray is an optional extra (`pip install "quant-report[ray]"`). Without `address`, a local Ray instance is
started with as many CPUs as `jobs`, so it runs (and is tested) on one machine. Tasks need no shared
file system: each writes its report into a temporary folder on its node and returns the files, which
the driver writes into the output folder atomically (the same staged folder a local run uses). With a
file system every node sees at the same path, `shared_dir=True` lets tasks write there directly.

Every task runs in a fresh worker process (`max_calls=1`): the worker redirects its output into the
model's log and imports TensorFlow, and nothing of that must leak into the next model. A task that
dies (killed, out of memory, a node lost) is not retried and becomes a failure entry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import time
from pathlib import Path

from reporter.batch.executor import Executor
from reporter.batch.worker import Job, Outcome, work
from reporter.batch.worker import outcome as worker_outcome
from reporter.core import children
from reporter.core.errors import UsageError
from reporter.core.files import folder_name, staged_folder

INSTALL_HINT = 'the Ray executor needs Ray: pip install "quant-report[ray]"'


def require_ray():
    """Ray, or a UsageError saying how to install it (one line)."""
    try:
        import ray
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return ray


class _Messages:
    """What the local pool's queue receives, kept in the task (Ray returns it with the result)."""

    def __init__(self):
        self.items = []

    def put(self, item):
        self.items.append(item)


def _task(job: Job, shared_dir: bool, starts: tuple = ()) -> dict:
    """One model in a Ray worker process: the local pool's worker, then the report folder's files. `starts` (the
    driver's reporter.core.children.AT_START) run first: Ray starts its workers, not reporter.core.children, so
    the driver's composition (reporter.plugins) is handed over here."""
    for start in starts:
        start()
    folder = folder_name(job.name)
    tmp = None
    local = job
    if not shared_dir:
        tmp = Path(tempfile.mkdtemp(prefix="quant-report-ray-"))
        local = dataclasses.replace(local, out=str(tmp / "out"), log=str(tmp / "logs" / f"{folder}.log"))
    if job.remote:  # on a cluster the lock file is not on every node: each node times on its own
        local = dataclasses.replace(local, timing_lock=None)
    messages = _Messages()
    try:
        work(local, messages)
        done = [payload for kind, _, payload in messages.items if kind == "done"]
        stages = [payload for kind, _, payload in messages.items if kind == "stage"]
        files, log = {}, b""
        if not shared_dir:
            report = Path(local.out) / folder
            if report.is_dir():
                files = {p.relative_to(report).as_posix(): p.read_bytes() for p in sorted(report.rglob("*"))
                         if p.is_file()}
            log_path = Path(local.log)
            log = log_path.read_bytes() if log_path.is_file() else b""
        return {"result": done[0] if done else None, "stage": stages[-1] if stages else "start",
                "files": files, "log": log}
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


class RayPool(Executor):
    """The batch as Ray tasks, one per model (`options.address`, `.cpus_per_task`, `.shared_dir`). Interrupted
    (SIGTERM, Ctrl-C), it cancels the tasks still running and shuts down the Ray instance it started."""

    def run(self, jobs: list[Job]) -> None:
        ray = require_ray()
        options, display = self.options, self.display
        started = not ray.is_initialized()
        if started:
            ray.init(address=options.address,
                     num_cpus=None if options.address else max(1, options.jobs) * options.cpus_per_task,
                     include_dashboard=False, log_to_driver=False, configure_logging=False)
        remote = ray.remote(num_cpus=options.cpus_per_task, max_calls=1, max_retries=0)(_task)
        refs = {}
        try:
            for job in jobs:
                # A second process for conversions only where the task has a second CPU of its own.
                task_job = dataclasses.replace(job, remote=options.address is not None,
                                               side_converter=job.side_converter and options.cpus_per_task >= 2)
                refs[remote.remote(task_job, options.shared_dir, tuple(children.AT_START))] = job
                display.stage(job.name, "queued on Ray")
            t_start = {job.name: time.perf_counter() for job in jobs}
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
                display.tick()
                for ref in ready:
                    job = refs.pop(ref)
                    self._finished(self._collect(ray, ref, job, time.perf_counter() - t_start[job.name]))
        finally:
            for ref in refs:  # stopped early: on a cluster the tasks would otherwise run on without us
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if started:
                ray.shutdown()

    def _collect(self, ray, ref, job: Job, seconds: float) -> Outcome:
        """The finished task's outcome; its report files and log written into the output folder (atomically)."""
        folder = folder_name(job.name)
        out = Path(job.out)
        try:
            payload = ray.get(ref)
        except ray.exceptions.RayError as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            return Outcome(job.name, "failed", folder, stage="start",
                           error=f"Ray task died ({type(exc).__name__}: {first})"[:300], seconds=round(seconds, 2))
        if not self.options.shared_dir:
            if payload["files"]:
                with staged_folder(out, job.name) as staged:
                    for rel, data in payload["files"].items():
                        target = staged / rel
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(data)
            if payload["log"]:
                log = Path(job.log)
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_bytes(payload["log"])
        return worker_outcome(job, payload["result"], 0 if payload["result"] else 1, payload["stage"], out)
