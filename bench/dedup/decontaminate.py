"""Decontamination speed: documents/s/core against 10,000 evaluation passages, kernel alone and on Spark.

Evaluation passages: the paragraphs of the shared Wikipedia articles and WikiText-2 (those of at
least 13 normalized words), the longest cut in two until there are `--passages` (10,000), as two
sets (wikipedia, wikitext). Documents: every page of the shared WARCs, extracted (resiliparse, no
language or quality filter: `warc_pages`), repeated to `--docs`.

Reported, one core, CPU time (no Spark):
- the matching kernel as the stage runs it (dedup.decontam.find_hits: compiled n-gram hashing, a
  bitmap of the keys' top bits that turns most clean n-grams away, and a lookup in the sorted keys
  through a bucket table on their top bits), from normalized text (what `prepare` hands it), the
  same without the bitmap, and from raw text (normalization included);
- the pieces done with numpy instead: the same n-gram hashes (dedup.minhash.shingle_hashes, one
  document a call), and the lookup alone over precomputed hashes, 1,000 documents a call, with
  np.searchsorted on the sorted keys or np.isin;
- the naive way: xxhash of each n-gram string and a Python set (as datatrove's filter does with a
  dict), on a tenth of the documents;
- the kernel against bigger tables (random keys added to the real ones: hashes are uniform, so the
  cost of a lookup depends only on the table's size), with the table's memory: where a Bloom
  filter would start to pay.
Then through Spark local[CORES]: the dedup job with only prepare, ids, decontaminate and output,
and the same job without decontamination, at a quarter of the documents and at all of them;
each run twice, the faster kept; docs/s/core = documents / (wall seconds x cores), and documents /
CPU seconds of the driver, JVM and Python workers (what other jobs on the machine disturb least),
for each job, for what decontamination adds, and per document between the two sizes (its fixed
cost left out).
Finally the hits (if any) of the passages in the pages, listed.

    .venv/bin/python -m bench.dedup.decontaminate [--docs 40000] [--passages 10000] [--cores 2] [--skip-kernel] [--skip-spark]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import Clock, table

N = 13


def warc_pages(warc_dir: Path, root: Path) -> dict[str, tuple[str, str]]:
    """id -> (url, text) of every page of the shared WARCs (quirks and WET fragments included),
    extracted with resiliparse and no language, quality, PII or URL filter: every page there is."""
    from curation.config import ExtractJobConfig
    from testkit.kept_sets import all_warcs, kept_run

    no_filter = {k: None for k in ("gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")}
    cfg = ExtractJobConfig.from_dict(
        {
            "extract": {"extractors": ["resiliparse"], "cascade": False},
            "langid": {"languages": [], "threshold": 0.0},
            "filters": no_filter,
            "pii": {"enabled": False},
            "url_filter": {"enabled": False},
        }
    )
    run = kept_run(all_warcs(warc_dir), cfg, root)
    return {i: (run.urls[i] or "", t) for i, t in sorted(run.texts.items())}


def eval_passages(data_dir: Path, n: int) -> dict[str, list[str]]:
    """{set: passages}: Wikipedia and WikiText paragraphs of >= N words, cut to make `n` in all."""
    from dedup.normalize import normalize_text

    q = data_dir / "quality"
    wiki = [
        json.loads(line)["text"] for line in (q / "enwiki_sample_articles.jsonl").read_text().splitlines()
    ]
    sets = {
        "wikipedia": [p for a in wiki for p in a.split("\n")],
        "wikitext": (q / "wikitext-2-valid.txt").read_text().splitlines(),
    }
    sets = {k: [p.strip() for p in v if len(normalize_text(p).split()) >= N] for k, v in sets.items()}
    while sum(map(len, sets.values())) < n:  # cut the longest passage in two
        name, i = max(
            ((k, i) for k, v in sets.items() for i in range(len(v))), key=lambda x: len(sets[x[0]][x[1]])
        )
        words = sets[name][i].split()
        sets[name][i : i + 1] = [" ".join(words[: len(words) // 2]), " ".join(words[len(words) // 2 :])]
    total = sum(map(len, sets.values()))
    keep = {k: round(n * len(v) / total) for k, v in sets.items()}
    keep["wikitext"] = n - keep["wikipedia"]
    return {k: v[: keep[k]] for k, v in sets.items()}


def cpu_rate(fn, docs: int) -> dict:
    t0 = time.process_time()
    fn()
    cpu = time.process_time() - t0
    return {"docs_per_s": docs / cpu, "us_per_doc": 1e6 * cpu / docs}


def kernel_rows(table, texts: list[str], norms: list[bytes], passages: list[str]) -> list[tuple[str, dict]]:
    import xxhash

    from dedup.decontam import find_hits
    from dedup.minhash import shingle_hashes
    from dedup.normalize import normalize_bytes, normalize_text

    keys = table.keys
    key_set = set()  # the naive index: xxhash of each n-gram string of the passages
    for p in passages:
        w = normalize_text(p).split()
        key_set.update(xxhash.xxh64_intdigest(" ".join(w[i : i + N])) for i in range(len(w) - N + 1))
    batches = [slice(i, i + 1000) for i in range(0, len(norms), 1000)]
    find_hits(table, norms[:10])  # compile, or load the cached machine code

    def kernel(t=table):
        for b in batches:
            find_hits(t, norms[b])

    every_bit = dataclasses.replace(table, bitmap=np.full_like(table.bitmap, np.iinfo(np.uint64).max))

    def from_text():
        for b in batches:
            find_hits(table, [normalize_bytes(t) for t in texts[b]])

    few = texts[: max(1, len(texts) // 10)]
    hashed = [shingle_hashes(n, N) for n in norms[:5000]]  # the kernel's hashes, by the numpy reference
    batch_hashes = [np.concatenate(hashed[i : i + 1000]) for i in range(0, len(hashed), 1000)]

    def numpy_hashes():
        for n in norms[:5000]:
            shingle_hashes(n, N)

    def searchsorted():
        for h in batch_hashes:
            i = np.minimum(np.searchsorted(keys, h), keys.size - 1)
            np.flatnonzero(keys[i] == h)

    def isin():
        for h in batch_hashes:
            np.flatnonzero(np.isin(h, keys))

    def naive():
        for t in few:
            w = normalize_text(t).split()
            [1 for i in range(len(w) - N + 1) if xxhash.xxh64_intdigest(" ".join(w[i : i + N])) in key_set]

    return [
        ("kernel: n-gram hashes, bitmap, bucket lookup; normalized text", cpu_rate(kernel, len(norms))),
        ("kernel without the bitmap (every bit set)", cpu_rate(lambda: kernel(every_bit), len(norms))),
        ("kernel, from raw text (normalization included)", cpu_rate(from_text, len(texts))),
        ("numpy n-gram hashes alone (dedup.minhash.shingle_hashes)", cpu_rate(numpy_hashes, len(hashed))),
        ("lookup alone: np.searchsorted, 1,000 documents a call", cpu_rate(searchsorted, len(hashed))),
        ("lookup alone: np.isin, 1,000 documents a call", cpu_rate(isin, len(hashed))),
        ("naive: xxhash per n-gram string + Python set", cpu_rate(naive, len(few))),
    ]


def scaling_rows(table, norms: list[bytes]) -> list[tuple[str, dict]]:
    """The kernel against tables of 10^6 and 10^7 keys (the real keys plus random ones)."""
    from dedup.decontam import find_hits, make_table

    rng = np.random.default_rng(0)
    rows = []
    sample = norms[:5000]
    for size in (table.keys.size, 1_000_000, 10_000_000):
        extra = rng.integers(0, 2**63, size=max(0, size - table.keys.size), dtype=np.uint64) * np.uint64(2)
        t = make_table([table.keys, np.unique(extra)], N) if extra.size else table
        find_hits(t, sample[:10])
        r = cpu_rate(
            lambda t=t: [find_hits(t, sample[i : i + 1000]) for i in range(0, len(sample), 1000)], len(sample)
        )
        mb = t.nbytes / 2**20
        rows.append((f"{t.keys.size:>11,} n-grams, table {mb:,.0f} MiB", r))
    return rows


def spark_rows(texts: list[str], work: Path, cfg_sets: list[dict], cores: int) -> list[tuple[str, dict]]:
    """The job without and with decontamination, at a quarter of the documents and at all of them,
    each run twice (alternating), the faster kept: wall x cores and CPU seconds (driver, JVM and
    Python workers together; other jobs sharing the machine inflate walls, far less CPU time).
    Rows per size: the job without, with, and what decontamination adds; then what it adds per
    document between the two sizes, its fixed cost (a few small Spark jobs) left out."""
    sizes = (len(texts) // 4, len(texts))
    best: dict[tuple[int, bool], tuple[float, float]] = {}
    _run_job(texts[: sizes[0]], work / "warm-up", None, cores)  # JVM, workers, compiled kernels
    for n in sizes:
        for _ in range(2):
            for on in (False, True):
                wall, cpu, stages = _run_job(texts[:n], work / f"{n}", cfg_sets if on else None, cores)
                print(
                    f"  {n:,} documents, decontamination {'on' if on else 'off'}: {wall:.1f} s, {stages}",
                    flush=True,
                )
                old = best.get((n, on), (float("inf"), float("inf")))
                best[n, on] = (min(old[0], wall), min(old[1], cpu))
    rows = []
    for n in sizes:
        (w0, c0), (w1, c1) = best[n, False], best[n, True]
        rows.append((f"{n:,} documents, the job without (wall x {cores})", _rate(n, w0 * cores)))
        rows.append((f"{n:,} documents, the job without (CPU)", _rate(n, c0)))
        rows.append((f"{n:,} documents, the job with (wall x {cores})", _rate(n, w1 * cores)))
        rows.append((f"{n:,} documents, the job with (CPU)", _rate(n, c1)))
        rows.append((f"{n:,} documents, what decontamination adds (CPU)", _rate(n, c1 - c0)))
    (lo, hi), added = sizes, [best[n, True][1] - best[n, False][1] for n in sizes]
    rows.append(
        (f"added per document from {lo:,} to {hi:,} documents (CPU)", _rate(hi - lo, added[1] - added[0]))
    )
    return rows


def _run_job(texts: list[str], work: Path, sets: list[dict] | None, cores: int) -> tuple[float, float, str]:
    """Wall and CPU seconds of the dedup job with only prepare, ids, [decontaminate] and output, and
    its stages' seconds."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from core.spark import SparkOptions
    from dedup.config import DedupJobConfig
    from dedup.job import run_dedup

    inp = work / "docs"
    if not inp.exists():
        inp.mkdir(parents=True)
        per = -(-len(texts) // 4)
        for f in range(4):
            part = texts[f * per : (f + 1) * per]
            pq.write_table(
                pa.table({"id": [f"d{f}-{i:07d}" for i in range(len(part))], "text": part}),
                inp / f"{f}.parquet",
            )
    off = {"enabled": False}
    cfg = {"exact": off, "url": off, "cluster": off, "lines": off, "output": {"partitions": 2 * cores}}
    if sets:
        cfg["decontaminate"] = {"sets": sets}
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)
    conf = {"spark.driver.memory": "4g", "spark.ui.enabled": "false"}
    spark = SparkOptions(f"local[{cores}]", conf, progress=False)
    with Clock() as clock:  # this process and everything under it: Spark's JVM, its Python workers
        run_dedup(str(inp), str(out), DedupJobConfig.from_dict(cfg), spark=spark)
    wall, cpu = clock.wall, clock.cpu
    info = json.loads((out / "stats.json").read_text())["stage_info"]
    return wall, cpu, ", ".join(f"{k} {v['seconds']:.1f} s" for k, v in info.items())


