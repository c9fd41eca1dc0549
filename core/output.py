"""The output folder of a job: atomic per-unit writes, completion markers, and a config guard.

Layout under the output root:
    _config.json           the config (and its fingerprint) that made this folder
    docs/<unit>.parquet    kept documents of one input file (zstd Parquet)
    rejected/<unit>.parquet  a capped sample of dropped documents per reason
    stats/<unit>.json      per-file stage counters and timings
    done/<unit>.json       completion marker, written last
    stats.json             merged stats of every finished unit (rewritten at the end of each run)
    _SUCCESS               every input of the last run is done

Every file is written under a temporary name in the same folder and renamed into place; the marker
is renamed last. A unit without a marker is redone from scratch (its files are overwritten), so a
crash at any point never leaves a unit that looks finished. A rerun with a different config into
the same folder is refused: outputs always say which config made them.

The root may also be an object-store URI (`s3://bucket/prefix`, core/storage.py): a task then makes
its files in a local staging folder and `commit_unit` uploads each to its final key in one request
(S3 has no rename), then the stats, then the marker; nothing is ever stored under a temporary key.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.errors import OutputConflict
from core.storage import LocalStore, Store, is_remote, join, open_store, staging_dir

__all__ = [
    "OutputConflict",
    "OutputDir",
    "atomic_write_bytes",
    "atomic_write_json",
    "check_folder_path",
    "diff_keys",
    "guard_folder",
    "unit_name",
]

SUBDIRS = ("docs", "rejected", "stats", "done")


def unit_name(uri: str) -> str:
    """File-system-safe, collision-free name for one input: base name + hash of the full URI."""
    base = uri.rstrip("/").rsplit("/", 1)[-1]
    for suffix in (".gz", ".warc", ".arc", ".wet", ".wat", ".txt"):
        base = base.removesuffix(suffix)
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", base)[:80] or "input"
    return f"{base}-{hashlib.sha1(uri.encode()).hexdigest()[:10]}"


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Write a file whole (local: temporary name + rename; object store: one PUT)."""
    open_store(path).write_bytes(str(path), data)


def json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True, default=str) + "\n").encode()


def atomic_write_json(path: Path | str, obj: Any) -> None:
    atomic_write_bytes(path, json_bytes(obj))


class OutputDir:
    """`subdirs`: the per-unit folders this job writes (`score` has no rejected/).

    `root` is the absolute local Path, or the URI string of an object-store folder; `uri` is its
    string form either way, and every read and write goes through `store` (core/storage.py).
    """

    def __init__(self, root: str | Path, subdirs: tuple[str, ...] = SUBDIRS) -> None:
        self.remote = is_remote(root)
        self.root: Path | str = str(root).rstrip("/") if self.remote else Path(root).expanduser().resolve()
        self.uri = str(self.root)
        self.store: Store = open_store(self.uri) if self.remote else LocalStore()
        self.subdirs = subdirs

    def path(self, *parts: str) -> str:
        """A file of this folder as a string (local path or URI)."""
        return join(self.uri, *parts)

    def write_json(self, rel: str, obj: Any) -> None:
        self.store.write_bytes(self.path(rel), json_bytes(obj))

    def read_json(self, rel: str) -> Any | None:
        try:
            return json.loads(self.store.read_bytes(self.path(rel)))
        except FileNotFoundError:
            return None

    def delete(self, rel: str) -> None:
        self.store.delete(self.path(rel))

    @property
    def staging(self) -> Path:
        """Where temporary files are made: the folder itself, or local scratch for an object store."""
        return staging_dir(self.uri) if self.remote else self.root  # type: ignore[return-value]

    # -- driver side -------------------------------------------------------------------------
    def prepare(
        self, job: str, config: dict[str, Any], fingerprint: str, extra: dict[str, Any] | None = None
    ) -> bool:
        """Create the folder, or check that it was made by the same job, config and `extra` record.

        Returns True when this call created it (see `discard`).
        """
        created = guard_folder(self.root, job, config, fingerprint, extra)
        for sub in self.subdirs:
            self.store.makedirs(self.path(sub))
        self.remove_stale_tmp()
        return created

    def discard(self) -> None:
        """Remove a folder `prepare` just created when the run could not start (Spark did not come up).

        Left behind, it would hold nothing but a claim that a rerun with another config trips on.
        A folder with a finished unit is never removed.
        """
        if not self.store.list(self.path("done"), ".json"):
            self.store.delete_tree(self.uri)

    def remove_stale_tmp(self, unit: str | None = None) -> None:
        """Temporary files of a crashed run (or of one failed unit): never renamed into place.

        For an object store these are local staging files only: no temporary key ever exists.
        """
        pattern = f".{unit}.*.tmp-*" if unit else ".*.tmp-*"
        for sub in ("", *self.subdirs):
            for p in (self.staging / sub).glob(pattern):
                with contextlib.suppress(OSError):
                    p.unlink()

    def is_done(self, unit: str) -> bool:
        return self.store.exists(self.path("done", f"{unit}.json"))

    def read_stats(self, unit: str) -> dict[str, Any] | None:
        return self.read_json(f"stats/{unit}.json")

    def set_success(self, ok: bool) -> None:
        if ok:
            self.store.write_bytes(self.path("_SUCCESS"), b"")
        else:
            self.delete("_SUCCESS")

    # -- task side ---------------------------------------------------------------------------
    def tmp_path(self, sub: str, unit: str, ext: str) -> Path:
        folder = self.staging / sub
        if self.remote:
            folder.mkdir(parents=True, exist_ok=True)
        return folder / f".{unit}{ext}.tmp-{uuid.uuid4().hex[:8]}"

    def final_path(self, sub: str, unit: str, ext: str) -> Path | str:
        return self.path(sub, f"{unit}{ext}") if self.remote else self.root / sub / f"{unit}{ext}"

    def read_marker(self, unit: str) -> dict[str, Any] | None:
        return self.read_json(f"done/{unit}.json")

    def commit_unit(
        self,
        unit: str,
        tmp_files: Iterable[Path] | dict[str, Path],
        stats: dict[str, Any],
        marker: dict[str, Any] | None = None,
    ) -> None:
        """Rename (publish) the unit's files into place, write its stats, then its marker (last).

        `tmp_files` are files made by `tmp_path` (a dict's values: subfolder -> file); `marker` adds
        fields to the completion marker (what a later step reads about the unit, e.g. its hashes).
        """
        for tmp in tmp_files.values() if isinstance(tmp_files, dict) else tmp_files:
            final = tmp.name.split(".tmp-")[0].removeprefix(".")
            sub = tmp.parent.relative_to(self.staging).as_posix()
            self.store.publish(tmp, self.path(sub if sub != "." else "", final))
        self.write_json(f"stats/{unit}.json", stats)
        self.write_json(
            f"done/{unit}.json",
            {"unit": unit, "input": stats.get("input"), **(marker or {}), "finished": _now()},
        )


