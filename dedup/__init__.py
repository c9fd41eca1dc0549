"""Dedup on Spark: exact, URL, MinHash LSH with distributed connected components, and line-level.

`python -m dedup run --input DIR --output DIR` reads documents (the curation `docs/` Parquet, or any
Parquet with `id` and `text`), and writes them back with `dup_cluster` and `dup_cluster_size` added.
"""
