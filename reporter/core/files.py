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
    whole name so that two long names stay apart; so does a name with letters beyond ASCII: "日本" and "中文"
    are "model-<hash>", "café" is "cafe-<hash>", each its own folder)."""
    import hashlib

    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", folded).strip("._") or "model"
    digest = "-" + hashlib.sha256(name.encode("utf-8", "replace")).hexdigest()[:8]
    if len(safe) > _FOLDER_MAX:
        return safe[:_FOLDER_MAX - len(digest)].rstrip("._") + digest
    return safe + digest if not name.isascii() else safe


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


def check_replaceable(out_dir, name: str, inputs=()):
    """Raises QuantReportError naming the report folder `out_dir/NAME` when the run must not or cannot replace it,
    found before the run, not after it has measured everything: one of `inputs` (the model, its base, the data:
    paths) is that folder or inside it (UsageError); it is not a report folder quant-report wrote (UsageError);
    it holds an earlier report that cannot be replaced (an immutable or read-only folder)."""
    from reporter.core.errors import QuantReportError

    folder = Path(out_dir) / folder_name(name)
    check_outside(folder, inputs)
    _check_replaceable(folder)
    if not folder.is_dir() or folder.is_symlink():
        return
    try:  # the swap renames the old folder away and removes it: a folder that takes no new entry refuses both
        os.rmdir(tempfile.mkdtemp(prefix=".quant-report-check-", dir=folder))
    except OSError as exc:
        raise QuantReportError(f"{folder}: the report already there cannot be replaced: {exc.strerror} (make it"
                               " writable, or choose another --name or --out)") from None


MARKER = ".quant-report-staging"  # inside each staging (.NAME.partial-*) and swap (.NAME.old-*) folder we made
_LEFTOVER = re.compile(r"^\.(.+)\.(partial|old)-[a-z0-9_]{8}$")  # tempfile.mkdtemp's 8 characters


def _our_folder(out_dir: Path, prefix: str) -> tuple[Path, int]:
    """A new folder `out_dir/PREFIXxxxxxxxx`, held locked (the descriptor returned), then marked as ours.

    Locked before it is marked, so that a marked folder nobody holds is always a dead run's. The marker is
    only ever written here, into a folder mkdtemp has just created for us (O_EXCL, no symlink followed)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=out_dir))
    try:
        held = _hold(folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        fd = os.open(folder / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("made by quant-report for one run; removed with its folder\n")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(held)
        raise
    return folder, held


_LIVE: list[tuple[Path, Path, bool]] = []  # this process's staging folders while staged: (folder, out, out made)


def abandon_staged() -> None:
    """Removes this process's staging folders now (and an output folder the run made, left empty): for a process
    about to end without unwinding (os._exit)."""
    while _LIVE:
        tmp, out_dir, created = _LIVE.pop()
        shutil.rmtree(tmp, ignore_errors=True)
        if created:
            with contextlib.suppress(OSError):
                out_dir.rmdir()


@contextlib.contextmanager
def staged_folder(out_dir, name: str, on_replace=None):
    """Yields a temporary folder beside `out_dir/name`; on success it replaces `out_dir/name`.

    On an exception the temporary folder is removed and any earlier `out_dir/name` stays intact. Safe when
    several runs write the same name at once: each stages in its own folder, which it holds locked while it
    lives, and the swaps take turns under a lock on `out_dir`; the last to finish wins, and it is told
    (`on_replace(message)`) when it replaced a report another run wrote meanwhile. Leftovers of earlier runs
    of this name that were killed (their staging folder marked as ours and no longer locked) are removed
    first. Only a report folder quant-report wrote (its `REPORT_MARKER`, which the staging folder gets) or an
    empty one is replaced: anything else is refused with a UsageError, before the work and again before the
    swap. When the earlier report cannot be moved aside (permission, immutable, another device), it is left
    as it was, our folders are removed and QuantReportError says why.
    """
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / folder_name(name)
    with _locked(out_dir):  # swaps take this lock too: `final` is not half-swapped while it is checked
        _check_replaceable(final)  # `final` exists then, so `out_dir` was not created by this run
        clean_leftovers(out_dir, final.name)
        tmp, held = _our_folder(out_dir, f".{final.name}.partial-")
        try:
            mark_report_folder(tmp)  # goes with it: the report folder it becomes may be replaced by a later run
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            os.close(held)
            raise
    before = _identity(final)
    _LIVE.append((tmp, out_dir, created))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the report folder should not be
        yield tmp
    except BaseException:
        _LIVE.remove((tmp, out_dir, created))
        shutil.rmtree(tmp, ignore_errors=True)
        os.close(held)
        if created and not any(out_dir.iterdir()):
            with contextlib.suppress(OSError):
                out_dir.rmdir()
        raise
    _LIVE.remove((tmp, out_dir, created))
    try:
        with _locked(out_dir):
            now = _identity(final)
            try:
                _check_replaceable(final)  # what is there now: a user's folder put there meanwhile stays
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            _swap(tmp, final, now is not None)
    finally:
        os.close(held)
    if now is not None and now != before and on_replace is not None:
        on_replace(f"another run wrote {final} while this one ran; this run finished last, so its report is"
                   " the one kept there")


def as_the_user_knows(path: str, out_dir, name: str) -> str:
    """A path this run wrote, named as the user knows it. Inside the staging folder (`.NAME.partial-*` in
    `out_dir`) it is the report folder that folder becomes, `out_dir/NAME` as `out_dir` was given, followed by
    the file only when the file is one of the report's own (report.pdf), not an internal one (a dot-named
    SavedModel export, a `.tmp` file). In the temporary folder it is that folder, named as such. Any other path
    is returned as it is."""
    parts = Path(path).parts
    staging = f".{folder_name(name)}.partial-"
    for i, part in enumerate(parts):
        if part.startswith(staging):
            shown = Path(out_dir) / folder_name(name)
            for rest in parts[i + 1:]:
                if rest.startswith(".") or ".tmp" in rest:
                    break
                shown = shown / rest
            return str(shown)
    from reporter.core.lifetime import user_tempdir

    temp = Path(user_tempdir())  # the user's TMPDIR, which holds the run's own temporary folder
    try:
        Path(path).relative_to(temp)
    except ValueError:
        return path
    return f"the temporary folder {temp} (TMPDIR)"


REPORT_MARKER = ".quant-report-report"  # in every report folder quant-report writes: what may be replaced
REPORT_MARKER_LINE = "quant-report report folder: a later run of this name may replace this whole folder\n"


def mark_report_folder(folder: Path):
    """Writes the report marker into `folder`, a staging folder quant-report has just made (never a user's)."""
    fd = os.open(Path(folder) / REPORT_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(REPORT_MARKER_LINE)


def is_report_folder(folder: Path) -> bool:
    """Whether `folder` holds quant-report's report marker: a regular file (no link) whose first line is ours.
    A file name a user's folder may hold (run.log, report.json, index.json) is no proof."""
    try:
        fd = os.open(Path(folder) / REPORT_MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    import stat

    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return False
        return f.readline(len(REPORT_MARKER_LINE) + 1) == REPORT_MARKER_LINE.encode("utf-8")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_outside(folder, inputs=()):
    """Raises UsageError when one of `inputs` (paths of the model, its base, the data) is `folder` (a report
    folder a run would replace) or inside it: a run never deletes what it reads. Checked as given and with
    links resolved; inputs that are no path (a `module:function`) are skipped."""
    from reporter.core.errors import UsageError

    folder = Path(folder)
    for given in inputs:
        if not given or not isinstance(given, (str, os.PathLike)) or not os.path.lexists(given):
            continue
        pairs = ((os.path.abspath(given), os.path.abspath(folder)), (os.path.realpath(given), os.path.realpath(folder)))
        if any(_inside(path, report) for path, report in pairs):
            where = "is" if any(path == report for path, report in pairs) else "is inside"
            raise UsageError(f"{given}: {where} the report folder {folder}, which this run would replace; it is"
                             " left as it is: choose another --name or --out")


def _check_replaceable(final: Path):
    """Refuses, before any work and again before the swap, to replace `final` unless it is a report folder
    quant-report wrote (its marker, `REPORT_MARKER`, is in it) or an empty folder: a user's folder is never
    deleted, whatever files it holds. A report of an earlier version, which has no marker, is refused too."""
    from reporter.core.errors import UsageError

    if not os.path.lexists(final):
        return
    if final.is_symlink() or not final.is_dir():
        raise UsageError(f"{final}: exists and is not a report folder quant-report wrote; it is left as it"
                         " is: choose another --name or --out")
    if any(final.iterdir()) and not is_report_folder(final):
        raise UsageError(f"{final}: cannot be replaced: it is not a report folder quant-report wrote (it holds no"
                         f" {REPORT_MARKER} file, as reports of earlier versions do not either); it is left as it is:"
                         " choose another --name or --out, or remove it yourself")


def _swap(tmp: Path, final: Path, earlier: bool):
    """Puts `tmp` in the place of `final` (the earlier report, if `earlier`, moved aside into a marked
    `.NAME.old-*` folder, then removed). On failure the earlier report stays (or is moved back) where it was,
    our folders go, and QuantReportError names `final` and the OS reason."""
    from reporter.core.errors import QuantReportError

    old = old_held = None
    try:
        if earlier:
            try:
                old, old_held = _our_folder(final.parent, f".{final.name}.old-")
                os.replace(final, old / "previous")
            except OSError as exc:
                raise _replace_error(final, exc, "the earlier report there is left as it was") from None
        try:
            os.replace(tmp, final)
        except OSError as exc:
            if old is None:
                raise QuantReportError(f"cannot write {final}: {exc.strerror or exc}") from None
            try:
                os.replace(old / "previous", final)
            except OSError:
                kept, old = old, None  # never remove the only copy of the earlier report, nor let a clean-up
                with contextlib.suppress(OSError):
                    (kept / MARKER).unlink()
                raise _replace_error(final, exc, f"the earlier report could not be put back and is in"
                                                  f" {kept / 'previous'}") from None
            raise _replace_error(final, exc, "the earlier report there is left as it was") from None
        with contextlib.suppress(OSError):
            (final / MARKER).unlink()  # the report folder is no staging folder any more
    except QuantReportError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        if old_held is not None:
            os.close(old_held)


def _replace_error(final: Path, exc: OSError, what: str):
    from reporter.core.errors import QuantReportError

    return QuantReportError(f"cannot replace {final}: {exc.strerror or exc}; {what}")


def clean_leftovers(out_dir, name: Optional[str] = None) -> list[Path]:
    """Removes the staging and swap folders (`.NAME.partial-*`, `.NAME.old-*`; every name when `name` is None)
    that runs killed earlier left in `out_dir`: only folders quant-report made (they hold its marker file, a
    regular file) that no live run holds locked. Anything else, however it is named, is never touched."""
    import fcntl
    import stat

    removed = []
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return removed
    for p in out_dir.iterdir():
        match = _LEFTOVER.match(p.name)
        if match is None or (name and match.group(1) != name):
            continue
        try:  # the folder itself, never a symlink to one
            fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.stat(MARKER, dir_fd=fd, follow_symlinks=False).st_mode):
                continue  # not made by quant-report
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a live run holds its own staging folder
        except OSError:
            continue
        else:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
        finally:
            os.close(fd)
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
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:  # a failed write names no file: name the one being written
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
