"""Shard cache and store errors say where, and what cannot pass is not retried (issue 44 item 7).

Real shards (testkit/corpus.py) on moto's S3 server (testkit/s3.py), read through tokens/shard_cache.py.
Checked, each as a class:
- a full disk under the cache (a real size-limited tmpfs, the kernel's own ENOSPC) is raised at once,
  naming the folder, data.shard_cache_dir and data.shard_cache_bytes, wherever the write fails, with no
  temporary file left;
- `core.storage.download` raises a permanent failure (a missing key or bucket, NoSuchKey; a local
  destination that cannot be written) at once with its type kept, and still retries one that may pass (a
  refused connection); the cache reports a missing key as the shard the manifest lists but the store lacks;
- a `bin_bytes` no shard can have is a manifest error naming the field, not blamed on the cache bound.
"""

from __future__ import annotations

import errno
import json
import socket
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

import core.storage
from core.storage import download
from mixtures.recipe import Recipe, RecipeError
from mixtures.sampler import MixtureSampler
from testkit.corpus import build_two_sources, two_source_recipe
from testkit.range_server import serving
from testkit.s3 import upload_tree
from testkit.tiers import refused
from tokens.shard_cache import Remote, ShardCache, ShardCacheError, ShardMissingError, open_cached_shards


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    return build_two_sources(tmp_path_factory.mktemp("src"))


@pytest.fixture()
def on_s3(sources, s3_bucket) -> dict[str, str]:
    out = {}
    for name, folder in sources.items():
        out[name] = f"{s3_bucket}/shards/{name}"
        upload_tree(folder, out[name])
    return out


@pytest.fixture()
def sleeps(monkeypatch) -> list[float]:
    """download()'s backoff sleeps, recorded instead of slept: one per retry."""
    got: list[float] = []
    # core.storage's own `time` only: the servers' threads keep the real one
    monkeypatch.setattr(core.storage, "time", SimpleNamespace(sleep=got.append))
    return got


def _files(folder: Path) -> list[dict]:
    return json.loads((folder / "manifest.json").read_text())["files"]


@pytest.fixture
def small_disk(tmp_path):
    """A real 32 KiB filesystem (tmpfs with a size limit): the largest .bin (~64 KB) does not fit it."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32k", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if (
        res.returncode != 0
    ):  # the platform cannot give this fault: skip, or under CI=true fail (testkit/tiers.py)
        refused(f"cannot mount a size-limited tmpfs here (needs CAP_SYS_ADMIN): {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.faults
@pytest.mark.parametrize("how", ["fetch", "read"])
def test_a_full_cache_disk_names_the_folder_and_keys_at_once(sources, on_s3, small_disk, sleeps, how):
    """`fetch`: the file asked for directly; `read`: a document of an opened shard, as the sampler (and so
    the trainer, mid-run) reads it. The bound (1 GB) allows the file: only the disk is full."""
    cache = ShardCache(small_disk / "cache", 10**9)
    files = _files(sources["web"])
    big = max(files, key=lambda f: f["bin_bytes"])
    assert big["bin_bytes"] > 32 * 1024
    shards = open_cached_shards(cache, on_s3["web"], [big])  # its index fits
    with pytest.raises(ShardCacheError) as e:
        if how == "fetch":
            cache.fetch(shards[0].remote)
        else:
            shards[0][0]
    msg = str(e.value)
    assert e.value.errno == errno.ENOSPC
    assert f"shard cache {cache.root} (data.shard_cache_dir): no space left on its disk for" in msg
    assert f"{on_s3['web']}/{big['bin']} ({big['bin_bytes']:,} bytes)" in msg
    assert "data.shard_cache_bytes = 1,000,000,000" in msg
    assert sleeps == []  # a retry fills the same disk
    assert not [p.name for p in cache.root.iterdir() if ".tmp-" in p.name or p.name.endswith(".bin")]


def test_a_cache_folder_that_is_a_file_is_named(sources, on_s3, tmp_path):
    (tmp_path / "cache").write_text("")
    cache = ShardCache(tmp_path / "cache", 10**9)
    with pytest.raises(
        ShardCacheError, match=rf"shard cache {tmp_path}/cache \(data\.shard_cache_dir\): cannot use"
    ):
        open_cached_shards(cache, on_s3["web"], _files(sources["web"]))


def test_a_missing_key_is_named_and_not_retried(sources, on_s3, tmp_path, sleeps):
    f = _files(sources["web"])[0]
    cache = ShardCache(tmp_path / "cache", 10**9)
    remote = Remote(f"{on_s3['web']}/part-99999.bin", f["bin_sha256"], f["bin_bytes"], "bin")
    with pytest.raises(
        ShardMissingError, match=r"/part-99999\.bin: listed in manifest\.json but not on the store"
    ):
        cache.fetch(remote)
    assert sleeps == [] and cache.stats.downloads == 0
    assert [p.name for p in cache.root.iterdir()] == [".locks"]  # no temporary file left


@pytest.mark.parametrize(
    "where", ["missing key", "missing bucket", "local folder missing", "http 404", "http 410"]
)
def test_download_raises_a_permanent_failure_at_once(on_s3, tmp_path, sleeps, where):
    uri, local = f"{on_s3['web']}/manifest.json", tmp_path / "out"
    (tmp_path / "www").mkdir()
    with serving(tmp_path / "www", fail_every=1, fail_status=410) as gone, serving(tmp_path / "www") as www:
        if where == "missing key":
            uri = f"{on_s3['web']}/no-such-key"
        elif where == "missing bucket":
            uri = "s3://no-such-bucket-refinery/x"
        elif where == "local folder missing":
            local = tmp_path / "missing" / "out"
        else:
            uri = f"{www.url if where == 'http 404' else gone.url}no-such.warc.gz"
        with pytest.raises(FileNotFoundError) as e:
            download(uri, local, retries=3)
    assert sleeps == [] and "not retried" in str(e.value) and uri in str(e.value)


@pytest.mark.parametrize("where", ["connection refused", "http 503"])
def test_download_retries_a_failure_that_may_pass(tmp_path, sleeps, where):
    with socket.socket() as s:  # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "x.warc.gz").write_bytes(b"x" * 100)
    with serving(tmp_path / "www", fail_every=1, fail_status=503) as busy:
        url = f"http://127.0.0.1:{port}/" if where == "connection refused" else busy.url
        with pytest.raises(OSError, match="failed after 3 attempts"):
            download(f"{url}x.warc.gz", tmp_path / "x", retries=3)
    assert sleeps == [2, 4]


@pytest.mark.parametrize("bin_bytes", [10**15, 2**40, "+2"])
def test_an_impossible_bin_bytes_is_a_manifest_error_not_the_cache_bound(sources, on_s3, tmp_path, bin_bytes):
    import s3fs

    m = json.loads((sources["web"] / "manifest.json").read_text())
    i = max(range(len(m["files"])), key=lambda k: m["files"][k]["bin_bytes"])
    m["files"][i]["bin_bytes"] = m["files"][i]["bin_bytes"] + 2 if bin_bytes == "+2" else bin_bytes
    s3fs.S3FileSystem().pipe_file(
        f"{on_s3['web']}/manifest.json".removeprefix("s3://"), json.dumps(m).encode()
    )
    recipe = Recipe.from_dict(two_source_recipe(on_s3), source="t")
    with pytest.raises(RecipeError) as e:
        MixtureSampler(recipe, 64, shard_cache=ShardCache(tmp_path / "cache", 10**6))
    assert f"manifest.json: files[{i}].bin_bytes " in str(e.value)
    assert "shard_cache" not in str(e.value)
