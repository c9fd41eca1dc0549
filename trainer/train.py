"""Training entry point, started by the DeepSpeed launcher:

    deepspeed --num_gpus 8 --module trainer.train --config configs/train-124m.yaml [--set key=value ...]
    deepspeed --num_gpus 2 --module trainer.train --config configs/train-debug.yaml      # CPU: 2 processes
    deepspeed --hostfile hosts --num_nodes 2 --num_gpus 8 --module trainer.train --config ...

(trainer/launch.py builds this command for every caller, as `python -m deepspeed.launcher.runner`.)
Overrides: `--set optimizer.lr=1e-3`, repeatable, as on every command; the older positional
`optimizer.lr=1e-3` is kept as an alias, applied before the `--set` ones (a later value wins).

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
number of micro-batches per step changes with the ramp-up.

What this file leaves to others: the DeepSpeed JSON, the ZeRO stage and the process group
(trainer/deepspeed_setup.py); checkpoints, local or on an object store (trainer/checkpointing.py); what
happens around a step (spike rollback, checkpoint cadence, the metrics line, held-out eval, test faults) is
step hooks (trainer/hooks.py), registered in `default_hooks`: a new feature is one file and one line there. Exit codes: 0 done, 2 bad config, 3 the spike
guard gave up (too many rollbacks), 130 interrupted (Ctrl-C: `interrupted`, the process group destroyed).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import random
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # started as a script by the launcher: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if __name__ == "__main__":  # before the imports below (seconds): a Ctrl-C then is `interrupted` too
    from core.cli import handle_interrupts

    handle_interrupts()

import numpy as np
import torch

from core.cli import add_config_args, guarded
from trainer import checkpoint as ckpt
from trainer.checkpointing import CheckpointCadence, Checkpointer, check_store
from trainer.config import ConfigError, TrainConfig, load_config
from trainer.data import open_rank_data
from trainer.deepspeed_setup import (
    build_engine,
    device_memory_bytes,
    drop_gradients,
    launch_rank_world,
    resolve_deepspeed_config,
    start_process_group,
    zero3_grad_norm,
)
from trainer.evaluation import HeldoutEval, generate
from trainer.faults import FaultHook, Faults, faults_from_env
from trainer.hooks import Hooks, MetricsLog, StepEnd
from trainer.metrics import MetricsWriter, causal_flops_per_token, device_peak, flops_per_token, mfu
from trainer.model import document_ids_from_eod, model_config
from trainer.profiling import StepProfiler
from trainer.schedule import batch_at, lr_at
from trainer.spike import ACCEPT, SpikeGuard, SpikeRollback


def _log(rank: int, msg: str) -> None:
    if rank == 0:
        print(msg, flush=True)


def default_hooks(faults: Faults) -> Hooks:
    """The step hooks of a run, in the order they act (trainer/hooks.py says why this order)."""
    return Hooks(
        [
            SpikeRollback(),  # trainer/spike.py
            CheckpointCadence(),  # trainer/checkpointing.py
            MetricsLog(),  # trainer/hooks.py
            HeldoutEval(),  # trainer/evaluation.py
            FaultHook(faults),  # trainer/faults.py: test-only, inert without REFINERY_TRAIN_FAULTS
            StepProfiler(),  # trainer/profiling.py: inert unless logging.profile_start is set
        ]
    )


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
    """One rank's training run: the engine, its slice of the data stream, the run's state, and its hooks."""

    def __init__(self, cfg: TrainConfig, faults: Faults | None = None):
        self.cfg = cfg
        self.hooks = default_hooks(faults if faults is not None else Faults())
        # Every check of the config and the data before the process group: a bad recipe is an exit 2 in
        # seconds, on every rank alike, not a traceback per rank after minutes of distributed start-up.
        self.rank, self.world = launch_rank_world()
        cfg.schedule.check_divisible(self.world)
        check_store(cfg.checkpoint)  # checkpoints on object storage: the bucket must answer and take a write
        self.seq_len = cfg.data.seq_len
        tok = self._init_data()
        self.mcfg = self._model_config(tok)
        on_cuda = torch.cuda.is_available()
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        # checked now (a missing deepspeed.config_file is an exit 2 before the process group), resolved below
        resolve_deepspeed_config(
            cfg, self.mcfg, self.world, on_cuda, device_memory_bytes(on_cuda, local_rank)
        )
        pg = start_process_group(cfg.deepspeed.timeout_s)
        self.dist, self.device, self.on_cuda = pg.dist, pg.device, pg.on_cuda
        if (pg.rank, pg.world) != (self.rank, self.world):  # a launcher that sets no RANK/WORLD_SIZE
            self.rank, self.world = pg.rank, pg.world
            cfg.schedule.check_divisible(self.world)
            tok = self._init_data()
        # again, now on the memory of the smallest device of the run: every rank must pick the same stage
        mem = torch.tensor([device_memory_bytes(self.on_cuda, local_rank)], dtype=torch.int64)
        mem = mem.to(self.device)
        self.dist.all_reduce(mem, op=self.dist.ReduceOp.MIN)
        self.ds_config, self.zero_plan = resolve_deepspeed_config(
            cfg, self.mcfg, self.world, self.on_cuda, int(mem.item())
        )

        # same seed on every rank: every rank builds identical initial weights before ZeRO-3 shards them
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)

        e = build_engine(cfg, self.mcfg, self.ds_config, self.on_cuda)
        self.engine, self.optimizer, self.zero_stage = e.engine, e.optimizer, e.zero_stage
        self.compiled_blocks, self.clip0, self.zero3 = e.compiled_blocks, e.clip0, e.zero_stage == 3

        self.guard = SpikeGuard(cfg.spike)
        self.step = 0
        self.tokens_consumed = 0  # sampler tokens (rows × (seq_len+1)), the unit of the recipe and ramp-up
        self.tokens_trained = 0  # predicted tokens (rows × seq_len)
        self.per_source = {s: 0 for s in self.sources}
        self.rollbacks = 0
        self.spike_run_start: int | None = None
        self.checkpointer = Checkpointer(
            cfg.checkpoint, self.dist, self.rank, self.world, log=lambda m: _log(self.rank, m)
        )
        self.metrics = MetricsWriter(cfg.logging.dir, self.rank == 0, cfg.logging.tensorboard)
        self.seconds = {"checkpoint": 0.0, "eval": 0.0}  # what the hooks spent, for the end summary
        # MFU in PaLM's count, and the causal count beside it (trainer/metrics.py says why both)
        self.flops_tok = flops_per_token(self.mcfg, self.seq_len)
        self.flops_tok_causal = causal_flops_per_token(self.mcfg, self.seq_len)
        name = torch.cuda.get_device_name(self.device) if self.on_cuda else None
        self.peak = device_peak(name)
        self.device_name = name or "cpu"
        self.hooks.on_start(self)

    def _init_data(self) -> dict:
        """This rank's batches and held-out rows (trainer/data.py); returns the shards' tokenizer entry."""
        d = open_rank_data(self.cfg, self.rank, self.world)
        self.batches, self.heldout, self.sources = d.batches, d.heldout, d.sources
        self.eod_id, self.tokenizer_path = int(d.tokenizer["eod_id"]), d.tokenizer.get("path")
        self.tokenizer_sha256 = d.tokenizer.get("sha256")  # the sample opens the path only if it matches
        return d.tokenizer

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

    # ------------------------------------------------------------------ state and checkpoints
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

    def load(self, tag: str, keep_quarantine: bool = False) -> None:
        """Checkpoint `tag` into the engine, then the trainer state it saved (trainer_state) into this run."""
        st = self.checkpointer.load(tag, self.engine, self.optimizer, self.zero_stage)
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

    def resume(self) -> None:
        """With checkpoint.resume, continue from the newest good checkpoint, if there is one."""
        if not (self.checkpointer.enabled and self.cfg.checkpoint.resume):
            return
        t0 = time.perf_counter()
        tag = self.checkpointer.choose()
        if tag is None:
            return
        self.load(tag)
        dt = time.perf_counter() - t0  # choosing (and downloading) included
        _log(
            self.rank,
            f"[trainer] resumed from {self.checkpointer.where(tag)} at step {self.step} in {dt:.2f} s",
        )
        self.hooks.on_checkpoint(self, "resume")
        self.metrics.write({"event": "resume", "step": self.step, "from": tag, "seconds": dt})

    def save(self) -> float:
        """Checkpoint this step (collective); returns the seconds the save took."""
        on_uploaded = lambda n: self.hooks.on_upload(self, n)  # noqa: E731
        dt = self.checkpointer.save(self.engine, self.step, self.trainer_state(), on_uploaded)
        self.hooks.on_checkpoint(self, "save")
        return dt

    # ------------------------------------------------------------------ one step
    def train_step(self) -> StepEnd | None:
        """One optimizer step (module docstring, items 1-5): its metrics record and the spike guard's
        decision, or None when the data ran out."""
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
        gnorm = zero3_grad_norm(self.engine, self.dist, self.device) if self.zero3 else float("nan")
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
            "mfu_causal": mfu(self.flops_tok_causal, tps, self.world, self.peak),
            "per_source_tokens": dict(self.per_source),
            "time": {"data": acc.t_data, "fwd_bwd": acc.t_fb, "optimizer": t_opt, "step": step_time},
            "update": decision == ACCEPT,
        }
        if self.on_cuda:  # the high-water mark since start, what bench/trainer/throughput.py reports per row
            rec["peak_memory_gib"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        if cfg.logging.log_sample_indices:
            gathered: list[list[int]] = [None] * self.world  # type: ignore[list-item]
            self.dist.all_gather_object(gathered, acc.indices)
            rec["indices"] = sorted(i for part in gathered for i in part)
        return StepEnd(rec, decision, reason)  # a skip or rollback is acted on by the SpikeRollback hook

    def _accumulate(self, accum: int, micro: int, normalizer: float) -> _Accumulated:
        """Forward/backward of this rank's `accum` micro-batches; gradients accumulate in the engine."""
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
            loss = self.hooks.on_loss(self, loss, mb.indices)  # test faults: a deterministic "bad batch"
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
                ds_norm = self.engine.get_global_grad_norm()  # None at stage 0: see Stage0Clip
                stage0 = self.clip0.norm if self.clip0 is not None else float("nan")
                gnorm = float(stage0 if ds_norm is None else ds_norm)
        else:
            drop_gradients(self.engine, self.optimizer)
            if self.spike_run_start is None:
                self.spike_run_start = start_index
        return decision, reason, gnorm

    # ------------------------------------------------------------------ loop
    def run(self) -> None:
        """Resume if asked, train to schedule.steps (or the end of the data), write the end summary."""
        cfg = self.cfg
        self.resume()
        self.metrics.start(self.step)
        self._log_start()
        t_run = time.perf_counter()
        t_steps = 0.0
        tokens_at_start = self.tokens_trained
        while self.step < cfg.schedule.steps:
            step = self.train_step()
            if step is None:
                _log(self.rank, f"[trainer] data exhausted at step {self.step}: stopping")
                break
            t_steps += step.rec["time"]["step"]
            self.hooks.on_step_end(self, step)
        self.hooks.on_train_end(self)  # the final eval and save
        wall = time.perf_counter() - t_run
        summary = {
            "event": "end",
            "step": self.step,
            "wall_s": wall,
            "tokens_per_s": (self.tokens_trained - tokens_at_start) / max(wall, 1e-9),
            "goodput": t_steps / max(wall, 1e-9),
            "checkpoint_s": self.seconds["checkpoint"],
            "eval_s": self.seconds["eval"],
            "per_source_tokens": dict(self.per_source),
            "rollbacks": self.rollbacks,
            "skipped_steps": self.guard.skipped_total,
        }
        if cfg.logging.sample_tokens > 0:
            summary["sample"] = generate(self, cfg.logging.sample_prompt, cfg.logging.sample_tokens)
        self.metrics.write(summary)
        _log(
            self.rank,
            "[trainer] " + json.dumps({k: v for k, v in summary.items() if k != "per_source_tokens"}),
        )

    def _log_start(self) -> None:
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

    def finish(self, barrier: bool = True) -> None:
        """Close the metrics and leave the process group. barrier=False after a Ctrl-C: the other ranks
        may be gone already, and a barrier would wait for them until the collective timeout."""
        self.metrics.close()
        self.batches.sampler.close()  # its prefetch thread joined now, not at interpreter exit
        if self.dist.is_initialized():
            if barrier:  # a clean end: after a Ctrl-C, a device sync in engine.destroy() could wait forever
                self.dist.barrier()
                self._release_engine()
            # without this, DeepSpeed's CPU accelerator (gloo) aborts at interpreter exit (exit -6)
            self.dist.destroy_process_group()
            gc.collect()

    def _release_engine(self) -> None:
        """Free the engine while the interpreter is whole. It and its ZeRO optimizer hold the process
        groups, their pending work and tensors; left to interpreter finalization, a rank of a two-node run
        once aborted after its last step ("terminate called without an active exception", exit -6). Hooks
        off, references dropped and collected before the groups are destroyed."""
        self.engine.destroy()
        self.engine = self.optimizer = None
        gc.collect()


