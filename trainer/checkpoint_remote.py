"""Checkpoints on object storage (`checkpoint.dir: s3://bucket/prefix`): the guarantees of a local folder.

DeepSpeed writes only to local files, and S3 has no rename. So a checkpoint is made in a local staging
folder, then each file is uploaded to its final key, then the marker goes up LAST:

    save    every rank writes its files into <staging>/step_…/ (checkpoint.write_files, as locally);
            rank 0 first deletes what a crashed attempt at this step left under the prefix (its marker
            first). Each rank uploads the files it wrote (`owner`: by name, so it also holds when each
            node has its own staging folder), with their size and sha256 computed from the local bytes.
            Rank 0 checks every file is listed under the prefix at its size, then writes COMPLETE.json
            (one PUT), then prunes. Only then is the step's local copy dropped.
    resume  rank 0 reads each tag's COMPLETE.json FIRST (newest first); a tag without one is skipped as
            incomplete, whatever keys it has. It downloads exactly the files the marker lists, every
            name checked first (checkpoint.marker_files: a plain file name, never `../x`), into a
            cleared local folder and runs checkpoint.verify on that copy (sha256 of the downloaded bytes,
            or sizes with checkpoint.verify=size); a tag that fails falls back to the one before, logged.
            The local copy then goes through the trainer's one load path (trainer state as JSON, the
            static pickle check, the weights-only DeepSpeed load, the universal conversion for another
            world size): nothing of that is specific to object storage. The other nodes' first ranks
            download the chosen tag too, into their own staging folder.
    prune   the newest `keep` complete checkpoints stay; an older one loses its marker first, then its
            keys, so a prune cut short leaves an incomplete checkpoint, never a complete-looking one
            with files missing.

A killed run leaves at most keys without a marker (never read, overwritten or pruned later) and local
scratch, which nothing trusts: every resume downloads into a cleared folder.

Credentials and endpoint come from the AWS chain (core/storage.py), never from the config; the prefix is
checked (bucket reachable, a probe object written and deleted) before the process group starts.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.errors import ConfigError
from core.files import sha256_file
from core.output import check_folder_path
from core.safe_json import JSONFileError, loads_checked
from core.storage import ObjectStore, join, staging_dir
from trainer.checkpoint import (
    MARKER,
    TAG_RE,
    CheckpointError,
    first_good,
    marker_files,
    marker_json,
    prune,
    tag_for,
    verify,
    write_files,
)

__all__ = [
    "all_ok",
    "check_writable",
    "fetch",
    "is_fetched",
    "local_rank",
    "mark_fetched",
    "newest_good",
    "owner",
    "save",
    "staging_root",
]

# DeepSpeed's per-rank shard files and the trainer's per-rank state; anything else rank 0 wrote
_RANK_FILE = re.compile(r"^(?:zero_pp_rank_|trainer_rank)(\d+)[_.]")


def owner(name: str) -> int:
    """The rank that writes checkpoint file `name`: the number in a per-rank name, else rank 0."""
    m = _RANK_FILE.match(name)
    return int(m.group(1)) if m else 0


def staging_root(uri: str, staging: str = "") -> Path:
    """The local folder a run with checkpoints at `uri` stages them in: one per URI (its hash), under
    `staging` (checkpoint.staging) or the system temporary folder."""
    if not staging:
        return staging_dir(uri)
    path = Path(staging).expanduser().resolve() / hashlib.sha1(uri.encode()).hexdigest()[:12]
    path.mkdir(parents=True, exist_ok=True)
    return path


def check_writable(uri: str) -> None:
    """ConfigError naming checkpoint.dir unless its bucket answers and an object can be written there.

    Called on every rank before the process group starts: a wrong bucket or endpoint is an exit 2 in
    seconds, not an upload error after the first checkpoint interval."""
    try:
        check_folder_path(uri, "checkpoint.dir")
        store = ObjectStore(uri)
        probe = join(uri, f".write-probe-{uuid.uuid4().hex[:12]}")  # not a step_ name: never listed
        store.write_bytes(probe, b"")
        store.delete(probe)
    except ConfigError:
        raise
    except Exception as e:  # OutputConflict (unreachable, no bucket) or the probe's OSError
        msg = str(e) if str(e).startswith("checkpoint.dir") else f"checkpoint.dir {uri}: {e}"
        raise ConfigError(f"{msg} (checked before training starts: the bucket must exist and be writable "
                          "with the AWS environment's credentials)") from None  # fmt: skip


def list_tags(store: ObjectStore, uri: str) -> list[str]:
    """Checkpoint prefixes under `uri`, newest first (complete or not)."""
    return sorted((d for d in store.list_dirs(uri) if TAG_RE.match(d)), reverse=True)


def all_ok(dist, error: str | None) -> None:
    """Collective: raise CheckpointError on every rank if any rank reports an error (none waits alone).
    Also used by the trainer for its local checkpoints (the elastic resume's conversion)."""
    errors: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(errors, error)
    bad = [e for e in errors if e]
    if bad:
        raise CheckpointError("; ".join(bad))


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", 0))


def save(
    engine,
    staging: Path,
    uri: str,
    step: int,
    trainer_state: dict[str, Any],
    keep: int,
    log=print,
    on_uploaded: Callable[[int], None] | None = None,
) -> str:
    """Collective: every rank calls it. Returns the checkpoint's URI once its marker is written.

    `on_uploaded(n)` is called on each rank after its n-th uploaded file (test faults: a kill mid-upload).
    """
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    store = ObjectStore(uri)
    tag = tag_for(step)
    remote = join(uri, tag)
    error = None
    if rank == 0:  # a crashed attempt at this step: marker first, so nothing complete-looking is half gone
        try:
            store.delete(join(remote, MARKER))
            store.delete_tree(remote)
        except OSError as e:
            error = f"{remote}: cannot clear a crashed attempt's keys: {e}"
    all_ok(dist, error)
    local = write_files(engine, staging, step, trainer_state, clear=local_rank() == 0)
    mine: dict[str, tuple[int, str]] = {}
    error = None
    try:
        for n, f in enumerate(sorted(p for p in local.iterdir() if p.is_file() and owner(p.name) == rank), 1):
            mine[f.name] = (f.stat().st_size, sha256_file(f))
            store.upload(f, join(remote, f.name))  # one PUT, or a multipart upload S3 shows only when whole
            if on_uploaded is not None:
                on_uploaded(n)
    except OSError as e:
        error = f"checkpoint {remote} not saved: upload failed on rank {rank}: {e}"
    gathered: list[dict] = [None] * world  # type: ignore[list-item]
    dist.all_gather_object(gathered, {"files": mine, "error": error})
    bad = [g["error"] for g in gathered if g["error"]]
    if bad:
        raise CheckpointError("; ".join(bad))
    error = None
    if rank == 0:
        files = {k: v for part in gathered for k, v in part["files"].items()}
        try:
            listed = store.sizes(remote)
            wrong = [n for n, (size, _) in files.items() if listed.get(n) != size]
            if wrong:
                error = f"checkpoint {remote} not saved: uploaded keys missing or of another size: {wrong}"
            else:
                store.write_bytes(join(remote, MARKER), marker_json(step, world, files).encode())  # LAST
                _prune(store, uri, keep, log)
        except OSError as e:
            error = f"checkpoint {remote}: writing its marker failed: {e}"
    all_ok(dist, error)
    if local_rank() == 0:
        shutil.rmtree(local, ignore_errors=True)  # the uploaded copy is the checkpoint now
    return remote


def _prune(store: ObjectStore, uri: str, keep: int, log) -> None:
    def remove(t: str) -> None:  # marker first: a prune cut short leaves an incomplete checkpoint
        store.delete(join(uri, t, MARKER))
        store.delete_tree(join(uri, t))

    tags = list_tags(store, uri)
    prune(tags, lambda t: store.exists(join(uri, t, MARKER)), remove, keep, lambda t: join(uri, t), log)


def fetch(uri: str, tag: str, staging: Path, mode: str = "sha256") -> str | None:
    """Download checkpoint `tag` of `uri` into `staging/tag` (cleared first), marker first; None when the
    local copy is complete and intact (checkpoint.verify), else the reason it is not (the copy removed)."""
    if not TAG_RE.match(tag):  # `staging/tag` is cleared below: only a checkpoint folder's name
        return f"{tag!r} is not a checkpoint tag (step_ and 8 digits)"
    store = ObjectStore(uri)
    remote, local = join(uri, tag), staging / tag
    where = join(remote, MARKER)
    try:
        raw = store.read_bytes(where)
    except FileNotFoundError:
        return f"incomplete (no {MARKER}: the upload did not finish)"
    try:  # every name checked before the first download: each is joined to the key and the local folder
        files = marker_files(loads_checked(raw, where), where)
    except (JSONFileError, CheckpointError) as e:  # both name the marker and what is wrong in it
        return str(e)
    shutil.rmtree(local, ignore_errors=True)
    (staging / f".fetched-{tag}").unlink(missing_ok=True)
    local.mkdir(parents=True)
    for name in files:
        try:
            store.download(join(remote, name), local / name)
        except FileNotFoundError:
            why = f"missing file {name}"
            break
    else:
        (local / MARKER).write_bytes(raw)
        why = verify(local, mode)
        if why is None:
            return None
    shutil.rmtree(local, ignore_errors=True)
    return why


def mark_fetched(staging: Path, tag: str) -> str:
    """Record a new id for the download of `tag` in `staging` (a dot file beside it); returns the id."""
    token = uuid.uuid4().hex
    (staging / f".fetched-{tag}").write_text(token)
    return token


def is_fetched(staging: Path, tag: str, token: str) -> bool:
    """True when `staging` holds the download `mark_fetched` named `token` (the same folder as rank 0's)."""
    p = staging / f".fetched-{tag}"
    return p.is_file() and p.read_text() == token


def newest_good(uri: str, staging: Path, mode: str = "sha256", log=print) -> str | None:
    """Tag of the newest checkpoint under `uri` that is complete and verifies, downloaded into
    `staging/tag`; logs each one skipped and why."""
    tags = list_tags(ObjectStore(uri), uri)
    return first_good(tags, lambda t: fetch(uri, t, staging, mode), lambda t: join(uri, t), log)
