"""Near-duplicates planted in real Leipzig text, and the MinHash stage's view of them, for the
per-language MinHash tests (tests/dedup/test_minhash_languages.py, test_minhash_per_language.py).

`planted`: documents of 10 consecutive real sentences of one language, the first half each with a
copy that has 1% of the language's own words deleted, inserted or replaced (testkit.neardup).
`found_pairs`: the pairs that share a band key, signed by the minhash stage's own batch function.
`dedup_removed`: the whole dedup job over rows written as one Parquet file: {removed id: reason}.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.spark import SparkOptions
from curation.filters.segment import segmenter_for
from dedup.config import DedupJobConfig
from dedup.job import run_dedup
from dedup.minhash import MinHashConfig
from dedup.normalize import normalize_bytes
from dedup.stages.base import DocBatch
from dedup.stages.minhash import _signer
from testkit.neardup import candidate_pairs, edit_segmented, leipzig_documents

FW2_BANDS = {"bands": 14, "rows": 8}  # FineWeb-2's (and FineWeb's) LSH: 112 hashes


def planted(iso: str, code: str, data_dir: Path, limit: int = 100) -> tuple[list[str], list[tuple[int, int]]]:
    """(documents, planted pairs (original, copy)) of Leipzig language `iso`, edited with the
    segmenter of `code`: the first half of the documents get a copy, appended after them."""
    docs = leipzig_documents(iso, sentences=10, limit=limit, data_dir=data_dir)
    seg = segmenter_for(code)
    rng = random.Random(7)
    half = len(docs) // 2
    vocab = [w for d in docs[half:] for w in seg.words(d) if w.isalpha()]
    rows, pairs = list(docs), []
    for i in range(half):
        pairs.append((i, len(rows)))
        rows.append(edit_segmented(docs[i], seg, 0.01, rng, vocab))
    return rows, pairs


def found_pairs(
    docs: list[str], lang: str | list[str | None] | None, words: str = "normalized", **minhash: Any
) -> set[tuple[int, int]]:
    """Pairs that share a band key, signed by the minhash stage (`lang`: one code for every
    document, or one per document; `minhash`: more MinHashConfig fields)."""
    langs = list(lang) if isinstance(lang, list) else [lang] * len(docs)
    batch = pa.RecordBatch.from_pydict({"text": docs, "lang": pa.array(langs, pa.string())})
    norms = [normalize_bytes(t) for t in docs]
    out = _signer(MinHashConfig(words=words, **minhash), False)(
        DocBatch(batch, docs, [None] * len(docs), norms)
    )
    return candidate_pairs([None if b is None else np.array(b) for b in out["_bands"].to_pylist()])


def dedup_removed(rows: list[dict[str, Any]], folder: Path, minhash: dict[str, Any]) -> dict[str, str]:
    """The dedup job (lines off: its min_words counts whitespace words, which a Chinese page has a
    handful of) over `rows` in folder/in, output in folder/out: {removed id: reason}."""
    (folder / "in").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "in" / "part-0.parquet")
    cfg = {"output": {"partitions": 2}, "lines": {"enabled": False}, "minhash": minhash}
    out = folder / "out"
    run_dedup(str(folder / "in"), str(out), DedupJobConfig.from_dict(cfg), spark=SparkOptions(progress=False))
    return {r["id"]: r["reason"] for r in pq.read_table(out / "removed_ids").to_pylist()}