def check_folder_path(path: str | Path, what: str = "output") -> Path | str:
    """`path` resolved, if it is or can be made a writable folder; OutputConflict naming it if not.

    Checked before any work starts: a path that is a file (or lies under one), or a folder this
    user cannot write, would otherwise fail only once the job runs, with an OS traceback. An
    object-store URI is checked by reaching its bucket (credentials, endpoint, existence).
    """
    if is_remote(path):
        return _check_remote_folder(str(path).rstrip("/"), what)
    p = Path(path).expanduser().resolve()
    if p.exists() and not p.is_dir():
        raise OutputConflict(f"{what} {p} is a file, not a folder; name a folder")
    probe = p
    while not probe.exists():  # the nearest existing ancestor is where the folder would be made
        probe = probe.parent
    if not probe.is_dir():
        raise OutputConflict(f"{what} {p} cannot be created: {probe} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise OutputConflict(f"{what} {p} cannot be written: no write permission on {probe}")
    return p


def _check_remote_folder(uri: str, what: str) -> str:
    """The bucket must be reachable with the environment's credentials, and `uri` not be an object."""
    store = open_store(uri)
    rest = uri.split("://", 1)[1]
    bucket = rest.split("/", 1)[0]
    try:
        store.check_bucket(uri)
        is_file = "/" in rest and store.exists(uri) and not store.list(uri, recursive=True)
    except (FileNotFoundError, PermissionError) as e:
        raise OutputConflict(
            f"{what} {uri}: bucket {bucket!r} does not exist or is not visible ({e})"
        ) from None
    except Exception as e:  # credentials, endpoint, network: botocore raises many types
        raise OutputConflict(f"{what} {uri} cannot be reached: {type(e).__name__}: {e}") from None
    if is_file:
        raise OutputConflict(f"{what} {uri} is an object, not a folder (prefix); name a folder")
    return uri


def guard_folder(
    root: Path | str, job: str, config: dict[str, Any], fingerprint: str, extra: dict[str, Any] | None = None
) -> bool:
    """Create `root` with its `_config.json`, or refuse it if another job, config or `extra` made it.

    Returns True when it created `_config.json` (a new folder), False when it accepted an existing one.

    `extra` holds what else decides the outputs but is not a config value (e.g. the input list of
    a job whose output is one whole dataset); a difference there is refused like a config change.
    """
    check_folder_path(root)
    store = open_store(root)
    if not is_remote(root):
        Path(root).mkdir(parents=True, exist_ok=True)
    cfg_path = join(root, "_config.json")
    extra = extra or {}
    if store.exists(cfg_path):
        old = json.loads(store.read_bytes(cfg_path))
        changed = [k for k in sorted(extra) if old.get(k) != extra[k]]
        if old.get("job") != job or old.get("fingerprint") != fingerprint or changed:
            diff = diff_keys(old.get("config", {}), config) + changed
            raise OutputConflict(
                f"{root} was made by `{old.get('job')}` with config {old.get('fingerprint')}; "
                f"this run is `{job}` with config {fingerprint}"
                + (f" (differs in: {', '.join(diff[:10])})" if diff else "")
                + "".join(_list_change(k, old.get(k), extra[k]) for k in changed)
                + ". Use another --output, or delete that folder to start over."
            )
        return False
    record = {"job": job, "fingerprint": fingerprint, "config": config, **extra, "created": _now()}
    store.write_bytes(cfg_path, json_bytes(record))
    return True


def _list_change(key: str, old: Any, new: Any) -> str:
    """'; inputs: 1 added (c.warc.gz), 2 removed (a.warc.gz, ...)' for a changed list record."""
    if not isinstance(old, list) or not isinstance(new, list):
        return f"; {key} was not recorded by the run that made it" if old is None else ""
    old_set, new_set = set(old), set(new)
    added, removed = [x for x in new if x not in old_set], [x for x in old if x not in new_set]
    part = [
        f"{len(xs)} {verb} ({', '.join(map(str, xs[:3]))}{', ...' if len(xs) > 3 else ''})"
        for verb, xs in (("added", added), ("removed", removed))
        if xs
    ]
    return f"; {key}: {', '.join(part)}" if part else ""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def diff_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]
