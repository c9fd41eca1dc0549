"""Shards on S3 (moto's real server, testkit/s3.py) train exactly as the same folder on disk.

The two real sources of tests/mixtures/test_sampler.py (testkit/corpus.py through the tokenize job's own
per-file function) are uploaded as they are; the recipe names their `s3://` folders. Checked: the stream
and the held-out rows of 2 ranks equal the local ones, byte for byte, with 2 ranks sharing one node cache
(each file downloaded once on the node); a second sampler on the same cache downloads nothing; a bound
that holds about two shards evicts and changes nothing; a byte changed on S3 is refused naming the shard;
`plan` and the recipe check read the manifests on S3.
"""

from __future__ import annotations

import json
import threading

import pytest

from core.errors import ConfigError
from mixtures.plan import make_plan
from mixtures.recipe import Recipe, RecipeError
from mixtures.sampler import MixtureSampler
from mixtures.validate import check_sources
from testkit.corpus import build_two_sources, two_source_recipe
from testkit.s3 import upload_tree
from tokens.shard_cache import ShardCache, ShardIntegrityError

SEQ = 64
HELDOUT = 3


@pytest.fixture(scope="module")
def local_sources(tmp_path_factory):
    return build_two_sources(tmp_path_factory.mktemp("mix"))


@pytest.fixture()
def s3_sources(local_sources, s3_bucket):
    """The same folders uploaded to a fresh bucket: name -> s3:// URI."""
    out = {}
    for name, folder in local_sources.items():
        uri = f"{s3_bucket}/shards/{name}"
        upload_tree(folder, uri)
        out[name] = uri
    return out


def _recipe(sources) -> Recipe:
    """test_sampler.py's two-phase recipe over these folders (local paths or s3:// URIs)."""
    return Recipe.from_dict(two_source_recipe(sources), source="test")


def _stream(sampler):
    return [(s.index, s.source, s.phase, s.tokens.tobytes(), s.doc_starts.tobytes()) for s in sampler]


def _run(recipe, rank, cache=None):
    sampler = MixtureSampler(recipe, SEQ, rank, 2, heldout_sequences=HELDOUT, shard_cache=cache)
    heldout = {k: v.tobytes() for k, v in sampler.heldout().items()}
    return _stream(sampler), heldout


def _files(sources) -> int:
    """.bin + .idx files the recipe's manifests list (what one node downloads at most once)."""
    return sum(2 * len(json.loads((p / "manifest.json").read_text())["files"]) for p in sources.values())


def _cached_bytes(cache: ShardCache) -> int:
    return sum(p.stat().st_size for p in cache.root.iterdir() if p.is_file() and not p.name.startswith("."))


def test_two_ranks_on_s3_equal_local_and_share_one_download(local_sources, s3_sources, tmp_path):
    local = [_run(_recipe(local_sources), r) for r in (0, 1)]
    assert len(local[0][0]) == len(local[1][0]) == 100
    # Two ranks of one node at the same time, each its own cache object (as two processes) on one folder.
    caches = [ShardCache(tmp_path / "node", 10**9) for _ in range(2)]
    remote: list = [None, None]

    def rank(r):
        remote[r] = _run(_recipe(s3_sources), r, caches[r])

    threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert remote == local  # every token, document start, source, phase and held-out row
    n_files = _files(local_sources)
    downloads = sum(c.stats.downloads for c in caches)
    cached = [p for p in (tmp_path / "node").iterdir() if p.is_file()]
    # each file once on the node: as many downloads as files in the cache, every file the rows needed
    # (all but an empty shard's .bin, which holds nothing to read)
    assert downloads == len(cached) >= n_files - 1, (n_files, [c.stats for c in caches])
    assert all(c.stats.mismatches == c.stats.evictions == 0 for c in caches)

    # A second run on the node: everything is already there and verified, nothing is fetched again.
    again = ShardCache(tmp_path / "node", 10**9)
    assert _run(_recipe(s3_sources), 1, again) == local[1]
    # every index, and the .bins rank 1's rows need (not necessarily all of them), found in place
    assert again.stats.downloads == 0 and again.stats.hits > n_files // 2


