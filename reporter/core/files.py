"""Writing files and a model's output folder so that each is either complete or absent, never half-written."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path


def folder_name(name: str) -> str:
    """A safe folder name for a model name that may hold any characters."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return safe or "model"


def check_writable(out_dir):
    """Raises QuantReportError naming `out_dir` when reports cannot be written there (checked before
    any work, and without leaving anything behind)."""
    from reporter.core.errors import QuantReportError

    out_dir = Path(out_dir)
    existing = out_dir
    while not existing.exists():  # the folder is created later: its nearest existing parent must be writable
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise QuantReportError(f"{existing}: --out must be a folder, but this is a file")
    try:  # os.access says yes to root even on a read-only file system: try for real, leave nothing
        os.rmdir(tempfile.mkdtemp(prefix=".quant-report-check-", dir=existing))
    except OSError as exc:
        where = "" if existing == out_dir else f" (it would be created in {existing})"
        raise QuantReportError(f"{out_dir}: cannot write reports to this folder: {exc.strerror}{where}") from None


@contextlib.contextmanager
def staged_folder(out_dir, name: str):
    """Yields a temporary folder beside `out_dir/name`; on success it replaces `out_dir/name`.

    On an exception the temporary folder is removed and any earlier `out_dir/name` stays intact.
    """
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / folder_name(name)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=out_dir))
    tmp.chmod(0o755)  # mkdtemp makes it private; the report folder should not be
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if created and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise
    old = None
    if final.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", dir=out_dir))
        os.replace(final, old / "previous")
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)



def write_atomic(path, data):
    """Writes `data` (bytes, or text as UTF-8) to a temporary file beside `path`, then renames: a reader never
    sees half a file, and a failure leaves no partial file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
