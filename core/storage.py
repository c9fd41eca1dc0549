"""Where job outputs live: a local folder or an object store (`s3://bucket/prefix`), behind one API.

Every job's output folder (core/output.py) goes through a `Store`, so the same commit protocol holds
on both: a unit's files are made locally, then *published* to their final names, then its stats,
then its completion marker (last; readers look at the marker first).

    LocalStore   the folder as it always was: `publish` is a rename in the same folder, a small
                 file is written to a temporary name and renamed (atomic on POSIX).
    ObjectStore  fsspec (s3fs for `s3://`): S3 has no rename, so nothing is ever written under a
                 temporary key that a reader could take as final. `publish` uploads the local file
                 to its final key in one request (PutObject, or a multipart upload for big files,
                 which S3 makes visible only when complete), and small files are one PutObject. A
                 killed unit leaves at most data keys without their marker: not done, so the rerun
                 overwrites them.

Two questions, two names: `is_object_store(uri)`, a store this layer can write an output to (and
read one from); `is_remote(uri)`, anything read over the network, which adds http(s):// (read-only:
WARCs and listings are fetched from there, nothing is written). `local_input` is the one download
helper: a task's input as a local path, a remote one copied to a temporary file with retries.

Credentials and endpoint come from the standard AWS chain that botocore reads (AWS_ACCESS_KEY_ID /
AWS_PROFILE / ~/.aws/config, AWS_ENDPOINT_URL for S3-compatible servers), never from a project
config file. Listings are not cached (`use_listings_cache=False`): a marker written by another
process must be seen at once, and S3 is read-after-write consistent.
"""

from __future__ import annotations

import abc
import contextlib
import errno
import hashlib
import logging
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

__all__ = [
    "LocalStore",
    "ObjectStore",
    "Store",
    "check_object_store_uri",
    "file_identities",
    "is_object_store",
    "is_remote",
    "join",
    "local_input",
    "open_store",
    "staging_dir",
]

log = logging.getLogger(__name__)

OBJECT_STORE_PREFIXES = ("s3://", "s3a://", "gs://", "gcs://", "az://", "abfs://", "memory://")
READ_ONLY_PREFIXES = ("http://", "https://")


def is_object_store(uri: str | Path) -> bool:
    """True for an object-store URI this layer writes to and reads from (an output may live there)."""
    return str(uri).startswith(OBJECT_STORE_PREFIXES)


# A bucket (container) name as the stores take it: S3's characters (letters, digits, dots and hyphens, a
# letter or digit at each end) loosened to upper case, underscores and any length up to 255, which GCS,
# Azure and S3-compatible servers accept; nothing that could be an empty name, a path or a host:port.
_BUCKET = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")


def check_object_store_uri(uri: str | Path) -> None:
    """ValueError saying what is wrong with an object-store URI, or nothing: `scheme://bucket[/key/...]`.

    Refused: no bucket (`s3://`, `s3:///x`: the bucket would be "" and the client fails deep inside with
    an IndexError or a parameter error), a bucket name no store takes, and an empty, `.` or `..` key
    segment (`s3://b/a//c`, `s3://b/../c`): S3 keeps them literally, so such a prefix is not the folder
    it looks like (and `..` must never climb out of a configured root). A trailing `/` is allowed.
    Every `ObjectStore` checks its URI so; configs call it at load to name their key."""
    text = str(uri)
    if not is_object_store(text):
        raise ValueError(f"{text!r} is not an object-store URI ({', '.join(OBJECT_STORE_PREFIXES)})")
    scheme, rest = text.split("://", 1)
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"{text!r} names no bucket: expected {scheme}://bucket/prefix")
    if len(bucket) > 255 or not _BUCKET.match(bucket):
        raise ValueError(f"{text!r}: {bucket[:80]!r} is not a bucket name (letters, digits, '.', '-', '_')")
    parts = key.removesuffix("/").split("/") if key.removesuffix("/") else []
    bad = next((p for p in parts if p in ("", ".", "..")), None)
    if bad is not None:
        raise ValueError(
            f"{text!r}: an {'empty' if not bad else repr(bad)} path segment (no '//', '.', '..')"
        )


def is_remote(uri: str | Path) -> bool:
    """True for anything read over the network: an object store, or http(s) (read-only: inputs only)."""
    return str(uri).startswith((*OBJECT_STORE_PREFIXES, *READ_ONLY_PREFIXES))


