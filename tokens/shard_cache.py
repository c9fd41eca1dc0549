"""A node-local cache of token shards that live on an object store, shared by the ranks of a node.

A recipe source whose `shards:` is `s3://…/shards/<source>` trains exactly as a local folder: the
sampler (mixtures/sampler.py) reads each shard's `.idx` at start (small: it holds the lengths the
stream's permutation needs) and a `.bin` when a document of it is first needed, both through this
cache, and fetches the `.bin`s the next documents need ahead of time on a background thread.

Why a whole-file cache and not ranged reads of single documents: bench/trainer/shard_fetch.py measured (0fec8f6; docs/trainer.md)
both against a local S3 server; a ranged read costs one request per document, so the sampler waits on
a round trip for every document, while a cached shard costs one request per shard and then memory
speed (numbers in docs/trainer.md).

The cache folder (`data.shard_cache_dir`, default `$TMPDIR/refinery-shards`) holds each file under its
manifest sha256 (`<sha256>.bin`, `<sha256>.idx`): a file gets that name only after its bytes were
hashed and matched (downloaded to a temporary name, hashed, `os.replace`d), so the name records the
verified sha and a cached file is never re-hashed; a file the manifest no longer lists is simply never
asked for again. A mismatch is downloaded once more (a torn transfer), then refused with an error
naming the shard (`ShardIntegrityError`).

Every name in the folder comes from a manifest's sha256, so `Remote` refuses one that is not 64
lowercase hex digits (tokens/manifest.py checks the whole manifest; this is the cache's own guard for
any caller): with `"../victim"` a file outside the folder would be found "already verified" and its
lock file created outside it. Errors say where: a full disk or an unusable folder names the folder and
`data.shard_cache_dir`/`data.shard_cache_bytes` (`ShardCacheError`, raised at once: a retry fills the
same disk), and a file the manifest lists but the store does not hold (NoSuchKey) is not retried
(`ShardMissingError`).

Ranks of one node share it through `flock`s in `.locks/` (local filesystem locks; the folder must be
node-local, not NFS):
    <sha>.fetch  exclusive while one process downloads the file; the others wait on it, then find
                 the file in place (one download per node, never a half-written file read);
    <sha>.use    shared while a process has the file open (pinned); eviction takes it exclusively
                 without waiting, so a file in use is never evicted;
    evict        exclusive around the space accounting and eviction.
Eviction is least recently used (a file's mtime is touched when it is opened) and runs before a
download when the files would exceed `data.shard_cache_bytes`. A process first evicts what no one
has open, then closes its own least recently used shards; if the files in use by all ranks still do
not fit, the bound is exceeded rather than a rank stalled, with a warning. A bound smaller than one
shard is a ConfigError (`check_fits`). Eviction unlinks, never truncates: a rank that still maps an
evicted file keeps reading the same bytes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import shutil
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import ConfigError
from core.files import sha256_file
from core.storage import download, join
from tokens.manifest import MAX_FILE_BYTES, ManifestError, check_file_name, check_sha256
from tokens.shards import ShardFormatError, read_index

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "CachedShard",
    "ShardCache",
    "ShardCacheError",
    "ShardIntegrityError",
    "ShardMissingError",
    "default_cache_dir",
    "open_cached_shards",
]

log = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 64 * 2**30
"""Default bound: a node's local scratch disk usually has this much to spare; set it to the mix's size
(or more) and every shard is fetched once per node per run."""
_ENTRY = re.compile(r"^[0-9a-f]{64}\.(bin|idx)$")
_TMP = re.compile(r"^\.([0-9a-f]{64}\.(?:bin|idx))\.tmp-(\d+)-[0-9a-f]+$")
_INDEX_FETCHERS = 8  # .idx files are small: latency-bound, fetched in parallel at start


class ShardIntegrityError(ShardFormatError):
    """A shard's bytes on the store are not the ones its manifest recorded (sha256), twice in a row."""


class ShardMissingError(ShardFormatError):
    """A file the manifest lists is not on the store (NoSuchKey): a permanent answer, not retried."""


class ShardCacheError(OSError):
    """The cache folder cannot hold a file (full disk, not writable, not a folder); the message names the
    folder and the config keys that move or bound it. Keeps the errno of the failure."""


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def default_cache_dir() -> Path:
    """`$TMPDIR/refinery-shards` of the machine that trains (node-local scratch), not of the one that wrote
    the config."""
    return Path(tempfile.gettempdir()) / "refinery-shards"


@dataclass(slots=True)
class CacheStats:
    downloads: int = 0
    """files fetched from the store (a re-download after a mismatch counts too)"""
    bytes_downloaded: int = 0
    hits: int = 0
    """files found already verified in the cache (by this process or another rank)"""
    evictions: int = 0
    mismatches: int = 0
    over_bound: int = 0
    """downloads made although the files in use exceeded the bound"""


