"""The document row: the contract every later stage (dedup, scoring, tokenize) reads.

A stage adds columns and never drops one it did not add. `id` is stable across reruns and
machines: a hash of the WARC file's base name and the record's byte offset in it.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

DOC_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("warc_file", pa.string(), nullable=False),
        pa.field("warc_offset", pa.int64(), nullable=False),
        pa.field("warc_record_id", pa.string()),
        pa.field("crawl", pa.string()),
        pa.field("fetch_time", pa.timestamp("us", tz="UTC")),
        pa.field("source_format", pa.string()),  # "warc" (HTML extracted here) or "wet" (text given)
        pa.field("text", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("lang", pa.string()),
        pa.field("lang_score", pa.float32()),
    ]
)

REJECTED_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("url", pa.string()),
        pa.field("warc_file", pa.string()),
        pa.field("warc_offset", pa.int64()),
        pa.field("stage", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("detail", pa.string()),
        pa.field("lang", pa.string()),
        pa.field("lang_score", pa.float32()),
        # First characters of the text (or of the HTML when extraction never produced text).
        pa.field("snippet", pa.string()),
    ]
)


def doc_id(warc_file_name: str, offset: int) -> str:
    """Stable document id: sha1 of '<WARC base name>:<record offset>', 32 hex chars."""
    base = warc_file_name.rsplit("/", 1)[-1]
    return hashlib.sha1(f"{base}:{offset}".encode()).hexdigest()[:32]
