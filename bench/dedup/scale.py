"""Dedup at scale: our Spark job vs datatrove's 4-stage MinHash pipeline, same documents, one run.

Documents (built from the real text in ../shared/data, see testkit.neardup.real_documents): the
real documents are split into sentences (~60k); document i is 4 runs of 3 consecutive sentences,
each run starting at a random position (seeded), so documents read as real prose and two random
documents share almost no 5-gram. Then 5% of documents are replaced by lightly edited copies (1% of
words) of earlier ones and 2% by exact copies: planted near and exact duplicates.

Compared, in one run, on the same Parquet files:
- ours: `dedup.job.run_dedup` on Spark local[CORES], MinHash + components only (exact, URL and line
  dedup off, as datatrove's pipeline has none of them), then the full job (every stage);
- datatrove 0.10.1: MinhashDedupSignature -> MinhashDedupBuckets -> MinhashDedupCluster ->
  MinhashDedupFilter (+ ParquetWriter), LocalPipelineExecutor with CORES workers;
- both with 5-gram shingles and the same bands x rows (9 x 13: our default for threshold 0.8).
  The shingles are not byte-identical: datatrove tokenizes words with spaCy, we split normalized text.
Reported: wall time, docs/s per core, peak RSS of the driver (Python), of the JVM (driver+executor in
local mode) and of the Python workers together (sampled every 0.2 s over the process tree).

Also signature throughput per core (one process, no Spark): our normalize + compiled shingle +
signature kernel (one call per batch, as the job runs it) vs datasketch's MinHash.update_batch on the
same shingle strings (datasketch hashes each with sha1); our numpy reference path is shown too.

    .venv/bin/python bench/dedup/scale.py --docs 1000000 [--cores 2] [--skip-datatrove]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

B, R = 9, 13


def build_docs(n: int, out: Path, files: int, seed: int = 0) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from testkit.neardup import edit, real_documents, vocabulary

    docs = real_documents()
    sents = [s for d in docs for s in re.split(r"(?<=[.!?])\s+", d.replace("\n", " ")) if len(s.split()) >= 4]
    rng = np.random.default_rng(seed)
    prng = random.Random(seed)
    vocab = vocabulary(docs)
    starts = rng.integers(0, len(sents) - 3, size=(n, 4))
    texts: list[str] = []
    planted = {"near": 0, "exact": 0}
    for i in range(n):
        r = rng.random()
        if i > 100 and r < 0.05:
            texts.append(edit(texts[int(rng.integers(0, i))], 0.01, prng, vocab))
            planted["near"] += 1
        elif i > 100 and r < 0.07:
            texts.append(texts[int(rng.integers(0, i))])
            planted["exact"] += 1
        else:
            texts.append("\n".join(" ".join(sents[s : s + 3]) for s in starts[i]))
    out.mkdir(parents=True, exist_ok=True)
    per = (n + files - 1) // files
    for f in range(files):
        lo, hi = f * per, min(n, (f + 1) * per)
        ids = [f"doc{i:08d}" for i in range(lo, hi)]
        pq.write_table(pa.table({"id": ids, "text": texts[lo:hi]}), out / f"part-{f:03d}.parquet")
    return {
        "docs": n,
        "sentences": len(sents),
        "bytes": sum(len(t.encode()) for t in texts),
        **planted,
    }


class TreeRss:
    """Peak RSS per role over this process's tree: python driver, java, python workers."""

    def __init__(self, root_pid: int) -> None:
        import psutil

        self.root = psutil.Process(root_pid)
        self.peak = {"driver": 0, "jvm": 0, "workers": 0, "total": 0}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import psutil

        while not self._stop.wait(0.2):
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                continue
            cur = {"driver": 0, "jvm": 0, "workers": 0}
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    name = p.name()
                except psutil.Error:
                    continue
                if p.pid == self.root.pid:
                    cur["driver"] += rss
                elif "java" in name:
                    cur["jvm"] += rss
                else:
                    cur["workers"] += rss
            for k, v in cur.items():
                self.peak[k] = max(self.peak[k], v)
            self.peak["total"] = max(self.peak["total"], sum(cur.values()))

    def __enter__(self) -> TreeRss:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def run_ours(inp: Path, work: Path, cores: int, full: bool) -> dict:
    from core.spark import SparkOptions
    from dedup.config import DedupJobConfig
    from dedup.job import run_dedup

    off = {"enabled": False}
    # lines.max_docs 1000: a line in more than 0.1% of a 1M-document set is boilerplate. The default
    # (10) suits a few thousand documents; here every 3-sentence run of the ~27k-sentence pool recurs
    # in ~15 documents by construction, and the default would strip most documents bare.
    cfg = {
        "minhash": {"bands": B, "rows": R},
        "lines": {"max_docs": 1000},
        "output": {"partitions": 4 * cores},
    }
    if not full:
        cfg.update(exact=off, url=off, lines=off)
    out = work / ("ours-full" if full else "ours-minhash")
    shutil.rmtree(out, ignore_errors=True)
    conf = {"spark.driver.memory": "4g", "spark.ui.enabled": "false"}
    with TreeRss(os.getpid()) as rss:
        t0 = time.perf_counter()
        res = run_dedup(
            str(inp),
            str(out),
            DedupJobConfig.from_dict(cfg),
            spark=SparkOptions(f"local[{cores}]", conf, progress=False),
        )
        wall = time.perf_counter() - t0
    info = json.loads((out / "stats.json").read_text())
    return {
        "pipeline": "ours, Spark: " + ("all stages" if full else "MinHash + components"),
        "wall_s": wall,
        "docs_out": res.docs_out,
        "removed": res.docs_in - res.docs_out,
        "rss": rss.peak,
        "stage_s": {k: v.get("seconds") for k, v in info["stage_info"].items()},
    }


