"""The trainer's checkpoints, local or on an object store: the `Checkpointer` chooses, verifies, loads,
saves and prunes them, and `CheckpointCadence` (a step hook) saves every checkpoint.every steps and at the end.

The file format and its safety rules are trainer/checkpoint.py (layout, COMPLETE.json marker, trainer state
as JSON, the weights-only load, the universal conversion for another world size); the object-store
protocol (staging folder, marker uploaded last, download then verify) is trainer/checkpoint_remote.py.
This file is what the run does with them, collectively on every rank:

    choose  rank 0 picks the newest checkpoint that verifies (downloading it first on an object store) and
            broadcasts the tag; on an object store every other node's first rank downloads it too.
    load    the trainer state first (plain JSON), then the static pickle check, then DeepSpeed's load
            inside the weights-only guard: at the same world size (or any, at ZeRO stage 0) directly,
            else through the universal conversion. The caller restores the returned trainer state.
    save    DeepSpeed's files + each rank's trainer state + the marker, then pruning to checkpoint.keep.

A checkpoint loads only into the ZeRO stage that wrote it (with zero_stage=auto another device or world size
can resolve another stage): refused with the setting that resumes it.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from core.storage import is_object_store
from trainer import checkpoint as ckpt
from trainer import checkpoint_remote as remote
from trainer.config import CheckpointSection
from trainer.hooks import Hook, StepEnd


def check_store(cfg: CheckpointSection) -> None:
    """Checkpoints on object storage: the bucket must answer and take a write, or a ConfigError (exit 2)
    now, before the process group starts. Nothing to check for a local folder."""
    if is_object_store(cfg.dir):
        remote.check_writable(cfg.dir)


@contextlib.contextmanager
def _universal_load(engine) -> Iterator[None]:
    """DeepSpeed reads `checkpoint.load_universal` from its config at each load_checkpoint, and only there
    (engine.py, 0.19.8): switched on for the one load of a universal checkpoint, so later loads of the
    run's own checkpoints (rollbacks, at this world size) take the regular path."""
    old = engine._config.load_universal_checkpoint
    engine._config.load_universal_checkpoint = True
    try:
        yield
    finally:
        engine._config.load_universal_checkpoint = old