@dataclass(frozen=True, slots=True)
class Remote:
    """One file of a manifest: where it is, what it must hash to, how big it is."""

    uri: str
    sha256: str
    size: int
    ext: str  # "bin" | "idx"

    def __post_init__(self) -> None:
        # the cache's files and locks are named after sha256: it must not be able to name a path
        try:
            check_sha256(self.sha256)
        except ValueError as e:
            raise ManifestError(f"{self.uri}: its {self.ext}_sha256 {e}") from None
        if self.ext not in ("bin", "idx"):
            raise ValueError(f"{self.uri}: ext must be bin or idx, got {self.ext!r}")
        if (
            isinstance(self.size, bool)
            or not isinstance(self.size, int)
            or not 0 <= self.size <= MAX_FILE_BYTES
        ):
            raise ManifestError(
                f"{self.uri}: its size must be an integer in [0, {MAX_FILE_BYTES}], got {self.size!r}"
            )

    @property
    def name(self) -> str:
        return f"{self.sha256}.{self.ext}"


@dataclass(slots=True)
class _Pin:
    fd: int
    array: np.ndarray


class ShardCache:
    """The cache folder of one node; one object per process (threads share it). See the module docstring."""

    def __init__(self, root: str | Path | None = None, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if max_bytes <= 0:
            raise ConfigError(f"data.shard_cache_bytes must be > 0, got {max_bytes}")
        self.root = Path(root) if root else default_cache_dir()
        self.max_bytes = int(max_bytes)
        self.locks = self.root / ".locks"  # made on first use: a run with local shards makes nothing
        self.stats = CacheStats()
        self._pins: OrderedDict[str, _Pin] = OrderedDict()  # by file name, least recently used first
        self._lock = threading.RLock()  # pins and space accounting, between the sampler and its prefetcher
        self._warned = False

    # -- locks ---------------------------------------------------------------------------------
    def _lock_fd(self, name: str) -> int:
        with self._local(f"lock file {name}"):
            self.locks.mkdir(parents=True, exist_ok=True)
            return os.open(self.locks / name, os.O_CREAT | os.O_RDWR, 0o644)

    @contextlib.contextmanager
    def _local(self, what: str, size: int = 0) -> Iterator[None]:
        """Turn a failure of this node's cache folder into a ShardCacheError that says where and what to
        change: a full disk (whatever file was written), or any error on a path in the folder. An error
        of the store (a download) passes through unchanged."""
        try:
            yield
        except ShardCacheError:
            raise
        except OSError as e:
            in_folder = e.filename is not None and _under(str(e.filename), self.root)
            if e.errno not in _DISK_FULL and not in_folder:
                raise
            raise self._error(e, what, size) from e

    def _error(self, e: OSError, what: str, size: int) -> ShardCacheError:
        where = f"shard cache {self.root} (data.shard_cache_dir)"
        if e.errno in _DISK_FULL:
            free = "unknown"
            with contextlib.suppress(OSError):
                free = f"{shutil.disk_usage(self.root).free:,}"
            need = f" ({size:,} bytes)" if size else ""
            return ShardCacheError(
                e.errno,
                f"{where}: no space left on its disk for {what}{need}; {free} bytes free there, bound "
                f"data.shard_cache_bytes = {self.max_bytes:,}: free space, point data.shard_cache_dir at a "
                "larger node-local disk, or set data.shard_cache_bytes below the disk's free space",
            )
        return ShardCacheError(
            e.errno,
            f"{where}: cannot use it for {what}: {e.strerror or e}: {e.filename} (set data.shard_cache_dir "
            "to a writable node-local folder)",
        )

    @contextlib.contextmanager
    def _flock(self, name: str, mode: int) -> Iterator[None]:
        fd = self._lock_fd(name)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    # -- files ---------------------------------------------------------------------------------
    def check_fits(self, remote: Remote) -> None:
        """ConfigError unless `remote` fits the bound at all (a smaller bound could never hold it)."""
        if remote.size > self.max_bytes:
            raise ConfigError(
                f"data.shard_cache_bytes: {self.max_bytes:,} bytes is smaller than the shard {remote.uri} "
                f"({remote.size:,} bytes); the cache must hold at least the largest shard"
            )

    def fetch(self, remote: Remote, make_room: bool = True) -> Path | None:
        """The verified local copy of `remote`, downloading it (once per node) if needed. With
        make_room=False (the prefetcher) nothing this process has open is closed for it: None when it
        does not fit beside them."""
        path = self.root / remote.name
        if path.exists():
            self.stats.hits += 1
            return path
        with self._flock(f"{remote.name}.fetch", fcntl.LOCK_EX):
            if path.exists():  # another rank (or our prefetcher) fetched it while we waited
                self.stats.hits += 1
                return path
            with self._local(remote.uri, remote.size):
                tmp = self._make_room(remote, unpin=make_room)
                if tmp is None:
                    return None
                self._download_verified(remote, path, tmp)
        return path

    def _download_verified(self, remote: Remote, path: Path, tmp: Path) -> None:
        """Download to `tmp` (the reservation `_make_room` made), hash, rename to `path`; once more on a
        mismatch. `tmp` is gone afterwards either way."""
        try:
            for attempt in (1, 2):
                try:  # retried inside only when it may pass: a missing key or a full disk is raised at once
                    download(remote.uri, tmp, retries=3)
                except FileNotFoundError as e:
                    raise ShardMissingError(
                        f"{remote.uri}: listed in manifest.json but not on the store ({e}); re-upload the "
                        "shards folder or re-tokenize the source"
                    ) from None
                self.stats.downloads += 1
                self.stats.bytes_downloaded += tmp.stat().st_size
                got = sha256_file(tmp)
                if got == remote.sha256:
                    os.replace(tmp, path)
                    return
                self.stats.mismatches += 1
                log.warning(
                    "%s: sha256 %s, manifest.json records %s (try %d/2)",
                    remote.uri,
                    got,
                    remote.sha256,
                    attempt,
                )
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise ShardIntegrityError(
            f"{remote.uri}: its sha256 is {got} but manifest.json records {remote.sha256} (downloaded twice): "
            "the object is not the one tokenize wrote; re-upload it or re-tokenize the source"
        )

    def array(self, remote: Remote, dtype: np.dtype) -> np.ndarray:
        """`remote`'s bytes as a read-only array, pinned (never evicted) until this process closes it to
        make room. Each call refreshes its place in this process's LRU order."""
        with self._lock:
            pin = self._pins.get(remote.name)
            if pin is not None:
                self._pins.move_to_end(remote.name)
                return pin.array
        fd = self._lock_fd(f"{remote.name}.use")
        fcntl.flock(fd, fcntl.LOCK_SH)  # pinned from here: no one evicts it now
        try:
            # not under self._lock: the prefetcher takes a fetch lock before it (one lock order)
            path = self.fetch(remote)
            assert path is not None
            os.utime(path)  # least recently used is by mtime, across the ranks of the node
            arr = np.memmap(path, dtype=dtype, mode="r") if remote.size else np.zeros(0, dtype)
        except BaseException:
            os.close(fd)
            raise
        with self._lock:
            self._pins[remote.name] = _Pin(fd, arr)
        return arr

    def _unpin(self, name: str) -> None:
        pin = self._pins.pop(name)
        os.close(pin.fd)  # the memmap stays valid for any view still held: eviction only unlinks

    def close(self) -> None:
        with self._lock:
            for name in list(self._pins):
                self._unpin(name)

    # -- space ---------------------------------------------------------------------------------
    def _entries(self) -> tuple[list[tuple[float, str, int]], int]:
        """(the verified files, oldest first, as (mtime, name, size); the bytes reserved by downloads in
        flight on this node). A download reserves its full size up front in its temporary name
        (`.<name>.tmp-<size>-<tag>`), so two ranks (or a rank and its prefetcher) never both count the
        same free space; one whose owner died (its fetch lock is free) is removed here."""
        out, reserved = [], 0
        for e in os.scandir(self.root):
            with contextlib.suppress(FileNotFoundError):
                if _ENTRY.match(e.name):
                    st = e.stat()
                    out.append((st.st_mtime, e.name, st.st_size))
                elif m := _TMP.match(e.name):
                    if self._owner_alive(m[1]):
                        reserved += int(m[2])
                    else:
                        os.unlink(e.path)
        return sorted(out), reserved

    def _owner_alive(self, name: str) -> bool:
        fd = self._lock_fd(f"{name}.fetch")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    def _try_evict(self, name: str) -> bool:
        fd = self._lock_fd(f"{name}.use")
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # some rank has it open
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.root / name)
                self.stats.evictions += 1
            return True
        finally:
            os.close(fd)

    def _make_room(self, remote: Remote, unpin: bool) -> Path | None:
        """Evict until `remote` fits, then reserve its space: the temporary file to download it to, or None
        when it does not fit and `unpin` is False (see the module docstring). Called holding its fetch lock."""
        with self._lock, self._flock("evict", fcntl.LOCK_EX):
            entries, used = self._entries()
            used += sum(size for _, _, size in entries)
            fits = lambda: used + remote.size <= self.max_bytes  # noqa: E731
            for _, name, size in entries:  # least recently used first, what no one has open
                if fits():
                    break
                if name not in self._pins and self._try_evict(name):
                    used -= size
            if unpin and not fits():
                sizes = {name: size for _, name, size in entries}
                for name in list(self._pins):  # this process's own, least recently used first
                    if fits():
                        break
                    self._unpin(name)
                    if name in sizes and self._try_evict(name):
                        used -= sizes[name]
            if not fits():
                if not unpin:
                    return None
                self.stats.over_bound += 1
                if not self._warned:
                    self._warned = True
                    log.warning(
                        "shard cache %s: the shards open on this node (%s bytes) leave no room for %s under "
                        "the bound of %s bytes; going over it (raise data.shard_cache_bytes)",
                        self.root, f"{used:,}", remote.uri, f"{self.max_bytes:,}",
                    )  # fmt: skip
            tmp = self.root / f".{remote.name}.tmp-{remote.size}-{uuid.uuid4().hex[:8]}"
            tmp.touch()
            return tmp


