"""Token shard byte format: Megatron-LM's MMIDIDX `.bin` + `.idx` pair, written and read with numpy.

One shard is two files with a common prefix (`part-00000.bin`, `part-00000.idx`). The format is the
one Megatron-LM's `IndexedDataset` reads (megatron/core/datasets/indexed_dataset.py, `_IndexWriter`
/ `_IndexReader`), so a shard folder can be handed to Megatron unchanged:

`.bin`: the token ids of every document, in order, each document followed by the end-of-document
(EOD) token, as little-endian `uint16` when every id fits (vocabulary <= 65,536) else `int32`.
MMIDIDX has no code for uint32 (its dtype codes are 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
6 float64, 7 float32, 8 uint16), so large vocabularies use int32, as Megatron itself does.

`.idx` (all little-endian):
    offset  size          field
    0       9             magic b"MMIDIDX\\x00\\x00"
    9       8   u64       version = 1
    17      1   u8        dtype code of the .bin (8 = uint16, 4 = int32)
    18      8   u64       S = number of sequences (here: one sequence per document)
    26      8   u64       D = number of entries in document_indices (= documents + 1)
    34      4*S i32       sequence_lengths: tokens per document, EOD included
    ..      8*S i64       sequence_pointers: byte offset of each document in the .bin
    ..      8*D i64       document_indices: 0, 1, ..., S (document i = sequences [d[i], d[i+1]))

A document's tokens without its EOD are `bin[ptr : ptr + 2*(len-1)]`. This is exactly what
Megatron's `tools/preprocess_data.py --append-eod` writes for one-sentence documents.

Here: `write_shard_files` / `write_shard` (writer), `IndexedShard` (numpy memmap reader, what the
mixture sampler uses), and `build_manifest`, the `manifest.json` of a complete source folder (its
parts' hashes and counts, the tokenizer's identity; the tokenize job in tokens/job.py writes it).
"""

from __future__ import annotations

import hashlib
import os
import struct
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from tokens.lang_counts import merge_languages

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
HEADER_BYTES = 34
# Megatron's DType enum values (megatron/core/datasets/indexed_dataset.py).
DTYPE_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}


class ShardFormatError(ValueError):
    """A .bin/.idx pair is not a valid shard; the message names the file and what is wrong."""


def dtype_for_vocab(vocab_size: int) -> np.dtype:
    """uint16 when every id (0 .. vocab_size-1) fits, else int32 (MMIDIDX has no uint32)."""
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be > 0, got {vocab_size}")
    if vocab_size <= 2**16:
        return np.dtype(np.uint16)
    if vocab_size <= 2**31:
        return np.dtype(np.int32)
    raise ValueError(f"vocab_size {vocab_size} does not fit int32")


