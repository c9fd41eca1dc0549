"""Training entry point, started by the DeepSpeed launcher:

    deepspeed --num_gpus 8 trainer/train.py --config configs/train-124m.yaml [dotted.key=value ...]
    deepspeed --num_gpus 2 trainer/train.py --config configs/train-debug.yaml      # CPU: 2 processes
    deepspeed --hostfile hosts --num_nodes 2 --num_gpus 8 trainer/train.py --config ...

One optimizer step:
  1. global batch from the ramp-up (by consumed tokens) → accumulation = batch / (micro_batch × world);
  2. each rank pulls its micro-batches from the mixture sampler (its own slice of one global stream);
  3. forward/backward per micro-batch; the loss of each is its token-loss sum / (step tokens / world), so
     DeepSpeed's mean over ranks of the accumulated gradients is the gradient of the step's token mean;
  4. loss and the pre-update gradient norm are all-reduced; the spike guard accepts, skips (gradients
     dropped, no update) or rolls back to the last good checkpoint with the offending data quarantined;
  5. engine.step(): clipping at optimizer.grad_clip and AdamW (LR set by the trainer from the schedule);
  6. metrics line; checkpoint every N steps; every eval.every steps (and at the end) the mean loss per
     source on the held-out documents (mixtures/sampler.py, "Held-out split"), no gradient.

Gradient accumulation is the trainer's (DeepSpeed's `managed_gradient_accumulation: false`), because the
number of micro-batches per step changes with the ramp-up. Exit codes: 0 done, 2 bad config, 3 the spike
guard gave up (too many rollbacks), 130 interrupted (Ctrl-C: `interrupted`, the process group destroyed).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):  # started as a script by the launcher: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if __name__ == "__main__":  # before the imports below (seconds): a Ctrl-C then is `interrupted` too
    from core.cli import handle_interrupts

    handle_interrupts()

import numpy as np
import torch

from core.cli import guarded
from core.storage import is_remote
from mixtures.recipe import RecipeError
from mixtures.sampler import MixtureSampler
from tokens.shards import ShardFormatError
from trainer import checkpoint as ckpt
from trainer import checkpoint_remote as remote
from trainer.config import (
    ConfigError,
    TrainConfig,
    compile_enabled,
    deepspeed_config,
    load_config,
    load_recipe,
    plan_zero_stage,
)
from trainer.data import Batches
from trainer.faults import ENV_VAR, Faults, faults_from_env
from trainer.metrics import MetricsWriter, device_peak, flops_per_token, mfu
from trainer.model import Transformer, compile_blocks, document_ids_from_eod, model_config
from trainer.schedule import batch_at, lr_at
from trainer.spike import ACCEPT, ROLLBACK, SpikeGuard


def _log(rank: int, msg: str) -> None:
    if rank == 0:
        print(msg, flush=True)


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices (embeddings, linears); not norms or other vectors (nanoGPT, Llama)."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        (decay if p.ndim >= 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def launch_rank_world() -> tuple[int, int]:
    """(rank, world size) as the launcher set them for init_distributed (deepspeed, torchrun: RANK and
    WORLD_SIZE; mpirun: OMPI_COMM_WORLD_*); (0, 1) for a plain `python trainer/train.py`."""
    env = os.environ
    for r, w in (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")):
        if r in env and w in env:
            return int(env[r]), int(env[w])
    return 0, 1


def device_memory_bytes(on_cuda: bool, local_rank: int) -> int:
    """Memory one rank may plan with (deepspeed.zero_stage=auto): its CUDA device's total memory, or on
    the CPU accelerator the host's available RAM shared by the host's ranks."""
    if on_cuda:
        return int(torch.cuda.get_device_properties(local_rank).total_memory)
    import psutil  # a DeepSpeed dependency

    local = int(os.environ.get("LOCAL_SIZE", os.environ.get("LOCAL_WORLD_SIZE", 1)))
    return int(psutil.virtual_memory().available) // max(local, 1)


def shm_workspace_path(rank: int) -> Path:
    """The /dev/shm file DeepSpeed's CPU shm allreduce creates for `rank` (deepspeed/ops/csrc/cpu/comm/
    shm.cpp: deepspeed_allreduce_buffer_{uid}_{MASTER_ADDR}_{MASTER_PORT}_{rank})."""
    addr, port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    return Path(f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_{addr}_{port}_{rank}")


def release_shm_workspace(dist, rank: int) -> None:
    """Unlink this rank's shm allreduce file once every rank has mapped it.

    DeepSpeed 0.19.8 never unlinks it, so every CPU run left 66 MB per rank in /dev/shm for good (we
    found 9 GB of them after a day of tests and demos; the launcher's port differs per run, so nothing
    reuses them). init_distributed returns only after this rank mapped every peer's file, so after a
    barrier no one needs the names any more; the memory stays mapped until the processes exit, even
    when they are killed.
    """
    dist.barrier()
    with contextlib.suppress(FileNotFoundError):
        shm_workspace_path(rank).unlink()


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


@dataclasses.dataclass
class _Accumulated:
    """What one step's micro-batches leave on this rank, before the all-reduce."""

    loss_sum: torch.Tensor  # () float64: this rank's normalized losses, summed
    counts: torch.Tensor  # (sources,) float64: sampler tokens drawn per source
    indices: list[int] = dataclasses.field(default_factory=list)  # global sequence indices drawn
    phase: str = ""
    t_data: float = 0.0
    t_fb: float = 0.0


