"""One model of a batch, in its own process: the typed job, the worker function and its outcome.

The local pool (reporter.batch.runner) and the Ray executor (reporter.batch.ray) both run `work` and turn
what it reports into an `Outcome` with `outcome`. The process has the driver's plug-ins before `work` runs (the
built-in and installed ones, and the user's: `--plugin`, the batch file's `plugin`): a local worker is a
reporter.core.children.Child, which runs the driver's `AT_START` (reporter.plugins) first, and a Ray task runs them
itself (reporter.batch.ray).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from reporter.core.files import folder_name

FINGERPRINT_KEY = "inputs_sha256"


@dataclass(frozen=True)
class Job:
    """What a worker needs to report one model."""

    name: str
    model: str
    data: str  # an .npz path or package.module:function
    out: str  # the batch's output folder
    shown: tuple  # (model, data) as the config file gives them: what the report shows
    options: dict  # RunSettings fields from the config
    fingerprint: str  # of the inputs, for --resume
    log: str  # the model's log file while it runs
    config_dir: str  # where a data function is imported from
    timing_lock: Optional[str] = None  # a lock file shared by workers so that one model is timed at a time
    extra: dict = field(default_factory=dict)  # recorded in the report's settings
    remote: bool = False  # a Ray task on a cluster
    side_converter: bool = True  # may convert in a second process (reporter.convert.side): a core is free for it


@dataclass
class Outcome:
    """What became of one model in the batch."""

    name: str
    status: str  # "ok", "failed" or "skipped" (complete and unchanged, with --resume)
    folder: str  # the report folder's name inside the output folder
    stage: str = ""  # for a failure: the stage it failed in
    error: str = ""
    log: str = ""  # for a failure: the log file, relative to the output folder
    seconds: float = 0.0
    peak_rss_mb: Optional[float] = None


class FileLock:
    """An exclusive lock on a file (flock), shared by the batch's worker processes: held around each
    latency timing so that two models are never timed at once. The kernel releases it when the holder
    dies, so a worker killed while timing (out of memory) does not block the others."""

    def __init__(self, path):
        self.path = str(path)
        self._fd = None

    def __enter__(self):
        import fcntl

        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        import fcntl

        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
        return False


_messages = None  # in a local worker process: the queue its stages go to (handed over when the process starts)


def listen(messages) -> None:
    """A local worker process's first step (reporter.core.children.Child's initializer): where its stages go."""
    global _messages
    _messages = messages


def in_worker(job: Job) -> dict:
    """One model in a local worker process (a reporter.core.children.Child, which dies with the batch driver): its
    outcome. SIGTERM (the driver stopping it) or Ctrl-C removes the model's staging folder, then the process
    ends."""
    from reporter.core.lifetime import TERMINATED_EXIT, Terminated, terminate_raises

    try:
        with terminate_raises():
            return work(job, _messages)
    except Terminated:
        sys.exit(TERMINATED_EXIT)
    except KeyboardInterrupt:
        sys.exit(128 + signal.SIGINT)


def work(job: Job, messages) -> dict:
    """Runs one model in a fresh process; reports stages and the outcome through `messages`, and returns the
    outcome."""
    import traceback

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    log_path = Path(job.log)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "a", buffering=1, encoding="utf-8")
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    name = job.name
    last = {"stage": "start"}

    def listener(stage):
        last["stage"] = stage
        messages.put(("stage", name, stage))

    from reporter.measure import evaluate
    from reporter.core.errors import QuantReportError
    from reporter.core.lifetime import stop_if_terminated
    from reporter.inputs import materialize
    from reporter.inputs.data_loading import is_callable_spec
    from reporter.pipeline.stages import RunSettings, run

    if job.timing_lock:
        evaluate.set_timing_lock(FileLock(job.timing_lock))

    t0 = time.perf_counter()
    outcome = {"status": "ok", "stage": "", "error": ""}
    made = None
    try:
        model = job.model
        if is_callable_spec(model):  # a model function: its model saved for the run, removed after
            made = Path(tempfile.mkdtemp(prefix="quant-report-model-"))
            model = str(materialize.call_model_function(model, job.config_dir, made))
        run(RunSettings(model=model, data=job.data, out=job.out, name=name, quiet=True,
                        shown_paths=tuple(job.shown), listener=listener, failure_log=str(log_path), code_dir=job.config_dir,
                        side_converter=job.side_converter,
                        extra={FINGERPRINT_KEY: job.fingerprint, **job.extra}, **job.options))
    except QuantReportError as exc:
        stop_if_terminated(exc)  # a library's error that only followed from SIGTERM: the worker stops
        outcome = {"status": "failed", "stage": last["stage"], "error": str(exc).splitlines()[0]}
        print(f"error: {exc}")
    except Exception as exc:  # noqa: BLE001 - every failure becomes an entry, not a crash
        from reporter.core.errors import storage_problem

        stop_if_terminated(exc)
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        full = storage_problem(exc)  # a full disk or a file-size limit, named as such
        error = str(full) if full is not None else f"{type(exc).__name__}: {text}"
        outcome = {"status": "failed", "stage": last["stage"], "error": error[:300]}
        traceback.print_exc()
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
    outcome["seconds"] = round(time.perf_counter() - t0, 2)
    outcome["peak_rss_mb"] = peak_rss_mb()
    log.flush()
    messages.put(("done", name, outcome))
    return outcome


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM): its own, where getrusage's ru_maxrss also counts what the
    process that forked it had reached before the exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024.0, 1)
    except (OSError, ValueError, IndexError):
        pass
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def outcome(job: Job, result: Optional[dict], exitcode: int, stage: str, out: Path) -> Outcome:
    folder = folder_name(job.name)
    log = Path(job.log)
    if result is None:  # the worker died: what its run wrote went to the staging folder's run.log; keep it
        _keep_staged_log(log, out, folder)
    rel_log = str(log.relative_to(out)) if log.exists() else ""
    if result is None:
        how = f"exit code {exitcode}"
        if exitcode is not None and exitcode < 0:
            try:
                how = f"killed by {signal.Signals(-exitcode).name}"
            except ValueError:
                pass
            if exitcode == -signal.SIGKILL:
                how += ", perhaps out of memory"
        return Outcome(job.name, "failed", folder, stage=stage, error=f"worker process died ({how})", log=rel_log)
    if result["status"] == "ok":
        log.unlink(missing_ok=True)  # the report folder has its own run.log
        return Outcome(job.name, "ok", folder, seconds=result["seconds"], peak_rss_mb=result["peak_rss_mb"])
    return Outcome(job.name, "failed", folder, stage=result["stage"], error=result["error"], log=rel_log,
                   seconds=result["seconds"], peak_rss_mb=result["peak_rss_mb"])


def _keep_staged_log(log: Path, out: Path, folder: str):
    """Appends the run.log a dead worker's run left in its staging folder (`.NAME.partial-*`) to the model's
    log, so that the log keeps what the run wrote."""
    for staged in sorted(Path(out).glob(f".{folder}.partial-*/run.log"), key=lambda p: p.stat().st_mtime)[-1:]:
        try:
            with open(log, "ab") as kept:
                kept.write(staged.read_bytes())
        except OSError:
            pass
