"""Shard byte format: round trip, and the bytes checked against Megatron-LM's MMIDIDX layout.

The oracle here is an independent reader written from Megatron's `_IndexReader`
(megatron/core/datasets/indexed_dataset.py): header, then int32 lengths, int64 byte pointers,
int64 document indices. It does not use tokens.shards' reader.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from tokens.shards import IndexedShard, ShardFormatError, dtype_for_vocab, write_shard

MEGATRON_CODES = {8: np.uint16, 4: np.int32}


def megatron_read(prefix):
    """Documents (EOD included) as Megatron's reader sees them, from the raw bytes."""
    raw = Path(f"{prefix}.idx").read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    assert struct.unpack("<Q", raw[9:17])[0] == 1
    dtype = MEGATRON_CODES[raw[17]]
    n_seq, n_doc = struct.unpack("<QQ", raw[18:34])
    off = 34
    lengths = np.frombuffer(raw, np.int32, n_seq, off)
    pointers = np.frombuffer(raw, np.int64, n_seq, off + lengths.nbytes)
    doc_idx = np.frombuffer(raw, np.int64, n_doc, off + lengths.nbytes + pointers.nbytes)
    assert len(raw) == off + lengths.nbytes + pointers.nbytes + doc_idx.nbytes
    data = Path(f"{prefix}.bin").read_bytes()
    docs = []
    for i in range(len(doc_idx) - 1):
        for s in range(doc_idx[i], doc_idx[i + 1]):
            docs.append(np.frombuffer(data, dtype, int(lengths[s]), int(pointers[s])))
    return dtype, docs


@pytest.mark.parametrize("vocab,expected", [(2048, np.uint16), (65536, np.uint16), (128_256, np.int32)])
def test_round_trip_and_megatron_layout(tmp_path, vocab, expected):
    rng = np.random.default_rng(0)
    eod = vocab - 1
    docs = [rng.integers(0, vocab - 1, size=n) for n in (0, 1, 7, 300, 5)]
    info = write_shard(tmp_path / "part-00000", docs, eod, dtype_for_vocab(vocab))
    assert info["documents"] == 5 and info["tokens"] == sum(len(d) + 1 for d in docs)
    dtype, mdocs = megatron_read(tmp_path / "part-00000")
    assert dtype is expected
    shard = IndexedShard(tmp_path / "part-00000")
    assert len(shard) == len(mdocs) == 5 and shard.num_tokens == info["tokens"]
    for i, d in enumerate(docs):
        assert mdocs[i][-1] == eod and np.array_equal(mdocs[i][:-1], d)
        assert np.array_equal(shard[i][:-1], d) and shard[i][-1] == eod
    # The whole .bin is the documents back to back, each followed by EOD: read as raw little-endian
    # numbers, not through either reader.
    flat = np.concatenate([np.append(d, eod) for d in docs])
    raw = np.fromfile(tmp_path / "part-00000.bin", dtype=np.dtype(expected).newbyteorder("<"))
    assert np.array_equal(raw, flat)
    assert shard.bin_path.stat().st_size == len(flat) * np.dtype(expected).itemsize


def test_empty_shard(tmp_path):
    write_shard(tmp_path / "p", [], 0, np.dtype(np.uint16))
    shard = IndexedShard(tmp_path / "p")
    assert len(shard) == 0 and shard.num_tokens == 0
    assert megatron_read(tmp_path / "p")[1] == []


def test_out_of_range_and_bad_files(tmp_path):
    with pytest.raises(ValueError, match="out of range"):
        write_shard(tmp_path / "a", [np.array([70000])], 0, np.dtype(np.uint16))
    write_shard(tmp_path / "b", [np.array([1, 2, 3])], 0, np.dtype(np.uint16))
    # A .bin that lost bytes no longer matches its index.
    data = (tmp_path / "b.bin").read_bytes()
    (tmp_path / "b.bin").write_bytes(data[:-2])
    with pytest.raises(ShardFormatError, match="index describes"):
        IndexedShard(tmp_path / "b")
    (tmp_path / "b.idx").write_bytes(b"NOTANIDX" + b"\x00" * 40)
    with pytest.raises(ShardFormatError, match="bad magic"):
        IndexedShard(tmp_path / "b")
    with pytest.raises(ShardFormatError, match="no such file"):
        IndexedShard(tmp_path / "missing")
    # The refused write of "a" left its temporary .bin (write_shard writes the .bin first and stops at
    # the bad id) and no finished pair; "b" left nothing temporary. Exactly that, not "none or a's".
    leftovers = sorted(p.name.split(".tmp-")[0] for p in tmp_path.glob(".*.tmp-*"))
    assert leftovers == [".a.bin"]
    assert not (tmp_path / "a.bin").exists() and not (tmp_path / "a.idx").exists()
