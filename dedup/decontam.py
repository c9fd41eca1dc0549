"""Decontamination's two halves without Spark: evaluation sets -> an n-gram index, documents -> hits.

`build_index(cfg)` reads every evaluation set on the driver (JSONL, Parquet or text, local or
`s3://` through core.storage.local_input), normalizes each passage as every dedup stage does
(dedup.normalize) and hashes its word n-grams with the MinHash shingle hash (dedup.minhash: one
prefix-sum pass over the bytes, 64 bits), so that a document's n-grams, hashed by the compiled
kernel (dedup.kernels.ngram_hits), compare equal to them. The index (`NgramTable`) is one sorted
uint64 array of the distinct n-grams of all sets, the sets each n-gram belongs to (a bit per set),
a bucket table on the top bits of the hash that makes a lookup one pair of offsets and about one
key, and in front of it a bitmap of 16 to 32 bits per key (a one-hash Bloom filter that stays in
cache) that turns most n-grams of a clean document away: the whole of it is what the stage
broadcasts, about 24 bytes per distinct n-gram (bench/dedup/decontaminate.py measures it against
np.searchsorted, np.isin and a Python set, and at 10^6 and 10^7 n-grams).

Rules, each counted in the set's report:
- a passage shorter than `ngram` words gives no n-gram (`passages_short`): matching it whole would
  need every shorter length hashed in every document, and a few words match everywhere (datatrove's
  n-gram filter skips them too, silently);
- with `skip_trivial`, an n-gram made only of numbers and single ASCII letters is left out
  (`ngrams_trivial`): normalization turns every digit into 0, so a row of a table of figures
  matches any other table, and `a b c d ...` any alphabetical index (what the shared Wikipedia
  and WikiText sets hit in the shared WARC pages without it);
- a record without the text field, or with an empty or non-string one, is skipped
  (`records_without_text`); a set with no n-gram at all is an error naming it;
- a `text` or `jsonl` file must be UTF-8 text: a NUL byte (a binary file: Parquet, a model, an archive
  read as text) or bytes that are not UTF-8 are an error naming the file and line, not replaced with
  U+FFFD: a replaced byte splits a word, and the set's n-grams would silently miss what they should find.
"""

from __future__ import annotations

import functools
import gzip
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import InputError
from core.safe_json import loads_checked
from core.storage import local_input
from dedup import kernels
from dedup.config import DecontaminateConfig, EvalSetConfig
from dedup.minhash import shingle_hashes, token_bounds
from dedup.normalize import normalize_bytes

_ZERO = ord("0")
_MAX_SETS_PER_WORD = 64


@dataclass
class SetReport:
    """What one evaluation set holds, as its report shows it."""

    name: str
    files: list[str]
    records: int = 0
    records_without_text: int = 0
    passages: int = 0
    passages_short: int = 0
    ngrams: int = 0
    """distinct n-grams indexed"""
    ngrams_trivial: int = 0
    """distinct n-grams left out by `skip_trivial`"""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class NgramTable:
    """The arrays a task needs to find n-grams (broadcast as one object)."""

    ngram: int
    keys: np.ndarray
    """uint64, sorted, distinct"""
    owners: np.ndarray
    """uint64[len(keys), ceil(sets / 64)]: bit s of word s // 64 set when set s holds the n-gram"""
    buckets: np.ndarray
    """int32[2^bits + 1] (int64 past 2^31 keys): keys with top bits t are keys[buckets[t]:buckets[t + 1]]"""
    shift: int
    """64 - bits"""
    bitmap: np.ndarray
    """uint64 words of 2^(bits + 4) bits: bit `key >> bitmap_shift` set for every key"""
    bitmap_shift: int

    @property
    def nbytes(self) -> int:
        """What broadcasting it ships (about 24 bytes per n-gram)."""
        return self.keys.nbytes + self.owners.nbytes + self.buckets.nbytes + self.bitmap.nbytes


@dataclass
class EvalIndex:
    names: tuple[str, ...]
    table: NgramTable
    sets: list[SetReport] = field(default_factory=list)


def passages(st: EvalSetConfig, report: SetReport) -> Iterator[str]:
    """The passages of one set, file by file; InputError names a file (and line) that cannot be read."""
    for uri in report.files:
        fmt = st.format or _format_of(uri)
        try:
            with local_input(uri, retries=3) as path:
                yield from _file_passages(Path(path), uri, fmt, st.text_field, report)
        except OSError as e:
            raise InputError(f"evaluation set {st.name}: cannot read {uri}: {e}") from None


def _format_of(uri: str) -> str:
    name = uri.lower().removesuffix(".gz")
    if name.endswith((".jsonl", ".json")):
        return "jsonl"
    return "parquet" if name.endswith(".parquet") else "text"