class Trainer:
    """One rank's training run: the engine, its slice of the data stream, checkpoints, eval and metrics."""

    def __init__(self, cfg: TrainConfig, faults: Faults | None = None):
        self.cfg = cfg
        self.faults = faults if faults is not None else Faults()  # test-only (trainer/faults.py)
        # Every check of the config and the data before the process group: a bad recipe is an exit 2 in
        # seconds, on every rank alike, not a traceback per rank after minutes of distributed start-up.
        self.rank, self.world = launch_rank_world()
        cfg.schedule.check_divisible(self.world)
        # checkpoints on object storage: the bucket must answer and take a write, or exit 2 now
        self.ckpt_uri = cfg.checkpoint.dir if is_remote(cfg.checkpoint.dir) else None
        if self.ckpt_uri:
            remote.check_writable(self.ckpt_uri)
        tok = self._init_data()
        self.mcfg = self._model_config(tok)
        on_cuda = torch.cuda.is_available()
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.ds_config = self._deepspeed_config(on_cuda, device_memory_bytes(on_cuda, local_rank))
        if self._init_distributed() != (self.rank, self.world):  # a launcher that sets no RANK/WORLD_SIZE
            cfg.schedule.check_divisible(self.world)
            tok = self._init_data()
        # again, now on the memory of the smallest device of the run: every rank must pick the same stage
        mem = torch.tensor([device_memory_bytes(self.on_cuda, local_rank)], dtype=torch.int64)
        mem = mem.to(self.device)
        self.dist.all_reduce(mem, op=self.dist.ReduceOp.MIN)
        self.ds_config = self._deepspeed_config(self.on_cuda, int(mem.item()))

        # same seed on every rank: every rank builds identical initial weights before ZeRO-3 shards them
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)

        self._init_engine(tok)

        self.guard = SpikeGuard(cfg.spike)
        self.step = 0
        self.tokens_consumed = 0  # sampler tokens (rows × (seq_len+1)), the unit of the recipe and ramp-up
        self.tokens_trained = 0  # predicted tokens (rows × seq_len)
        self.per_source = {s: 0 for s in self.sources}
        self.rollbacks = 0
        self.spike_run_start: int | None = None
        # where DeepSpeed reads and writes: the checkpoint folder, or for an object store the local
        # staging folder checkpoints are made in and downloaded to (trainer/checkpoint_remote.py)
        self.ckpt_root = (
            remote.staging_root(self.ckpt_uri, cfg.checkpoint.staging)
            if self.ckpt_uri
            else Path(cfg.checkpoint.dir)
            if cfg.checkpoint.dir
            else None
        )
        self.metrics = MetricsWriter(cfg.logging.dir, self.rank == 0, cfg.logging.tensorboard)
        self.flops_tok = flops_per_token(self.mcfg, self.seq_len)
        name = torch.cuda.get_device_name(self.device) if self.on_cuda else None
        self.peak = device_peak(name)
        self.device_name = name or "cpu"
        self.last_saved = -1
        self.last_eval = -1
        if self.faults.active:
            _log(self.rank, f"[trainer] TEST FAULTS ACTIVE ({ENV_VAR}): {self.faults.to_dict()}")

    def _init_distributed(self) -> tuple[int, int]:
        """Process group, this rank's device, and CPU threads per rank; returns the launcher's
        (rank, world) before this call, for the caller to compare with the process group's."""
        import deepspeed
        import torch.distributed as dist
        from deepspeed.accelerator import get_accelerator

        before = (self.rank, self.world)
        deepspeed.init_distributed()
        self.dist = dist
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.on_cuda = torch.cuda.is_available()
        if not self.on_cuda:
            release_shm_workspace(dist, self.rank)
        self.device = torch.device(get_accelerator().device_name(local_rank))
        if self.on_cuda:
            torch.cuda.set_device(self.device)
        elif "OMP_NUM_THREADS" not in os.environ:
            # processes of one host share its cores; oversubscribing them slows every rank down
            local = int(os.environ.get("LOCAL_SIZE", os.environ.get("LOCAL_WORLD_SIZE", 1)))
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(local, 1)))
        return before

    def _init_data(self) -> dict:
        """This rank's slice of the recipe's stream and the held-out rows; returns the shards' tokenizer entry.

        Runs before the process group starts: every recipe and shard error is a ConfigError naming
        `data.recipe` (exit 2), from the same checks as `mixtures plan` (mixtures/validate.py)."""
        cfg = self.cfg
        self.seq_len = cfg.data.seq_len
        try:
            sampler = MixtureSampler(
                load_recipe(cfg),
                self.seq_len + 1,
                self.rank,
                self.world,
                allow_over_cap=cfg.data.allow_over_cap,
                heldout_sequences=cfg.eval.sequences_per_source,
            )
        except (RecipeError, ShardFormatError) as e:
            raise ConfigError(f"data.recipe: {e}") from None
        self.batches = Batches(sampler)
        # (sequences_per_source, seq_len + 1) per source, the same on every rank; never in the training stream
        self.heldout = sampler.heldout() if cfg.eval.sequences_per_source else {}
        tok = next(iter(sampler.streams.values())).manifest["tokenizer"]
        self.eod_id, self.tokenizer_path = int(tok["eod_id"]), tok.get("path")
        self.sources = sorted(sampler.streams)
        return tok

    def _model_config(self, tok: dict):
        cfg = self.cfg
        return model_config(
            cfg.model.size,
            vocab_size=int(tok["vocab_size"]),
            max_seq_len=self.seq_len,
            kernels=cfg.model.kernels,
            attention=cfg.model.attention,
            **cfg.model.overrides,
        )

    def _deepspeed_config(self, on_cuda: bool, device_bytes: int) -> dict:
        """The DeepSpeed JSON, with deepspeed.zero_stage=auto resolved on `device_bytes` (self.zero_plan)."""
        cfg = self.cfg
        self.zero_plan = None
        stage = cfg.deepspeed.zero_stage
        if stage == "auto" and not cfg.deepspeed.config_file:
            self.zero_plan = plan_zero_stage(cfg, self.mcfg, self.world, on_cuda, device_bytes)
            stage = self.zero_plan.stage
        return deepspeed_config(cfg, self.world, on_cuda, stage=None if stage == "auto" else int(stage))

    def _init_engine(self, tok: dict) -> None:
        """The model (same initial weights on every rank), AdamW and the DeepSpeed engine around them."""
        import deepspeed

        cfg = self.cfg
        model = Transformer(self.mcfg)
        # blocks compiled before deepspeed.initialize, so that ZeRO-3's hooks go on the modules whose
        # forward is compiled and stay outside the graphs (trainer/model.py, compile_blocks)
        self.compiled_blocks = compile_blocks(model) if compile_enabled(cfg, self.on_cuda) else 0
        opt = torch.optim.AdamW(
            param_groups(model, cfg.optimizer.weight_decay),
            lr=cfg.optimizer.lr,
            betas=(cfg.optimizer.beta1, cfg.optimizer.beta2),
            eps=cfg.optimizer.eps,
            foreach=False,
            fused=self.on_cuda,
        )
        self.engine, self.optimizer, _, _ = deepspeed.initialize(
            model=model, optimizer=opt, config=self.ds_config
        )
        self.zero_stage = int(self.ds_config.get("zero_optimization", {}).get("stage", 0))
        self.zero3 = self.zero_stage == 3
        self.stage0_grad_norm = float("nan")
        if self.zero_stage == 0 and not cfg.deepspeed.config_file:
            self.optimizer.register_step_pre_hook(self._clip_stage0)

    # ------------------------------------------------------------------ state
    def trainer_state(self) -> dict:
        return {
            "step": self.step,
            "tokens_consumed": self.tokens_consumed,
            "tokens_trained": self.tokens_trained,
            "per_source": dict(self.per_source),
            "sampler": self.batches.sampler.state_dict(),
            "spike": self.guard.state_dict(),
            "spike_run_start": self.spike_run_start,
            "quarantine": [list(w) for w in self.batches.quarantine],
            "rollbacks": self.rollbacks,
            "config": self.cfg.to_dict(),
            "model_config": dataclasses.asdict(self.mcfg),
            "zero_stage": self.zero_stage,  # resolved (deepspeed.zero_stage may say auto)
        }

    def _choose_checkpoint(self) -> str | None:
        """The newest good checkpoint's tag (rank 0 decides); on an object store it is then in every node's
        local staging folder (`self.ckpt_root / tag`), downloaded and verified."""
        mode = self.cfg.checkpoint.verify
        choice: list = [None, None, None]  # tag, error, the id of rank 0's download
        if self.rank == 0:
            try:
                if self.ckpt_uri:
                    choice[0] = remote.newest_good(self.ckpt_uri, self.ckpt_root, mode, log=print)
                    if choice[0] is not None:
                        choice[2] = remote.mark_fetched(self.ckpt_root, choice[0])
                else:
                    choice[0] = ckpt.newest_good(self.ckpt_root, mode, log=print)
            except OSError as e:  # the object store failed: every rank stops with it, not only rank 0
                choice[1] = f"cannot read checkpoints under {self.ckpt_uri}: {e}"
        self.dist.broadcast_object_list(choice, src=0)
        if choice[1] is not None:
            raise ckpt.CheckpointError(choice[1])
        tag = choice[0]
        if self.ckpt_uri and tag is not None:
            # the first rank of a node without rank 0's download (its own staging folder) fetches the tag too
            error = None
            if (
                self.rank != 0
                and remote.local_rank() == 0
                and not remote.is_fetched(self.ckpt_root, tag, choice[2])
            ):
                try:
                    why = remote.fetch(self.ckpt_uri, tag, self.ckpt_root, mode)
                except OSError as e:
                    why = str(e)
                if why is not None:
                    error = f"rank {self.rank}: cannot fetch {tag} from {self.ckpt_uri}: {why}"
            remote.all_ok(self.dist, error)
        return tag

    def load(self, tag: str, keep_quarantine: bool = False) -> None:
        path = self.ckpt_root / tag
        st = ckpt.load_trainer_state(path, self.rank, self.world)  # first: plain JSON
        ckpt.check_deepspeed_files(path)  # a refused file is named here, before DeepSpeed reads any
        # DeepSpeed loads a checkpoint only into the ZeRO stage that wrote it; with zero_stage=auto another
        # device or world size can resolve another stage
        saved_stage = ckpt.saved_zero_stage(st)
        if saved_stage != self.zero_stage:
            raise ckpt.CheckpointError(
                f"{path} was written under ZeRO stage {saved_stage}, this run resolved stage "
                f"{self.zero_stage}: set deepspeed.zero_stage={saved_stage} to resume from it"
            )
        # stage 0: every rank's checkpoint holds the full model and optimizer state, any world size loads it
        if st["world_size"] == self.world or self.zero_stage == 0:
            # DeepSpeed's own torch.load(weights_only=False), forced weights-only
            with ckpt.safe_torch_load():
                load_path, _ = self.engine.load_checkpoint(
                    str(self.ckpt_root), tag=tag, load_optimizer_states=True, load_lr_scheduler_states=False
                )
        else:
            load_path = self._load_other_world_size(path, st["world_size"])
        if load_path is None:
            raise RuntimeError(f"DeepSpeed could not load {path}")
        quarantine = list(self.batches.quarantine)
        self.step = st["step"]
        self.tokens_consumed = st["tokens_consumed"]
        self.tokens_trained = st["tokens_trained"]
        self.per_source = dict(st["per_source"])
        self.batches.sampler.load_state_dict(st["sampler"])
        self.guard.load_state_dict(st["spike"])
        self.spike_run_start = st["spike_run_start"]
        self.batches.quarantine = [tuple(w) for w in st["quarantine"]]
        if keep_quarantine:  # a rollback adds the window it just found to what the checkpoint knew
            for w in quarantine:
                if w not in self.batches.quarantine:
                    self.batches.quarantine.append(w)
        self.rollbacks = max(self.rollbacks, st["rollbacks"])
        ckpt.set_rng_state(st["rng"])
        self.last_saved = self.step
        if self.ckpt_uri:  # the downloaded copy has been read by every rank
            self.dist.barrier()
            if remote.local_rank() == 0:
                shutil.rmtree(path, ignore_errors=True)
                (self.ckpt_root / f".fetched-{tag}").unlink(missing_ok=True)

    def _load_other_world_size(self, path: Path, old_world: int) -> str | None:
        """Elastic resume: `path` was written by `old_world` ranks. Rank 0 converts it to DeepSpeed's universal
        checkpoint (trainer/checkpoint.py, convert_to_universal), every rank loads its new partition of each
        parameter's fp32 weight and Adam moments from it, and what DeepSpeed's load gets wrong is put right
        (repair_universal_load). The conversion is removed once every rank has loaded it."""
        ranks = f"{old_world} rank{'s' * (old_world != 1)}"
        _log(self.rank, f"[checkpoint] {path} was written by {ranks}, this run has {self.world}: "
             "loading it through DeepSpeed's universal checkpoint")  # fmt: skip
        # rank 0 converts the shared folder; with object storage each node's first rank its own download
        converts = remote.local_rank() == 0 if self.ckpt_uri else self.rank == 0
        error = None
        if converts:
            try:
                ckpt.convert_to_universal(path)
            except Exception as e:  # every rank stops with it, not only the converting one
                error = f"{path}: conversion to a universal checkpoint failed: {type(e).__name__}: {e}"
        remote.all_ok(self.dist, error)
        with ckpt.safe_torch_load(), _universal_load(self.engine):
            load_path, _ = self.engine.load_checkpoint(
                str(path), tag=ckpt.UNIVERSAL, load_optimizer_states=True, load_lr_scheduler_states=False
            )
            groups = ckpt.universal_param_groups(path)
        ckpt.repair_universal_load(self.optimizer, groups)
        self.dist.barrier()  # every rank has read the conversion
        if converts:
            ckpt.remove_universal(path)
        return load_path

    def _dump_state(self, event: str) -> None:
        """Test hook (REFINERY_TRAIN_FAULTS `dump_state_steps`, trainer/faults.py): at those steps, after a
        save or a resume, the full fp32 weights, Adam moments, step counts and optimizer hyperparameters
        (checkpoint.gather_full_state) go to `<logging.dir>/state_dump/<event>_step_XXXXXXXX.safetensors`.
        Collective; it only reads the state."""
        if self.step not in self.faults.dump_state_steps:
            return
        tensors, meta = ckpt.gather_full_state(self.engine, self.optimizer)
        if self.rank == 0:
            from safetensors.torch import save_file

            out = Path(self.cfg.logging.dir or ".") / "state_dump"
            out.mkdir(parents=True, exist_ok=True)
            name = out / f"{event}_{ckpt.tag_for(self.step)}.safetensors"
            save_file(tensors, str(name), metadata={"state": json.dumps(meta)})

    def save(self) -> float:
        t0 = time.perf_counter()
        log = lambda m: _log(self.rank, m)  # noqa: E731
        if self.ckpt_uri:
            remote.save(
                self.engine,
                self.ckpt_root,
                self.ckpt_uri,
                self.step,
                self.trainer_state(),
                self.cfg.checkpoint.keep,
                log=log,
                on_uploaded=self._upload_fault,
            )
        else:
            ckpt.save(
                self.engine,
                self.ckpt_root,
                self.step,
                self.trainer_state(),
                self.cfg.checkpoint.keep,
                log=log,
            )
        self.last_saved = self.step
        dt = time.perf_counter() - t0
        self._dump_state("save")
        return dt

    def _upload_fault(self, uploaded: int) -> None:
        """Test fault (trainer/faults.py, kill_in_upload_step): rank 0 dies after its first uploaded file."""
        if self.faults.kill_in_upload_step == self.step and self.rank == 0 and uploaded == 1:
            os.kill(os.getpid(), signal.SIGKILL)

    # ------------------------------------------------------------------ one step
    def _grad_norm(self) -> float:
        """Global L2 norm of the accumulated (not yet clipped) gradients, before the update."""
        from deepspeed.utils import safe_get_local_grad

        sq = torch.zeros((), dtype=torch.float64, device=self.device)
        for p in self.engine.module.parameters():
            g = safe_get_local_grad(p)
            if g is not None:
                sq += g.double().pow(2).sum()
        self.dist.all_reduce(sq)
        return float(sq.sqrt())

    def _clip_stage0(self, optimizer, args, kwargs) -> None:
        """ZeRO stage 0: an optimizer step pre-hook, so it runs inside engine.step() after DeepSpeed's
        gradient all-reduce (every rank then holds the same averaged gradients, whose local norm is the
        global one). Keeps the pre-clip norm for the metrics and clips at optimizer.grad_clip, which
        DeepSpeed's own stage-0 clipping does too but without keeping the norm (it is off in this case:
        config.deepspeed_config). At stage 0 the optimizer is the trainer's torch AdamW itself."""
        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        clip = self.cfg.optimizer.grad_clip
        norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
        self.stage0_grad_norm = float(norm)

    def _drop_gradients(self) -> None:
        # ZeRO-3's zero_grad also resets its micro-step counter, so the next step's first backward
        # overwrites (not accumulates into) the gradient partitions
        self.optimizer.zero_grad()
        if hasattr(self.engine, "_unmanaged_backward_count"):
            self.engine._unmanaged_backward_count = 0

    def train_step(self) -> dict | None:
        """One optimizer step (module docstring, items 1-5); its metrics record, or None when data ran out."""
        cfg = self.cfg
        t0 = time.perf_counter()
        self.batches.skip_quarantined()
        batch = batch_at(self.tokens_consumed, cfg.schedule)
        micro = cfg.schedule.micro_batch
        accum = batch // (micro * self.world)
        if self.batches.rows_left() < accum * micro:
            return None  # the recipe's data is used up: no partial step
        start_index = self.batches.global_index
        lr = lr_at(self.step, cfg.schedule, cfg.optimizer)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        normalizer = batch * self.seq_len / self.world  # see module docstring, item 3
        acc = self._accumulate(accum, micro, normalizer)
        tf = time.perf_counter()
        self.dist.all_reduce(acc.loss_sum)
        self.dist.all_reduce(acc.counts)
        loss_val = float(acc.loss_sum) / self.world
        gnorm = self._grad_norm() if self.zero3 else float("nan")
        acc.t_fb += time.perf_counter() - tf

        to = time.perf_counter()
        decision, reason, gnorm = self._apply_or_skip(loss_val, gnorm, acc.phase, start_index)
        t_opt = time.perf_counter() - to

        self.step += 1
        self.tokens_consumed += batch * (self.seq_len + 1)
        self.tokens_trained += batch * self.seq_len
        for s, c in zip(self.sources, acc.counts.tolist(), strict=True):
            self.per_source[s] += int(c)
        step_time = time.perf_counter() - t0
        tps = batch * self.seq_len / step_time
        rec = {
            "step": self.step,
            "loss": loss_val,
            "grad_norm": gnorm,
            "lr": lr,
            "batch": batch,
            "accum": accum,
            "phase": acc.phase,
            "tokens": self.tokens_trained,
            "tokens_per_s": tps,
            "mfu": mfu(self.flops_tok, tps, self.world, self.peak),
            "per_source_tokens": dict(self.per_source),
            "time": {"data": acc.t_data, "fwd_bwd": acc.t_fb, "optimizer": t_opt, "step": step_time},
            "update": decision == ACCEPT,
        }
        if self.on_cuda:  # the high-water mark since start, what bench/train_throughput.py reports per row
            rec["peak_memory_gib"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        if cfg.logging.log_sample_indices:
            gathered: list[list[int]] = [None] * self.world  # type: ignore[list-item]
            self.dist.all_gather_object(gathered, acc.indices)
            rec["indices"] = sorted(i for part in gathered for i in part)
        if decision != ACCEPT:
            rec["spike"] = reason
            self.metrics.write({"event": "spike_skip", "step": self.step, "reason": reason, "loss": loss_val})
            _log(self.rank, f"[spike] step {self.step}: {reason} spike (loss {loss_val:.4f}, grad norm "
                 f"{gnorm:.3g}): update skipped ({self.guard.consecutive} in a row)")  # fmt: skip
        if decision == ROLLBACK:
            rec["rollback"] = self._rollback()
        return rec

    def _accumulate(self, accum: int, micro: int, normalizer: float) -> _Accumulated:
        """Forward/backward of this rank's `accum` micro-batches; gradients accumulate in the engine."""
        poison = set(self.faults.poison_indices)
        acc = _Accumulated(
            loss_sum=torch.zeros((), dtype=torch.float64, device=self.device),
            counts=torch.zeros(len(self.sources), dtype=torch.float64, device=self.device),
        )
        for _ in range(accum):
            td = time.perf_counter()
            mb = self.batches.next(micro)
            x = torch.from_numpy(mb.tokens).to(self.device, non_blocking=True)
            inp, tgt = x[:, :-1], x[:, 1:]
            doc_ids = document_ids_from_eod(inp, self.eod_id) if self.cfg.model.document_mask else None
            acc.t_data += time.perf_counter() - td
            tf = time.perf_counter()
            loss = self.engine(inp, tgt, doc_ids=doc_ids, loss_normalizer=normalizer)
            if poison and poison.intersection(mb.indices):
                loss = loss * self.faults.poison_factor  # test fault: a deterministic "bad batch"
            self.engine.backward(loss, scale_wrt_gas=False)
            acc.loss_sum += loss.detach().double()
            acc.t_fb += time.perf_counter() - tf
            for s in mb.sources:
                acc.counts[self.sources.index(s)] += self.seq_len + 1
            acc.indices.extend(mb.indices)
            acc.phase = mb.phase
        return acc

    def _apply_or_skip(
        self, loss: float, gnorm: float, phase: str, start_index: int
    ) -> tuple[str, str, float]:
        """The spike guard's decision on the all-reduced step values, acted on: the update is applied, or
        the gradients are dropped. Returns (decision, reason, grad norm: ZeRO-0/1/2 know it only now)."""
        decision, reason = (
            self.guard.observe(loss, gnorm if self.zero3 else 0.0, phase)
            if self.cfg.spike.enabled
            else (ACCEPT, "")
        )
        if decision == ACCEPT:
            self.engine.step()
            self.spike_run_start = None
            if not self.zero3:
                ds_norm = self.engine.get_global_grad_norm()  # None at stage 0: see _clip_stage0
                gnorm = float(self.stage0_grad_norm if ds_norm is None else ds_norm)
        else:
            self._drop_gradients()
            if self.spike_run_start is None:
                self.spike_run_start = start_index
        return decision, reason, gnorm

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Mean loss per target token on each source's held-out rows. Collective: call it on every rank.

        Rank r takes rows r, r+W, ... of each source, micro_batch rows per forward. Every rank runs the same
        number of forwards, because each ZeRO-3 forward gathers the sharded weights from all ranks: a rank
        out of rows runs a stand-in row and drops its loss. Sums are float64 and all-reduced, so the result
        depends only on the weights (bit-identical between an uninterrupted and a resumed run).
        """
        micro = self.cfg.schedule.micro_batch
        # (sources, 2): summed token loss and target count of each source
        sums = torch.zeros(len(self.sources), 2, dtype=torch.float64, device=self.device)
        self.engine.eval()
        for i, src in enumerate(self.sources):
            rows = self.heldout[src]
            mine = rows[self.rank :: self.world]
            for j in range(0, -(-len(rows) // self.world), micro):
                chunk = mine[j : j + micro]
                x = torch.from_numpy(chunk if len(chunk) else rows[:1]).to(self.device)
                inp, tgt = x[:, :-1], x[:, 1:]  # (B, seq_len) each
                doc_ids = document_ids_from_eod(inp, self.eod_id) if self.cfg.model.document_mask else None
                loss_sum = self.engine(inp, tgt, doc_ids=doc_ids, loss_normalizer=1.0)  # sum over tokens
                if len(chunk):
                    sums[i, 0] += loss_sum.double()
                    sums[i, 1] += tgt.numel()
        self.engine.train()
        self.dist.all_reduce(sums)
        return {src: float(sums[i, 0] / sums[i, 1]) for i, src in enumerate(self.sources)}

    def run_eval(self) -> float:
        """Evaluate, log `eval/<source>/loss` at the current step; returns the seconds it took."""
        t0 = time.perf_counter()
        losses = self.evaluate()
        dt = time.perf_counter() - t0
        self.last_eval = self.step
        self.metrics.write(
            {
                "event": "eval",
                "step": self.step,
                "eval": {s: {"loss": v} for s, v in losses.items()},
                "sequences_per_source": self.cfg.eval.sequences_per_source,
                "seconds": dt,
            }
        )
        _log(self.rank, f"eval  {self.step:5d} " + " ".join(f"{s} {v:.4f}" for s, v in losses.items()))
        return dt

    def _rollback(self) -> str:
        window = (int(self.spike_run_start), int(self.batches.global_index))
        self.batches.quarantine.append(window)
        if self.ckpt_root is None:
            _log(self.rank, "[spike] rollback wanted but checkpoints are off: continuing past the window")
            return "no-checkpoint"
        if self.rollbacks >= self.cfg.spike.max_rollbacks:
            _log(self.rank, f"[spike] {self.rollbacks} rollbacks already: giving up, the run needs a human")
            self.metrics.write({"event": "give_up", "step": self.step, "rollbacks": self.rollbacks})
            self.finish()
            sys.exit(3)
        tag = self._choose_checkpoint()
        if tag is None:
            _log(self.rank, "[spike] rollback wanted but no good checkpoint: continuing past the window")
            return "no-checkpoint"
        at = self.step
        self.load(tag, keep_quarantine=True)
        self.rollbacks += 1
        self.guard.consecutive = 0
        self.spike_run_start = None
        _log(self.rank, f"[spike] step {at}: rolled back to {tag}; data window [{window[0]}, {window[1]}) "
             "of the global stream quarantined")  # fmt: skip
        self.metrics.write(
            {
                "event": "rollback",
                "step": at,
                "to": tag,
                "quarantine": list(window),
                "rollbacks": self.rollbacks,
            }
        )
        return tag

    # ------------------------------------------------------------------ loop
    def run(self) -> None:
        cfg = self.cfg
        if self.ckpt_root is not None and cfg.checkpoint.resume:
            t0 = time.perf_counter()
            tag = self._choose_checkpoint()
            if tag is not None:
                self.load(tag)
                dt = time.perf_counter() - t0  # choosing (and downloading) included
                where = self.ckpt_uri or self.ckpt_root
                _log(self.rank, f"[trainer] resumed from {where}/{tag} at step {self.step} in {dt:.2f} s")
                self._dump_state("resume")
                self.metrics.write({"event": "resume", "step": self.step, "from": tag, "seconds": dt})
        self.metrics.start(self.step)
        _log(self.rank, f"[trainer] {self.mcfg.num_params() / 1e6:.2f}M params, world {self.world}, "
             f"device {self.device_name}, ZeRO stage {self.ds_config['zero_optimization']['stage']}, "
             f"FLOPs/token {self.flops_tok:.4g}")  # fmt: skip
        if self.zero_plan is not None:
            _log(self.rank, f"[trainer] {self.zero_plan.describe()}")
        precision = "bf16 autocast" if "torch_autocast" in self.ds_config else (
            "bf16" if self.ds_config.get("bf16", {}).get("enabled") else "fp32")  # fmt: skip
        _log(self.rank, f"[trainer] precision {precision}, kernels {self.mcfg.kernels}, attention "
             f"{self.mcfg.attention}, torch.compile: "
             f"{f'{self.compiled_blocks} blocks' if self.compiled_blocks else 'off'} "
             f"(model.compile={self.cfg.model.compile})")  # fmt: skip
        t_run = time.perf_counter()
        t_ckpt = t_steps = t_eval = 0.0
        tokens_at_start = self.tokens_trained
        while self.step < cfg.schedule.steps:
            rec = self.train_step()
            if rec is None:
                _log(self.rank, f"[trainer] data exhausted at step {self.step}: stopping")
                break
            t_steps += rec["time"]["step"]
            due = cfg.checkpoint.every and self.step % cfg.checkpoint.every == 0
            # not right after a rollback: the step counter was just set back to an existing checkpoint
            if self.ckpt_root is not None and due and "rollback" not in rec:
                dt = self.save()
                rec["time"]["checkpoint"] = dt
                t_ckpt += dt
            if self.step % cfg.logging.every == 0 or "rollback" in rec or not rec["update"]:
                self.metrics.write(rec)
                if self.rank == 0 and (self.step % max(cfg.logging.every, 10) == 0 or self.step == 1):
                    mf = f" mfu {rec['mfu']:.1%}" if rec["mfu"] is not None else ""
                    print(f"step {self.step:5d} loss {rec['loss']:.4f} gnorm {rec['grad_norm']:.3f} "
                          f"lr {rec['lr']:.2e} batch {rec['batch']} {rec['tokens_per_s']:.0f} tok/s{mf}",
                          flush=True)  # fmt: skip
            # not right after a rollback either: that step's weights are the checkpoint's, evaluated before
            if self.heldout and cfg.eval.every and self.step % cfg.eval.every == 0 and "rollback" not in rec:
                t_eval += self.run_eval()
            if self.faults.kill_at_step and self.step == self.faults.kill_at_step and self.rank == 0:
                os.kill(os.getpid(), signal.SIGKILL)  # test fault: a crash with no cleanup at all
        if self.heldout and self.last_eval != self.step:
            t_eval += self.run_eval()  # the final weights' held-out loss, whatever eval.every is
        if self.ckpt_root is not None and cfg.checkpoint.save_final and self.last_saved != self.step:
            t_ckpt += self.save()
        wall = time.perf_counter() - t_run
        summary = {
            "event": "end",
            "step": self.step,
            "wall_s": wall,
            "tokens_per_s": (self.tokens_trained - tokens_at_start) / max(wall, 1e-9),
            "goodput": t_steps / max(wall, 1e-9),
            "checkpoint_s": t_ckpt,
            "eval_s": t_eval,
            "per_source_tokens": dict(self.per_source),
            "rollbacks": self.rollbacks,
            "skipped_steps": self.guard.skipped_total,
        }
        if cfg.logging.sample_tokens > 0:
            summary["sample"] = self.generate(cfg.logging.sample_prompt, cfg.logging.sample_tokens)
        self.metrics.write(summary)
        _log(
            self.rank,
            "[trainer] " + json.dumps({k: v for k, v in summary.items() if k != "per_source_tokens"}),
        )

    @torch.no_grad()
    def generate(self, prompt: str, n: int) -> str:
        """Greedy continuation; every rank runs the same forwards (ZeRO-3 gathers weights collectively)."""
        try:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(self.tokenizer_path)
        except Exception as e:  # the sample is a courtesy; a missing tokenizer file must not fail the run
            return f"<no sample: {e}>"
        ids = tok.encode(prompt).ids or [self.eod_id]
        self.engine.eval()
        for _ in range(n):
            x = torch.tensor([ids[-self.seq_len :]], device=self.device)
            logits = self.engine(x)
            ids.append(int(logits[0, -1].float().argmax()))
        self.engine.train()
        return tok.decode(ids)

    def finish(self, barrier: bool = True) -> None:
        """Close the metrics and leave the process group. barrier=False after a Ctrl-C: the other ranks
        may be gone already, and a barrier would wait for them until the collective timeout."""
        self.metrics.close()
        if self.dist.is_initialized():
            if barrier:
                self.dist.barrier()
            # without this, DeepSpeed's CPU accelerator (gloo) aborts at interpreter exit (exit -6)
            self.dist.destroy_process_group()


def _leave_process_group() -> None:
    """Destroy this rank's process group if one was started (a Ctrl-C may come while Trainer() starts it)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=False, help="training config YAML (configs/train-*.yaml)")
    ap.add_argument("--local_rank", type=int, default=None, help="set by the deepspeed launcher")
    ap.add_argument("overrides", nargs="*", help="dotted.key=value overrides, e.g. optimizer.lr=1e-3")
    args = ap.parse_args(argv)
    # Ctrl-C: every rank of the launcher gets it; each leaves its process group (no barrier) and exits
    # 130 with the one line `interrupted` (core/cli.py guarded)
    return guarded(lambda: _train(args))


def _train(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config, args.overrides)
        faults = faults_from_env()
        trainer = Trainer(cfg, faults)  # recipe and shards are checked before its process group starts
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _leave_process_group()
        raise
    interrupted = False
    try:
        trainer.run()
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        try:
            trainer.finish(barrier=not interrupted)
        except KeyboardInterrupt:  # a second Ctrl-C while finishing: still leave the process group
            _leave_process_group()
            raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
