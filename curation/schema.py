"""The document row: the contract every later stage (dedup, scoring, tokenize) reads.

A stage adds columns and never drops one it did not add. `id` is stable across reruns and
machines: a hash of the WARC file's base name and the record's byte offset in it.

`pii_counts` is a struct with one int32 field per PII type, not a map<string,int32>: Parquet
stores a struct as one plain int32 column per type (Spark reads `pii_counts.email` without
touching the others, and its statistics allow predicate pushdown), while a map is a repeated
key/value list that pyarrow's `to_pylist` returns as a list of tuples and Spark must explode to
filter on. The set of types is fixed by curation.pii.scrub, so the struct's flexibility cost is nil. A
field is null when its type was not scanned (disabled in the config) and 0 when it was scanned and
found nothing; the whole struct is null when the PII stage is off. `quality` is the probability of
the positive ("high quality") class from classifiers/, null when no model ran; thresholds on it
belong to mixture recipes.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

# Field order = curation.pii.scrub.PII_TYPES (tests check they agree; schema.py stays import-light).
PII_COUNT_FIELDS = ("secret", "card", "iban", "ssn", "email", "ip", "phone", "address")
PII_COUNTS_TYPE = pa.struct([pa.field(t, pa.int32()) for t in PII_COUNT_FIELDS])

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
        pa.field("pii_counts", PII_COUNTS_TYPE),  # replacements per PII type (curation/pii/scrub.py)
        pa.field("quality", pa.float32()),  # P(high quality) (classifiers/), null without a model
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
