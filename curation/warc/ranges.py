"""Split a large WARC.gz into byte ranges at gzip member boundaries: one `extract` unit per range.

One task per WARC leaves cores idle at the end of a job (a 1 GB Common Crawl WARC is one long
task); ranges of about `reader.split_bytes` let every core work until the end, each range being
a unit with its own completion marker, stats and resume (core/runner.py is unchanged: a range is
just another unit). A range is named `<file unit>@<start>-<end>`, so its files never collide with
another range's or the whole file's, and the reader (curation/warc/records.py) gets the offsets back from
the name.

Boundaries: a gzip WARC is a sequence of gzip members, one per record in Common Crawl files. For
each target offset k * split_bytes the planner scans forward for the gzip magic (1f 8b 08) and
keeps the first candidate that verifies (`_is_record_member`): the member inflates completely,
starts with a WARC version line, and is followed by the end of the file or by another gzip magic.
It reads one record's member (tens of KB) per target and candidate, never the whole file. A range reads the records that *start* in
[start, end), so a record is never split and every record belongs to exactly one range; offsets
stay absolute (`warc_offset` and document ids do not depend on the split).

The size: `reader.split_bytes` at most, less when the inputs are too few or too small to keep every
core busy to the end (`plan_unit_bytes`, `reader.units_per_core`): five 7 MB files on 2 cores were
five units, the fifth running alone for a fifth of the job.

Not split (one unit, as before): files not larger than split_bytes, uncompressed WARCs, files
where no boundary verifies (a single gzip stream), and remote inputs (s3://, https://): their
size and boundaries would cost ranged requests on the driver, and each range would download the
whole file (the task reads a local copy); a remote 1 GB WARC stays one task.

Known limit: a gzip'd WARC stored verbatim inside a record (deflate stores incompressible data as
is) could pass the check at a target offset; the chained-member check makes it unlikely, not
impossible.
"""

from __future__ import annotations

import contextlib
import os
import re
import zlib
from typing import BinaryIO

from core.storage import is_remote
from curation.warc.warcio_reader import GZIP_MAGIC

__all__ = ["largest_first", "parse_range_unit", "plan_ranges", "plan_unit_bytes", "range_unit", "split_units"]

_RANGE_RE = re.compile(r"(.+)@(\d+)-(\d+)")
_VERSION_RE = re.compile(rb"WARC/\d+\.\d+\r?\n")
# A candidate member is inflated whole to check it ends cleanly; a record member larger than this
# (compressed) is not taken as a boundary, the scan goes on to the next candidate.
_MAX_MEMBER = 64 << 20
_BLOCK = 1 << 20


def range_unit(unit: str, start: int, end: int) -> str:
    return f"{unit}@{start}-{end}"


def parse_range_unit(unit: str) -> tuple[int, int] | None:
    """(start, end) of a range unit, None for a whole-file unit (core.output.unit_name has no '@')."""
    m = _RANGE_RE.fullmatch(unit)
    return (int(m.group(2)), int(m.group(3))) if m else None


