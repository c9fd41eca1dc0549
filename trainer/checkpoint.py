"""Checkpoints: DeepSpeed engine state + the trainer's own state per rank, a completion marker, resume choice.

Layout of one checkpoint, `<dir>/step_00000120/`:

    mp_rank_00_model_states.pt, zero_pp_rank_<r>_mp_rank_00_{model,optim}_states.pt   DeepSpeed (ZeRO-3 shards)
    trainer_rank<r>.json      step, tokens, sampler state, spike-guard state, quarantined data windows,
                              RNG states of this rank (Python, NumPy, torch CPU, CUDA; tensors as base64)
    COMPLETE.json             written last, by rank 0, after every rank finished: file → (size, sha256)

A checkpoint *counts* only with COMPLETE.json (DESIGN: temp → rename → marker). Resume takes the newest
complete one whose files still match the marker (sha256, or sizes only with checkpoint.verify=size) and
falls back past any that do not, with a log line naming why. DeepSpeed's own `latest` pointer is not used:
it is written before other ranks may have finished.

Loading never runs code from a file. A pickle (`torch.load(..., weights_only=False)`) executes whatever
its author put in `__reduce__`; the sha256 in COMPLETE.json catches corruption, not a malicious author.
So the trainer's own state is JSON, a `trainer_rank<r>.pt` of older versions is read only with
`weights_only=True` and NumPy's array types allowed (what those files hold), and DeepSpeed's files, which
DeepSpeed itself loads with `weights_only=False`, are read inside `safe_torch_load()`: torch's
`TORCH_FORCE_WEIGHTS_ONLY_LOAD` turns every `torch.load` into a weights-only one, with the two plain
DeepSpeed classes its ZeRO optimizer state holds allowed (`deepspeed_safe_globals`). Before that,
`check_deepspeed_files` reads each file's pickle statically, so a refused file is named in the error.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy._core.multiarray import _reconstruct  # how NumPy pickles an array

from core.errors import InputError
from core.files import sha256_file

MARKER = "COMPLETE.json"
TAG_RE = re.compile(r"^step_(\d{8})$")
FORCE_WEIGHTS_ONLY = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"


class CheckpointError(InputError):
    """A checkpoint file cannot be loaded (refused as unsafe, unreadable, or from another run shape)."""


def trainer_state_name(rank: int) -> str:
    return f"trainer_rank{rank}.json"


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


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.numpy().tobytes()).decode("ascii")


def _unb64(s: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(s)), dtype=torch.uint8)  # torch RNG states are bytes


def rng_state() -> dict[str, Any]:
    """This process's RNG states as JSON values (exactly: ints, repr-exact floats, base64 bytes)."""
    version, mt, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    st = {
        "python": [version, list(mt), gauss],
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch_cpu": _b64(torch.get_rng_state()),
    }
    if torch.cuda.is_available():
        st["torch_cuda"] = [_b64(t) for t in torch.cuda.get_rng_state_all()]
    return st


def set_rng_state(st: dict[str, Any]) -> None:
    """Inverse of rng_state(); also takes the tuples/arrays/tensors of a legacy trainer_rank<r>.pt."""
    version, mt, gauss = st["python"]
    random.setstate((version, tuple(mt), gauss))
    kind, keys, pos, has_gauss, cached = st["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    cpu = st["torch_cpu"]
    torch.set_rng_state(_unb64(cpu) if isinstance(cpu, str) else cpu)
    if "torch_cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([_unb64(t) if isinstance(t, str) else t for t in st["torch_cuda"]])


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
    tmp = ckpt / f".{trainer_state_name(rank)}.tmp"
    # allow_nan: the spike guard's window may hold a NaN loss; json reads NaN back
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, ckpt / trainer_state_name(rank))
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


def read_trainer_state(ckpt: Path, rank: int = 0) -> dict[str, Any]:
    """Rank `rank`'s trainer state in `ckpt`: JSON, or a legacy .pt read weights-only; never code."""
    path = ckpt / trainer_state_name(rank)
    legacy = ckpt / f"trainer_rank{rank}.pt"
    if path.is_file():
        try:
            st = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{path}: not a readable trainer state ({e})") from None
    elif legacy.is_file():
        path, st = legacy, _load_legacy(legacy)
    else:
        raise CheckpointError(f"{ckpt}: no {path.name} (nor a legacy {legacy.name})")
    if not isinstance(st, dict) or "world_size" not in st:
        raise CheckpointError(f"{path}: not a trainer state (no world_size)")
    return st


