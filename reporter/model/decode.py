"""Typed decoding of report.json data: JSON values checked against the dataclass annotations, recursively.

Every problem is a `ValueError` with a one-line message that names the field's path and what is wrong in
JSON's words ("variants[1].size_bytes: expected an integer, got a string ("big")"), so that a malformed
report.json is refused when it is read, not by a renderer later. No TensorFlow here.

Types understood: int (not true/false), float (an integer too; not NaN or infinite), str, bool, Any,
Optional[X] (and X | None), list / list[X], dict / dict[str, X], and dataclasses (their fields by name: no
unknown key, every field without a default present; a field files do not keep, reporter.core.records'
`unstored`, is an unknown key). A field's figure beyond the bound it carries (reporter.model.bounds: a share
above 1, a negative size, a ratio of 1e308) is `OutOfBounds`: "variants[1].size_bytes is -5: must be a size in
bytes (a whole number >= 0)".

`loads` is the one way the tool parses JSON it did not just write (report.json, index.json): bounded in
nesting depth and number size, so a hostile file fails in one line (`JSONLimitError`), never with a
RecursionError or an OverflowError later.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import math
import re
import types
import typing
from typing import Any

from reporter.core.records import is_stored
from reporter.model.bounds import BOUND, MAX_INT, bound_of

# A string shown in a message is cut to this many characters.
SHOWN_CHARS = 40
# At most this many unknown keys are named in a message.
SHOWN_KEYS = 5

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Bounds of every JSON file the tool reads (a report nests about 8 levels; sizes and counts fit in 63 bits).
MAX_DEPTH = 100
_INT_DIGITS = len(str(MAX_INT))
# Integer fields that size loops and charts when a report is rendered, by field name: a claim beyond any
# model the tool can measure is refused (a report's 2**62 classes would hang the render).
COUNT_LIMITS = {"num_classes": 1_000_000}
# Every figure's bound (a share, a size, a latency, a ratio ...) is declared on its record's field
# (reporter.model.bounds.figure) and checked here when the record is decoded (`_within`).
# report.json's settings are read with their own declarations' checks and bounds (reporter.model.settings).
# A name (a model's, an output's, a metric's) longer than this is cut, the rest elided with "…", when read:
# every format shows it as read (a 30 MB name is not copied into every file).
MAX_NAME_CHARS = 300
# A JSON string (its escapes included), then the brackets outside strings: what the depth scan reads.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


class DecodeError(ValueError):
    """A report.json value that does not have the declared type; `path` is where ("" for the whole file)."""

    def __init__(self, path: str, problem: str):
        self.path, self.problem = path, problem
        super().__init__(f"{path or 'report.json'}: {problem}")


class OutOfBounds(DecodeError):
    """A figure of the declared type beyond its field's bound (reporter.model.bounds): "variants[1].size_bytes is -5:
    must be a size in bytes (a whole number >= 0)"."""

    def __init__(self, path: str, value, must_be: str):
        text = repr(value)
        shown = text[:SHOWN_CHARS] + "…" if len(text) > SHOWN_CHARS else text
        super().__init__(path, f"is {shown}: must be {must_be}")

    def __str__(self) -> str:
        return f"{self.path} {self.problem}"