class Checkpointer:
    """One rank's view of the run's checkpoints (checkpoint.dir): a local folder, or an object-store prefix
    staged through a local folder. Every method but `where` is collective: call it on every rank."""

    def __init__(self, cfg: CheckpointSection, dist, rank: int, world: int, log: Callable[[str], None]):
        self.cfg, self.dist, self.rank, self.world, self.log = cfg, dist, rank, world, log
        self.uri = cfg.dir if is_object_store(cfg.dir) else None
        # where DeepSpeed reads and writes: the checkpoint folder, or for an object store the local
        # staging folder checkpoints are made in and downloaded to (trainer/checkpoint_remote.py)
        self.root: Path | None = (
            remote.staging_root(self.uri, cfg.staging) if self.uri else Path(cfg.dir) if cfg.dir else None
        )
        self.last_saved = -1  # the step of the newest checkpoint this run saved or loaded

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def where(self, tag: str) -> str:
        return f"{self.uri or self.root}/{tag}"

    def choose(self) -> str | None:
        """The newest good checkpoint's tag (rank 0 decides); on an object store it is then in every node's
        local staging folder (`root / tag`), downloaded and verified."""
        mode = self.cfg.verify
        choice: list = [None, None, None]  # tag, error, the id of rank 0's download
        if self.rank == 0:
            try:
                if self.uri:
                    choice[0] = remote.newest_good(self.uri, self.root, mode, log=print)
                    if choice[0] is not None:
                        choice[2] = remote.mark_fetched(self.root, choice[0])
                else:
                    choice[0] = ckpt.newest_good(self.root, mode, log=print)
            except OSError as e:  # the object store failed: every rank stops with it, not only rank 0
                choice[1] = f"cannot read checkpoints under {self.uri}: {e}"
        self.dist.broadcast_object_list(choice, src=0)
        if choice[1] is not None:
            raise ckpt.CheckpointError(choice[1])
        tag = choice[0]
        if self.uri and tag is not None:
            self._fetch_on_this_node(tag, choice[2])
        return tag

    def _fetch_on_this_node(self, tag: str, token: str) -> None:
        """The first rank of a node without rank 0's download (its own staging folder) fetches `tag` too."""
        error = None
        if self.rank != 0 and remote.local_rank() == 0 and not remote.is_fetched(self.root, tag, token):
            try:
                why = remote.fetch(self.uri, tag, self.root, self.cfg.verify)
            except OSError as e:
                why = str(e)
            if why is not None:
                error = f"rank {self.rank}: cannot fetch {tag} from {self.uri}: {why}"
        remote.all_ok(self.dist, error)

    def load(self, tag: str, engine, optimizer, zero_stage: int) -> dict[str, Any]:
        """Load checkpoint `tag` into `engine` and `optimizer`; returns this rank's trainer state (step,
        tokens, sampler, spike guard, RNG) for the caller to restore."""
        path = self.root / tag
        st = ckpt.load_trainer_state(path, self.rank, self.world)  # first: plain JSON
        ckpt.check_deepspeed_files(path)  # a refused file is named here, before DeepSpeed reads any
        saved_stage = ckpt.saved_zero_stage(st)
        if saved_stage != zero_stage:
            raise ckpt.CheckpointError(
                f"{path} was written under ZeRO stage {saved_stage}, this run resolved stage "
                f"{zero_stage}: set deepspeed.zero_stage={saved_stage} to resume from it"
            )
        # stage 0: every rank's checkpoint holds the full model and optimizer state, any world size loads it
        if st["world_size"] == self.world or zero_stage == 0:
            # DeepSpeed's own torch.load(weights_only=False), forced weights-only
            with ckpt.safe_torch_load():
                load_path, _ = engine.load_checkpoint(
                    str(self.root), tag=tag, load_optimizer_states=True, load_lr_scheduler_states=False
                )
        else:
            load_path = self._load_other_world_size(path, st["world_size"], engine, optimizer)
        if load_path is None:
            raise RuntimeError(f"DeepSpeed could not load {path}")
        self.last_saved = st["step"]
        if self.uri:  # the downloaded copy has been read by every rank
            self.dist.barrier()
            if remote.local_rank() == 0:
                shutil.rmtree(path, ignore_errors=True)
                (self.root / f".fetched-{tag}").unlink(missing_ok=True)
        return st

    def _load_other_world_size(self, path: Path, old_world: int, engine, optimizer) -> str | None:
        """Elastic resume: `path` was written by `old_world` ranks. Rank 0 converts it to DeepSpeed's universal
        checkpoint (trainer/checkpoint.py, convert_to_universal), every rank loads its new partition of each
        parameter's fp32 weight and Adam moments from it, and what DeepSpeed's load gets wrong is put right
        (repair_universal_load). The conversion is removed once every rank has loaded it."""
        ranks = f"{old_world} rank{'s' * (old_world != 1)}"
        self.log(f"[checkpoint] {path} was written by {ranks}, this run has {self.world}: "
                 "loading it through DeepSpeed's universal checkpoint")  # fmt: skip
        # rank 0 converts the shared folder; with object storage each node's first rank its own download
        converts = remote.local_rank() == 0 if self.uri else self.rank == 0
        error = None
        if converts:
            try:
                ckpt.convert_to_universal(path)
            except Exception as e:  # every rank stops with it, not only the converting one
                error = f"{path}: conversion to a universal checkpoint failed: {type(e).__name__}: {e}"
        remote.all_ok(self.dist, error)
        with ckpt.safe_torch_load(), _universal_load(engine):
            load_path, _ = engine.load_checkpoint(
                str(path), tag=ckpt.UNIVERSAL, load_optimizer_states=True, load_lr_scheduler_states=False
            )
            groups = ckpt.universal_param_groups(path)
        ckpt.repair_universal_load(optimizer, groups)
        self.dist.barrier()  # every rank has read the conversion
        if converts:
            ckpt.remove_universal(path)
        return load_path

    def save(self, engine, step: int, state: dict[str, Any], on_uploaded: Callable[[int], None]) -> float:
        """Save checkpoint `step` (and prune to checkpoint.keep); returns the seconds it took."""
        t0 = time.perf_counter()
        if self.uri:
            remote.save(engine, self.root, self.uri, step, state, self.cfg.keep, log=self.log,
                        on_uploaded=on_uploaded)  # fmt: skip
        else:
            ckpt.save(engine, self.root, step, state, self.cfg.keep, log=self.log)
        self.last_saved = step
        return time.perf_counter() - t0


class CheckpointCadence(Hook):
    """Save every checkpoint.every steps and, with checkpoint.save_final, at the end; never right after a
    rollback (the step counter was just set back to an existing checkpoint)."""

    def on_step_end(self, t, step: StepEnd) -> None:
        every = t.cfg.checkpoint.every
        if t.checkpointer.enabled and every and t.step % every == 0 and "rollback" not in step.rec:
            dt = t.save()
            step.rec["time"]["checkpoint"] = dt
            t.seconds["checkpoint"] += dt

    def on_train_end(self, t) -> None:
        if t.checkpointer.enabled and t.cfg.checkpoint.save_final and t.checkpointer.last_saved != t.step:
            t.seconds["checkpoint"] += t.save()
