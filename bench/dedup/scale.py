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
local mode) and of the Python workers together (sampled every 0.2 s over the process tree). Ours runs
as a user runs it (`python -m dedup run`, its own process tree), and per stage (cut by the job's
progress lines): seconds, CPU seconds of the whole tree, peak RSS per role, and from Spark's event log
the shuffle bytes written and the bytes spilled to disk. The JVM's RSS only grows (its heap is not
given back), so a stage's JVM peak is at most the heap so far.

Sizes run in order (`--docs 1000000 3000000 10000000`); the input is written one file at a time, so
the builder's memory does not grow with n. datatrove and our MinHash-only job run at `--compare-at`.

Also signature throughput per core (one process, no Spark): our normalize + compiled shingle +
signature kernel (one call per batch, as the job runs it) vs datasketch's MinHash.update_batch on the
same shingle strings (datasketch hashes each with sha1); our numpy reference path is shown too.

    .venv/bin/python -m bench.dedup.scale --docs 1000000 3000000 10000000 [--compare-at 1000000] [--cores 2]
    .venv/bin/python -m bench.dedup.scale --docs 1000000 --work W --datatrove-from W/scale_cmp.log  # ours again
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

B, R = 9, 13


def build_docs(n: int, out: Path, files: int, seed: int = 0) -> dict:
    """Write the n documents as `files` Parquet files, one file at a time (memory flat in n).

    A copy's text is rebuilt from what made its source (sentence starts; the source's own source and
    a per-document edit seed), so nothing but four ints and a source index per document is kept.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from testkit.neardup import edit, real_documents, vocabulary

    docs = real_documents()
    sents = [s for d in docs for s in re.split(r"(?<=[.!?])\s+", d.replace("\n", " ")) if len(s.split()) >= 4]
    rng = np.random.default_rng(seed)
    vocab = vocabulary(docs)
    starts = rng.integers(0, len(sents) - 3, size=(n, 4), dtype=np.int32)
    r = rng.random(n)
    src = (rng.random(n) * np.arange(n)).astype(np.int64)  # a uniformly drawn earlier document
    kind = np.zeros(n, np.int8)  # 0 original, 1 near copy (1% of words edited), 2 exact copy
    kind[100:][r[100:] < 0.07] = 2
    kind[100:][r[100:] < 0.05] = 1

    def text_of(i: int) -> str:
        if kind[i] == 0:
            return "\n".join(" ".join(sents[s : s + 3]) for s in starts[i])
        base = text_of(int(src[i]))
        return base if kind[i] == 2 else edit(base, 0.01, random.Random(seed * 1_000_003 + i), vocab)

    out.mkdir(parents=True, exist_ok=True)
    per = (n + files - 1) // files
    nbytes = 0
    for f in range(files):
        lo, hi = f * per, min(n, (f + 1) * per)
        texts = [text_of(i) for i in range(lo, hi)]
        nbytes += sum(len(t.encode()) for t in texts)
        ids = [f"doc{i:08d}" for i in range(lo, hi)]
        pq.write_table(pa.table({"id": ids, "text": texts}), out / f"part-{f:04d}.parquet")
    return {
        "docs": n,
        "sentences": len(sents),
        "bytes": nbytes,
        "near": int((kind == 1).sum()),
        "exact": int((kind == 2).sum()),
    }


class TreeRss:
    """Peak RSS per role over a process tree (python driver, java, python workers), sampled every
    0.2 s, with the timeline kept so that peaks can be cut per stage afterwards."""

    ROLES = ("driver", "jvm", "workers")

    def __init__(self, root_pid: int) -> None:
        import psutil

        self.root = psutil.Process(root_pid)
        self.samples: list[tuple[float, dict[str, int]]] = []
        self.cpu: list[float] = []  # CPU seconds of the tree so far at each sample
        self._cpu_by_pid: dict[int, float] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import psutil

        while not self._stop.wait(0.2):
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                continue
            cur = dict.fromkeys(self.ROLES, 0)
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    name = p.name()
                    t = p.cpu_times()
                except psutil.Error:
                    continue
                # per process, so that a Python worker that exits keeps the CPU it was last seen with
                self._cpu_by_pid[p.pid] = t.user + t.system
                role = "driver" if p.pid == self.root.pid else "jvm" if "java" in name else "workers"
                cur[role] += rss
            self.samples.append((time.perf_counter(), cur))
            self.cpu.append(sum(self._cpu_by_pid.values()))

    def peak(self, t0: float = float("-inf"), t1: float = float("inf")) -> dict[str, int]:
        """Peak per role (and of their sum) over the samples taken between t0 and t1."""
        out = dict.fromkeys((*self.ROLES, "total"), 0)
        for t, cur in self.samples:
            if t0 <= t <= t1:
                for k, v in cur.items():
                    out[k] = max(out[k], v)
                out["total"] = max(out["total"], sum(cur.values()))
        return out

    def cpu_s(self, t0: float, t1: float) -> float:
        """CPU seconds the tree spent between t0 and t1 (from the samples nearest inside)."""
        inside = [c for (t, _), c in zip(self.samples, self.cpu) if t0 <= t <= t1]
        return max(0.0, inside[-1] - inside[0]) if len(inside) > 1 else 0.0

    def __enter__(self) -> TreeRss:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


_STAGE_DONE = re.compile(r"^\[dedup\] (\w+): ([0-9.]+) s")


def run_ours(inp: Path, work: Path, cores: int, full: bool, docs: int, nbytes: int) -> dict:
    """`python -m dedup run` as a user runs it, in its own process tree, watched per stage.

    A stage's window is [the moment its progress line arrives - its seconds, that moment]; "start"
    is everything before the first stage (the JVM and the input listing), "finish" everything after
    the last (removed_ids/, the sample, stats.json).
    """
    out = work / ("ours-full" if full else "ours-minhash")
    shutil.rmtree(out, ignore_errors=True)
    # 0.1% of the set: a line in more documents than that is boilerplate. By construction every
    # 3-sentence run recurs in ~n*4/27k documents (147 at 1M, 1,470 at 10M), so a fixed count
    # would strip real prose at 10M and not at 1M; this keeps the lines stage's work alike per size.
    partitions = max(4 * cores, -(-nbytes // (128 << 20)))  # ~128 MB of text per shuffle partition
    sets = [
        f"minhash.bands={B}",
        f"minhash.rows={R}",
        f"lines.max_docs={max(10, docs // 1000)}",
        f"output.partitions={partitions}",
    ]
    if not full:
        sets += ["exact.enabled=false", "url.enabled=false", "lines.enabled=false"]
    cmd = [sys.executable, "-m", "dedup", "run", "--input", str(inp), "--output", str(out)]
    cmd += [a for kv in sets for a in ("--set", kv)]
    cmd += ["--master", f"local[{cores}]", "--spark-conf", "spark.driver.memory=4g"]
    cmd += ["--spark-conf", "spark.ui.enabled=false"]
    # Spark's event log: per-task shuffle bytes written and disk spills, cut per stage below.
    events = work / f"events-{out.name}"
    shutil.rmtree(events, ignore_errors=True)
    events.mkdir()
    cmd += [
        "--spark-conf",
        "spark.eventLog.enabled=true",
        "--spark-conf",
        f"spark.eventLog.dir={events.as_uri()}",
        "--spark-conf",
        "spark.eventLog.compress=false",
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stages: list[tuple[str, float, float]] = []  # (name, start, end)
    epochs: list[float] = []  # each stage's end, time.time(): the event log's clock
    tail: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            tail.append(line)
            del tail[:-60]
            if m := _STAGE_DONE.match(line):
                now, wall_now = time.perf_counter(), time.time()
                stages.append((m.group(1), now - float(m.group(2)), now))
                epochs.append(wall_now)

    with TreeRss(proc.pid) as rss:
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        proc.wait()
        reader.join()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError("dedup failed:\n" + "".join(tail))
    info = json.loads((out / "stats.json").read_text())
    windows = [("start", t0, stages[0][1] if stages else t0 + wall), *stages]
    windows.append(("finish", stages[-1][2] if stages else t0, t0 + wall))
    disk = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    # the event log's tasks, by finish time, into the same windows (start .. each stage's end .. finish)
    ends = [*epochs, float("inf")]
    task_sums = _task_metrics(events, ends)
    shutil.rmtree(events, ignore_errors=True)
    return {
        "pipeline": "ours, Spark: " + ("all stages" if full else "MinHash + components"),
        "docs": docs,
        "wall_s": wall,
        "docs_out": info["docs_out"],
        "removed": info["docs_in"] - info["docs_out"],
        "rss": rss.peak(),
        "stage_s": {k: v.get("seconds") for k, v in info["stage_info"].items()},
        "stage_rss": [
            {"stage": name, "seconds": e - s, "cpu_s": rss.cpu_s(s, e), **rss.peak(s, e), **task_sums[i]}
            for i, (name, s, e) in enumerate(windows)
        ],
        "output_bytes": disk,
    }


def _task_metrics(events: Path, ends: list[float]) -> list[dict[str, float]]:
    """Sums of Spark task metrics per window of run_ours: `start` (none: the few listing tasks count
    with the first stage), then each stage up to its end in `ends` (time.time()), then `finish`
    (the last end is +inf). Shuffle bytes written and bytes spilled to disk."""
    keys = ("shuffle_write_bytes", "spill_disk_bytes")
    sums = [dict.fromkeys(keys, 0.0) for _ in ends]
    for log in sorted(p for p in events.rglob("*") if p.is_file()):  # v2 logs: a folder of rolled files
        with open(log) as fh:
            for line in fh:
                if '"SparkListenerTaskEnd"' not in line:
                    continue
                ev = json.loads(line)
                m = ev.get("Task Metrics") or {}
                t = ev["Task Info"]["Finish Time"] / 1000
                w = sums[next(k for k, e in enumerate(ends) if t <= e)]
                w["shuffle_write_bytes"] += (m.get("Shuffle Write Metrics") or {}).get(
                    "Shuffle Bytes Written", 0
                )
                w["spill_disk_bytes"] += m.get("Disk Bytes Spilled", 0)
    return [dict.fromkeys(keys, 0.0), *sums]


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
    lines: list[str] = []
    with TreeRss(proc.pid) as rss:
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
        reader.start()
        proc.wait()
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
        "rss": rss.peak(),
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


def build(work: Path, docs: int, files: int) -> tuple[Path, dict]:
    """The input for `docs` documents under work/input-<docs> (built once, reused with --work)."""
    inp = work / f"input-{docs}"
    if not (inp / "_built.json").exists():
        shutil.rmtree(inp, ignore_errors=True)
        t0 = time.perf_counter()
        built = build_docs(docs, inp, files)
        built["build_s"] = time.perf_counter() - t0
        (inp / "_built.json").write_text(json.dumps(built))
    built = json.loads((inp / "_built.json").read_text())
    print(f"documents: {built}", flush=True)
    return inp, built


def print_runs(runs: list[dict], cores: int) -> None:
    gb = 1 << 30
    hdr = (
        f"{'docs':>11} {'pipeline':<42} {'wall s':>8} {'docs/s/core':>11} {'kept':>11} "
        f"{'driver GB':>9} {'JVM GB':>7} {'workers GB':>10}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in runs:
        print(
            f"{r['docs']:>11,} {r['pipeline']:<42} {r['wall_s']:>8.0f} {r['docs'] / r['wall_s'] / cores:>11.0f} "
            f"{r['docs_out']:>11,} {r['rss']['driver'] / gb:>9.2f} {r['rss']['jvm'] / gb:>7.2f} "
            f"{r['rss']['workers'] / gb:>10.2f}"
        )


def print_stages(runs: list[dict]) -> None:
    """Per stage of our runs: seconds and peak RSS of the driver, the JVM and the Python workers."""
    gb = 1 << 30
    hdr = (
        f"{'docs':>11} {'stage':<10} {'seconds':>8} {'CPU s':>10} {'shuffle GB':>10} {'spill GB':>8} "
        f"{'driver GB':>9} {'JVM GB':>7} {'workers GB':>10} {'total GB':>8}"
    )
    for r in runs:
        if "stage_rss" not in r:
            continue
        print(
            f"\n{r['pipeline']}, {r['docs']:,} documents (output {r['output_bytes'] / 1e9:.2f} GB on disk):"
        )
        print(hdr)
        for st in r["stage_rss"]:
            print(
                f"{r['docs']:>11,} {st['stage']:<10} {st['seconds']:>8.1f} {st['cpu_s']:>10.1f} "
                f"{st['shuffle_write_bytes'] / 1e9:>10.2f} {st['spill_disk_bytes'] / 1e9:>8.2f} {st['driver'] / gb:>9.2f} "
                f"{st['jvm'] / gb:>7.2f} {st['workers'] / gb:>10.2f} {st['total'] / gb:>8.2f}"
            )


def print_per_billion(full: list[dict], cores: int) -> dict[str, dict[str, float]]:
    """Per stage, per billion documents: a least-squares line through the measured sizes (cost = a +
    b * docs), read at 1e9. Arithmetic on the measured slope, not a measurement: it assumes the
    stage stays linear (every stage is a scan, a hash shuffle or a sort) and that a cluster's cores
    are as busy as these 2.

    core-hours: the process tree's CPU seconds (JVM and Python workers); wall x cores: the stage's
    seconds times the cores it held, idle ones included (what a cluster bills);
    shuffle TB: what the stage's tasks wrote to shuffle files (compressed, as it lies on the workers'
    local disks); spill TB: bytes sorted or aggregated past memory onto that disk.
    """
    xs = np.array([r["docs"] for r in full], float)
    names = [st["stage"] for st in full[-1]["stage_rss"]]
    out: dict[str, dict[str, float]] = {}
    print(
        f"\nper billion documents (a line through {len(full)} sizes, read at 1e9: arithmetic, not measured):"
    )
    hdr = f"{'stage':<10} {'core-hours':>10} {'core-hours, wall x cores':>24} {'shuffle TB':>10} {'spill TB':>8} {'peak RSS GB':>11}"
    print(hdr)
    for name in names:
        rows = [next((st for st in r["stage_rss"] if st["stage"] == name), None) for r in full]
        if any(st is None for st in rows):
            continue

        def at_billion(key: str, rows: list[dict] = rows) -> float:
            slope = np.polyfit(xs, np.array([st[key] for st in rows], float), 1)[0]
            return max(0.0, float(slope)) * 1e9

        row = {
            "core_hours": at_billion("cpu_s") / 3600,
            "core_hours_busy": at_billion("seconds") * cores / 3600,
            "shuffle_tb": at_billion("shuffle_write_bytes") / 1e12,
            "spill_tb": at_billion("spill_disk_bytes") / 1e12,
            "peak_rss_gb": max(st["total"] for st in rows) / (1 << 30),
        }
        out[name] = row
        print(
            f"{name:<10} {row['core_hours']:>10.0f} {row['core_hours_busy']:>24.0f} {row['shuffle_tb']:>10.2f} "
            f"{row['spill_tb']:>8.2f} {row['peak_rss_gb']:>11.2f}"
        )
    total = {
        k: sum(r[k] for r in out.values())
        for k in ("core_hours", "core_hours_busy", "shuffle_tb", "spill_tb")
    }
    print(
        f"{'total':<10} {total['core_hours']:>10.0f} {total['core_hours_busy']:>24.0f} "
        f"{total['shuffle_tb']:>10.2f} {total['spill_tb']:>8.2f}"
    )
    out["total"] = total
    return out


def report(runs: list[dict], cores: int) -> dict:
    """Every table of a finished run; returns its figures (the datatrove ratio, driver growth, per billion)."""
    out: dict = {}
    print()
    print_runs(runs, cores)
    for r in runs:
        print(
            f"  {r['docs']:,} {r['pipeline']}: "
            + ", ".join(f"{k} {v:.0f} s" for k, v in r["stage_s"].items() if v is not None)
        )
    print_stages(runs)
    ours_mh = next((r for r in runs if r["pipeline"].endswith("components")), None)
    dt = next((r for r in runs if r["pipeline"].startswith("datatrove")), None)
    if ours_mh and dt:
        out["speedup_vs_datatrove"] = dt["wall_s"] / ours_mh["wall_s"]
        print(
            f"\nMinHash dedup at {ours_mh['docs']:,} documents: {out['speedup_vs_datatrove']:.1f}x datatrove's wall time"
        )
    full = [r for r in runs if r["pipeline"].endswith("all stages")]
    if len(full) > 1:
        lo, hi = full[0], full[-1]
        out["driver_peak_ratio"] = ratio = hi["rss"]["driver"] / lo["rss"]["driver"]
        print(
            f"driver peak RSS, all stages: {lo['rss']['driver'] / (1 << 30):.2f} GB at {lo['docs']:,} -> "
            f"{hi['rss']['driver'] / (1 << 30):.2f} GB at {hi['docs']:,} documents ({ratio:.2f}x for "
            f"{hi['docs'] / lo['docs']:.0f}x the documents)"
        )
        out["per_billion"] = print_per_billion(full, cores)
    return out


def _last_summary(log: str) -> dict:
    """The JSON summary line a run of this bench printed last in `log`."""
    return json.loads([ln for ln in Path(log).read_text().splitlines() if ln.startswith("{")][-1])


def earlier_run(log: str, pipeline: str, docs: int) -> dict:
    """The run of `pipeline` (a prefix of its name) at `docs` documents from an earlier log, marked so."""
    for r in _last_summary(log)["runs"]:
        if r["pipeline"].startswith(pipeline) and r["docs"] == docs:
            return {**r, "pipeline": f"{r['pipeline']} (earlier run, {Path(log).name})"}
    raise SystemExit(f"{log}: no {pipeline} run at {docs:,} documents")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--docs", type=int, nargs="+", default=[1_000_000], help="one or more sizes, run in order"
    )
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--docs-per-file", type=int, default=125_000, help="input files hold this many documents")
    ap.add_argument("--work", default=None, help="work folder (default: a temporary one, removed after)")
    ap.add_argument(
        "--compare-at",
        type=int,
        default=1_000_000,
        help="the size at which datatrove and our MinHash-only job run too (0: none)",
    )
    ap.add_argument(
        "--datatrove-from",
        metavar="LOG",
        help="take datatrove's run at --compare-at from an earlier log of this bench (same input, same "
        "machine; ~43 min at 1M on 2 cores) instead of running it again; its row says so",
    )
    ap.add_argument("--skip-full", action="store_true", help="skip our all-stages run")
    ap.add_argument("--keep-outputs", action="store_true", help="keep each run's output (default: removed)")
    ap.add_argument(
        "--report",
        metavar="LOG",
        nargs="+",
        help="print the tables again from earlier runs' logs (their last lines)",
    )
    args = ap.parse_args()
    if args.report:
        report([r for log in args.report for r in _last_summary(log)["runs"]], args.cores)
        return 0
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="dedup-scale-"))
    work.mkdir(parents=True, exist_ok=True)

    print("\nsignature throughput, one core (5-gram shingles, 128 permutations, same normalization):")
    sig = signature_throughput()
    for r in sig:
        print(f"  {r['signer']:<44} {r['docs_per_s']:>9.0f} docs/s  {r['MB_per_s']:>6.2f} MB/s")
    print(
        f"  speed-up from text: {sig[1]['cpu_s'] / sig[0]['cpu_s']:.1f}x; "
        f"from normalized text (shingles + signature only): {sig[3]['cpu_s'] / sig[2]['cpu_s']:.1f}x",
        flush=True,
    )

    runs: list[dict] = []
    sizes: dict[int, dict] = {}
    for n in args.docs:
        files = max(1, -(-n // args.docs_per_file))
        inp, built = build(work, n, files)
        sizes[n] = built
        todo = []
        if n == args.compare_at:
            todo += ["minhash", "datatrove"]
        if not args.skip_full:
            todo.append("full")
        for what in todo:
            if what == "datatrove" and args.datatrove_from:
                r = earlier_run(args.datatrove_from, "datatrove", n)
            elif what == "datatrove":
                r = run_datatrove(inp, work, args.cores, files)
                r["docs"] = n
            else:
                r = run_ours(inp, work, args.cores, what == "full", n, built["bytes"])
            runs.append(r)
            print(f"{r['docs']:,} documents, {r['pipeline']}: {r['wall_s']:.0f} s", flush=True)
            if not args.keep_outputs:
                for sub in ("ours-full", "ours-minhash", "datatrove"):
                    shutil.rmtree(work / sub, ignore_errors=True)

    print(f"\nlocal[{args.cores}] / {args.cores} datatrove workers; inputs:")
    for n, b in sizes.items():
        print(
            f"  {n:>11,} documents, {b['bytes'] / 1e9:.2f} GB of text, {b['near']:,} near and {b['exact']:,} exact copies planted"
        )
    summary: dict = {"sizes": sizes, "runs": runs, **report(runs, args.cores)}
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