def _open_text(path: Path, uri: str, fmt: str) -> io.TextIOBase:
    raw = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # noqa: SIM115
    # git's test for a binary file: a NUL in the first 8000 bytes. Asked first, so a Parquet file or an
    # archive is called binary, not "not valid JSON" at line 1; a NUL further on is found line by line.
    if b"\x00" in raw.peek(8000)[:8000]:
        raw.close()
        raise _not_text(uri, fmt, "", "a NUL byte in its first 8000 bytes, so a binary file")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="strict")  # strict: see the module docstring


def _not_text(uri: str, fmt: str, where: str, why: str) -> InputError:
    return InputError(
        f"{uri}{where}: {why}: an evaluation set of format {fmt} is UTF-8 text (convert it, e.g. "
        "`iconv -f cp1252 -t utf-8`; a Parquet file needs format: parquet or a .parquet name)"
    )


def _file_passages(path: Path, uri: str, fmt: str, key: str, report: SetReport) -> Iterator[str]:
    def take(value: Any) -> Iterator[str]:
        report.records += 1
        if isinstance(value, str) and value.strip():
            yield value
        else:
            report.records_without_text += 1

    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(path)
        except (pa.ArrowInvalid, OSError) as e:
            raise InputError(f"{uri}: not a readable Parquet file ({e})") from None
        if key not in pf.schema_arrow.names:
            raise InputError(f"{uri}: no column {key!r} (columns: {', '.join(pf.schema_arrow.names)})")
        for batch in pf.iter_batches(columns=[key], batch_size=4096):
            for value in batch.column(0).to_pylist():
                yield from take(value)
        return
    with _open_text(path, uri, fmt) as f:
        lineno = 0
        lines = iter(f)
        while True:
            try:
                line = next(lines, None)
            except UnicodeDecodeError as e:  # decoded by blocks: the line is the first one not yet read
                why = f"byte 0x{e.object[e.start]:02x} is not UTF-8"
                raise _not_text(uri, fmt, f" (after line {lineno})", why) from None
            if line is None:
                break
            lineno += 1
            if "\x00" in line:
                raise _not_text(uri, fmt, f":{lineno}", "a NUL byte, so a binary file")
            if not line.strip():
                continue
            if fmt == "text":  # a passage per non-empty line (WikiText: a paragraph per line)
                yield from take(line)
                continue
            # the checked reader (an evaluation set is outside data): its error names the line
            obj = loads_checked(line, f"{uri}:{lineno}")
            yield from take(obj.get(key) if isinstance(obj, dict) else None)


