"""Checkpoints: DeepSpeed engine state + the trainer's own state per rank, a completion marker, resume choice.

Layout of one checkpoint, `<dir>/step_00000120/`:

    mp_rank_00_model_states.pt, zero_pp_rank_<r>_mp_rank_00_{model,optim}_states.pt   DeepSpeed (ZeRO-3 shards)
    trainer_rank<r>.json      step, tokens, sampler state, spike-guard state, quarantined data windows,
                              RNG states of this rank (Python, NumPy, torch CPU, CUDA; tensors as base64)
    COMPLETE.json             written last, by rank 0, after every rank finished: file → (size, sha256)

A checkpoint *counts* only with COMPLETE.json (DESIGN: temp → rename → marker). On object storage
(`checkpoint.dir=s3://…`) the same folder is made in local staging and uploaded, marker last, and resume
downloads a checkpoint marker first and verifies the copy: trainer/checkpoint_remote.py. Resume takes the newest
complete one whose files still match the marker (sha256, or sizes only with checkpoint.verify=size) and
falls back past any that do not, with a log line naming why. DeepSpeed's own `latest` pointer is not used:
it is written before other ranks may have finished.

The marker is data: whoever can write the checkpoint folder (or its bucket) writes it, and its `files` names are
joined to the folder on verify, download and load. So it is read as untrusted JSON and every name must be a plain
file name of the folder (`marker_files`, core/names.py: no `/`, `..`, `%2F`, NUL, absolute or empty name) with a
[size, sha256] value before any is opened (CONVENTIONS 14); a folder holding a symbolic link is refused too (the
trainer writes none, and a load through one reads outside the folder). Either makes the checkpoint one that does
not verify, the reason naming the marker and the field, and resume falls back past it.

Another world size (elastic resume): the trainer state is the same on every rank but for the RNG
(`load_trainer_state` gives each new rank its rule's share), and the ZeRO shards are converted on rank 0 to
DeepSpeed's universal checkpoint (`convert_to_universal`, into `step_…/universal/` for the one load, then
removed), which DeepSpeed partitions anew at load; `repair_universal_load` puts right the two things
DeepSpeed 0.19.8's ZeRO-3 universal load gets wrong (each group's hyperparameters, a shared step tensor).

Loading never runs code from a file. A pickle (`torch.load(..., weights_only=False)`) executes whatever
its author put in `__reduce__`; the sha256 in COMPLETE.json catches corruption, not a malicious author.
So the trainer's own state is JSON, a `trainer_rank<r>.pt` of older versions is read only with
`weights_only=True` and NumPy's array types allowed (what those files hold), and DeepSpeed's files, which
DeepSpeed itself loads with `weights_only=False`, are read inside `safe_torch_load()`: the project's one
weights-only guard (core/weights_only.py: torch's `TORCH_FORCE_WEIGHTS_ONLY_LOAD` turns every `torch.load`
into a weights-only one), with the two plain DeepSpeed classes its ZeRO optimizer state holds allowed
(`deepspeed_safe_globals`). Before that,
`check_deepspeed_files` reads each file's pickle statically, so a refused file is named in the error.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import random
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy._core.multiarray import _reconstruct  # how NumPy pickles an array

from core.errors import InputError
from core.files import sha256_file
from core.names import check_file_name, check_sha256, show
from core.safe_json import INT_BOUND, JSONFileError, read_json_file
from core.weights_only import weights_only_loads

MARKER = "COMPLETE.json"
TAG_RE = re.compile(r"^step_(\d{8})$")


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
    # a link is not a folder the trainer made: resuming or pruning through it would reach outside `root`
    tags = [p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink() and TAG_RE.match(p.name)]
    return sorted(tags, reverse=True)


def marker_json(step: int, world: int, files: dict[str, tuple[int, str]]) -> str:
    """COMPLETE.json's text: the step, the world size and every file's (size, sha256), as `marker_files` reads."""
    return json.dumps({"step": step, "world_size": world, "files": files}, indent=1)


def marker_files(marker: Any, where: str) -> dict[str, tuple[int, str]]:
    """The `files` of a parsed COMPLETE.json (`where` names it), each name a plain file name of the checkpoint
    folder and each value [size, sha256]; CheckpointError naming `where` and the field otherwise."""
    files = marker.get("files") if isinstance(marker, dict) else None
    if not isinstance(files, dict):
        raise CheckpointError(
            f"{where}: files must be an object of file name -> [size, sha256], got {show(files)}"
        )
    out = {}
    for name, value in files.items():
        try:
            check_file_name(name, folder="the checkpoint folder")
        except ValueError as e:
            raise CheckpointError(f"{where}: files: a name {e}") from None
        if name == MARKER:  # the marker is written after the files it lists: it cannot be one of them
            raise CheckpointError(f"{where}: files lists {MARKER} itself")
        ok = isinstance(value, list) and len(value) == 2
        size = value[0] if ok else None
        if not ok or not isinstance(size, int) or isinstance(size, bool) or not 0 <= size < INT_BOUND:
            raise CheckpointError(f"{where}: files[{name!r}] must be [size, sha256], got {show(value)}")
        try:
            out[name] = (size, check_sha256(value[1]))
        except ValueError as e:
            raise CheckpointError(f"{where}: files[{name!r}] sha256 {e}") from None
    return out


def verify(ckpt: Path, mode: str = "sha256") -> str | None:
    """None when `ckpt` is complete and intact, else the reason it is not."""
    marker = ckpt / MARKER
    if not marker.is_file():
        return "incomplete (no COMPLETE.json: a rank did not finish writing)"
    links = sorted(p.name for p in ckpt.iterdir() if p.is_symlink())
    if links:
        return f"holds a symbolic link ({', '.join(map(show, links[:3]))}), which the trainer never writes"
    try:
        files = marker_files(read_json_file(marker), str(marker))
    except (JSONFileError, CheckpointError) as e:  # both name the marker and what is wrong in it
        return str(e)
    for name, (size, digest) in files.items():
        p = ckpt / name
        if not p.is_file():
            return f"missing file {name}"
        if p.stat().st_size != size:
            return f"{name}: size {p.stat().st_size} != {size} recorded"
        if mode == "sha256" and sha256_file(p) != digest:
            return f"{name}: sha256 mismatch (corrupt)"
    return None


def first_good(
    tags: list[str], check: Callable[[str], str | None], where: Callable[[str], Any], log
) -> str | None:
    """The first of `tags` (newest first) that `check` finds good (None); logs each one skipped and why.
    One rule for a local folder and an object store (checkpoint_remote.newest_good)."""
    for tag in tags:
        why = check(tag)
        if why is None:
            return tag
        log(f"[checkpoint] skipping {where(tag)}: {why}; falling back to an older checkpoint")
    return None


def newest_good(root: Path, mode: str = "sha256", log=print) -> str | None:
    """Tag of the newest checkpoint that verifies; logs each one skipped and why."""
    return first_good(list_tags(root), lambda t: verify(root / t, mode), lambda t: root / t, log)


def prune(
    tags: list[str],
    is_complete: Callable[[str], bool],
    remove: Callable[[str], None],
    keep: int,
    where: Callable[[str], Any],
    log,
) -> None:
    """Keep the newest `keep` complete checkpoints of `tags` (newest first); remove older ones and incomplete
    ones older than them. One rule for a local folder and an object store (checkpoint_remote.save)."""
    complete = [t for t in tags if is_complete(t)]
    if len(complete) <= keep:
        return
    oldest_kept = complete[keep - 1]
    for t in tags:
        if t < oldest_kept:
            remove(t)
            log(f"[checkpoint] removed {where(t)} (keep last {keep})")


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
    ckpt = write_files(engine, root, step, trainer_state)
    names = sorted(p.name for p in ckpt.iterdir() if p.is_file() and p.name != MARKER)
    mine = {n: (os.path.getsize(ckpt / n), sha256_file(ckpt / n)) for n in names[rank::world]}
    gathered: list[dict] = [None] * world  # type: ignore[list-item]
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        files = {k: v for part in gathered for k, v in part.items()}
        tmpm = ckpt / (MARKER + ".tmp")
        tmpm.write_text(marker_json(step, world, files))
        os.replace(tmpm, ckpt / MARKER)
        _prune(root, keep, log)
    dist.barrier()
    return ckpt


def write_files(
    engine, root: Path, step: int, trainer_state: dict[str, Any], clear: bool | None = None
) -> Path:
    """Collective: every rank writes its DeepSpeed files and its trainer state into `root/step_…/`.

    Returns the folder once every rank's files are in place (a barrier); no marker yet. A leftover of a
    crashed attempt at this same step (it never got its marker) is removed first, by the rank whose
    `clear` is true (default: rank 0, for a folder every rank shares).
    """
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    tag = tag_for(step)
    ckpt = root / tag
    if (rank == 0 if clear is None else clear) and ckpt.exists():
        shutil.rmtree(ckpt)
    dist.barrier()
    engine.save_checkpoint(str(root), tag=tag, save_latest=False)
    state = {**trainer_state, "rng": rng_state(), "rank": rank, "world_size": world}
    tmp = ckpt / f".{trainer_state_name(rank)}.tmp"
    # allow_nan: the spike guard's window may hold a NaN loss; json reads NaN back
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, ckpt / trainer_state_name(rank))
    dist.barrier()  # every rank's files are in place
    return ckpt


def _prune(root: Path, keep: int, log) -> None:
    prune(
        list_tags(root),
        lambda t: (root / t / MARKER).is_file(),
        lambda t: shutil.rmtree(root / t, ignore_errors=True),
        keep,
        lambda t: root / t,
        log,
    )


MAX_STATE_BYTES = 256 << 20
"""Largest trainer state read back (RNG states and the sampler's position are a few hundred KB)."""


def read_trainer_state(ckpt: Path, rank: int = 0) -> dict[str, Any]:
    """Rank `rank`'s trainer state in `ckpt`: JSON, or a legacy .pt read weights-only; never code."""
    path = ckpt / trainer_state_name(rank)
    legacy = ckpt / f"trainer_rank{rank}.pt"
    if path.is_file():
        try:  # the checked reader; finite=False: the spike guard's window may hold a NaN loss
            st = read_json_file(path, max_bytes=MAX_STATE_BYTES, finite=False)
        except JSONFileError as e:
            why = str(e).removeprefix(f"{path}: ")  # the error names the file: once is enough
            raise CheckpointError(f"{path}: not a readable trainer state ({why})") from None
    elif legacy.is_file():
        path, st = legacy, _load_legacy(legacy)
    else:
        raise CheckpointError(f"{ckpt}: no {path.name} (nor a legacy {legacy.name})")
    if not isinstance(st, dict) or "world_size" not in st:
        raise CheckpointError(f"{path}: not a trainer state (no world_size)")
    return st


def saved_zero_stage(state: dict[str, Any], where: Any = "trainer state") -> int:
    """The ZeRO stage a checkpoint was written under, from its trainer state: the resolved stage it records
    (deepspeed.zero_stage may say auto), or for checkpoints from before that key their config's stage, a
    number then. A state with neither (hand-made, or cut short) is a CheckpointError naming `where`."""
    stage = state.get("zero_stage")
    if stage is None:
        # only now: the fallback must not be looked up when the resolved stage is recorded
        try:
            stage = state["config"]["deepspeed"]["zero_stage"]
        except (KeyError, TypeError):
            stage = None
    if not isinstance(stage, int) or isinstance(stage, bool) or stage not in (0, 1, 2, 3):
        raise CheckpointError(
            f"{where}: no ZeRO stage recorded (neither `zero_stage` 0-3 nor config.deepspeed.zero_stage; "
            f"got {stage!r}): not a trainer state this trainer wrote"
        )
    return stage


def load_trainer_state(ckpt: Path, rank: int, world: int) -> dict[str, Any]:
    """This rank's trainer state, also from a checkpoint written by another number of ranks.

    Everything but the RNG states is the same on every rank (step, tokens, the sampler's cursor into the one
    global stream, the spike guard: all follow all-reduced values), so at another world size every rank takes
    rank 0's, with the RNG states of old rank `rank mod N` (N: the checkpoint's world size). The rule keeps
    what a rank had when it existed before, and gives a new rank the states of an old one, as the trainer
    starts every rank with the same seed (and the model draws no random numbers while training).
    """
    base = read_trainer_state(ckpt, 0)
    old = base["world_size"]
    if old == world:
        return base if rank == 0 else read_trainer_state(ckpt, rank)
    if not isinstance(old, int) or isinstance(old, bool) or old < 1:
        raise CheckpointError(f"{ckpt}: world_size {old!r} in its trainer state is not a number of ranks")
    src = rank % old
    return base if src == 0 else {**base, "rng": read_trainer_state(ckpt, src)["rng"]}


UNIVERSAL = "universal"  # the subfolder of a checkpoint its universal conversion goes to, while it is loaded


def convert_to_universal(ckpt: Path, log=print) -> Path:
    """Convert the ZeRO checkpoint `ckpt` to DeepSpeed's universal checkpoint in `ckpt/universal/`; its path.

    A universal checkpoint holds, per parameter, the full fp32 weight and Adam moments (`zero/<name>/
    {fp32,exp_avg,exp_avg_sq}.pt`), which DeepSpeed's `checkpoint.load_universal` load partitions anew for
    any world size. Offline, on CPU, in this process (one worker: no child processes, so the weights-only
    load below covers all of it); run it on one rank. Every DeepSpeed file of `ckpt` is checked statically
    first, and `ds_to_universal` reads them inside safe_torch_load(). Converted anew each time, from the
    checkpoint that just verified, never reused: a leftover folder could be anyone's.
    """
    import argparse

    from deepspeed.checkpoint.ds_to_universal import main as ds_to_universal

    check_deepspeed_files(ckpt)
    out, tmp = ckpt / UNIVERSAL, ckpt / f".{UNIVERSAL}.tmp"
    remove_universal(ckpt)
    args = argparse.Namespace(
        input_folder=str(ckpt),
        output_folder=str(tmp),
        num_extract_workers=1,
        num_merge_workers=1,
        keep_temp_folder=False,
        strict=True,
        inject_missing_state=False,
    )
    t0 = time.perf_counter()
    quiet = contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO())
    with safe_torch_load(), quiet[0], quiet[1]:  # its prints and progress bars, per parameter
        ds_to_universal(args)
    (ckpt / "latest_universal").unlink(missing_ok=True)  # its pointer to tmp; the trainer names the tag
    os.replace(tmp, out)
    log(f"[checkpoint] converted {ckpt} to a universal checkpoint in {time.perf_counter() - t0:.1f} s")
    return out