def load_trainer_state(ckpt: Path, rank: int, world: int) -> dict[str, Any]:
    """This rank's trainer state, refused when the checkpoint was written by another number of ranks."""
    st = read_trainer_state(ckpt, rank)
    if st["world_size"] != world:
        raise CheckpointError(
            f"{ckpt} was written by {st['world_size']} ranks, this run has {world}: resuming on another "
            "world size needs DeepSpeed's universal checkpoint conversion (not supported here yet)"
        )
    return st


# what a trainer_rank<r>.pt of earlier versions holds besides plain containers and tensors: the array of
# np.random.get_state() (torch.serialization.get_unsafe_globals_in_checkpoint on one of those files)
_LEGACY_GLOBALS = [np.ndarray, np.dtype, np.dtypes.UInt32DType, _reconstruct]


def _load_legacy(path: Path) -> dict[str, Any]:
    """A pickled trainer state of earlier versions, read weights-only: a file that needs any other global
    (a `__reduce__` calling os.system, say) is refused with the name of the file, and nothing runs."""
    try:
        with torch.serialization.safe_globals(_LEGACY_GLOBALS):
            return torch.load(path, weights_only=True)
    except Exception as e:  # pickle.UnpicklingError, or any error of the restricted unpickler
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        # torch's message opens with advice to retry with weights_only=False; the cause is a later line
        why = next(
            (ln for ln in lines if "unsupported" in ln.lower()), lines[-1] if lines else type(e).__name__
        )
        raise CheckpointError(
            f"{path}: refused to load: it is not plain data (weights-only unpickling failed: {why}); "
            "load only checkpoints you wrote"
        ) from None


def deepspeed_safe_globals() -> list:
    """The non-container classes DeepSpeed's ZeRO checkpoint files hold (torch.serialization.
    get_unsafe_globals_in_checkpoint on a ZeRO-3 checkpoint): a plain loss-scaler record and an enum."""
    from deepspeed.runtime.fp16.loss_scaler import LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum

    return [LossScaler, ZeroStageEnum]


def check_deepspeed_files(ckpt: Path) -> None:
    """Refuse, naming the file and what it needs, a DeepSpeed file of `ckpt` that is not plain data.

    A static read of each file's pickle (torch.serialization.get_unsafe_globals_in_checkpoint: nothing is
    called) before DeepSpeed sees the folder, so the error names the file; the guarantee itself is the
    weights-only unpickler of safe_torch_load(), which also covers what a static read cannot see.
    """
    with torch.serialization.safe_globals(deepspeed_safe_globals()):
        for f in sorted(ckpt.glob("*.pt")):
            if f.name.startswith("trainer_rank"):
                continue  # the trainer's own legacy state: read_trainer_state's allowlist
            try:
                unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(f)
            except ValueError:  # torch's legacy (non-zip) format: only the forced weights-only load checks it
                continue
            if unsafe:
                raise CheckpointError(
                    f"{f}: refused to load: it is not plain data (it needs {', '.join(sorted(unsafe))}); "
                    "load only checkpoints you wrote"
                )


@contextlib.contextmanager
def safe_torch_load() -> Iterator[None]:
    """Every `torch.load` inside is weights-only, also DeepSpeed's own `weights_only=False` calls.

    torch reads TORCH_FORCE_WEIGHTS_ONLY_LOAD at each call and lets it override an explicit
    `weights_only=False` (torch/serialization.py), so DeepSpeed's loaders need no patching.
    """
    old = os.environ.get(FORCE_WEIGHTS_ONLY)
    os.environ[FORCE_WEIGHTS_ONLY] = "1"
    try:
        with torch.serialization.safe_globals(deepspeed_safe_globals()):
            yield
    finally:
        if old is None:
            os.environ.pop(FORCE_WEIGHTS_ONLY, None)
        else:
            os.environ[FORCE_WEIGHTS_ONLY] = old
