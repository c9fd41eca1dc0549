"""Stage `prepare`: the input with a row number and every hash the later stages work on.

The only pass over the text until `lines`: per document the normalized-text hash (exact), the
normalized URL (url), the MinHash band keys and optionally the signature (minhash), the UTF-8 size,
and a reason for text that cannot be compared at all (empty_text, no_words; removed by `ids`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from core.stats import Stats
from dedup.minhash import MinHashConfig, MinHasher
from dedup.normalize import hash64, normalize_bytes, normalize_url
from dedup.stages.base import Flow, Stage, StageContext
from dedup.stages.common import ADDED_COLUMNS, with_fields

FEATURES = (
    "_reason string, _text_hash long, _url_norm string, _n_shingles int, "
    "_bands array<long>, _sig binary, _bytes long"
)


class Prepare(Stage):
    name = "prepare"
    counters = ("minhash_too_short",)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from pyspark.sql import functions as F

        mh = ctx.cfg.minhash
        df = ctx.spark.read.parquet(*ctx.files)
        # A rerun over dedup output replaces its cluster columns; private (_) columns are ours.
        df = df.drop(*[c for c in df.columns if c in ADDED_COLUMNS or c.startswith("_")])
        input_columns = df.columns
        df = df.withColumn("_row", F.monotonically_increasing_id())
        out = df.mapInArrow(
            _features_fn(mh, keep_sig=mh.verify == "signature"), with_fields(df.schema, FEATURES)
        )
        ctx.write(out, "prepare")
        agg = (
            ctx.read("prepare")
            .agg(
                F.count(F.lit(1)).alias("docs"),
                F.sum("_bytes").alias("bytes"),
                F.sum(F.when(F.col("_reason").isNull() & F.col("_bands").isNull(), 1).otherwise(0)).alias(
                    "short"
                ),
            )
            .first()
        )
        return {
            "docs": int(agg["docs"]),
            "bytes": int(agg["bytes"] or 0),
            "minhash_too_short": int(agg["short"] or 0),
            "columns": input_columns,
        }

    def add_to_stats(self, stats: Stats, info: dict[str, Any], flow: Flow) -> None:
        flow.docs, flow.bytes = info["docs"], info["bytes"]  # every document enters the funnel here
        super().add_to_stats(stats, info, flow)


def _features_fn(mh_config: MinHashConfig, keep_sig: bool):
    """mapInArrow function: the input columns plus the hashes every later stage works on."""

    def run(batches):
        hasher = MinHasher(mh_config)
        for batch in batches:
            texts = batch.column("text").to_pylist()
            urls = batch.column("url").to_pylist() if "url" in batch.schema.names else [None] * len(texts)
            reason, thash, unorm, nbytes, norms = [], [], [], [], []
            for text, url in zip(texts, urls):
                unorm.append(normalize_url(url))
                nbytes.append(len(text.encode("utf-8", "surrogatepass")) if text else 0)
                norm = normalize_bytes(text) if text and not text.isspace() else None
                if norm is None:
                    reason.append("empty_text")
                elif not norm:
                    reason.append("no_words")  # only punctuation/symbols: nothing to compare
                else:
                    reason.append(None)
                thash.append(hash64(norm) if norm else None)
                norms.append(norm or b"")
            # One compiled call per batch; a text with no shingle (count 0) gets no bands.
            sig_mat, counts = hasher.sign_batch(norms)
            keys = hasher.band_keys_batch(sig_mat)
            has = counts > 0
            nsh = counts.tolist()
            bands = [k if ok else None for k, ok in zip(keys.tolist(), has.tolist())]
            sigs = [s.tobytes() if ok and keep_sig else None for s, ok in zip(sig_mat, has.tolist())]
            cols = dict(zip(batch.schema.names, batch.columns))
            cols.update(
                _reason=pa.array(reason, pa.string()),
                _text_hash=pa.array(thash, pa.int64()),
                _url_norm=pa.array(unorm, pa.string()),
                _n_shingles=pa.array(nsh, pa.int32()),
                _bands=pa.array(bands, pa.list_(pa.int64())),
                _sig=pa.array(sigs, pa.binary()),
                _bytes=pa.array(nbytes, pa.int64()),
            )
            yield pa.RecordBatch.from_pydict(cols)

    return run