def remove_universal(ckpt: Path) -> None:
    """Drop the universal conversion of `ckpt` (and a crashed one's leftovers): the ZeRO shards stay the
    checkpoint, and the conversion would double its size on disk."""
    for p in (ckpt / UNIVERSAL, ckpt / f".{UNIVERSAL}.tmp"):
        shutil.rmtree(p, ignore_errors=True)
    (ckpt / "latest_universal").unlink(missing_ok=True)


def universal_param_groups(ckpt: Path) -> list[dict[str, Any]]:
    """Every param group's saved hyperparameters (`params` left out) from `ckpt`'s universal conversion:
    DeepSpeed's load reads only the first group's. Read weights-only, as every DeepSpeed file here."""
    path = ckpt / UNIVERSAL / "zero" / "optimizer_state.pt"
    with safe_torch_load():
        sd = torch.load(path, map_location="cpu", weights_only=True)
    return [{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]]


def repair_universal_load(optimizer, group_settings: list[dict[str, Any]]) -> None:
    """Undo what DeepSpeed 0.19.8's ZeRO-3 universal load gets wrong (stage3.py,
    load_hp_checkpoint_state_from_checkpoint_dir_stage3), for a torch optimizer inside `optimizer`:

    - it gives every param group the first group's saved hyperparameters (here the no-decay group came
      back with weight_decay 0.1): group i gets `group_settings[i]`, its own saved ones
      (universal_param_groups);
    - it stores ONE `step` tensor object in the state of every sub-group, and torch's Adam increments it in
      place, once per sub-group per optimizer step: with two groups the bias correction ran two steps ahead
      after one step. Each sub-group gets its own copy.
    """
    for group, settings in zip(optimizer.param_groups, group_settings, strict=True):
        group.update(settings)
    for st in optimizer.optimizer.state.values():
        if torch.is_tensor(st.get("step")):
            st["step"] = st["step"].clone()


