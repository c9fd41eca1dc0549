"""Tokens/s per core: our `tokenize` (Spark job, and its per-file core alone) vs datatrove's DocumentTokenizer.

Same documents, same tokenizer.json, one core each (Spark `local[1]`, datatrove 1 task / 1 worker,
TOKENIZERS_PARALLELISM=false so neither uses the Rust thread pool). There is no large corpus in
../shared, so the documents are the real `extract` output (default out/demo/extract, what `make
demo` writes) repeated `--repeat` times into `--files` Parquet files, with fresh ids (said in the
output). One run each; "wall" includes reading Parquet and writing shards, and for Spark its start.

    .venv/bin/python bench/tokenize_throughput.py [--input out/demo/extract] [--tokenizer FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
import pyarrow.parquet as pq

from curation.tokenizer import TokenizerConfig, doc_parquet_files, load_tokenizer, train_tokenizer


def make_docs(src: str, out: Path, repeat: int, files: int) -> tuple[int, int]:
    texts = []
    for f in doc_parquet_files(src):
        texts += [t for t in pq.read_table(f, columns=["text"]).column("text").to_pylist() if t]
    rows = [t for _ in range(repeat) for t in texts]
    per = -(-len(rows) // files)
    out.mkdir(parents=True)
    for i in range(files):
        chunk = rows[i * per : (i + 1) * per]
        ids = [f"{i}-{j}" for j in range(len(chunk))]
        pq.write_table(pa.table({"id": ids, "text": chunk}), out / f"docs-{i:03d}.parquet")
    return len(rows), sum(len(t.encode()) for t in rows)


def bench_core(docs: Path, tok, out: Path) -> tuple[float, int]:
    from curation.tokenize import TokenizeTask, tokenize_file

    (out / "done").mkdir(parents=True)
    task = TokenizeTask(
        source="b",
        out_dir=str(out),
        tokenizer_json=Path(tok.path).read_text(),
        tokenizer_sha256=tok.sha256,
        eod_token=tok.eod_token,
    )
    t0 = time.perf_counter()
    tokens = sum(
        tokenize_file(i, str(f), task)["tokens"] for i, f in enumerate(sorted(docs.glob("*.parquet")))
    )
    return time.perf_counter() - t0, tokens


def bench_spark(docs: Path, tok_path: str, out: Path) -> tuple[float, float, int]:
    from curation.job import get_spark, run_tokenize

    get_spark("local[1]", "bench-tokenize", {"spark.ui.enabled": "false"})
    t0 = time.perf_counter()
    res = run_tokenize(str(docs), tok_path, str(out), source="b", master="local[1]")
    wall = time.perf_counter() - t0
    assert res.ok and res.manifest
    busy = sum(json.loads(p.read_text())["seconds"] for p in (out / "shards" / "b" / "done").glob("*.json"))
    return wall, busy, res.manifest["tokens"]


def bench_datatrove(docs: Path, tok, out: Path) -> tuple[float, int]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.tokens import DocumentTokenizer

    ex = LocalPipelineExecutor(
        pipeline=[
            ParquetReader(str(docs), text_key="text", id_key="id"),
            DocumentTokenizer(
                str(out / "dt"),
                tokenizer_name_or_path=tok.path,
                eos_token=tok.eod_token,
                shuffle_documents=False,
                batch_size=10000,
            ),
        ],
        tasks=1,
        workers=1,
        logging_dir=str(out / "logs"),
    )
    t0 = time.perf_counter()
    ex.run()
    wall = time.perf_counter() - t0
    total = sum(p.stat().st_size for p in (out / "dt").glob("*.ds")) // 2  # uint16 tokens
    return wall, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default="out/demo/extract")
    ap.add_argument("--tokenizer", default=None, help="tokenizer.json (default: train a 32k one on --input)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--files", type=int, default=4)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-tokenize-"))
    tok_path = args.tokenizer or str(
        train_tokenizer(args.input, tmp / "tok", TokenizerConfig(vocab_size=32768))
    )
    tok = load_tokenizer(tok_path)
    n_docs, n_bytes = make_docs(args.input, tmp / "docs", args.repeat, args.files)
    print(
        f"documents: {n_docs:,} ({n_bytes / 1e6:.1f} MB), the real docs of {args.input} x{args.repeat}; "
        f"tokenizer vocab {tok.vocab_size}, sha {tok.sha256[:12]}"
    )
    rows = []
    secs, tokens = bench_core(tmp / "docs", tok, tmp / "core")
    rows.append(("ours: tokenize_file (no Spark), 1 core", secs, tokens))
    wall, busy, tokens_s = bench_spark(tmp / "docs", tok_path, tmp / "spark")
    rows.append(("ours: Spark job local[1], wall incl. scheduling", wall, tokens_s))
    rows.append(("ours: Spark job local[1], task time", busy, tokens_s))
    secs, tokens_d = bench_datatrove(tmp / "docs", tok, tmp / "datatrove")
    rows.append(("datatrove DocumentTokenizer, 1 task/1 worker", secs, tokens_d))
    print(f"\n{'pipeline':<50} {'seconds':>8} {'tokens':>12} {'tokens/s/core':>14}")
    for name, s, t in rows:
        print(f"{name:<50} {s:>8.2f} {t:>12,} {t / s:>14,.0f}")
    print(f"\n(outputs under {tmp}; tokens: ours count EOD per document, datatrove its EOS per document)")


if __name__ == "__main__":
    main()
