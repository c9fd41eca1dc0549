"""Checkpoints: DeepSpeed engine state + the trainer's own state per rank, a completion marker, resume choice.

Layout of one checkpoint, `<dir>/step_00000120/`:

    mp_rank_00_model_states.pt, zero_pp_rank_<r>_mp_rank_00_{model,optim}_states.pt   DeepSpeed (ZeRO-3 shards)
    trainer_rank<r>.pt        step, tokens, sampler state, spike-guard state, quarantined data windows,
                              RNG states of this rank (Python, NumPy, torch CPU, CUDA)
    COMPLETE.json             written last, by rank 0, after every rank finished: file → (size, sha256)

A checkpoint *counts* only with COMPLETE.json (DESIGN: temp → rename → marker). Resume takes the newest
complete one whose files still match the marker (sha256, or sizes only with checkpoint.verify=size) and
falls back past any that do not, with a log line naming why. DeepSpeed's own `latest` pointer is not used:
it is written before other ranks may have finished.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core.files import sha256_file

MARKER = "COMPLETE.json"
TAG_RE = re.compile(r"^step_(\d{8})$")


def tag_for(step: int) -> str:
    return f"step_{step:08d}"


def list_tags(root: Path) -> list[str]:
    """Checkpoint folders under root, newest first (complete or not)."""
    if not root.is_dir():
        return []
    tags = [p.name for p in root.iterdir() if p.is_dir() and TAG_RE.match(p.name)]
    return sorted(tags, reverse=True)


def verify(ckpt: Path, mode: str = "sha256") -> str | None:
    """None when `ckpt` is complete and intact, else the reason it is not."""
    marker = ckpt / MARKER
    if not marker.is_file():
        return "incomplete (no COMPLETE.json: a rank did not finish writing)"
    try:
        files = json.loads(marker.read_text())["files"]
    except (ValueError, KeyError) as e:
        return f"unreadable {MARKER}: {e}"
    for name, (size, digest) in files.items():
        p = ckpt / name
        if not p.is_file():
            return f"missing file {name}"
        if p.stat().st_size != size:
            return f"{name}: size {p.stat().st_size} != {size} recorded"
        if mode == "sha256" and sha256_file(p) != digest:
            return f"{name}: sha256 mismatch (corrupt)"
    return None


def newest_good(root: Path, mode: str = "sha256", log=print) -> str | None:
    """Tag of the newest checkpoint that verifies; logs each one skipped and why."""
    for tag in list_tags(root):
        why = verify(root / tag, mode)
        if why is None:
            return tag
        log(f"[checkpoint] skipping {root / tag}: {why}; falling back to an older checkpoint")
    return None


def rng_state() -> dict[str, Any]:
    st = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch_cpu": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        st["torch_cuda"] = torch.cuda.get_rng_state_all()
    return st


def set_rng_state(st: dict[str, Any]) -> None:
    random.setstate(st["python"])
    np.random.set_state(st["numpy"])
    torch.set_rng_state(st["torch_cpu"])
    if "torch_cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["torch_cuda"])


def save(engine, root: Path, step: int, trainer_state: dict[str, Any], keep: int, log=print) -> Path:
    """Collective: every rank calls it. Returns the checkpoint folder once it is complete everywhere."""
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    tag = tag_for(step)
    ckpt = root / tag
    if rank == 0 and ckpt.exists():
        shutil.rmtree(ckpt)  # a leftover of a crashed attempt at this same step (it never got its marker)
    dist.barrier()
    engine.save_checkpoint(str(root), tag=tag, save_latest=False)
    state = {**trainer_state, "rng": rng_state(), "rank": rank, "world_size": world}
    tmp = ckpt / f".trainer_rank{rank}.pt.tmp"
    torch.save(state, tmp)
    os.replace(tmp, ckpt / f"trainer_rank{rank}.pt")
    dist.barrier()  # every rank's files are in place
    names = sorted(p.name for p in ckpt.iterdir() if p.is_file() and p.name != MARKER)
    mine = {n: (os.path.getsize(ckpt / n), sha256_file(ckpt / n)) for n in names[rank::world]}
    gathered: list[dict] = [None] * world  # type: ignore[list-item]
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        files = {k: v for part in gathered for k, v in part.items()}
        tmpm = ckpt / (MARKER + ".tmp")
        tmpm.write_text(json.dumps({"step": step, "world_size": world, "files": files}, indent=1))
        os.replace(tmpm, ckpt / MARKER)
        _prune(root, keep, log)
    dist.barrier()
    return ckpt


def _prune(root: Path, keep: int, log) -> None:
    """Keep the newest `keep` complete checkpoints; drop older ones and incomplete ones older than them."""
    complete = [t for t in list_tags(root) if (root / t / MARKER).is_file()]
    if len(complete) <= keep:
        return
    oldest_kept = complete[keep - 1]
    for t in list_tags(root):
        if t < oldest_kept:
            shutil.rmtree(root / t, ignore_errors=True)
            log(f"[checkpoint] removed {root / t} (keep last {keep})")


def load_trainer_state(ckpt: Path, rank: int, world: int) -> dict[str, Any]:
    st = torch.load(ckpt / f"trainer_rank{rank}.pt", weights_only=False)
    if st["world_size"] != world:
        raise RuntimeError(
            f"{ckpt} was written by {st['world_size']} ranks, this run has {world}: resuming on another "
            "world size needs DeepSpeed's universal checkpoint conversion (not supported here yet)"
        )
    return st
