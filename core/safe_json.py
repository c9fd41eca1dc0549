"""The one reader of JSON that comes from outside the process (files, replies, manifests): bounded and finite.

A model folder is untrusted input (classifiers/model.py), and so are a run's files, a manifest, a
JSONL data set, a server's reply and a file's embedded metadata: whoever can write them can write
any JSON, and `json.loads` turns some of it into failures far from the cause or into tracebacks
instead of an error that names the file. In the packages tests/core/test_json_readers.py scans,
every `json.loads` of such text goes through here; the few that parse our own in-memory dumps are
listed there, each with why, and any other bare call fails that test.

The checks:

- **depth**: `[[[[...]]]]` a few thousand deep raises RecursionError inside the C parser (or later,
  in any code that walks the result). The nesting is measured first, without recursion, on the text
  with its strings blanked out, and a document deeper than `max_depth` is refused unparsed.
- **non-finite numbers**: Python's parser reads `NaN`, `Infinity` and `1e400` (-> inf) without a
  word; a NaN cut point then compares false with everything (every document fell in bucket 0).
  A reader of a log that records a diverged loss as `NaN` (the trainer's metrics and state) passes
  `finite=False`: NaN and ±Infinity then read as floats; the other checks stay.
- **huge integers**: `10**400` written out parses to a Python int that overflows on the first
  `float()` or `math.isfinite` (an OverflowError traceback); past 4,300 digits the parser itself
  raises ValueError. Integers are bounded to int64, the widest any model file here writes.
- **duplicate keys**: the parser keeps the last one silently; the file means one of the two.
- **size**: a file over `max_bytes` is refused before it is read.

Every refusal is a `JSONFileError` (an InputError: `error: ...`, exit 2 from every CLI) naming the file
and, for a bad value, its key path (`columns[0].cuts[3]`). Bad values are marked while parsing and
reported after, so the message can say where they are. What a value must be beyond that (a count in
its range, cut points ascending) is each reader's own check, next to the format it reads.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from core.errors import InputError

__all__ = [
    "INT_BOUND",
    "MAX_BYTES",
    "MAX_DEPTH",
    "JSONFileError",
    "key_path",
    "loads_checked",
    "nesting_depth",
    "read_json_file",
]

MAX_BYTES = 16 << 20
"""Largest file read by default (a metadata.json listing its inputs is KBs to a few MB)."""
MAX_DEPTH = 64
"""Deepest nesting of objects and arrays (the files written here nest 5 deep at most)."""
INT_BOUND = 1 << 63
"""Integers must lie in (-INT_BOUND, INT_BOUND): int64, what counts, seeds and sizes fit in."""

# A JSON string, escapes included: blanked before brackets are counted, so `"[[["` is not nesting.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class JSONFileError(InputError):
    """A JSON file is unreadable, too large, too deep, or holds a value no model writes; names the file."""


class _Bad:
    """A value the parser met that the reader refuses; reported with its key path after parsing."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _parse_constant(name: str) -> _Bad:
    return _Bad(f"{name} is not a finite number")


def _parse_float(text: str) -> float | _Bad:
    x = float(text)
    return x if math.isfinite(x) else _Bad(f"{text[:40]} overflows a float")


def _parse_int(text: str) -> int | _Bad:
    # the length first: int() of thousands of digits is slow, and past 4,300 it raises ValueError
    if len(text.lstrip("-")) > 19 or not -INT_BOUND < int(text) < INT_BOUND:
        digits = len(text.lstrip("-"))
        return _Bad(f"the integer {text[:20]}... ({digits} digits) is beyond int64")
    return int(text)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            out[k] = _Bad(f"the key {k[:60]!r} is given twice in one object")
        else:
            out[k] = v
    return out


def key_path(path: tuple[str | int, ...]) -> str:
    """`("columns", 0, "cuts", 3)` -> `columns[0].cuts[3]`; the top level is `(top level)`."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def nesting_depth(text: str, stop: int | None = None) -> int:
    """Deepest nesting of `[`/`{` in JSON text, counted without recursion (strings blanked first);
    the count ends as soon as it passes `stop`, so a hostile file costs no more than a few brackets."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for c in brackets:  # only the brackets are left: two per container
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop is not None and deepest > stop:
                    break
        else:
            depth -= 1
    return deepest


def _first_bad(value: Any) -> tuple[tuple[str | int, ...], _Bad] | None:
    """The key path and marker of the first refused value, in document order (iterative)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, _Bad):
            return path, v
        if isinstance(v, dict):
            stack.extend(((*path, k), x) for k, x in reversed(v.items()))
        elif isinstance(v, list):
            stack.extend(((*path, i), x) for i, x in reversed(list(enumerate(v))))
    return None


def loads_checked(
    data: bytes | str,
    where: str,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    finite: bool = True,
) -> Any:
    """`data` (UTF-8 JSON) parsed, after the checks of the module docstring; JSONFileError naming
    `where` (the file) and the key of the first bad value otherwise."""
    size = len(data)
    if size > max_bytes:
        raise JSONFileError(f"{where}: {size:,} bytes, over the {max_bytes:,} such a file may have")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise JSONFileError(f"{where}: not UTF-8 (byte {e.start})") from None
    if nesting_depth(data, stop=max_depth) > max_depth:
        raise JSONFileError(f"{where}: nests deeper than the {max_depth} levels such a file may have")
    try:
        value = json.loads(
            data,
            parse_constant=_parse_constant if finite else float,
            parse_float=_parse_float if finite else float,
            parse_int=_parse_int,
            object_pairs_hook=_object,
        )
    except json.JSONDecodeError as e:
        raise JSONFileError(f"{where}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:  # unreachable below max_depth; kept so no input can give a traceback
        raise JSONFileError(f"{where}: nests too deep to parse") from None
    bad = _first_bad(value)
    if bad is not None:
        path, marker = bad
        raise JSONFileError(f"{where}: {key_path(path)}: {marker.why}")
    return value


def read_json_file(
    path: str | Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH, finite: bool = True
) -> Any:
    """The checked JSON of a local file; its size is checked before it is read."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise JSONFileError(f"{p}: {size:,} bytes, over the {max_bytes:,} such a file may have")
        data = p.read_bytes()
    except OSError as e:
        raise JSONFileError(f"{p}: cannot be read ({e.strerror or e})") from None
    return loads_checked(data, str(p), max_bytes=max_bytes, max_depth=max_depth, finite=finite)