class CachedShard:
    """The reading interface of `tokens.shards.IndexedShard` (len, lengths, num_tokens, shard[i]) for a
    shard on an object store: its index read at once (from the cache), its `.bin` when first indexed."""

    def __init__(self, cache: ShardCache, bin_file: Remote, idx_path: Path) -> None:
        dtype, lengths, pointers, _, _ = read_index(idx_path)
        # copies: the .idx may be evicted later, these arrays are what the sampler keeps
        self.lengths, self.pointers = np.array(lengths), np.array(pointers)
        self.dtype = dtype.newbyteorder("<")
        self.cache, self.remote = cache, bin_file
        self.bin_path = bin_file.uri
        total = int(self.lengths.sum(dtype=np.int64)) * dtype.itemsize
        if total != bin_file.size:
            raise ShardFormatError(
                f"{bin_file.uri}: manifest.json records {bin_file.size} bytes, its index {total}"
            )

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum(dtype=np.int64))

    def __getitem__(self, i: int) -> np.ndarray:
        start = int(self.pointers[i]) // self.dtype.itemsize
        return self.cache.array(self.remote, self.dtype)[start : start + int(self.lengths[i])]


def _under(path: str, root: Path) -> bool:
    """Whether `path` is `root` or inside it (lexically: the folder need not exist)."""
    return os.path.commonpath([os.path.abspath(path), os.path.abspath(root)]) == os.path.abspath(root)


