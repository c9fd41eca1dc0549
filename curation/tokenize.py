"""Documents -> token shards: the per-file logic of the `tokenize` job, with no Spark in it.

One input Parquet file of documents becomes one shard `shards/<source>/part-NNNNN.{bin,idx}`
(format: curation/shards.py, Megatron MMIDIDX), plus `part-NNNNN.ids.parquet` (the document `id`
of every shard document, in order: provenance down to the document) and `done/part-NNNNN.json`
(the completion marker with the part's stats, hashes and input), written last. `NNNNN` is the
file's position in the sorted input listing, so a rerun on the same inputs names parts the same.

Documents are kept in input order (determinism: the same input and tokenizer give byte-identical
shards). Rows the recipe's selectors reject, and rows with a null or empty `text`, are counted per
reason in the part's stats, never dropped silently. `tokenize_file` is what a Spark task calls for
its file and what the tests call directly.

Encoding uses `curation.tokenizer.build_encoder`: tiktoken when it gives exactly the HF ids for
this tokenizer.json (~4x faster), else HF with the reason logged; the part's marker records which
(`encoder`). Both give byte-identical shards (tests/curation/test_tokenizer_fast.py).
"""

from __future__ import annotations

import json
import logging
import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.output import atomic_write_json
from core.selectors import Selector, selection_mask
from core.stats import Stats
from curation.shards import dtype_for_vocab, sha256_file, write_shard

log = logging.getLogger(__name__)

# Documents per encode call: amortises HF's Python<->Rust crossing and bounds the ids held as lists.
BATCH_DOCS = 512
STAGES = ("select", "tokenize")


@dataclass(frozen=True, slots=True)
class TokenizeTask:
    """Everything a task needs, picklable (the tokenizer travels as its JSON text)."""

    source: str
    out_dir: str
    """shards/<source> folder."""
    tokenizer_json: str
    tokenizer_sha256: str
    eod_token: str
    selectors: tuple[Selector, ...] = ()
    text_column: str = "text"
    encoder: str = "auto"
    """curation.tokenizer.ENCODERS: auto (tiktoken when exact, else HF), tiktoken, hf."""


def part_name(index: int) -> str:
    return f"part-{index:05d}"


_ENCODERS: dict[tuple[str, str], Any] = {}


def _encoder(task: TokenizeTask) -> Any:
    """One built encoder per worker process (keyed by tokenizer hash and mode), reused across tasks."""
    key = (task.tokenizer_sha256, task.encoder)
    enc = _ENCODERS.get(key)
    if enc is None:
        from curation.tokenizer import build_encoder

        enc = _ENCODERS[key] = build_encoder(task.tokenizer_json, task.encoder)
    return enc


def tokenize_file(index: int, path: str, task: TokenizeTask) -> dict[str, Any]:
    """Tokenize one Parquet file into part `index`; returns a small summary, never raises."""
    name = part_name(index)
    out = Path(task.out_dir)
    try:
        return _tokenize(index, path, task, out, name)
    except Exception as e:  # a failed file is reported and retried, never kills the job
        log.error("tokenize %s failed: %s", path, e)
        return {
            "status": "failed",
            "part": name,
            "input": path,
            "error": f"{type(e).__name__}: {e}",
            "traceback": traceback.format_exc(),
        }


def _tokenize(index: int, path: str, task: TokenizeTask, out: Path, name: str) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    t0, cpu0 = time.perf_counter(), time.process_time()
    stats = Stats()
    schema = pq.read_schema(path)
    needed = [task.text_column, "id", *(s.column for s in task.selectors)]
    columns = [c for c in dict.fromkeys(needed) if c in schema.names]
    table = pq.read_table(path, columns=columns)
    n = table.num_rows
    if task.text_column not in table.column_names:
        raise ValueError(f"{path}: no {task.text_column!r} column; columns: {', '.join(schema.names)}")

    with stats.timed("select"):
        mask, drops = selection_mask(table, task.selectors, source=path)
        sel = table.filter(mask)
        st = stats.stage("select")
        st.docs_in, st.docs_out = n, sel.num_rows
        for reason, count in drops.items():
            st.drops[reason] += count

    texts = sel.column(task.text_column).to_pylist()
    ids = sel.column("id").to_pylist() if "id" in sel.column_names else [None] * len(texts)
    enc = _encoder(task)
    eod_id = enc.hf.token_to_id(task.eod_token)
    dtype = dtype_for_vocab(enc.hf.get_vocab_size())
    kept_ids: list[Any] = []
    arrays: list[np.ndarray] = []
    with stats.timed("tokenize"):
        st = stats.stage("tokenize")
        good: list[str] = []
        for doc_id, text in zip(ids, texts, strict=True):
            st.docs_in += 1
            if not isinstance(text, str):
                st.drops["null_text"] += 1
            elif not text:
                st.drops["empty_text"] += 1
            else:
                nbytes = len(text.encode("utf-8"))
                st.bytes_in += nbytes
                st.bytes_out += nbytes
                st.docs_out += 1
                good.append(text)
                kept_ids.append(doc_id)
        for i in range(0, len(good), BATCH_DOCS):
            arrays += [np.asarray(ids, dtype=dtype) for ids in enc.encode_batch(good[i : i + BATCH_DOCS])]
    info = write_shard(out / name, arrays, eod_id, dtype)
    ids_path = out / f"{name}.ids.parquet"
    tmp_ids = out / f".{name}.ids.parquet.tmp-{os.getpid()}"
    pq.write_table(
        pa.table({"id": pa.array(kept_ids, type=pa.string()), "tokens": [len(a) + 1 for a in arrays]}),
        tmp_ids,
        compression="zstd",
    )
    os.replace(tmp_ids, ids_path)
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - cpu0
    summary = {
        "status": "done",
        "part": name,
        "input": str(path),
        "input_sha256": sha256_file(path),
        "input_metadata": _refinery_metadata(schema),
        "documents": info["documents"],
        "tokens": info["tokens"],
        "bin": f"{name}.bin",
        "idx": f"{name}.idx",
        "ids": ids_path.name,
        "bin_sha256": info["bin_sha256"],
        "idx_sha256": info["idx_sha256"],
        "bin_bytes": info["bin_bytes"],
        "dtype": str(dtype),
        "encoder": enc.backend,
        "seconds": round(seconds, 6),
        # CPU time of this process: per-core throughput that a busy, shared machine does not skew.
        "cpu_seconds": round(cpu_seconds, 6),
        "tokenize_seconds": round(stats.stage("tokenize").seconds, 6),
        "stats": stats.to_dict(),
    }
    # The marker is written last: a part without it is redone from scratch.
    atomic_write_json(out / "done" / f"{name}.json", summary)
    return summary


def _refinery_metadata(schema: Any) -> Any:
    """The `refinery` schema metadata an earlier stage left (config fingerprint, input WARC)."""
    raw = (schema.metadata or {}).get(b"refinery")
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")
