"""What a data file or a model archive says about itself, read and checked before anything in it is.

An .npy file begins with a header (shape, dtype, order) of a few hundred bytes; so does every array inside an
.npz (a zip archive of .npy files). Those headers are read first, from the file or from the start of the zip
member's stream (a few KB decompressed, never the body), and checked: no Python objects, the arrays fit each
other and the model's inputs, the file holds as many bytes as its header declares, and what an .npz would
decompress into memory fits the memory this run may use. Only then is anything read. Only regular files are
opened: a FIFO, a device or a socket given as data would block or never end.

A `.keras` archive is checked the same way before Keras parses it: a member Keras parses as JSON larger than
JSON_LIMIT, or a member that declares far more bytes than it stores (a decompression bomb), is refused.
"""

from __future__ import annotations

import io
import math
import os
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from reporter.core.errors import InputError, QuantReportError

BUDGET_ENV = "QUANT_REPORT_MAX_DATA_BYTES"  # overrides the memory budget (bytes), e.g. for tests
JSON_LIMIT = 64_000_000  # a Keras config this large is not a model's: refused before it is parsed
BOMB_RATIO = 100  # a zip member declaring this many times what it stores (and more than BOMB_FLOOR) is a bomb
BOMB_FLOOR = 256 * 1024 * 1024
_MAX_HEADER = 100_000  # numpy writes headers under 10 KB; numpy itself refuses past 10,000 characters
_MAGIC = b"\x93NUMPY"
_FOLDER_HINT = "save the arrays as a folder of .npy files, which are memory-mapped"


@dataclass(frozen=True)
class Header:
    """One array as its .npy header declares it."""

    shape: tuple
    dtype: np.dtype
    offset: int  # bytes before the data (magic, length, header)
    stored: int  # bytes after the header in the file (or zip member)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def shown(self) -> str:
        return f"shape {self.shape}, {self.dtype}"


@dataclass(frozen=True)
class ModelInputs:
    """What the model takes, when known before the data are read: per-sample shapes by input name (None for
    a free dimension) and the model file's name, for the message."""

    model: str
    shapes: dict


