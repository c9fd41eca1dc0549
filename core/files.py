"""Small file helpers every stage shares: the one rule for "the Parquet files of a documents folder",
the one streaming sha256 of a file (manifests, model metadata, checkpoints), the one per-user
cache folder for derived data that is costly to rebuild in every worker process, and the one
redirection of a file descriptor for a while (`redirected_fd`).

A job's output is read marker first, on a local folder as on an object store (`finished_docs`, the
one helper for both): a unit file in `docs/` counts only once its `done/<unit>.json` exists, so a
stray file a killed run left behind (or anyone planted) is skipped, counted and logged, never read.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.output import unit_of
from core.storage import LocalStore, ObjectStore, Store, is_object_store, join

__all__ = [
    "cache_dir",
    "doc_parquet_files",
    "doc_parquet_uris",
    "finished_docs",
    "parquet_schema",
    "sha256_file",
]

log = logging.getLogger(__name__)


def doc_parquet_files(path: str | Path) -> list[Path]:
    """The Parquet files of a documents dataset, sorted: the one listing rule of every job.

    `path` is a Parquet file, a job's output folder (its `docs/` is read), or a folder of Parquet
    files, searched recursively (Spark writes `part-*.parquet`, possibly under partition folders).
    Names starting with `.` or `_` are skipped at every level: temporary files of a running job,
    `_SUCCESS`, `_temporary/`. A job's output folder is read marker first (`finished_docs`).
    Raises InputError when there is nothing to read.
    """
    p = Path(path).expanduser()
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise InputError(f"input not found: {path}")
    root = p / "docs" if (p / "docs").is_dir() else p
    files = sorted(
        f
        for f in root.rglob("*.parquet")
        if f.is_file() and not any(part.startswith((".", "_")) for part in f.relative_to(root).parts)
    )
    if root != p:
        kept = set(finished_docs(LocalStore(), str(p.absolute()), [str(f.absolute()) for f in files]))
        files = [f for f in files if str(f.absolute()) in kept]
    if not files:
        raise InputError(f"no Parquet files under {root}")
    return files


def doc_parquet_uris(path: str | Path) -> list[str]:
    """`doc_parquet_files` for a local path (absolute paths) or an object-store URI (URIs).

    The same rule on an object store: a `.parquet` object, or the `.parquet` keys under
    `<prefix>/docs/` if the prefix has one, else under the prefix, skipping `.`/`_` names. A job's
    output there is read marker first (`_finished_docs`): S3 has no rename, so a killed upload can
    leave a data key whose marker was never written (`finished_docs`, as for a local folder).
    """
    if not is_object_store(path):
        return [str(p.resolve()) for p in doc_parquet_files(path)]
    uri = str(path).rstrip("/")
    store = ObjectStore(uri)
    try:
        if uri.endswith(".parquet") and store.is_file(uri):
            return [uri]
        docs = f"{uri}/docs"
        root = docs if store.list(docs, ".parquet", recursive=True) else uri
        found = store.list(root, ".parquet", recursive=True)
    except Exception as e:  # credentials, endpoint, network: said clearly, before any job starts
        raise InputError(f"cannot list {uri}: {type(e).__name__}: {e}") from None
    files = [f for f in found if not any(p.startswith((".", "_")) for p in f[len(root) + 1 :].split("/"))]
    if root == docs:
        files = finished_docs(store, uri, files)
    if not files:
        raise InputError(f"no Parquet files under {root}")
    return files


def finished_docs(store: Store, root: str, files: list[str]) -> list[str]:
    """The files of `root/docs/` that the job output `root` says are finished: marker first.

    Per-unit jobs (extract, score): docs/<unit>.parquet (or docs/lang=<code>/<unit>.parquet, the
    extract job's `output.partition_by`) whose done/<unit>.json exists; any other file
    there (a killed run's, or a stray one) is skipped, and the skip is logged with a count and names.
    A job with one marker for its whole output (dedup): all of docs/ once `_SUCCESS` exists, else an
    InputError. A folder with neither markers nor `_config.json` is not a job output: all of it.
    The same code for a local folder and an object store (`store`, paths in the form of `root`).
    """
    markers = {m.rsplit("/", 1)[-1].removesuffix(".json") for m in store.list(join(root, "done"), ".json")}
    if markers:
        prefix = join(root, "docs") + "/"
        kept = [f for f in files if unit_of(f[len(prefix) :]) in markers]
        if len(kept) < len(files):
            stray = [f[len(prefix) :] for f in files if f not in set(kept)]
            log.warning(
                "%s: %d file(s) in docs/ without a completion marker in done/ skipped (a killed run's "
                "partial output, or not this job's): %s",
                root,
                len(stray),
                ", ".join(stray[:10]) + (", ..." if len(stray) > 10 else ""),
            )
        return kept
    if store.exists(join(root, "_config.json")) and not store.exists(join(root, "_SUCCESS")):
        raise InputError(f"{root} is an unfinished job output (no done/ markers, no _SUCCESS)")
    return files


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks (model files and shards can be GBs)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def parquet_schema(path: str | Path):
    """The Arrow schema in a Parquet file's footer; InputError naming the file if it cannot be read.

    Every job checks its inputs' columns this way before any work starts, so a truncated or
    corrupt file is reported by name (pyarrow's own message does not say which file).
    """
    import pyarrow as pa

    try:
        with open_parquet(path) as pf:  # only the footer is read (on an object store, ranged reads)
            return pf.schema_arrow
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(f"{path}: not a readable Parquet file ({e})") from None


@contextlib.contextmanager
def open_parquet(path: str | Path) -> Iterator[Any]:
    """A pyarrow ParquetFile of a local path or an object-store URI. Remote, only what is read is
    fetched (ranged reads): the footer, then the column chunks asked for."""
    import pyarrow.parquet as pq

    if not is_object_store(path):
        yield pq.ParquetFile(path)
        return
    with ObjectStore(str(path)).open(str(path)) as f:
        yield pq.ParquetFile(f)


def cache_dir() -> Path:
    """The per-user cache folder: `$REFINERY_CACHE_DIR`, else `$XDG_CACHE_HOME/refinery`, else
    `~/.cache/refinery`. Only derived data goes here (anything in it can be deleted at any time and
    is rebuilt from its source); not created until a writer needs it."""
    if os.environ.get("REFINERY_CACHE_DIR"):
        return Path(os.environ["REFINERY_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "refinery"


@contextlib.contextmanager
def redirected_fd(fd: int, to: int) -> Iterator[None]:
    """Point file descriptor `fd` at what descriptor `to` points at for the block, then back: what
    the process and the children it starts meanwhile write there goes to `to`'s file. Python's own
    buffers of fd 1 and 2 are flushed on both sides, so nothing written before or after crosses."""
    import sys

    def flush() -> None:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()

    flush()
    saved = os.dup(fd)
    os.dup2(to, fd)
    try:
        yield
    finally:
        flush()
        os.dup2(saved, fd)
        os.close(saved)