def join(root: str | Path, *parts: str) -> str:
    """`root/part/...` for a local path or a URI (no pathlib: it would fold `s3://` into `s3:/`)."""
    out = str(root).rstrip("/")
    for p in parts:
        if p:
            out += "/" + p.strip("/")
    return out


class Store(abc.ABC):
    """What the output layer needs of a storage: whole-object I/O, listing, and `publish`. An interface:
    LocalStore and ObjectStore implement every method (a store missing one cannot be made)."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool: ...

    @abc.abstractmethod
    def read_bytes(self, path: str) -> bytes: ...

    @abc.abstractmethod
    def is_file(self, path: str) -> bool:
        """Whether a file (an object at exactly this key) is there; a folder (prefix) is not one."""
        ...

    @abc.abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Write `path` whole: a reader sees the old content or the new one, never a part."""
        ...

    @abc.abstractmethod
    def publish(self, local_tmp: Path, path: str) -> None:
        """Move a finished local file to its final name `path` (whole or not at all)."""
        ...

    @abc.abstractmethod
    def upload(self, local: Path, path: str) -> None:
        """Copy a local file to `path` whole (the local file stays)."""
        ...

    @abc.abstractmethod
    def list(self, path: str, suffix: str = "", recursive: bool = False) -> list[str]:
        """Files under folder `path` ending in `suffix`, sorted, as full paths (same form as `path`)."""
        ...

    @abc.abstractmethod
    def list_dirs(self, path: str) -> list[str]:
        """Names (not paths) of the folders (key prefixes) directly under `path`, sorted."""
        ...

    @abc.abstractmethod
    def sizes(self, path: str) -> dict[str, int]:
        """Every file under folder `path` (recursively) as relative name -> size in bytes."""
        ...

    @abc.abstractmethod
    def download(self, path: str, local: Path) -> None:
        """Copy `path` to the local file `local` (made whole, or an error)."""
        ...

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Remove a file; a missing one is not an error."""
        ...

    @abc.abstractmethod
    def delete_tree(self, path: str) -> None:
        """Remove a folder (prefix) and everything under it; a missing one is not an error."""
        ...

    @abc.abstractmethod
    def makedirs(self, path: str) -> None: ...

    @abc.abstractmethod
    def open(self, path: str, mode: str = "rb") -> Any:
        """A binary file object for streaming a large file in or out (a Spark task's Parquet part).
        On an object store a written ("wb") file appears whole at `close()`, or never after
        `discard(f)`; a local one is written in place (callers rename a temporary name)."""
        ...

    def discard(self, f: Any) -> None:
        """Drop a file opened for writing without making it visible (what a failed writer calls)."""
        f.close()


class LocalStore(Store):
    """A local (or shared, mounted) folder: the behaviour every job had before object storage."""

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def read_bytes(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def write_bytes(self, path: str, data: bytes) -> None:
        p = Path(path)
        tmp = p.with_name(f".{p.name}.tmp-{uuid.uuid4().hex[:8]}")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)

    def publish(self, local_tmp: Path, path: str) -> None:
        os.replace(local_tmp, path)  # same folder: an atomic rename

    def upload(self, local: Path, path: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(path).with_name(f".{Path(path).name}.tmp-{uuid.uuid4().hex[:8]}")
        shutil.copyfile(local, tmp)
        os.replace(tmp, path)

    def list(self, path: str, suffix: str = "", recursive: bool = False) -> list[str]:
        root = Path(path)
        if not root.is_dir():
            return []
        found = root.rglob(f"*{suffix}") if recursive else root.glob(f"*{suffix}")
        return sorted(str(p) for p in found if p.is_file())

    def list_dirs(self, path: str) -> list[str]:
        root = Path(path)
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def sizes(self, path: str) -> dict[str, int]:
        root = Path(path)
        found = root.rglob("*") if root.is_dir() else []
        return {p.relative_to(root).as_posix(): p.stat().st_size for p in found if p.is_file()}

    def download(self, path: str, local: Path) -> None:
        shutil.copyfile(path, local)

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def delete_tree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def makedirs(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)

    def open(self, path: str, mode: str = "rb") -> Any:
        return open(path, mode)  # the caller closes it


class ObjectStore(Store):
    """An fsspec filesystem over object storage; paths are full URIs (`s3://bucket/key`)."""

    def __init__(self, uri: str) -> None:
        import fsspec

        check_object_store_uri(uri)  # a clear ValueError here, not an IndexError inside the client
        self.protocol = uri.split("://", 1)[0]
        # s3a:// is Hadoop's name for the same objects; s3fs knows them as s3://.
        proto = "s3" if self.protocol == "s3a" else self.protocol
        self.fs: Any = fsspec.filesystem(proto, use_listings_cache=False)

    def _key(self, path: str) -> str:
        return path.split("://", 1)[1]

    def _uri(self, key: str) -> str:
        return f"{self.protocol}://{key}"

    def _io(self, path: str, fn, *args: Any) -> Any:
        """Run one client call; botocore's errors (not OSErrors: EndpointConnectionError, ...)
        become OSError naming the object, the one type callers catch for "storage failed"."""
        try:
            return fn(*args)
        except OSError:
            raise
        except Exception as e:
            raise OSError(f"{path}: {type(e).__name__}: {e}") from e

    def exists(self, path: str) -> bool:
        return bool(self._io(path, self.fs.exists, self._key(path)))

    def is_file(self, path: str) -> bool:
        # one question about one key (HEAD), not "exists" then "is the prefix empty": another process
        # writing and deleting a key under the prefix between the two made a folder look like an object
        return bool(self._io(path, self.fs.isfile, self._key(path)))

    def read_bytes(self, path: str) -> bytes:
        return self._io(path, self.fs.cat_file, self._key(path))

    def write_bytes(self, path: str, data: bytes) -> None:
        self._io(path, self.fs.pipe_file, self._key(path), data)  # one PutObject: whole or nothing

    def publish(self, local_tmp: Path, path: str) -> None:
        # s3fs: one PutObject below its block size, else a multipart upload that S3 shows only
        # once completed (an interrupted one is never visible under the key).
        self.upload(local_tmp, path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(local_tmp)

    def upload(self, local: Path, path: str) -> None:
        self._io(path, self.fs.put_file, str(local), self._key(path))

    def list(self, path: str, suffix: str = "", recursive: bool = False) -> list[str]:
        key = self._key(path).rstrip("/")
        try:
            if recursive:
                keys = self._io(path, self.fs.find, key)
            else:
                keys = [e["name"] for e in self._io(path, self.fs.ls, key, True) if e["type"] == "file"]
        except FileNotFoundError:
            return []
        return sorted(self._uri(k) for k in keys if k.endswith(suffix) and k != key)

    def list_dirs(self, path: str) -> list[str]:
        key = self._key(path).rstrip("/")
        try:
            entries = self._io(path, self.fs.ls, key, True)
        except FileNotFoundError:
            return []
        return sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e["type"] == "directory")

    def sizes(self, path: str) -> dict[str, int]:
        key = self._key(path).rstrip("/")
        try:
            found = self._io(path, lambda: self.fs.find(key, detail=True))  # one listing, with sizes
        except FileNotFoundError:
            return {}
        return {k[len(key) + 1 :]: int(v["size"]) for k, v in found.items() if k != key}

    def download(self, path: str, local: Path) -> None:
        self._io(path, self.fs.get_file, self._key(path), str(local))

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._io(path, self.fs.rm_file, self._key(path))

    def delete_tree(self, path: str) -> None:
        keys = self._io(path, self.fs.find, self._key(path).rstrip("/"))
        if keys:
            self._io(path, self.fs.rm, keys)

    def check_bucket(self, path: str) -> None:
        """Raise unless the bucket of `path` answers: FileNotFoundError/PermissionError if it is
        missing or forbidden, another error if the endpoint cannot be reached (no False for both)."""
        bucket = self._key(path).split("/", 1)[0]
        if self.protocol in ("s3", "s3a"):
            self._io(path, self.fs.call_s3, "head_bucket", {"Bucket": bucket})
        elif not self.exists(f"{self.protocol}://{bucket}"):
            raise FileNotFoundError(bucket)

    def makedirs(self, path: str) -> None:
        pass  # object stores have no folders: a key's "folder" exists once a key is under it

    def open(self, path: str, mode: str = "rb") -> Any:
        # s3fs: written in blocks as a multipart upload that S3 shows only once `close()` completes it
        return self._io(path, self.fs.open, self._key(path), mode)

    def discard(self, f: Any) -> None:
        f.discard()  # fsspec's buffered file: aborts the multipart upload, writes nothing


def open_store(uri: str | Path) -> Store:
    """The store for a path or URI (a new object each call: cheap, fsspec caches the client)."""
    return ObjectStore(str(uri)) if is_object_store(uri) else LocalStore()


def staging_dir(uri: str, create: bool = True) -> Path:
    """A local folder where a task builds the files of an object-store output before publishing them.

    One per output URI (its hash), under the system temporary folder of the machine that runs the
    task; what a killed task leaves there is only ever local scratch, never seen as output.
    `create=False`: only its path (a driver that looks for leftovers makes no folder of its own).
    """
    name = hashlib.sha1(uri.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / "refinery-staging" / name
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def local_input(uri: str | Path, retries: int = 1, tmp_dir: str | None = None) -> Iterator[str]:
    """A local path for reading `uri` whole: the path itself, or a temporary download of a remote file.

    Tasks read their one input file this way (Parquet readers and the WARC reader's resync seek), so
    the reading code is the same for local, object-store and http(s) inputs. The copy is removed on exit.
    """
    if not is_remote(uri):
        yield str(uri)
        return
    fd, tmp = tempfile.mkstemp(prefix="refinery-in-", suffix=Path(str(uri)).suffix, dir=tmp_dir)
    os.close(fd)
    try:
        download(str(uri), tmp, retries)
        yield tmp
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def download(uri: str, local: str | Path, retries: int = 1) -> None:
    """Copy the remote file `uri` to `local`, trying `retries` times with a backoff (2, 4, ... 30 s).

    Every attempt starts a clean copy (a failed one may have written part of the file). The last
    failure is raised as an OSError naming the URI and the attempts, the one type callers catch.
    A permanent failure is raised at once, its type kept (`_permanent`): trying again would give the
    same answer after the backoff.
    """
    for attempt in range(1, retries + 1):
        try:
            if is_object_store(uri):
                ObjectStore(uri).download(uri, Path(local))
            else:  # http(s): fsspec's HTTP filesystem, streamed in 4 MiB blocks
                import fsspec

                with fsspec.open(uri, "rb") as src, open(local, "wb") as dst:
                    shutil.copyfileobj(src, dst, length=4 * 2**20)
            return
        except Exception as e:
            if (why := _permanent(e)) is not None:
                raise _same_kind(e, f"download of {uri} failed ({why}, not retried): {e}") from e
            if attempt == retries:
                raise OSError(f"download of {uri} failed after {retries} attempts: {e}") from e
            log.warning("download of %s failed (attempt %d/%d): %s", uri, attempt, retries, e)
            time.sleep(min(2**attempt, 30))


_LOCAL_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}


def _permanent(e: BaseException) -> str | None:
    """Why `e` would fail again on a retry, or None for a failure that may pass (a connection, a 5xx).

    A missing object (S3's NoSuchKey/NoSuchBucket, HTTP 404: FileNotFoundError through s3fs/fsspec), a
    refusal (AccessDenied, 403: PermissionError) and a full or read-only local disk are answers, not
    accidents of the network. fsspec's HTTP filesystem reports every failure of its first request as
    FileNotFoundError, a refused connection or a 503 too: there its cause decides (aiohttp's response
    error carries the status; a connection error or timeout is an OSError)."""
    if isinstance(e, FileNotFoundError):
        cause = e.__cause__
        status = getattr(cause, "status", None)
        if status is not None:
            return "no such object" if status in (404, 410) else None
        if isinstance(cause, OSError) and not isinstance(cause, FileNotFoundError):
            return None
        return "no such object"
    if isinstance(e, PermissionError):
        return "access denied"
    if isinstance(e, (IsADirectoryError, NotADirectoryError)):
        return "not a file"
    if isinstance(e, OSError) and e.errno in _LOCAL_FULL:
        return os.strerror(e.errno).lower()
    return None


def _same_kind(e: BaseException, message: str) -> OSError:
    """An OSError of `e`'s kind (FileNotFoundError stays one, ENOSPC keeps its errno) saying `message`."""
    for kind in (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError):
        if isinstance(e, kind):
            err = kind(message)
            err.errno = getattr(e, "errno", None) or _ERRNO[kind]
            return err
    return OSError(getattr(e, "errno", None), message)


_ERRNO = {
    FileNotFoundError: errno.ENOENT,
    PermissionError: errno.EACCES,
    IsADirectoryError: errno.EISDIR,
    NotADirectoryError: errno.ENOTDIR,
}


# -- what a file is, cheaply ------------------------------------------------------------------------

_WHOLE = 4 << 20
"""Files up to this size are hashed whole (every byte counts); larger ones are sampled."""
_EDGE = 256 << 10
_BLOCKS, _BLOCK = 32, 16 << 10
_FOOTER_MAX = 16 << 20


def file_identities(uris: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    """The identity of each input file, read without downloading it: what a resumed job compares.

    local file   size, mtime_ns and `sample`: sha256 of the whole file up to 4 MiB, else of its
                 first and last 256 KiB and 32 evenly spaced 16 KiB blocks, plus a Parquet file's
                 whole footer (row groups, column sizes and statistics: any rewrite of its data
                 moves them). Same size and mtime with other bytes (`touch -r`) changes `sample`.
    object store size and the ETag the store keeps for the object's content (one listing per
                 folder, no download); `modified` where a store has no ETag.
    http(s)      None: read-only sources are treated as immutable (Common Crawl's files are).

    A local file that cannot be read now is None too: the task that reads it reports it (extract
    counts an unreadable WARC), and nothing was made from its bytes. OSError naming an object when
    the store cannot be listed.
    """
    uris = list(dict.fromkeys(uris))
    out: dict[str, dict[str, Any] | None] = {u: None for u in uris}
    local = [u for u in uris if "://" not in u or u.startswith("file://")]
    remote = [u for u in uris if is_object_store(u)]
    with ThreadPoolExecutor(max_workers=8) as pool:  # a shared filesystem answers in parallel
        out.update(zip(local, pool.map(_local_identity, local), strict=True))
    by_folder: dict[str, list[str]] = {}
    for u in remote:
        by_folder.setdefault(u.rsplit("/", 1)[0], []).append(u)
    for folder, members in by_folder.items():
        out.update(_remote_identities(folder, members))
    return out


def _local_identity(uri: str) -> dict[str, Any] | None:
    try:
        return _read_identity(uri.removeprefix("file://"))
    except OSError:
        return None


def _read_identity(path: str) -> dict[str, Any]:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        size = st.st_size
        if size <= _WHOLE:
            h.update(f.read())
        else:
            step = (size - 2 * _EDGE) // (_BLOCKS + 1)
            spans = [(0, _EDGE)] + [(_EDGE + i * step, _BLOCK) for i in range(1, _BLOCKS + 1)]
            for start, n in [*spans, (size - _EDGE, _EDGE)]:
                f.seek(start)
                h.update(f.read(n))
            f.seek(size - 8)
            tail = f.read(8)
            footer = int.from_bytes(tail[:4], "little")
            if tail[4:] == b"PAR1" and footer <= min(_FOOTER_MAX, size - 12):
                f.seek(size - 8 - footer)  # all of a Parquet footer, even one longer than the tail
                h.update(f.read(footer))
    return {"size": size, "mtime_ns": st.st_mtime_ns, "sample": h.hexdigest()[:32]}


def _remote_identities(folder: str, uris: list[str]) -> dict[str, dict[str, Any]]:
    """One listing of `folder` (sizes and ETags come with it); an object it misses is asked alone."""
    store = ObjectStore(folder)
    try:
        listed = {store._uri(e["name"]): e for e in store._io(folder, store.fs.ls, store._key(folder), True)}
    except FileNotFoundError:
        listed = {}
    out = {}
    for u in uris:
        info = listed.get(u) or store._io(u, store.fs.info, store._key(u))
        ident: dict[str, Any] = {"size": int(info.get("size") or 0)}
        etag = info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("crc32c")
        if etag:
            ident["etag"] = str(etag).strip('"')
        else:
            modified = (
                info.get("LastModified") or info.get("mtime") or info.get("updated") or info.get("created")
            )
            ident["modified"] = str(modified) if modified is not None else None
        out[u] = ident
    return out