def gather_full_state(engine, optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Collective (every rank calls it): per parameter the full fp32 weight and Adam moments of a ZeRO
    engine, as `<name>/{fp32,exp_avg,exp_avg_sq}`, and per (sub-)group the optimizer's step count and
    hyperparameters. What a resume must restore exactly; the tests compare it before and after one."""
    from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state

    tensors = {}
    for name, p in engine.module.named_parameters():
        tensors[f"{name}/fp32"] = safe_get_full_fp32_param(p).cpu()
        for key in ("exp_avg", "exp_avg_sq"):
            tensors[f"{name}/{key}"] = safe_get_full_optimizer_state(p, key).cpu()
    flats = getattr(optimizer, "fp32_partitioned_groups_flat", None)  # ZeRO-3's sub-groups, in order
    states = (
        [optimizer.optimizer.state[f] for f in flats] if flats else list(optimizer.optimizer.state.values())
    )
    meta = {
        "step": [float(st["step"]) for st in states if "step" in st],
        "param_groups": [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups],
    }
    return tensors, meta


# what a trainer_rank<r>.pt of earlier versions holds besides plain containers and tensors: the array of
# np.random.get_state() (torch.serialization.get_unsafe_globals_in_checkpoint on one of those files)
_LEGACY_GLOBALS = [np.ndarray, np.dtype, np.dtypes.UInt32DType, _reconstruct]


def load_error(path: Path | str, e: BaseException) -> CheckpointError:
    """One line naming `path` and why torch could not load it, for any error of `torch.load` on it.

    torch's weights-only message opens with advice to retry with `weights_only=False` (which would run
    the file's code), and its zip reader's with a paragraph on corruption: the cause is the line naming
    the refused global, else the first sentence. A refused global means the file is not plain data;
    anything else (truncated, not a torch file, a missing entry) that it is not a readable checkpoint.
    """
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    refused = next((ln for ln in lines if "unsupported global" in ln.lower()), None)
    if refused is not None:
        return CheckpointError(
            f"{path}: refused to load: it is not plain data (weights-only unpickling failed: {refused}); "
            "load only checkpoints you wrote"
        )
    cause = next((ln for ln in lines if "unsupported" in ln.lower()), lines[0] if lines else "")
    cause = cause.split(". ")[0].rstrip(".")
    why = f"{type(e).__name__}: {cause}" if cause else type(e).__name__
    return CheckpointError(f"{path}: not a readable checkpoint file ({why}); the file is damaged or not ours")


def _load_legacy(path: Path) -> dict[str, Any]:
    """A pickled trainer state of earlier versions, read weights-only: a file that needs any other global
    (a `__reduce__` calling os.system, say) is refused with the name of the file, and nothing runs."""
    try:
        with weights_only_loads(_LEGACY_GLOBALS):
            return torch.load(path, weights_only=True)
    except Exception as e:  # pickle.UnpicklingError, or any error of the restricted unpickler
        raise load_error(path, e) from None


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
            except Exception as e:  # a zip that does not open (truncated, overwritten): named here
                raise load_error(f, e) from None
            if unsafe:
                raise CheckpointError(
                    f"{f}: refused to load: it is not plain data (it needs {', '.join(sorted(unsafe))}); "
                    "load only checkpoints you wrote"
                )


def safe_torch_load():
    """Every `torch.load` inside is weights-only, also DeepSpeed's own `weights_only=False` calls, with
    the plain DeepSpeed classes of its ZeRO files allowed: the project's one guard
    (core/weights_only.py), so DeepSpeed's loaders need no patching."""
    return weights_only_loads(deepspeed_safe_globals())
