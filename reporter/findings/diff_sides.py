"""One side of `quant-report diff` read: a report.json, a report folder, a batch folder (its index.json) or a folder
of report folders, as its reports by model name and the models that failed there.

Each problem is a DiffError naming the file (or the index.json row) and what is wrong with it; reporter.findings.diff
compares the two sides read.
"""

from __future__ import annotations

import json
from pathlib import Path

from reporter.core.errors import QuantReportError
from reporter.core.files import REPORT_MARKER, is_report_folder
from reporter.model.decode import JSONLimitError, OutOfBounds, got, kind, show_string
from reporter.model.decode import loads as bounded_loads
from reporter.model.report import Report


class DiffError(QuantReportError):
    """BASE or NEW cannot be read as quant-report results."""


def load_side(path) -> tuple[dict[str, Report], dict[str, str]]:
    """The reports of one side by model name, and the models that failed there (name -> error)."""
    path = Path(path)
    if not path.exists():
        raise DiffError(f"{path}: no such file or folder")
    if path.is_dir():
        if (path / "index.json").is_file():
            return _from_index(path / "index.json")
        if (path / "report.json").is_file():
            path = path / "report.json"
        else:
            folders = report_folders(path)
            if not folders:
                raise DiffError(f"{path}: neither a report folder (report.json), a batch folder (index.json) nor a"
                                f" folder of report folders (sub-folders holding {REPORT_MARKER})")
            return _from_folders(folders)
    if path.name == "index.json":
        return _from_index(path)
    report = _read_report(path)
    return {report.model.name: report}, {}


def _json_of(path: Path, read):
    """`read` (a JSON reader) of the file's text; DiffError naming the file when it is too large or deep, not JSON
    or not readable."""
    try:
        return read(path.read_text(encoding="utf-8"))
    except JSONLimitError as exc:
        raise DiffError(f"{path}: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DiffError(f"{path}: not a JSON file ({exc})") from None
    except OSError as exc:
        raise DiffError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None


def _read_report(path: Path) -> Report:
    """A report.json read and migrated (its findings are not needed: the diff compares measurements)."""
    try:
        return _json_of(path, Report.from_json)
    except OutOfBounds as exc:
        raise DiffError(f"{path}: {exc}") from None
    except (ValueError, TypeError, KeyError, RecursionError, OverflowError) as exc:
        raise DiffError(f"{path}: not a quant-report report.json ({exc})") from None


def _index_rows(path: Path) -> list[dict]:
    """index.json's rows, each checked: an object with a `name` (a non-empty string, once) and a `folder`
    inside the batch folder; DiffError naming the file and the row otherwise."""
    data = _json_of(path, bounded_loads)
    if not isinstance(data, dict) or "rows" not in data:
        raise DiffError(f"{path}: not a quant-report index.json (no \"rows\" list)")
    rows = data["rows"]
    if not isinstance(rows, list):
        raise DiffError(f"{path}: not a quant-report index.json (rows: expected a list, got {kind(rows)})")
    seen = set()
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DiffError(f"{path}: rows[{i}]: expected an object, got {kind(row)}")
        name = row.get("name")
        if not isinstance(name, str) or not name.strip():
            problem = "required field is missing" if "name" not in row else f"expected a model name, got {got(name)}"
            raise DiffError(f"{path}: rows[{i}].name: {problem}")
        if name in seen:
            raise DiffError(f"{path}: rows[{i}].name: {show_string(name)} appears twice")
        seen.add(name)
        for key in ("folder", "status", "error"):
            if row.get(key) is not None and not isinstance(row[key], str):
                raise DiffError(f"{path}: rows[{i}].{key}: expected a string, got {got(row[key])}")
        folder = row.get("folder") or ""
        parts = Path(folder).parts
        if Path(folder).is_absolute() or ".." in parts or "\\" in folder or any(not p.isprintable() for p in folder):
            raise DiffError(f"{path}: rows[{i}].folder: {show_string(folder)} is not a folder inside"
                            f" {path.parent}")
    return rows


def report_folders(path: Path) -> list[Path]:
    """The report folders directly in `path` (each holds quant-report's marker, `REPORT_MARKER`), by name; a
    run's hidden staging folders (`.NAME.partial-*`) left out."""
    try:
        found = [p for p in path.iterdir() if not p.name.startswith(".") and p.is_dir() and is_report_folder(p)]
    except OSError as exc:
        raise DiffError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    return sorted(found, key=lambda p: p.name)


def _from_folders(folders: list[Path]) -> tuple[dict[str, Report], dict[str, str]]:
    """A folder of report folders (a `run` or `demo` --out folder) by model name, as a batch's index names them:
    each report's model name (`run --name`; its folder's name is that name made safe for a file system), or its
    folder's name where several reports name the same model. A report folder without report.json counts as
    failed, as in a batch."""
    read, failed = {}, {}
    for folder in folders:
        if (folder / "report.json").is_file():
            read[folder.name] = _read_report(folder / "report.json")
        else:
            failed[folder.name] = f"no report.json in {folder}"
    names = [r.model.name for r in read.values()]
    reports = {}
    for folder, report in read.items():
        name = report.model.name if names.count(report.model.name) == 1 else folder
        reports[folder if name in reports or name in failed else name] = report
    return reports, failed


def _from_index(path: Path) -> tuple[dict[str, Report], dict[str, str]]:
    reports, failed = {}, {}
    for row in _index_rows(path):
        name, folder = row["name"], row.get("folder") or ""
        report_path = path.parent / folder / "report.json"
        if row.get("status") == "failed" or not folder or not report_path.is_file():
            failed[name] = row.get("error") or "no report.json"
            continue
        reports[name] = _read_report(report_path)
    return reports, failed