def open_cached_shards(cache: ShardCache, folder: str, files: list[dict[str, Any]]) -> list[CachedShard]:
    """The shards a manifest's `files` lists under `folder` (a URI), their indexes fetched in parallel.
    `files` is a checked manifest's (tokens/manifest.py); the names are checked again here, as `Remote`
    checks the hashes, because they choose what is read."""
    for i, f in enumerate(files):
        for key, suffix in (("bin", ".bin"), ("idx", ".idx")):
            try:
                check_file_name(f.get(key), suffix)
            except ValueError as e:
                raise ManifestError(f"{join(folder, 'manifest.json')}: files[{i}].{key} {e}") from None
    bins = [Remote(join(folder, f["bin"]), f["bin_sha256"], int(f["bin_bytes"]), "bin") for f in files]
    # an index is small and not in the manifest's sizes: counted once on disk, not reserved before
    idxs = [Remote(join(folder, f["idx"]), f["idx_sha256"], 0, "idx") for f in files]
    for b in bins:
        cache.check_fits(b)
    with ThreadPoolExecutor(_INDEX_FETCHERS) as pool:
        paths = list(pool.map(cache.fetch, idxs))
    return [CachedShard(cache, b, p) for b, p in zip(bins, paths, strict=True)]


class Prefetcher:
    """Fetches, on one background thread, the `.bin`s the next documents need, into free cache space only
    (it never closes a shard a rank has open). Its failures are only logged: the sampler's own read
    fetches again and raises the error where the data is needed."""

    def __init__(self, cache: ShardCache) -> None:
        self.cache = cache
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="shard-prefetch")
        self._queued: set[str] = set()
        self._closed = False

    def want(self, shards: Iterable[CachedShard], limit: int) -> None:
        """Fetch the first `limit` of `shards` (in the order they are needed) not yet on the node."""
        if self._closed:
            return
        for sh in shards:
            if limit <= 0:
                return
            r = sh.remote
            if r.size == 0 or (self.cache.root / r.name).exists():
                continue
            limit -= 1
            if r.name not in self._queued:
                self._queued.add(r.name)
                self._pool.submit(self._fetch, r)

    def _fetch(self, remote: Remote) -> None:
        try:
            self.cache.fetch(remote, make_room=False)
        except Exception as e:  # reported where the data is needed: the sampler fetches again
            log.debug("prefetch of %s failed: %s", remote.uri, e)
        finally:
            self._queued.discard(remote.name)

    def close(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