def regular_file(path, what: str = "") -> None:
    """InputError unless `path` is a regular file (or a link to one): a FIFO, device or socket would block."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise InputError(path, f"cannot read {what or 'it'}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a folder" if stat.S_ISDIR(mode)
                else "not a regular file")
        raise InputError(path, f"{kind}: quant-report reads {what or 'data'} only from regular files")


def size_text(n: int) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def memory_budget() -> tuple[Optional[int], str]:
    """(the bytes this run may read into memory, why that much); None when nothing tells. Half the memory
    available now (MemAvailable, or the cgroup's limit less its use, whichever is lower), or
    QUANT_REPORT_MAX_DATA_BYTES."""
    given = os.environ.get(BUDGET_ENV, "").strip()
    if given:
        try:
            return int(float(given)), f"set by {BUDGET_ENV}"
        except (ValueError, OverflowError):
            raise QuantReportError(f"{BUDGET_ENV}={given!r}: must be a number of bytes") from None
    available = _available_memory()
    return (available // 2, "half the memory available") if available else (None, "")


def _available_memory() -> Optional[int]:
    found = []
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            found.append(int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text().strip()))
    except (OSError, ValueError):
        pass
    if not found:
        try:
            found.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            return None
    return max(0, min(found))


class _Bad(Exception):
    """A header problem, said without the file's name (the caller knows how to name the file or entry)."""


def read_header(fp, stored: int) -> Header:
    """The header at the start of `fp` (a file or a zip member's stream; only the header is read); `stored` is
    how many bytes the file or member holds in all. Raises _Bad saying what is wrong, in a user's words."""
    magic = fp.read(8)
    if len(magic) < 8 or not magic.startswith(_MAGIC):
        raise _Bad("not an .npy file (it does not begin with numpy's .npy signature)")
    major, minor = magic[6], magic[7]
    if (major, minor) not in ((1, 0), (2, 0), (3, 0)):
        raise _Bad(f"an .npy file of format version {major}.{minor}, which this numpy does not read")
    size_format = "<H" if major == 1 else "<I"
    raw_length = fp.read(struct.calcsize(size_format))
    if len(raw_length) < struct.calcsize(size_format):
        raise _Bad("truncated: the file ends inside its .npy header")
    length = struct.unpack(size_format, raw_length)[0]
    if length > _MAX_HEADER:
        raise _Bad(f"its .npy header claims to be {size_text(length)} long (real ones are under 10 KB): the file is"
                   " damaged or not what it says")
    text = fp.read(length)
    if len(text) < length:
        raise _Bad("truncated: the file ends inside its .npy header")
    try:
        shape, _, dtype = _parse(major, raw_length + text)
    except Exception as exc:  # noqa: BLE001 - numpy's header parser raises several kinds (ValueError, TokenError)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise _Bad(f"its .npy header is damaged ({first})") from None
    if any(d < 0 for d in shape):
        raise _Bad(f"its .npy header is damaged (negative dimension in shape {shape})")
    offset = 8 + len(raw_length) + length
    return Header(tuple(shape), dtype, offset, max(0, stored - offset))


def _parse(major: int, raw: bytes):
    from numpy.lib import format as npy

    if major == 1:
        return npy.read_array_header_1_0(io.BytesIO(raw))
    if major == 2:
        return npy.read_array_header_2_0(io.BytesIO(raw))
    from numpy.lib import _format_impl  # version 3.0 (a UTF-8 header) has no public reader

    return _format_impl._read_array_header(io.BytesIO(raw), (3, 0))


def _check_body(header: Header, pickled: str) -> None:
    if header.dtype.hasobject:
        raise _Bad(pickled)
    if header.stored < header.nbytes:
        raise _Bad(f"truncated (or its header is wrong): the header declares {header.shown()}"
                   f" ({size_text(header.nbytes)}), but the file holds {size_text(header.stored)} of data")


def read_arrays(path: Path, model: str = "", shapes: Optional[dict] = None) -> dict:
    """The arrays of a folder of .npy files (memory-mapped) or of an .npz, read only once their headers passed
    `check`; `shapes`: the model's per-sample input shapes by name when known (None: checked later), `model` its
    file's name for the message."""
    expect = ModelInputs(model, shapes) if shapes else None
    return read_npy_folder(path, expect) if path.is_dir() else read_npz(path, expect)


# --- .npz ---------------------------------------------------------------------------------------------------

def npz_headers(path: Path) -> dict[str, tuple[zipfile.ZipInfo, Header]]:
    """Every array of an .npz by name, from its header alone; InputError naming the file and the entry."""
    regular_file(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        if _starts_like_npy(path):
            raise InputError(path, "a single .npy array, not an .npz archive: DATA must be an .npz file (or a"
                                   " folder of .npy files)") from None
        raise InputError(path, f"not a readable .npz archive ({exc})") from None
    found = {}
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            pickled = (f"array '{name}' holds Python objects (saved with pickle); save numeric arrays, e.g."
                       " np.savez(path, x=x.astype('float32'), y=y)")
            try:
                with archive.open(info) as member:
                    header = read_header(member, info.file_size)
                _check_body(header, pickled)
            except _Bad as bad:
                text = str(bad)
                raise InputError(path, text if text == pickled else f"array '{name}': {text}") from None
            except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
                raise InputError(path, f"array '{name}' cannot be read from the archive: {exc}") from None
            found[name] = (info, header)
    return found


def _starts_like_npy(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(6) == _MAGIC
    except OSError:
        return False


def read_npz(path: Path, expect: Optional[ModelInputs] = None) -> dict:
    """The arrays of an .npz, read only once their headers passed `check` (shapes, the model's inputs, the memory
    budget): a bomb is refused before a byte of it is decompressed."""
    from numpy.lib import format as npy

    found = npz_headers(path)
    headers = {name: header for name, (_, header) in found.items()}
    check(path, headers, expect)
    _within_budget(path, headers)
    arrays = {}
    with zipfile.ZipFile(path) as archive:
        for name, (info, header) in found.items():
            try:
                with archive.open(info) as member:
                    arrays[name] = npy.read_array(member, allow_pickle=False)
            except MemoryError:
                raise InputError(path, f"array '{name}' ({header.shown()}, {size_text(header.nbytes)}) does not fit in"
                                       f" memory; {_FOLDER_HINT}") from None
            except ValueError as exc:  # fewer bytes than the header declared
                raise InputError(path, f"array '{name}': truncated: its header declares {header.shown()}, but the"
                                       f" archive holds less ({str(exc).splitlines()[0][:120]})") from None
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
                raise InputError(path, f"array '{name}' is damaged in the archive: {exc}") from None
    return arrays


def _within_budget(path: Path, headers: dict[str, Header]) -> None:
    budget, why = memory_budget()
    if budget is None:
        return
    where = f"over the {size_text(budget)} this run may use ({why})"
    for name, header in headers.items():
        if header.nbytes > budget:
            raise InputError(path, f"'{name}' would take {size_text(header.nbytes)} in memory ({header.shown()}),"
                                   f" {where}; {_FOLDER_HINT}")
    total = sum(h.nbytes for h in headers.values())
    if total > budget:
        parts = ", ".join(f"'{n}' {size_text(h.nbytes)}" for n, h in headers.items())
        raise InputError(path, f"the arrays would take {size_text(total)} in memory together ({parts}), {where};"
                               f" {_FOLDER_HINT}")


# --- a folder of .npy files ------------------------------------------------------------------------------------

def read_npy_folder(folder: Path, expect: Optional[ModelInputs] = None) -> dict:
    """The .npy files of a folder, memory-mapped, once every header has been read and checked: each file is a
    regular file, an .npy, holds the bytes its header declares, and the arrays fit each other and the model."""
    headers = {}
    files = sorted(folder.glob("*.npy"))
    for file in files:
        regular_file(file)
        try:
            with open(file, "rb") as f:
                header = read_header(f, os.fstat(f.fileno()).st_size)
            _check_body(header, "holds Python objects (saved with pickle); save numeric arrays with np.save")
        except _Bad as bad:
            raise InputError(file, str(bad)) from None
        except OSError as exc:
            raise InputError(file, f"cannot read: {exc.strerror or exc}") from None
        headers[file.stem] = header
    check(folder, headers, expect)
    arrays = {}
    for file in files:
        try:
            arrays[file.stem] = np.load(file, mmap_mode="r", allow_pickle=False)
        except Exception as exc:  # noqa: BLE001 - numpy raises several kinds for a bad file
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise InputError(file, f"not a readable .npy array: {first}") from None
    return arrays


# --- shapes, from the headers ----------------------------------------------------------------------------------

def check(source, headers: dict[str, Header], expect: Optional[ModelInputs]) -> None:
    """The arrays' shapes checked against each other (every x and y the same number of samples, x_calib the
    same per-sample shape as x) and, when known, against the model's inputs; the messages are those load_data
    gives for arrays already read."""
    shapes = {name: h.shape for name, h in headers.items()}
    x = _group(shapes, "x")
    for name, shape in shapes.items():
        if (name == "x" or name.startswith(("x_", "y_")) or name in ("y", "x_calib")) and not shape:
            raise InputError(source, f"'{name}' is not an array of samples (it has shape ())")
    if not x:
        return  # load_data names what is missing
    counts = {n: s[0] for n, s in x.items()}
    if len(set(counts.values())) > 1:
        raise InputError(source, "x: the input arrays hold different numbers of samples: " + ", ".join(
            f"{k or 'x'}: {v}" for k, v in counts.items()))
    n = next(iter(counts.values()))
    for name, shape in shapes.items():
        if (name == "y" or name.startswith("y_")) and shape[0] != n:
            raise InputError(source, f"'x' has {n} samples but '{name}' has {shape[0]}")
    calib = _group(shapes, "x_calib")
    for name in set(x) & set(calib):
        if calib[name][1:] != x[name][1:]:
            what = f"'x_calib_{name}'" if name else "'x_calib'"
            raise InputError(source, f"{what} has shape {calib[name][1:]} per sample but the evaluation data have"
                                     f" {x[name][1:]}")
    _fits_model(source, x, expect)
    _fits_model(source, calib, expect, "x_calib")


def _group(shapes: dict, prefix: str) -> dict:
    """Shapes of `prefix` ("" for the one array) or of `prefix_<name>` by name, as load_data groups them."""
    if prefix in shapes:
        return {"": shapes[prefix]}
    start = prefix + "_"
    return {k[len(start):]: v for k, v in shapes.items()
            if k.startswith(start) and not (prefix == "x" and k.startswith("x_calib"))}


def _fits_model(source, x: dict, expect: Optional[ModelInputs], prefix: str = "x") -> None:
    if expect is None or not x or not expect.shapes:
        return
    if len(expect.shapes) == 1 and len(x) == 1 and next(iter(x)) in ("", *expect.shapes):
        pairs = [(next(iter(x)), next(iter(expect.shapes.values())), "")]
    elif set(x) == set(expect.shapes):
        pairs = [(name, expect.shapes[name], f" for input {name}") for name in x]
    else:
        return  # the names are matched (and a mismatch named) once the model's signature is known
    for name, want, where in pairs:
        got = tuple(x[name][1:])
        if len(got) != len(want) or any(w is not None and w != g for w, g in zip(want, got)):
            what = f"{prefix}_{name}" if name else prefix
            shown = ", ".join("None" if w is None else str(w) for w in want)
            raise InputError(source, f"'{what}' has shape {got} per sample but the model {expect.model} expects"
                                     f" ({shown}){where}")


# --- a .keras archive ------------------------------------------------------------------------------------------

def check_keras_archive(path: Path) -> None:
    """Refuses a .keras zip before Keras opens it when a JSON member (config.json, metadata.json) is larger than
    JSON_LIMIT, or a member declares more than BOMB_RATIO times what it stores and more than BOMB_FLOOR (or the
    memory budget, if lower)."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InputError(path, f"not a readable .keras archive ({exc})") from None
    budget, _ = memory_budget()
    floor = min(BOMB_FLOOR, budget) if budget else BOMB_FLOOR
    for info in members:
        if info.filename.lower().endswith(".json") and info.file_size > JSON_LIMIT:
            raise InputError(path, f"its {info.filename} is {size_text(info.file_size)} (a Keras model's is a few"
                                   f" hundred KB; refused above {size_text(JSON_LIMIT)}): refused before it is parsed")
        if info.file_size > floor and info.file_size > BOMB_RATIO * max(1, info.compress_size):
            raise InputError(path, f"its member {info.filename} declares {size_text(info.file_size)} but stores"
                                   f" {size_text(info.compress_size)}: refused as a decompression bomb")