DATATROVE_SCRIPT = r"""
import sys, time, json
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupSignature, MinhashDedupBuckets,
    MinhashDedupCluster, MinhashDedupFilter)
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import ParquetWriter
from datatrove.utils.hashing import HashConfig

if __name__ == "__main__":
    inp, work, cores, files, b, r = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    cfg = MinhashConfig(n_grams=5, num_buckets=b, hashes_per_bucket=r, seed=1,
                        hash_config=HashConfig(precision=64, hash_fc="xxhash"))
    times = {}
    def reader():
        return ParquetReader(inp, glob_pattern="*.parquet", text_key="text", id_key="id")
    t = time.perf_counter()
    LocalPipelineExecutor(pipeline=[reader(), MinhashDedupSignature(f"{work}/sigs", config=cfg)],
                          tasks=files, workers=cores, logging_dir=f"{work}/logs/1").run()
    times["signatures"] = time.perf_counter() - t; t = time.perf_counter()
    LocalPipelineExecutor(pipeline=[MinhashDedupBuckets(f"{work}/sigs", f"{work}/buckets", config=cfg)],
                          tasks=cfg.num_buckets, workers=cores, logging_dir=f"{work}/logs/2").run()
    times["buckets"] = time.perf_counter() - t; t = time.perf_counter()
    LocalPipelineExecutor(pipeline=[MinhashDedupCluster(f"{work}/buckets", f"{work}/remove_ids", config=cfg)],
                          tasks=1, workers=1, logging_dir=f"{work}/logs/3").run()
    times["cluster"] = time.perf_counter() - t; t = time.perf_counter()
    LocalPipelineExecutor(pipeline=[reader(), MinhashDedupFilter(f"{work}/remove_ids"),
                                    ParquetWriter(f"{work}/out", compression="zstd")],
                          tasks=files, workers=cores, logging_dir=f"{work}/logs/4").run()
    times["filter"] = time.perf_counter() - t
    print("TIMES " + json.dumps(times))
"""


def run_datatrove(inp: Path, work: Path, cores: int, files: int) -> dict:
    import psutil
    import pyarrow.parquet as pq

    out = work / "datatrove"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    script = out / "run.py"
    script.write_text(DATATROVE_SCRIPT)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(script), str(inp), str(out), str(cores), str(files), str(B), str(R)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peak = {"driver": 0, "jvm": 0, "workers": 0, "total": 0}
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            procs = [root, *root.children(recursive=True)]
            drv = root.memory_info().rss
            wk = sum(p.memory_info().rss for p in procs[1:])
            peak["driver"] = max(peak["driver"], drv)
            peak["workers"] = max(peak["workers"], wk)
            peak["total"] = max(peak["total"], drv + wk)
        except psutil.Error:
            pass
        time.sleep(0.2)
    reader.join()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError("datatrove failed:\n" + "".join(lines[-40:]))
    times = json.loads(next(ln for ln in lines if ln.startswith("TIMES "))[6:])
    kept = sum(pq.read_metadata(f).num_rows for f in (out / "out").rglob("*.parquet"))
    return {
        "pipeline": "datatrove 0.10.1: 4-stage MinHash",
        "wall_s": wall,
        "docs_out": kept,
        "removed": None,
        "rss": peak,
        "stage_s": times,
    }