def _leave_process_group() -> None:
    """Destroy this rank's process group if one was started (a Ctrl-C may come while Trainer() starts it)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """`--config FILE`, repeatable `--set section.key=value`, and the older positional `section.key=value`
    (kept as an alias). `args.overrides` is the positional ones, then the `--set` ones: a key given twice
    takes its last value. Intermixed parsing: positional overrides may also follow a `--set`."""
    ap = argparse.ArgumentParser(
        # how it is run, not the file name argparse would show ("train.py")
        prog="python -m trainer.train",
        description=__doc__.split("\n\n")[0],
        epilog="Overrides apply in order, positional ones first, then each --set: a later one wins. "
        "One process as shown; several: python -m deepspeed.launcher.runner --num_gpus N --module "
        "trainer.train --config C (trainer/launch.py).",
    )
    add_config_args(ap, "configs/train-debug.yaml", "optimizer.lr=1e-3")
    ap.add_argument("--local_rank", type=int, default=None, help="set by the deepspeed launcher")
    ap.add_argument(
        "positional",
        nargs="*",
        metavar="SECTION.KEY=VALUE",
        help="the older form of --set; applied before every --set",
    )
    args = ap.parse_intermixed_args(argv)
    args.overrides = [*args.positional, *args.overrides]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
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