def plan_unit_bytes(
    uris: list[str], split_bytes: int | None, cores: int | None, units_per_core: int, min_split_bytes: int
) -> int | None:
    """The range size for these inputs on `cores` task slots: their local bytes spread over
    cores x units_per_core units, between min_split_bytes and split_bytes (reader.units_per_core).

    Greedy scheduling ends with cores idle while the last units run; with units of at most
    1/(cores x k) of the work, that tail is at most about 1/k of the run. Remote inputs stay whole
    units (split_units), so only local files count. None: no splitting (split_bytes is None)."""
    if split_bytes is None or not cores or units_per_core <= 0:
        return split_bytes
    total = 0
    for uri in uris:
        if not is_remote(uri):
            with contextlib.suppress(OSError):  # unreadable: its task counts it (file_unreadable)
                total += os.path.getsize(uri)
    target = -(-total // (cores * units_per_core))
    return min(split_bytes, max(min_split_bytes, target))


def split_units(uri: str, unit: str, split_bytes: int | None) -> list[tuple[str, str]]:
    """The units (input, unit name) of one input: its ranges, or the whole file.

    A file over split_bytes is cut into ceil(size / split_bytes) ranges of equal target size, not
    into split_bytes-sized ranges and a remainder: a 7.7 MB file at 5.7 MB gives two of 3.9 MB rather
    than 5.7 and 2.0, so that no one range is the long pole of the job."""
    if split_bytes is None or is_remote(uri):
        return [(uri, unit)]
    try:
        size = os.path.getsize(uri)
        parts = -(-size // split_bytes)
        bounds = plan_ranges(uri, -(-size // parts) if parts > 1 else split_bytes)
    except OSError:  # unreadable now: the task counts it (file_unreadable) as for any unit
        return [(uri, unit)]
    if len(bounds) == 1:
        return [(uri, unit)]
    return [(uri, range_unit(unit, s, e)) for s, e in bounds]


def largest_first(units: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The units in the order Spark should start them: the most bytes first (a range's length, a
    local file's size; a remote file, which is never split, first of all), so that the last tasks to
    start are short and the cores finish together (longest-processing-time-first scheduling)."""

    def size(u: tuple[str, str]) -> float:
        uri, name = u
        if (span := parse_range_unit(name)) is not None:
            return span[1] - span[0]
        if is_remote(uri):
            return float("inf")
        try:
            return os.path.getsize(uri)
        except OSError:
            return 0

    return sorted(units, key=size, reverse=True)  # stable: equal sizes keep the input order


def plan_ranges(path: str, split_bytes: int) -> list[tuple[int, int]]:
    """Consecutive [start, end) ranges covering the file, each starting at a record's gzip member."""
    size = os.path.getsize(path)
    if size <= split_bytes:
        return [(0, size)]
    starts = [0]
    with open(path, "rb") as f:
        if f.read(len(GZIP_MAGIC)) != GZIP_MAGIC:
            return [(0, size)]
        target = split_bytes
        while target < size:
            b = _next_boundary(f, max(target, starts[-1] + 1), size)
            if b is None:
                break
            starts.append(b)
            # Ranges smaller than one record: the next target is past this boundary.
            target = max(target + split_bytes, b + 1)
    return list(zip(starts, [*starts[1:], size], strict=True))


def _next_boundary(f: BinaryIO, start: int, size: int) -> int | None:
    """The first verified record member at or after `start`, or None up to the end of the file."""
    pos = start
    carry = b""
    while pos < size:
        f.seek(pos)
        chunk = f.read(_BLOCK)
        if not chunk:
            return None
        buf = carry + chunk
        base = pos - len(carry)
        i = buf.find(GZIP_MAGIC)
        while i >= 0:
            if base + i >= start and _is_record_member(f, base + i, size):
                return base + i
            i = buf.find(GZIP_MAGIC, i + 1)
        carry = buf[-(len(GZIP_MAGIC) - 1) :]
        pos += len(chunk)
    return None


def _is_record_member(f: BinaryIO, at: int, size: int) -> bool:
    """A gzip member starts at `at`, inflates to a WARC record header, and ends where another
    member (or the file) begins: a 1f 8b 08 inside compressed data fails one of the three."""
    d = zlib.decompressobj(wbits=31)
    f.seek(at)
    head = b""
    read = 0
    try:
        while not d.eof:
            chunk = f.read(1 << 16)
            read += len(chunk)
            if not chunk or read > _MAX_MEMBER:
                return False
            out = d.decompress(chunk)
            if len(head) < 16:
                head += out[: 16 - len(head)]
                if len(head) >= 16 and not _VERSION_RE.match(head):
                    return False
    except zlib.error:
        return False
    if not _VERSION_RE.match(head):
        return False
    end = at + read - len(d.unused_data)
    if end == size:
        return True
    f.seek(end)
    return f.read(len(GZIP_MAGIC)) == GZIP_MAGIC