def passage_ngrams(norm: bytes, ngram: int, skip_trivial: bool) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 hashes of the n-grams of one normalized passage, those of them left out as trivial)."""
    hashes = shingle_hashes(norm, ngram)
    if not skip_trivial or hashes.size == 0:
        return hashes, hashes[:0]
    data, starts, ends = token_bounds(norm)
    # a token is trivial when it is a number (all "0" once normalized) or one ASCII character
    not_zero = np.concatenate(([0], np.cumsum(data != _ZERO)))
    numeric = (not_zero[ends] - not_zero[starts]) == 0
    one_ascii = ((ends - starts) == 1) & (data[starts] < 128)
    words = np.concatenate(([0], np.cumsum(~(numeric | one_ascii))))
    keep = (words[ngram:] - words[:-ngram]) > 0  # n-grams with at least one real word
    return hashes[keep], hashes[~keep]


def read_set(st: EvalSetConfig, cfg: DecontaminateConfig) -> tuple[np.ndarray, SetReport]:
    """(distinct n-gram hashes, report) of one evaluation set."""
    report = SetReport(st.name, st.files())
    kept, trivial = [np.zeros(0, np.uint64)], [np.zeros(0, np.uint64)]
    for text in passages(st, report):
        report.passages += 1
        hashes, left_out = passage_ngrams(normalize_bytes(text), cfg.ngram, cfg.skip_trivial)
        report.passages_short += hashes.size + left_out.size == 0
        kept.append(hashes)
        trivial.append(left_out)
    keys = np.unique(np.concatenate(kept))
    report.ngrams = int(keys.size)
    report.ngrams_trivial = int(np.setdiff1d(np.concatenate(trivial), keys).size)
    if keys.size == 0:
        raise InputError(
            f"evaluation set {st.name}: no n-gram of {cfg.ngram} words in its {report.passages} passages "
            f"({report.records} records, {report.records_without_text} without a {st.text_field!r} text)"
        )
    return keys, report


@functools.lru_cache(maxsize=2)
def build_index(cfg: DecontaminateConfig) -> EvalIndex:
    """Every set of `cfg` read and merged into one table (cached: the stage asks twice per run)."""
    per_set = [read_set(st, cfg) for st in cfg.sets]
    return EvalIndex(
        tuple(st.name for st in cfg.sets),
        make_table([k for k, _ in per_set], cfg.ngram),
        [r for _, r in per_set],
    )


def make_table(per_set: list[np.ndarray], ngram: int) -> NgramTable:
    """One sorted key array for sets of distinct hashes, with each key's set bits and bucket table."""
    all_keys = np.concatenate(per_set)
    set_ids = np.repeat(np.arange(len(per_set)), [k.size for k in per_set])
    keys, inverse = np.unique(all_keys, return_inverse=True)
    owners = np.zeros((keys.size, -(-len(per_set) // _MAX_SETS_PER_WORD)), dtype=np.uint64)
    bits = np.left_shift(np.uint64(1), (set_ids % _MAX_SETS_PER_WORD).astype(np.uint64))
    np.bitwise_or.at(owners, (inverse, set_ids // _MAX_SETS_PER_WORD), bits)
    # about one key per bucket: 2^bits >= keys, between 2^8 and 2^28 buckets
    nbits = int(min(28, max(8, int(np.ceil(np.log2(max(keys.size, 1)))))))
    shift = 64 - nbits
    starts = np.searchsorted(keys >> np.uint64(shift), np.arange(2**nbits + 1, dtype=np.uint64))
    buckets = starts.astype(np.int32 if keys.size < 2**31 else np.int64)  # 4 bytes a bucket
    # 16 to 32 bits per key: a clean n-gram finds its bit clear 94-97% of the time, in cache
    # (1.5x the documents/s of the bucket lookup alone, bench/dedup/decontaminate.py)
    bitmap_shift = shift - 4
    bits = keys >> np.uint64(bitmap_shift)
    bitmap = np.zeros(2 ** (nbits + 4) // 64, dtype=np.uint64)
    np.bitwise_or.at(bitmap, bits >> np.uint64(6), np.left_shift(np.uint64(1), bits & np.uint64(63)))
    return NgramTable(ngram, keys, owners, buckets, shift, bitmap, bitmap_shift)


@dataclass
class DocHits:
    """What one document shares with the evaluation sets, per set it shares anything with."""

    sets: list[int]
    """set indices, ascending"""
    ngrams: list[int]
    """distinct n-grams shared with each set"""
    examples: list[str]
    """per set, the first shared n-gram in the document (normalized text)"""
    keys: list[np.ndarray]
    """per set, the distinct shared n-gram hashes (uint64)"""


def find_hits(table: NgramTable, norms: list[bytes | None]) -> list[DocHits | None]:
    """Per normalized document (None: no text), its hits, or None when it shares no n-gram."""
    texts = [n or b"" for n in norms]
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
    data = np.frombuffer(b"".join(texts), dtype=np.uint8)
    cap = 1024
    while True:
        hit = [np.empty(cap, dtype=np.int64) for _ in range(4)]
        n = kernels.ngram_hits(
            data,
            offsets,
            table.ngram,
            table.keys,
            table.buckets,
            np.uint64(table.shift),
            table.bitmap,
            np.uint64(table.bitmap_shift),
            *hit,
        )
        if n <= cap:
            break
        cap = n  # a heavily contaminated batch: once more, with room for every hit
    doc, key, start, end = (a[:n] for a in hit)
    out: list[DocHits | None] = [None] * len(texts)
    bounds = np.flatnonzero(np.diff(doc)) + 1  # hits come in document order
    for lo, hi in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [n]))):
        if lo < hi:
            out[int(doc[lo])] = _doc_hits(table, texts[int(doc[lo])], key[lo:hi], start[lo:hi], end[lo:hi])
    return out


def _doc_hits(table: NgramTable, text: bytes, key: np.ndarray, start: np.ndarray, end: np.ndarray) -> DocHits:
    owners = table.owners[key]
    found = DocHits([], [], [], [])
    for word, present in enumerate(np.bitwise_or.reduce(owners, axis=0)):
        for bit in (b for b in range(_MAX_SETS_PER_WORD) if int(present) >> b & 1):
            mine = (owners[:, word] >> np.uint64(bit)) & np.uint64(1) == 1
            first = int(np.argmax(mine))  # hits come in document order: the first one it shares
            found.sets.append(word * _MAX_SETS_PER_WORD + bit)
            found.keys.append(np.unique(table.keys[key[mine]]))
            found.ngrams.append(int(found.keys[-1].size))
            found.examples.append(text[start[first] : end[first]].decode("utf-8", "replace"))
    return found