def _rate(docs: int, core_seconds: float) -> dict:
    """docs/s/core from seconds of one core (a difference of two runs can come out at or below 0: nan)."""
    if core_seconds <= 0:
        return {"docs_per_s": float("nan"), "us_per_doc": float("nan")}
    return {"docs_per_s": docs / core_seconds, "us_per_doc": 1e6 * core_seconds / docs}


def print_table(title: str, rows: list[tuple[str, dict]]) -> None:
    print(f"\n{title}")
    print(
        table(
            ["", "docs/s/core", "µs/doc"],
            [[k, f"{r['docs_per_s']:,.0f}", f"{r['us_per_doc']:.1f}"] for k, r in rows],
        )
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=40_000)
    ap.add_argument("--passages", type=int, default=10_000)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument("--skip-kernel", action="store_true", help="only the Spark runs (and the hits)")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from dedup.config import DecontaminateConfig
    from dedup.decontam import build_index, find_hits
    from dedup.normalize import normalize_bytes
    from testkit.shared_data import shared_data_dir

    data = shared_data_dir()
    work = Path(tempfile.mkdtemp(prefix="decontaminate-bench-"))
    try:
        pages = warc_pages(data / "warc", work / "pages")
        page_texts = [t for _, t in pages.values()]
        texts = (page_texts * (args.docs // len(page_texts) + 1))[: args.docs]
        sets = eval_passages(data, args.passages)
        cfg_sets = []
        for name, passages in sets.items():
            path = work / f"{name}.jsonl"
            path.write_text("".join(json.dumps({"text": p}) + "\n" for p in passages))
            cfg_sets.append({"name": name, "paths": [str(path)]})
        t0 = time.perf_counter()
        index = build_index(DecontaminateConfig(sets=cfg_sets))
        build_s = time.perf_counter() - t0
        t = index.table
        words = sum(len(x.split()) for x in page_texts)
        print(
            f"documents: {len(pages):,} shared WARC pages ({words / len(pages):,.0f} words each), repeated to {len(texts):,}"
        )
        for r in index.sets:
            print(f"set {r.name}: {r.passages:,} passages, {r.ngrams:,} distinct {N}-grams")
        table_mb = t.nbytes / 2**20
        print(f"index: {t.keys.size:,} n-grams, {table_mb:.1f} MiB broadcast, built in {build_s:.1f} s")

        if not args.skip_kernel:
            norms = [normalize_bytes(x) for x in texts]
            passages = [p for v in sets.values() for p in v]
            print_table("one core, CPU time, no Spark:", kernel_rows(t, texts, norms, passages))
            print_table(
                "the kernel against bigger tables (one core, from normalized text):", scaling_rows(t, norms)
            )
        if not args.skip_spark:
            print_table(f"through Spark local[{args.cores}]:", spark_rows(texts, work, cfg_sets, args.cores))

        hits = find_hits(t, [normalize_bytes(x) for x in page_texts])
        found = [
            (url, index.names[s], ex)
            for (url, _), h in zip(pages.values(), hits)
            if h
            for s, ex in zip(h.sets, h.examples)
        ]
        print(f"\nhits of the {args.passages:,} passages in the {len(pages):,} pages: {len(found)}")
        for url, name, ex in found:
            print(f"  {url}  {name}: {ex!r}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
