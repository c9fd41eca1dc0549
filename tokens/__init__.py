"""Refinery tokens: documents -> byte-level BPE tokenizer -> token shards that Megatron can read.

    python -m tokens train-tokenizer --input DOCS --output DIR [--config configs/tokenizer.yaml]
    python -m tokens tokenize --input DOCS --tokenizer DIR/tokenizer.json --output OUT --source NAME  (Spark)

Modules: `tokenizer` (the typed TokenizerConfig, BPE training, loading a tokenizer.json, and the
exact tiktoken fast path), `shards` (the Megatron MMIDIDX byte format, its reader, the manifest),
`job` (the per-file tokenize job on core's runner), `cli`. The package is named `tokens`, not
`tokenize`, so that nothing here shadows the standard library's `tokenize` module.
Nothing heavy is imported here: `tokenizers`, `tiktoken` and pyarrow load where they are used.
"""