def test_bound_evicts_and_the_stream_is_unchanged(local_sources, s3_sources, tmp_path):
    sizes = [
        f["bin_bytes"]
        for p in local_sources.values()
        for f in json.loads((p / "manifest.json").read_text())["files"]
    ]
    bound = max(sizes) + 4096  # the largest .bin and the indexes (a few KiB): never two .bins at once
    assert sorted(sizes)[-2] > 4096  # so a second non-empty .bin does not fit beside the largest
    cache = ShardCache(tmp_path / "small", bound)
    assert _run(_recipe(s3_sources), 0, cache) == _run(_recipe(local_sources), 0)
    assert cache.stats.evictions > 0 and cache.stats.over_bound == 0
    assert _cached_bytes(cache) <= bound

    with pytest.raises(ConfigError, match=r"data\.shard_cache_bytes: .* smaller than the shard s3://.*\.bin"):
        MixtureSampler(_recipe(s3_sources), SEQ, shard_cache=ShardCache(tmp_path / "tiny", max(sizes) - 1))


def test_a_changed_byte_on_s3_is_refused_naming_the_shard(local_sources, s3_sources, tmp_path):
    import s3fs

    manifest = json.loads((local_sources["web"] / "manifest.json").read_text())
    part = max(manifest["files"], key=lambda f: f["bin_bytes"])["bin"]
    key = f"{s3_sources['web']}/{part}".removeprefix("s3://")
    fs = s3fs.S3FileSystem()
    data = bytearray(fs.cat_file(key))
    data[len(data) // 2] ^= 0x01  # one bit of one token: same size, so the recipe check cannot see it
    fs.pipe_file(key, bytes(data))
    s3fs.S3FileSystem.clear_instance_cache()

    recipe = _recipe(s3_sources)
    check_sources(recipe)  # sizes match: only the sha256 finds it, when the shard is fetched
    cache = ShardCache(tmp_path / "c", 10**9)
    with pytest.raises(
        ShardIntegrityError, match=rf"s3://.*/web/{part}: its sha256 is .* manifest\.json records"
    ):
        _run(recipe, 0, cache)
    assert cache.stats.mismatches == 2  # downloaded once more before giving up
    # nothing of it stays: no temporary download, no file under the manifest's sha256
    assert not [p.name for p in (tmp_path / "c").iterdir() if ".tmp-" in p.name or p.name.endswith(".bin")]


def test_plan_and_recipe_check_read_manifests_on_s3(local_sources, s3_sources):
    plan, want = make_plan(_recipe(s3_sources), SEQ), make_plan(_recipe(local_sources), SEQ)
    for name in local_sources:
        assert plan.sources[name].available == want.sources[name].available
        assert plan.sources[name].exact and plan.sources[name].drawn == want.sources[name].drawn
    # with a held-out split the plan reads the shards' indexes (through the shard cache) for the pool
    plan, want = make_plan(_recipe(s3_sources), SEQ, HELDOUT), make_plan(_recipe(local_sources), SEQ, HELDOUT)
    for name in local_sources:
        assert plan.sources[name].draw == want.sources[name].draw
        assert plan.sources[name].draw.pool < plan.sources[name].available

    import s3fs

    manifest = json.loads((local_sources["multi"] / "manifest.json").read_text())
    s3fs.S3FileSystem().rm_file(f"{s3_sources['multi']}/{manifest['files'][0]['bin']}".removeprefix("s3://"))
    with pytest.raises(
        RecipeError, match=r"s3://.*/multi/part-\d+\.bin is listed in manifest\.json but missing"
    ):
        check_sources(_recipe(s3_sources))
