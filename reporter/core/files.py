"""Writing files and a model's output folder so that each is either complete or absent, never half-written."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import unicodedata
from pathlib import Path
from typing import Optional


MAX_NAME = 100  # characters in a model's name (--name, a batch entry's name)
_FOLDER_MAX = 80  # a folder name's length; .NAME.partial-XXXXXXXX beside it must stay under 255 bytes


def folder_name(name: str) -> str:
    """A safe folder name for a model name that may hold any characters (a long one is cut, with a hash of the
    whole name so that two long names stay apart)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"
    if len(safe) > _FOLDER_MAX:
        import hashlib

        safe = safe[:_FOLDER_MAX - 9].rstrip("._") + "-" + hashlib.sha256(name.encode("utf-8", "replace")).hexdigest()[:8]
    return safe


def name_problem(name: str) -> Optional[str]:
    """What is wrong with a model's name, or None: empty, longer than MAX_NAME, or holding control characters
    (a newline or an escape sequence would reach the terminal and the reports)."""
    if not name.strip():
        return "must not be empty"
    if len(name) > MAX_NAME:
        return f"is {len(name)} characters long; at most {MAX_NAME}"
    bad = sorted({ch for ch in name if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")})
    if bad:
        return f"holds control characters ({', '.join(repr(ch)[1:-1] for ch in bad)}): use letters, digits and punctuation"
    return None


def printable(text: str) -> str:
    """`text` for a terminal line: control characters (newline, carriage return, escape) shown escaped."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in text)


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
def staged_folder(out_dir, name: str, on_replace=None):
    """Yields a temporary folder beside `out_dir/name`; on success it replaces `out_dir/name`.

    On an exception the temporary folder is removed and any earlier `out_dir/name` stays intact. Safe when
    several runs write the same name at once: each stages in its own folder, which it holds locked while it
    lives, and the swaps take turns under a lock on `out_dir`; the last to finish wins, and it is told
    (`on_replace(message)`) when it replaced a report another run wrote meanwhile. Leftovers of earlier runs
    of this name that were killed (their staging folder no longer locked) are removed first.
    """
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / folder_name(name)
    with _locked(out_dir):
        clean_leftovers(out_dir, final.name)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=out_dir))
        held = _hold(tmp)
    before = _identity(final)
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the report folder should not be
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        os.close(held)
        if created and not any(out_dir.iterdir()):
            with contextlib.suppress(OSError):
                out_dir.rmdir()
        raise
    old = None
    with _locked(out_dir):
        now = _identity(final)
        if now is not None:
            old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", dir=out_dir))
            os.replace(final, old / "previous")
        os.replace(tmp, final)
        os.close(held)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    if now is not None and now != before and on_replace is not None:
        on_replace(f"another run wrote {final} while this one ran; this run finished last, so its report is"
                   " the one kept there")


def clean_leftovers(out_dir, name: Optional[str] = None) -> list[Path]:
    """Removes the staging and swap folders (`.NAME.partial-*`, `.NAME.old-*`; every name when `name` is None)
    that runs killed earlier left in `out_dir`: those no live run holds locked."""
    import fcntl

    removed = []
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return removed
    prefixes = (f".{name}.partial-", f".{name}.old-") if name else None
    for p in out_dir.iterdir():
        if not p.name.startswith(".") or not p.is_dir():
            continue
        if prefixes and not p.name.startswith(prefixes):
            continue
        if not prefixes and ".partial-" not in p.name and ".old-" not in p.name:
            continue
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a live run holds its own staging folder
        except OSError:
            os.close(fd)
            continue
        shutil.rmtree(p, ignore_errors=True)
        os.close(fd)
        removed.append(p)
    return removed


def _hold(folder: Path) -> int:
    """An open descriptor holding `folder` locked (released when closed, or when the process dies)."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


@contextlib.contextmanager
def _locked(folder: Path):
    """`folder` locked against other quant-report processes for the duration (swaps and clean-ups)."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _identity(path: Path):
    """What a folder is now (inode and change time), or None when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_ctime_ns


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
