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

EVIDENCE_TYPE = pa.map_(pa.string(), pa.float64())
"""The `evidence` column of annotate mode's document row (curation/pipeline.py `doc_schema`, absent in
drop mode): `<stage>/<metric>` -> the value the stage measured on this document, for every rule it
judged (core/stage.py `evidence_key`: `filter:gopher_quality/stop_words` -> 5.0, `langid/lang_score`
-> 0.93). A document kept by every filter carries the values of the rules it passed; one annotated
as dropped carries those up to and including the rule that dropped it (its `drop_stage`), whose
threshold and comparison are in the rejected sample's row. Null when no stage measured anything."""

REJECTED_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("url", pa.string()),
        pa.field("warc_file", pa.string()),
        pa.field("warc_offset", pa.int64()),
        pa.field("stage", pa.string()),  # the funnel row that dropped it (`filter:gopher_quality`)
        pa.field("reason", pa.string()),  # the counted drop reason (`gopher_quality:gopher_short_doc`)
        pa.field("detail", pa.string()),  # prose, bounded (REJECTED_DETAIL_CHARS)
        pa.field("lang", pa.string()),
        pa.field("lang_score", pa.float32()),
        # First characters of the text (or of the HTML when extraction never produced text).
        pa.field("snippet", pa.string()),
        # The rule's evidence (core/stage.py Drop), null for a drop that is no comparison (a blocklist,
        # a parse error, a datatrove block): `value <op> threshold` held, e.g. metric "stop_words",
        # value 1, op "<", threshold 2: "stop words 1 < 2". `metric` is unique within its stage; the
        # same value on kept documents is annotate mode's `evidence["<stage>/<metric>"]`.
        pa.field("metric", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("threshold", pa.float64()),
        pa.field("op", pa.string()),  # "<", "<=", ">" or ">=" (core.stage.OPS)
        # The text the sample shows, as `snippet` but up to `output.rejected_text_chars` (PII
        # scrubbed like the snippet); null when that is 0 or there is nothing to show.
        pa.field("text", pa.string()),
        # The sample is a reservoir per (stage, reason, lang) cell and input unit: the
        # `output.rejected_per_reason` rows with the smallest `sample_key` (`sample_key(id)`, a hash of
        # the document id), so a rerun keeps the same rows and the k smallest keys per cell over all
        # units' files are the whole run's sample of k (a reader merges files without bias).
        pa.field("sample_key", pa.int64()),
    ]
)
"""Rejected parquet written before issue 46 lacks metric..sample_key: a reader takes the columns present."""

REJECTED_DETAIL_CHARS = 2000
"""`detail` and `metric` strings are cut here: a hostile URL's words must not make a row of megabytes."""


def sample_key(key: str) -> int:
    """The rejected sample's ordering key of a document id (or of `<warc_file>:<offset>` for a record
    that never became a document): the first 63 bits of its blake2b hash, deterministic across
    machines and runs."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()) >> 1


def doc_id(warc_file_name: str, offset: int) -> str:
    """Stable document id: sha1 of '<WARC base name>:<record offset>', 32 hex chars."""
    base = warc_file_name.rsplit("/", 1)[-1]
    return hashlib.sha1(f"{base}:{offset}".encode()).hexdigest()[:32]