def decode(tp, value, path: str = ""):
    """`value` (parsed JSON) as type `tp`, dataclasses built; DecodeError names the first value that is not."""
    if tp is Any or tp is object:
        _check_finite(value, path)  # untyped values (settings, shapes) are written back: standard JSON only
        return value
    if isinstance(tp, type) and hasattr(tp, "decode_json"):  # a record read through a registry (model.figures)
        return tp.decode_json(value, path)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return decode(inner[0], value, path)
        for option in inner:  # not used by the report's types today: the first that fits
            try:
                return decode(option, value, path)
            except DecodeError:
                continue
        raise DecodeError(path, f"expected {' or '.join(expected(a) for a in inner)}, got {got(value)}")
    if tp is list or origin is list:
        if not isinstance(value, list):
            raise DecodeError(path, f"expected a list, got {got(value)}")
        (item,) = typing.get_args(tp) or (Any,)
        return [decode(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise DecodeError(path, f"expected an object, got {got(value)}")
        _, item = typing.get_args(tp) or (str, Any)
        return {k: decode(item, v, key_path(path, k)) for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass(tp, value, path)
    if tp is bool:
        if not isinstance(value, bool):
            raise DecodeError(path, f"expected true or false, got {got(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise DecodeError(path, f"expected an integer, got {got(value)}")
        limit = COUNT_LIMITS.get(path.rsplit(".", 1)[-1])
        if limit is not None and not 0 <= value <= limit:
            raise DecodeError(path, f"{value:,} is not a count this tool reads (0 to {limit:,})")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DecodeError(path, f"expected a number, got {got(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise DecodeError(path, f"expected a finite number, got {got(value)}")
        return value  # an integer stays one: the report saves back as it was read
    if tp is str:
        if not isinstance(value, str):
            raise DecodeError(path, f"expected a string, got {got(value)}")
        return value
    return value  # a type these reports do not declare: taken as it is


def _check_finite(value, path: str):
    """DecodeError at the first NaN or infinite number anywhere in `value` (walked without recursion)."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise DecodeError(where, f"expected a finite number, got {kind(item)}")
        if isinstance(item, dict):
            stack.extend((v, key_path(where, str(k))) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))


def _dataclass(tp, value, path: str):
    if not isinstance(value, dict):
        raise DecodeError(path, f"expected an object, got {got(value)}")
    hints, required, names = _fields(tp)
    unknown = [k for k in value if k not in names]
    if unknown:
        shown = ", ".join(show_string(k) for k in unknown[:SHOWN_KEYS])
        more = f" and {len(unknown) - SHOWN_KEYS} more" if len(unknown) > SHOWN_KEYS else ""
        raise DecodeError(path, f"unknown field{'s' if len(unknown) > 1 else ''} {shown}{more}")
    for name in required:
        if name not in value:
            raise DecodeError(key_path(path, name), "required field is missing")
    nulls = _null_values(tp)  # a figure written null when not finite reads back as its bound says (inf)
    fields = {k: nulls[k] if v is None and k in nulls else _named(k, decode(hints[k], v, key_path(path, k)))
              for k, v in value.items()}
    _within(tp, fields, path)
    return tp(**fields)


def _named(name: str, value):
    """`value` of a field called `name`: a `name` field cut to MAX_NAME_CHARS, any other as it is."""
    if name == "name" and isinstance(value, str) and len(value) > MAX_NAME_CHARS:
        return value[:MAX_NAME_CHARS] + "…"
    return value


def _within(tp, fields: dict, path: str):
    """OutOfBounds naming the first number of `fields` (the decoded fields of dataclass `tp` that report.json gave)
    beyond its field's bound (reporter.model.bounds), in the order the fields are declared."""
    record = None
    for f in _bounded_fields(tp):
        if f.name not in fields:
            continue  # a default: within its bound
        if record is None:  # what a bound chosen by another field reads: the record, defaults filled in
            record = {g.name: g.default for g in dataclasses.fields(tp)} | fields
        bound = bound_of(f, record)
        if bound is None:
            continue
        queue = collections.deque([(fields[f.name], key_path(path, f.name))])
        while queue:  # the field's number, or every number in its lists and dicts (None skipped), in order
            item, where = queue.popleft()
            if isinstance(item, (int, float)) and not isinstance(item, bool) and not bound.allows(item):
                raise OutOfBounds(where, item, bound.must_be)
            if isinstance(item, list):
                queue.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
            elif isinstance(item, dict):
                queue.extend((v, key_path(where, str(k))) for k, v in item.items())


@functools.lru_cache(maxsize=None)
def _bounded_fields(tp) -> tuple:
    """The fields of dataclass `tp` that carry a bound."""
    return tuple(f for f in dataclasses.fields(tp) if BOUND in f.metadata)


@functools.lru_cache(maxsize=None)
def _null_values(tp) -> dict:
    """The fields of dataclass `tp` whose bound reads null as a value (reporter.model.bounds.Bound.null): name -> it."""
    bounds = {f.name: f.metadata[BOUND] for f in _bounded_fields(tp)}
    return {name: b.null for name, b in bounds.items() if getattr(b, "null", None) is not None}


@functools.lru_cache(maxsize=None)
def _fields(tp) -> tuple[dict, tuple, frozenset]:
    """A dataclass's field types (forward references resolved), its fields without a default, all its names."""
    hints = typing.get_type_hints(tp)
    fields = [f for f in dataclasses.fields(tp) if is_stored(f)]  # a file keeps no unstored field
    required = tuple(f.name for f in fields
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    return hints, required, frozenset(f.name for f in fields)


# --- words for messages ----------------------------------------------------------------------------------
def key_path(path: str, key: str) -> str:
    """`path` then `key`: `.key` for a plain name, else `["key"]` (shortened)."""
    segment = f".{key}" if _NAME.match(key) and len(key) <= SHOWN_CHARS else f"[{show_string(key)}]"
    return segment[1:] if not path and segment.startswith(".") else f"{path}{segment}"


def expected(tp) -> str:
    """What a value of type `tp` is called in JSON."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(expected(a) for a in typing.get_args(tp) if a is not type(None))
    if tp is list or typing.get_origin(tp) is list:
        return "a list"
    if tp is dict or typing.get_origin(tp) is dict or dataclasses.is_dataclass(tp):
        return "an object"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(tp, "a value")


def kind(value) -> str:
    """What `value` is, in JSON's words: "a list", "an object", "a string", "null", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number" if math.isfinite(value) else str(value).replace("inf", "Infinity").replace("nan", "NaN")
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def got(value) -> str:
    """`value` for "got ...": its kind, with the value itself when it is a short scalar."""
    if isinstance(value, str):
        return f"a string ({show_string(value)})"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        text = repr(value)
        return f"{kind(value)} ({text[:SHOWN_CHARS] + '…' if len(text) > SHOWN_CHARS else text})"
    return kind(value)


def show_string(text: str) -> str:
    """`text` quoted as JSON on one line, cut after SHOWN_CHARS characters."""
    cut = text[:SHOWN_CHARS]
    quoted = json.dumps(cut, ensure_ascii=False)
    # json.dumps escapes control characters; other line or paragraph separators too, so the message stays one line
    quoted = "".join(c if c.isprintable() or c == " " else f"\\u{ord(c):04x}" for c in quoted)
    return quoted[:-1] + '…"' if len(text) > SHOWN_CHARS else quoted


# --- bounded JSON ---------------------------------------------------------------------------------------
class JSONLimitError(ValueError):
    """JSON text beyond what the tool reads: nested too deep, or a number too large. The message is one line,
    says where (line and column) and does not name the file: the caller adds it."""


def loads(text: str):
    """`json.loads(text)`, bounded: at most MAX_DEPTH levels of nesting (checked before parsing, without
    recursion), integers within ±MAX_INT, numbers that fit a float. JSONLimitError otherwise; malformed JSON is
    json.JSONDecodeError as usual. The NaN and Infinity that Python writes are read as floats: `decode` refuses
    them with the field's path."""
    # Strings blanked (same length and lines, so positions stay right): what the depth scan and the
    # positions in messages read.
    blanked = _STRING.sub(lambda m: " " * len(m.group()), text)
    _check_depth(blanked)
    try:
        return json.loads(text, parse_int=functools.partial(_bounded_int, blanked),
                          parse_float=functools.partial(_bounded_float, blanked))
    except RecursionError:  # not reached after the scan; kept so that no path can end in a traceback
        raise JSONLimitError(f"nested more than {MAX_DEPTH} levels deep") from None


def check_depth(text: str):
    """`text` with its strings (and comments) blanked, JSON or TOML: JSONLimitError "nested more than MAX_DEPTH
    levels deep (line L)" when its brackets nest deeper than that; every reader of nested text says it so."""
    _check_depth(text)


def _check_depth(text: str):
    """`text` with its strings blanked: JSONLimitError when its brackets nest deeper than MAX_DEPTH."""
    depth = 0
    for match in _BRACKETS.finditer(text):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_DEPTH:
            line = text.count("\n", 0, match.start()) + 1
            raise JSONLimitError(f"nested more than {MAX_DEPTH} levels deep (line {line})")


def _bounded_int(text: str, digits: str) -> int:
    if len(digits.lstrip("-")) <= _INT_DIGITS:
        value = int(digits)
        if -MAX_INT <= value <= MAX_INT:
            return value
    shown = digits if len(digits) <= 24 else f"{digits[:12]}… ({len(digits.lstrip('-')):,} digits)"
    raise JSONLimitError(f"the integer {shown} is too large{_where(text, digits)}: at most 2**63 - 1 is read")


def _bounded_float(text: str, digits: str) -> float:
    value = float(digits)
    if math.isfinite(value):
        return value
    shown = digits if len(digits) <= 24 else digits[:24] + "…"
    raise JSONLimitError(f"the number {shown} is too large for a float{_where(text, digits)}")


def _where(text: str, token: str) -> str:
    """ " (line L, column C)" where `token` first occurs in `text` (strings blanked), or "" if it does not."""
    offset = text.find(token)
    if offset < 0:
        return ""
    line = text.count("\n", 0, offset) + 1
    return f" (line {line}, column {offset - text.rfind(chr(10), 0, offset)})"
