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

Inputs are guarded by content as well as by name: `_inputs.json` holds each input's identity
(size, mtime and a sampled hash; an object's size and ETag: core.storage.file_identities) from the
run that made the folder. A rerun whose input changed under the same name is refused naming the
file (OutputConflict, exit 2), since its finished units (or dedup's finished stages) were made
from the old bytes. To start over instead, set `REFINERY_ON_CHANGED_INPUT=restart` (or pass
`on_changed_input="restart"`, `--on-changed-input restart` where a command has it): a per-file
job then redoes the units of the changed inputs, dedup redoes every stage. An output folder that
overlaps its inputs (the same folder, one inside the other) is refused before any work
(`check_disjoint`), and a damaged folder (`_config.json` not a JSON record, a folder where a file
belongs) is refused naming the path (`check_layout`), never a traceback.

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
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from core.errors import ConfigError, OutputConflict
from core.safe_json import loads_checked
from core.storage import (
    OBJECT_STORE_PREFIXES,
    LocalStore,
    Store,
    file_identities,
    is_object_store,
    join,
    open_store,
    staging_dir,
)

__all__ = [
    "OutputConflict",
    "OutputDir",
    "atomic_write_bytes",
    "atomic_write_json",
    "changed_input_policy",
    "check_disjoint",
    "check_folder_path",
    "check_layout",
    "diff_keys",
    "guard_folder",
    "guard_inputs",
    "input_identities",
    "unit_name",
]

SUBDIRS = ("docs", "rejected", "stats", "done")


HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
"""The folder name of a null value in Hive's layout (Spark and pyarrow read it back as null)."""
_PARTITION_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def partition_folder(column: str, value: Any) -> str:
    """`column=value`, the folder of one value in Hive's layout (docs/lang=rus_Cyrl/<unit>.parquet).

    The value becomes a path component, so it must be a plain name: a language code is, but a label
    from a user's LID model could hold `/` or `..`. Anything else is refused (ValueError), never
    escaped into a folder name that a reader would have to decode.
    """
    if value is None:
        return f"{column}={HIVE_NULL}"
    if not isinstance(value, str) or not _PARTITION_VALUE.fullmatch(value):
        raise ValueError(f"{column} {value!r} cannot name a partition folder (letters, digits, _ . - only)")
    return f"{column}={value}"


def unit_of(rel: str) -> str:
    """The unit a data file belongs to, from its path under the data folder: `<unit>.parquet`, or
    `<col>=<value>/.../<unit>.parquet` in Hive's layout (the folders above it are partitions)."""
    *folders, name = rel.split("/")
    if any("=" not in f for f in folders):
        return rel.removesuffix(".parquet")  # not a partition: no unit of this layout (skipped)
    return name.removesuffix(".parquet")


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
        self.remote = is_object_store(root)
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
        """A JSON file of the folder, None if missing; OutputConflict naming it if damaged."""
        return _read_json(self.store, self.path(rel))

    def delete(self, rel: str) -> None:
        self.store.delete(self.path(rel))

    @property
    def staging(self) -> Path:
        """Where temporary files are made: the folder itself, or local scratch for an object store.

        Only named here, not made: `tmp_path` makes it in the task that writes there, so a driver
        that only looks for leftovers leaves no folder on its own disk.
        """
        return staging_dir(self.uri, create=False) if self.remote else self.root  # type: ignore[return-value]

    # -- driver side -------------------------------------------------------------------------
    def prepare(
        self, job: str, config: dict[str, Any], fingerprint: str, extra: dict[str, Any] | None = None
    ) -> bool:
        """Create the folder, or check that it was made by the same job, config and `extra` record.

        Returns True when this call created it (see `discard`).
        """
        check_layout(self.root, self.subdirs)
        created = guard_folder(self.root, job, config, fingerprint, extra)
        for sub in self.subdirs:
            self.store.makedirs(self.path(sub))
        self.remove_stale_tmp()
        return created

    def guard_inputs(self, units: list[tuple[str, str]], on_changed_input: str | None = None) -> list[str]:
        """Refuse a rerun on inputs changed since the folder was made, or redo their units.

        `units`: (input, unit name) of this run. With the `restart` policy, every unit of a changed
        input is forgotten (marker first, then its files: a crash in between leaves a unit that
        is redone, never one that looks finished); returns the changed inputs.
        """
        return guard_inputs(
            self.uri, [u for u, _ in units], on_changed_input, lambda changed: self._forget(changed, units)
        )

    def _forget(self, changed: list[str], units: list[tuple[str, str]]) -> None:
        gone = set(changed)
        names = {n for u, n in units if _norm_input(u) in gone}
        for marker in self.store.list(self.path("done"), ".json"):
            name = marker.rsplit("/", 1)[-1].removesuffix(".json")
            with contextlib.suppress(OutputConflict):  # a damaged marker: forgotten as well
                record = self.read_json(f"done/{name}.json")
                if not isinstance(record, dict) or _norm_input(str(record.get("input"))) not in gone:
                    continue
            names.add(name)
        self.delete("_SUCCESS")
        for name in sorted(names):
            self.delete(f"done/{name}.json")
        for sub in ("", *self.subdirs):
            for f in self.store.list(self.path(sub)):
                fname = f.rsplit("/", 1)[-1]
                if sub != "done" and any(fname.startswith(f"{n}.") for n in names):
                    self.store.delete(f)

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
            # rglob: a partitioned folder's files are one level down (docs/lang=x/)
            for p in (self.staging / sub).glob(pattern) if not sub else (self.staging / sub).rglob(pattern):
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
        if self.remote or "/" in sub:  # a partition's folder (docs/lang=x) is made at its first file
            folder.mkdir(parents=True, exist_ok=True)
        return folder / f".{unit}{ext}.tmp-{uuid.uuid4().hex[:8]}"

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


_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def check_writable_scheme(path: str | Path, what: str = "output") -> None:
    """ConfigError for a `scheme://` output that is not an object store (hdfs://, file://, http://).

    Taken as a local path it would become a folder named `hdfs:` under the working directory, and
    the job would write there without a word. Checked on the path as the user gave it: once resolved
    as a Path, the scheme is gone.
    """
    m = _URI_SCHEME.match(str(path))
    if m and not is_object_store(path):
        stores = ", ".join(p for p in OBJECT_STORE_PREFIXES if p != "memory://")
        raise ConfigError(
            f"{what} {path}: {m.group(1)}:// is not a storage the jobs write to. Name a local or mounted "
            f"path (an HDFS NFS gateway or FUSE mount, without the scheme), or an object store ({stores})"
        )


def check_folder_path(path: str | Path, what: str = "output") -> Path | str:
    """`path` resolved, if it is or can be made a writable folder; OutputConflict naming it if not.

    Checked before any work starts: a path that is a file (or lies under one), or a folder this
    user cannot write, would otherwise fail only once the job runs, with an OS traceback. An
    object-store URI is checked by reaching its bucket (credentials, endpoint, existence); any other
    `scheme://` is a ConfigError (check_writable_scheme).
    """
    if is_object_store(path):
        return _check_remote_folder(str(path).rstrip("/"), what)
    check_writable_scheme(path, what)
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
        is_file = "/" in rest and store.is_file(uri)
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
    if not is_object_store(root):
        Path(root).mkdir(parents=True, exist_ok=True)
    cfg_path = join(root, "_config.json")
    extra = extra or {}
    old = _read_json(store, cfg_path)
    if old is not None:
        if not isinstance(old, dict):
            raise OutputConflict(_damaged(cfg_path, f"holds a JSON {type(old).__name__}, not a job record"))
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


def _damaged(path: str, what: str) -> str:
    return (
        f"{path} {what}: this folder was not made by a refinery job, or the file is damaged. "
        "Use another --output, or delete that folder to start over."
    )


MAX_OUTPUT_JSON_BYTES = 256 << 20
"""Largest JSON file of an output folder read back (`_inputs.json` of a crawl lists every input)."""


def _read_json(store: Store, path: str) -> Any | None:
    """A JSON file of an output folder; None if missing; OutputConflict naming it if it cannot be read."""
    try:  # the checked reader: a folder on a shared store is data (core/safe_json.py)
        return loads_checked(store.read_bytes(path), path, max_bytes=MAX_OUTPUT_JSON_BYTES)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise OutputConflict(_damaged(path, "is a folder, not a file")) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise OutputConflict(_damaged(path, f"is not valid JSON ({e})")) from None
    except PermissionError as e:
        raise OutputConflict(f"{path} cannot be read: {e}") from None
    # Any other OSError (a store that stopped answering) propagates: callers report it as such.


def check_layout(
    root: Path | str, folders: Iterable[str] = (), files: Iterable[str] = ("stats.json", "_SUCCESS")
) -> None:
    """Refuse a local output folder where a file of its layout is a folder or a folder is a file.

    Checked before any work: found later, the job would fail after running, when it writes
    stats.json or its markers. (An object store has no such clash: a key is never a prefix's
    stand-in.) `_config.json` and `_inputs.json` are checked by reading them (`_read_json`).
    """
    if is_object_store(root):
        return
    root = Path(root)
    for name in folders:
        p = root / name
        if p.exists() and not p.is_dir():
            raise OutputConflict(_damaged(str(p), "is a file, where this job keeps a folder"))
    for name in (*files, "_config.json", INPUTS_RECORD):
        p = root / name
        if p.is_dir():
            raise OutputConflict(_damaged(str(p), "is a folder, not a file"))


# -- inputs: content identity, and no overlap with the output ----------------------------------------

INPUTS_RECORD = "_inputs.json"
"""Each input's identity (core.storage.file_identities) when the folder's outputs were made."""
ON_CHANGED_INPUT_ENV = "REFINERY_ON_CHANGED_INPUT"
ON_CHANGED_INPUT = ("refuse", "restart")


def changed_input_policy(value: str | None = None) -> str:
    """`value`, else $REFINERY_ON_CHANGED_INPUT, else "refuse"; ConfigError for anything else."""
    policy = value or os.environ.get(ON_CHANGED_INPUT_ENV) or "refuse"
    if policy not in ON_CHANGED_INPUT:
        where = "on_changed_input" if value else ON_CHANGED_INPUT_ENV
        raise ConfigError(f"{where} must be one of {', '.join(ON_CHANGED_INPUT)}, got {policy!r}")
    return policy


def _norm_input(uri: str) -> str:
    return uri if "://" in uri else os.path.abspath(uri)


def guard_inputs(
    root: Path | str,
    inputs: Iterable[str],
    on_changed_input: str | None,
    start_over: Callable[[list[str]], None],
    identities: dict[str, dict[str, Any] | None] | None = None,
) -> list[str]:
    """Compare the inputs' identities with the folder's `_inputs.json`, then record them.

    A changed input (same name, other content) is refused (OutputConflict naming each file and
    what changed) under the `refuse` policy; under `restart`, `start_over(changed)` removes what
    was made from them before the new identities are recorded (so a crash in between refuses
    again rather than trusting stale outputs). Returns the changed inputs. A folder made before
    this record existed gets one now: its old content cannot be checked.
    """
    policy = changed_input_policy(on_changed_input)
    store = open_store(root)
    path = join(root, INPUTS_RECORD)
    now = {_norm_input(u): v for u, v in (identities or input_identities(inputs)).items()}
    record = _read_json(store, path)
    if record is not None and not (isinstance(record, dict) and isinstance(record.get("inputs"), dict)):
        raise OutputConflict(_damaged(path, "is not an input record"))
    before = record["inputs"] if record else {}
    changed = {u: why for u, v in now.items() if (why := _what_changed(before.get(u), v))}
    if changed and policy == "refuse":
        listed = "; ".join(f"{u} ({why})" for u, why in list(changed.items())[:5])
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        raise OutputConflict(
            f"input changed since {root} was made from it: {listed}{more}. Its outputs were made "
            "from the old content; use another --output, or start over with "
            f"{ON_CHANGED_INPUT_ENV}=restart (--on-changed-input restart where the command has it)."
        )
    if changed:
        start_over(sorted(changed))
    if record is None or changed or any(u not in before for u in now):
        store.write_bytes(path, json_bytes({"inputs": {**before, **now}, "recorded": _now()}))
    return sorted(changed)


def input_identities(inputs: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    """core.storage.file_identities; InputError naming a file that cannot be read any more."""
    try:
        return file_identities(inputs)
    except OSError as e:  # vanished or unreadable since it was listed
        from core.errors import InputError

        raise InputError(f"cannot read input {getattr(e, 'filename', None) or ''}: {e}") from None


def _what_changed(old: Any, new: dict[str, Any] | None) -> str:
    """'' when the same (or not comparable), else what differs: 'size 10 -> 12, content differs'."""
    if not isinstance(old, dict) or new is None:
        return ""
    parts = []
    for key, label in (("size", "size"), ("etag", "ETag"), ("modified", "modified"), ("mtime_ns", "mtime")):
        if old.get(key) != new.get(key) and (key in old or key in new):
            a, b = (_ns_time(x) if key == "mtime_ns" else x for x in (old.get(key), new.get(key)))
            parts.append(f"{label} {a} -> {b}")
    if old.get("sample") != new.get("sample"):
        parts.append("content differs")
    return ", ".join(parts)


def _ns_time(ns: Any) -> str:
    if not isinstance(ns, int):
        return str(ns)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns % 10**9:09d}Z"


def check_disjoint(
    output: Path | str, inputs: Iterable[str] = (), files: Iterable[str] = (), nested: bool = True
) -> None:
    """Refuse an output that overlaps the inputs, before any work (OutputConflict naming both).

    `inputs`: the paths or prefixes as the user gave them (globs and listings are skipped: their
    `files` are checked); `files`: the resolved input files. Refused: the output is an input, an
    input lies inside the output (a restart or a unit's rewrite would touch it), and, when the job
    lists its input folders recursively (`nested`), an output inside an input folder: a rerun
    would read the job's own files as inputs (and then fail on their schema or refuse the changed
    list, far from the cause). Local paths are compared resolved; `s3a://` is `s3://`. Every data job
    calls this first with the output as given, so an output no job can write (check_writable_scheme)
    is refused here too, before the path is resolved.
    """
    check_writable_scheme(output, "--output")
    out = _norm_location(output)
    for given in inputs:
        if any(ch in str(given) for ch in "*?[") or str(given).endswith((".paths", ".paths.gz")):
            continue
        src = _norm_location(given)
        if src == out:
            raise OutputConflict(
                f"--output {output} is also the --input: a rerun would read the job's own files as "
                "inputs. Name another output folder."
            )
        if _inside(src, out):
            raise OutputConflict(f"--input {given} lies inside --output {output}; name another output folder")
        if nested and _inside(out, src) and (is_object_store(given) or Path(given).expanduser().is_dir()):
            raise OutputConflict(
                f"--output {output} lies inside --input {given}: a rerun would read the job's own files "
                "as inputs. Name an output folder outside the input."
            )
    for f in files:
        src = _norm_location(f)
        if src == out or _inside(src, out):
            raise OutputConflict(f"input {f} lies inside --output {output}; name another output folder")


def _norm_location(p: Path | str) -> str:
    s = str(p)
    if "://" in s:
        return ("s3://" + s.split("://", 1)[1] if s.startswith("s3a://") else s).rstrip("/")
    return str(Path(s).expanduser().resolve())


def _inside(child: str, parent: str) -> bool:
    return child.startswith(parent.rstrip("/") + "/")


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