def signature_throughput(n_docs: int = 3000) -> list[dict]:
    from datasketch import MinHash

    from dedup.minhash import MinHashConfig, MinHasher, shingle_hashes, shingle_strings
    from dedup.normalize import normalize_bytes, normalize_text
    from testkit.neardup import real_documents

    docs = real_documents()[:n_docs]
    nbytes = sum(len(d.encode()) for d in docs)
    hasher = MinHasher(MinHashConfig(num_perm=128))
    normalize_text("warm up the table")

    def timed(fn) -> float:
        t0 = time.process_time()
        for d in docs:
            fn(d)
        return time.process_time() - t0

    def timed_batch(fn) -> float:
        t0 = time.process_time()
        fn(docs)
        return time.process_time() - t0

    hasher.sign_batch([normalize_bytes(d) for d in docs[:2]])  # compile (or load the cached kernel)

    def datasketch_sig(norm: str) -> None:
        m = MinHash(num_perm=128)
        m.update_batch([s.encode() for s in shingle_strings(norm, 5)])

    norms = {id(d): normalize_text(d) for d in docs}
    norm_bytes = [norms[id(d)].encode() for d in docs]
    # Ours as the job runs it: normalize each document, then one compiled call for the batch.
    runs = {
        "ours, from text": timed_batch(lambda ds: hasher.sign_batch([normalize_bytes(d) for d in ds])),
        "datasketch, from text": timed(lambda d: datasketch_sig(normalize_text(d))),
        "ours, from normalized text": timed_batch(lambda ds: hasher.sign_batch(norm_bytes)),
        "datasketch, from normalized text": timed(lambda d: datasketch_sig(norms[id(d)])),
        "ours numpy reference, from normalized text": timed(
            lambda d: hasher.signature(shingle_hashes(norms[id(d)], 5))
        ),
    }
    return [
        {"signer": k, "cpu_s": v, "docs_per_s": len(docs) / v, "MB_per_s": nbytes / v / 1e6}
        for k, v in runs.items()
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--work", default=None, help="work folder (default: a temporary one, removed after)")
    ap.add_argument("--skip-datatrove", action="store_true")
    ap.add_argument("--skip-full", action="store_true", help="skip our all-stages run")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="dedup-scale-"))
    inp = work / "input"
    t0 = time.perf_counter()
    if not (inp / "_built.json").exists():
        shutil.rmtree(inp, ignore_errors=True)
        built = build_docs(args.docs, inp, args.files)
        (inp / "_built.json").write_text(json.dumps(built))
    built = json.loads((inp / "_built.json").read_text())
    print(f"documents: {built} (built in {time.perf_counter() - t0:.0f} s)", flush=True)

    print("\nsignature throughput, one core (5-gram shingles, 128 permutations, same normalization):")
    sig = signature_throughput()
    for r in sig:
        print(f"  {r['signer']:<44} {r['docs_per_s']:>9.0f} docs/s  {r['MB_per_s']:>6.2f} MB/s")
    print(
        f"  speed-up from text: {sig[1]['cpu_s'] / sig[0]['cpu_s']:.1f}x; "
        f"from normalized text (shingles + signature only): {sig[3]['cpu_s'] / sig[2]['cpu_s']:.1f}x",
        flush=True,
    )

    runs = [run_ours(inp, work, args.cores, full=False)]
    print(f"ours (minhash) done: {runs[-1]['wall_s']:.0f} s", flush=True)
    if not args.skip_datatrove:
        runs.append(run_datatrove(inp, work, args.cores, args.files))
        print(f"datatrove done: {runs[-1]['wall_s']:.0f} s", flush=True)
    if not args.skip_full:
        runs.append(run_ours(inp, work, args.cores, full=True))
    gb = 1 << 30
    print(
        f"\n{built['docs']:,} documents, {built['bytes'] / 1e9:.2f} GB, local[{args.cores}] / {args.cores} workers"
    )
    hdr = f"{'pipeline':<42} {'wall s':>8} {'docs/s/core':>11} {'kept':>9} {'driver GB':>9} {'JVM GB':>7} {'workers GB':>10}"
    print(hdr)
    print("-" * len(hdr))
    for r in runs:
        print(
            f"{r['pipeline']:<42} {r['wall_s']:>8.0f} {built['docs'] / r['wall_s'] / args.cores:>11.0f} "
            f"{r['docs_out']:>9,} {r['rss']['driver'] / gb:>9.2f} {r['rss']['jvm'] / gb:>7.2f} "
            f"{r['rss']['workers'] / gb:>10.2f}"
        )
    for r in runs:
        print(
            f"  {r['pipeline']}: "
            + ", ".join(f"{k} {v:.0f} s" for k, v in r["stage_s"].items() if v is not None)
        )
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
