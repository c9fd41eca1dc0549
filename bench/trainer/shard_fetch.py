"""Training from shards on S3: a node cache with prefetch vs ranged reads of single documents, vs local.

    PYTHONPATH=. .venv/bin/python bench/trainer/shard_fetch.py [--tokens 400000] [--latency-ms 0 5 20]

Shards are built from the tests' real corpus (testkit/corpus.py, two sources) and uploaded to moto's S3
server on 127.0.0.1 (testkit/s3.py). For each way of reading, one MixtureSampler (rank 0 of 1, seq_len
256) over the whole recipe: time to first batch (building the sampler, the indexes, and the first row)
and tokens/s delivered over the whole stream (the recipe repeats the small sources: allow_over_cap).

    local     the shards on disk (tokens.shards.IndexedShard memmaps)
    cache     s3:// through tokens/shard_cache.py: every .idx at start, each .bin fetched whole once,
              verified, prefetched ahead of the sampler on a background thread (the code path)
    ranged    s3:// with each document read by one ranged GET (bytes of that document only); the
              indexes through the same cache. Kept here only, for the comparison.

moto on 127.0.0.1 has no network latency, so with --latency-ms 0 a request costs only moto's own work;
--latency-ms N adds N ms to every request of both S3 rows (a sleep before each GET: a crude model of a
real store's ~5-30 ms first-byte latency, not of its bandwidth), which shows the trend a real store gives:
ranged reads pay it per document, the cache per shard, and prefetch hides most of that behind reading.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

SEQ = 256


def recipe(sources: dict[str, str], tokens: int):
    from mixtures.recipe import Recipe

    data = {
        "name": "bench",
        "seed": 7,
        "total_tokens": tokens,
        "max_epochs": 10**6,  # a small corpus read many times over: the reading is what is measured
        "sources": {k: {"shards": v} for k, v in sources.items()},
        "phases": [{"name": "main", "share": 1.0, "weights": {"web": 3, "multi": 1}}],
    }
    return Recipe.from_dict(data, source="bench")


def use_ranged_reads(sampler, latency: float) -> None:
    """Swap each remote stream's shards for ranged-read ones (same indexes) and stop its prefetcher."""
    from core.storage import ObjectStore
    from tokens.shard_cache import CachedShard

    class RangedShard(CachedShard):
        def __getitem__(self, i: int) -> np.ndarray:
            size = self.dtype.itemsize
            start = int(self.pointers[i])
            end = start + int(self.lengths[i]) * size
            store = ObjectStore(self.remote.uri)
            time.sleep(latency)
            data = store.fs.cat_file(store._key(self.remote.uri), start=start, end=end)
            return np.frombuffer(data, dtype=self.dtype)

    for st in sampler.streams.values():
        st.prefetcher.close()
        st.prefetcher = None
        for sh in st.shards:
            sh.__class__ = RangedShard


def measure(rec, kind: str, cache_dir: Path | None, latency: float) -> tuple[float, float, int]:
    """(seconds to the first row, tokens/s over the stream, sha of the stream's tokens)."""
    import hashlib

    from mixtures.sampler import MixtureSampler
    from tokens.shard_cache import ShardCache

    t0 = time.perf_counter()
    cache = ShardCache(cache_dir, 10**10) if cache_dir else None
    sampler = MixtureSampler(rec, SEQ, allow_over_cap=True, shard_cache=cache)
    if kind == "ranged":
        use_ranged_reads(sampler, latency)
    h = hashlib.sha256()
    first = None
    n = 0
    for s in sampler:
        if first is None:
            first = time.perf_counter() - t0
        h.update(s.tokens.tobytes())
        n += len(s.tokens)
    total = time.perf_counter() - t0
    return first or 0.0, n / total, int.from_bytes(h.digest()[:4], "little")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=400_000, help="tokens the sampler delivers per row")
    ap.add_argument("--latency-ms", type=float, nargs="*", default=[0.0, 5.0], help="added per S3 request")
    args = ap.parse_args()

    import tokens.shard_cache as shard_cache
    from core.storage import download
    from testkit.corpus import build_two_sources
    from testkit.s3 import S3Server, s3_env, upload_tree

    server = S3Server()
    server.start()
    with tempfile.TemporaryDirectory() as tmp, s3_env(server):
        import s3fs

        root = Path(tmp)
        local = build_two_sources(root)
        s3fs.S3FileSystem().mkdir("bench")
        remote = {}
        for name, folder in local.items():
            remote[name] = f"s3://bench/shards/{name}"
            upload_tree(folder, remote[name])
        print(f"{args.tokens:,} tokens of rows of {SEQ}; shards: {sum(1 for _ in root.rglob('*.bin'))} files")
        print(f"{'latency/req':>12} {'reading':>8} {'first batch s':>14} {'tokens/s':>12} {'stream':>10}")
        for lat_ms in args.latency_ms:
            lat = lat_ms / 1000

            def slow_download(uri, local_path, retries=1, _lat=lat):
                time.sleep(_lat)
                download(uri, local_path, retries)

            shard_cache.download = slow_download  # the cache's one request per file pays the latency too
            rows = [("local", recipe({k: str(v) for k, v in local.items()}, args.tokens), None)]
            for kind in ("cache", "ranged"):
                rows.append((kind, recipe(remote, args.tokens), root / f"cache-{kind}-{lat_ms}"))
            for kind, rec, cache_dir in rows:
                first, rate, digest = measure(rec, kind, cache_dir, lat)
                print(f"{lat_ms:>10.1f}ms {kind:>8} {first:>14.3f} {rate:>12,.0f} {digest:>10x}")
    server.stop()


if __name__ == "__main__":
    main()