def encode_index(lengths: np.ndarray, dtype: np.dtype) -> bytes:
    """The .idx bytes for documents of `lengths` tokens (EOD included) stored back to back."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if (lengths <= 0).any():
        raise ValueError("every document has at least its EOD token")
    if (lengths >= 2**31).any():
        raise ValueError("a document longer than 2**31 tokens does not fit MMIDIDX's int32 lengths")
    n = len(lengths)
    pointers = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    doc_idx = np.arange(n + 1, dtype=np.int64)
    head = MAGIC + struct.pack("<Q", VERSION) + struct.pack("<B", DTYPE_CODES[dtype])
    head += struct.pack("<Q", n) + struct.pack("<Q", n + 1)
    return b"".join(
        [
            head,
            lengths.astype("<i4").tobytes(),
            pointers.astype("<i8").tobytes(),
            doc_idx.astype("<i8").tobytes(),
        ]
    )


def write_shard_files(
    bin_path: Path, idx_path: Path, docs: Iterable[np.ndarray], eod_id: int, dtype: np.dtype
) -> dict[str, object]:
    """Write one shard's `.bin` and `.idx` to exactly these paths (fsynced), without renaming.

    `docs` are token arrays without EOD; one EOD is appended to each. Returns documents, tokens
    (EOD included) and the sha256 of both files. Callers write temporary names and rename them
    into place (`write_shard`, or the tokenize job through its output folder's commit).
    """
    info = np.iinfo(dtype)
    if not info.min <= eod_id <= info.max:
        raise ValueError(f"EOD id {eod_id} does not fit {dtype}")
    eod = np.array([eod_id], dtype=dtype)
    lengths: list[int] = []
    h_bin = hashlib.sha256()
    with open(bin_path, "wb") as f:
        for toks in docs:
            toks = np.asarray(toks)
            if toks.size and (toks.min() < info.min or toks.max() > info.max):
                raise ValueError(f"token ids out of range for {dtype} in document {len(lengths)}")
            blob = np.concatenate([toks.astype(dtype, copy=False), eod]).astype(dtype.newbyteorder("<"))
            data = blob.tobytes()
            h_bin.update(data)
            f.write(data)
            lengths.append(len(blob))
        f.flush()
        os.fsync(f.fileno())
    idx_bytes = encode_index(np.asarray(lengths, dtype=np.int64), dtype)
    with open(idx_path, "wb") as f:
        f.write(idx_bytes)
        f.flush()
        os.fsync(f.fileno())
    return {
        "documents": len(lengths),
        "tokens": int(sum(lengths)),
        "bin_sha256": h_bin.hexdigest(),
        "idx_sha256": hashlib.sha256(idx_bytes).hexdigest(),
        "bin_bytes": int(sum(lengths)) * dtype.itemsize,
        "idx_bytes": len(idx_bytes),
    }


def write_shard(prefix: Path, docs: Iterable[np.ndarray], eod_id: int, dtype: np.dtype) -> dict[str, object]:
    """Write `prefix.bin` / `prefix.idx` atomically (temp names, fsync, rename .bin then .idx).

    A crash leaves at most temporary files (or a .bin without its .idx), never a pair that looks
    finished: the tokenize job also writes a done marker last. Returns `write_shard_files`' info.
    """
    prefix = Path(prefix)
    tag = uuid.uuid4().hex[:8]
    tmp_bin = prefix.with_name(f".{prefix.name}.bin.tmp-{tag}")
    tmp_idx = prefix.with_name(f".{prefix.name}.idx.tmp-{tag}")
    info = write_shard_files(tmp_bin, tmp_idx, docs, eod_id, dtype)
    os.replace(tmp_bin, prefix.with_suffix(".bin"))
    os.replace(tmp_idx, prefix.with_suffix(".idx"))
    return info


def read_index(idx_path: Path) -> tuple[np.dtype, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """An `.idx` file, memmapped and checked: (dtype of its .bin, lengths, pointers, document_indices,
    the raw memmap the arrays view). What `IndexedShard` opens, and what the shard cache
    (tokens/shard_cache.py) reads of a remote shard before its `.bin` is fetched."""
    idx = np.memmap(idx_path, dtype=np.uint8, mode="r")
    if len(idx) < HEADER_BYTES or bytes(idx[:9]) != MAGIC:
        raise ShardFormatError(f"{idx_path}: not an MMIDIDX index (bad magic)")
    version, code, n_seq, n_doc = struct.unpack("<QBQQ", bytes(idx[9:HEADER_BYTES]))
    if version != VERSION:
        raise ShardFormatError(f"{idx_path}: version {version}, expected {VERSION}")
    if code not in CODE_DTYPES:
        raise ShardFormatError(f"{idx_path}: dtype code {code}; readable: {sorted(CODE_DTYPES)}")
    expected = HEADER_BYTES + 4 * n_seq + 8 * n_seq + 8 * n_doc
    if len(idx) < expected:
        raise ShardFormatError(f"{idx_path}: truncated ({len(idx)} bytes, header implies {expected})")
    off = HEADER_BYTES
    lengths = np.frombuffer(idx, dtype="<i4", count=n_seq, offset=off)
    pointers = np.frombuffer(idx, dtype="<i8", count=n_seq, offset=off + 4 * n_seq)
    document_indices = np.frombuffer(idx, dtype="<i8", count=n_doc, offset=off + 12 * n_seq)
    return CODE_DTYPES[code], lengths, pointers, document_indices, idx


class IndexedShard:
    """Read-only view of one shard through numpy memmaps; nothing is loaded until indexed.

    `shard[i]` is document i with its EOD (`shard[i][:-1]` without it). `lengths` and
    `pointers` are memmapped views of the .idx arrays (lengths include the EOD).
    """

    def __init__(self, prefix: str | Path) -> None:
        prefix = Path(prefix)
        if prefix.suffix in (".bin", ".idx"):
            prefix = prefix.with_suffix("")
        self.prefix = prefix
        self.idx_path, self.bin_path = prefix.with_suffix(".idx"), prefix.with_suffix(".bin")
        for p in (self.idx_path, self.bin_path):
            if not p.is_file():
                raise ShardFormatError(f"{p}: no such file")
        self.dtype, self.lengths, self.pointers, self.document_indices, self._idx = read_index(self.idx_path)
        n_bin = self.bin_path.stat().st_size
        total = int(self.lengths.sum(dtype=np.int64)) * self.dtype.itemsize
        if n_bin != total:
            raise ShardFormatError(f"{self.bin_path}: {n_bin} bytes, the index describes {total}")
        # An empty file cannot be memmapped; a shard of zero documents is valid.
        self._bin = (
            np.memmap(self.bin_path, dtype=self.dtype.newbyteorder("<"), mode="r")
            if n_bin
            else np.zeros(0, dtype=self.dtype)
        )

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def num_tokens(self) -> int:
        return len(self._bin)

    def __getitem__(self, i: int) -> np.ndarray:
        start = int(self.pointers[i]) // self.dtype.itemsize
        return self._bin[start : start + int(self.lengths[i])]


# -- manifest ------------------------------------------------------------------------------------

MANIFEST_FORMAT = "refinery-shards/1 (Megatron MMIDIDX .bin/.idx, one sequence per document, EOD appended)"
PART_KEYS = (
    "part", "bin", "idx", "ids", "bin_sha256", "idx_sha256", "bin_bytes", "documents", "tokens",
    "input", "input_sha256", "input_metadata",
)  # fmt: skip
"""The fields of each `files[]` entry, taken from the part's completion marker."""


def build_manifest(
    source: str,
    config: dict[str, Any],
    fingerprint: str,
    tok: Any,
    parts: list[dict[str, Any]],
    percentiles: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """manifest.json of a complete source, from its parts' markers in part order.

    No timestamps: the same run gives the same bytes. `tok` is a tokens.tokenizer.LoadedTokenizer.
    A selection with percentiles adds `resolved_select` (the plain selection the shards were made with:
    usable as a `select` as it stands) and `percentiles` (per column, what its resolution counted:
    core.selectors.resolve_percentiles).
    """
    resolution = {}
    if "resolved_select" in config:
        resolution = {"resolved_select": config["resolved_select"], "percentiles": percentiles or {}}
    return {
        "format": MANIFEST_FORMAT,
        "source": source,
        "config_fingerprint": fingerprint,
        "select": config["select"],
        **resolution,
        "tokenizer": {
            "path": tok.path,
            "sha256": tok.sha256,
            "vocab_size": tok.vocab_size,
            "eod_token": tok.eod_token,
            "eod_id": tok.eod_id,
            "config_fingerprint": tok.meta.get("config_fingerprint"),
        },
        "dtype": str(dtype_for_vocab(tok.vocab_size)),
        "documents": sum(d["documents"] for d in parts),
        "tokens": sum(d["tokens"] for d in parts),
        "files": [{k: d[k] for k in PART_KEYS} for d in parts],
        **_languages(parts),
    }


def _languages(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """`languages`: the parts' per-`lang` documents, bytes and tokens summed (tokens/job.py counts
    them); absent when no part has a `lang` column, so a manifest without it reads as before."""
    counts = [d["languages"] for d in parts if "languages" in d]
    return {"languages": merge_languages(counts)} if counts else {}
