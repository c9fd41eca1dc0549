"""DeepSpeed set-up: the process group, the DeepSpeed JSON, and the ZeRO stage a run can afford.

What stands between the typed config (trainer/config.py) and `deepspeed.initialize`:

- `launch_rank_world` / `start_process_group`: the launcher's rank and world size, read before the process
  group exists (every config and data check runs first), then the process group itself, this rank's
  device, and CPU threads per rank; on the CPU accelerator without the shm allreduce op (`skip_shm_allreduce`).
- `deepspeed_config(cfg, world, on_cuda, stage=)`: the generated JSON (bf16 + fp32 master weights and fp32
  gradient accumulation on GPU, fp32 + torch.autocast at stage 0; plain fp32 on CPU; ZeRO-3 tuned from
  d_model); `deepspeed.config_file` replaces it with a given file.
- `plan_zero_stage`: `deepspeed.zero_stage: auto` resolved as the lowest stage whose model states and
  activations fit the device (ZeRO paper's per-rank byte counts, below), and `resolve_deepspeed_config`,
  which the trainer calls twice: on this rank's device before the process group (so a bad file is an exit
  2), then on the smallest device of the run (every rank must pick the same stage).
- `build_engine`: the model, AdamW (decay on matrices only) and `deepspeed.initialize`, with the trainer's
  own clipping at stage 0 (`Stage0Clip`); `zero3_grad_norm` and `drop_gradients` for the spike guard.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import ConfigError
from core.safe_json import read_json_file
from trainer.config import TrainConfig, resolve_precision

__all__ = [
    "ZERO3_LEAF_MODULES",
    "Engine",
    "ProcessGroup",
    "Stage0Clip",
    "ZeroPlan",
    "activation_bytes",
    "build_engine",
    "deepspeed_config",
    "device_memory_bytes",
    "drop_gradients",
    "launch_rank_world",
    "model_state_bytes",
    "param_groups",
    "plan_zero_stage",
    "resolve_deepspeed_config",
    "skip_shm_allreduce",
    "start_process_group",
    "zero3_grad_norm",
    "zero3_tuning",
]


# ------------------------------------------------------------------ process group


def launch_rank_world() -> tuple[int, int]:
    """(rank, world size) as the launcher set them for init_distributed (deepspeed, torchrun: RANK and
    WORLD_SIZE; mpirun: OMPI_COMM_WORLD_*); (0, 1) for a plain `python trainer/train.py`."""
    env = os.environ
    for r, w in (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")):
        if r in env and w in env:
            return int(env[r]), int(env[w])
    return 0, 1


def _local_ranks() -> int:
    """Ranks on this host (the launcher's LOCAL_SIZE, torchrun's LOCAL_WORLD_SIZE), at least 1."""
    return max(int(os.environ.get("LOCAL_SIZE", os.environ.get("LOCAL_WORLD_SIZE", 1))), 1)


def device_memory_bytes(on_cuda: bool, local_rank: int) -> int:
    """Memory one rank may plan with (deepspeed.zero_stage=auto): its CUDA device's total memory, or on
    the CPU accelerator the host's available RAM shared by the host's ranks."""
    import torch

    if on_cuda:
        return int(torch.cuda.get_device_properties(local_rank).total_memory)
    import psutil  # a DeepSpeed dependency

    return int(psutil.virtual_memory().available) // _local_ranks()


# DeepSpeed's name for its CPU shared-memory allreduce op (deepspeed/ops/op_builder/cpu/comm.py).
SHM_OP = "deepspeed_shm_comm"


def skip_shm_allreduce() -> None:
    """Keep DeepSpeed's CPU accelerator from JIT-compiling its shm allreduce op at init_distributed.

    Only `inference_all_reduce` uses that op; training goes through torch.distributed (gloo). Building
    it costs 1-2 minutes of C++ compile on every fresh machine or venv, and a build killed half way
    leaves torch's lock file in ~/.cache/torch_extensions, after which every later run on that host
    waits on it for ever (a CI run hung 80 minutes so). It also left a 66 MB /dev/shm file per rank
    that DeepSpeed 0.19.8 never unlinks. deepspeed.ops keeps the probed op table in one dict that
    build_shm_op reads, so marking the op incompatible there skips it.
    """
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__[SHM_OP] = False


@dataclass(frozen=True)
class ProcessGroup:
    """What `start_process_group` leaves: torch.distributed, this rank's place and device."""

    dist: Any  # the torch.distributed module
    rank: int
    world: int
    device: Any  # torch.device
    on_cuda: bool


def start_process_group(timeout_s: float = 600) -> ProcessGroup:
    """deepspeed.init_distributed, then this rank's device; on CPU without the shm allreduce op, and the
    host's cores shared among its ranks (unless OMP_NUM_THREADS says otherwise). `timeout_s` bounds every
    collective (deepspeed.timeout_s): a hung peer fails the run after it instead of stalling it."""
    from datetime import timedelta

    import deepspeed
    import torch
    import torch.distributed as dist
    from deepspeed.accelerator import get_accelerator

    on_cuda = torch.cuda.is_available()
    if not on_cuda:
        skip_shm_allreduce()
    # DeepSpeed 0.19's ZeRO calls torch.distributed.reduce_scatter_tensor and all_gather_into_tensor, which
    # torch 2.13 deprecates (renamed *_single); nothing a user can act on, and the reduce-scatter one was
    # printed again at every step (the registry that shows a warning once is reset whenever any code
    # touches the filters), burying the step lines
    warnings.filterwarnings(
        "ignore", message=r"`torch\.distributed\.\w+_tensor` is deprecated", category=FutureWarning
    )
    deepspeed.init_distributed(timeout=timedelta(seconds=timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(get_accelerator().device_name(local_rank))
    if on_cuda:
        torch.cuda.set_device(device)
    elif "OMP_NUM_THREADS" not in os.environ:
        # processes of one host share its cores; oversubscribing them slows every rank down
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // _local_ranks()))
    return ProcessGroup(dist, rank, world, device, on_cuda)


def resolve_deepspeed_config(
    cfg: TrainConfig, mcfg: Any, world_size: int, on_cuda: bool, device_bytes: int
) -> tuple[dict[str, Any], ZeroPlan | None]:
    """The DeepSpeed JSON with deepspeed.zero_stage=auto resolved on `device_bytes`, and the plan that
    resolved it (None when the stage is a number or a config file is given)."""
    plan = None
    stage = cfg.deepspeed.zero_stage
    if stage == "auto" and not cfg.deepspeed.config_file:
        plan = plan_zero_stage(cfg, mcfg, world_size, on_cuda, device_bytes)
        stage = plan.stage
    ds = deepspeed_config(cfg, world_size, on_cuda, stage=None if stage == "auto" else int(stage))
    return ds, plan


# ------------------------------------------------------------------ the engine


def param_groups(model, weight_decay: float) -> list[dict]:
    """Decay matrices (embeddings, linears); not norms or other vectors (nanoGPT, Llama)."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        (decay if p.ndim >= 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


class Stage0Clip:
    """ZeRO stage 0: an optimizer step pre-hook, so it runs inside engine.step() after DeepSpeed's
    gradient all-reduce (every rank then holds the same averaged gradients, whose local norm is the
    global one). Keeps the pre-clip norm for the metrics (`norm`) and clips at optimizer.grad_clip, which
    DeepSpeed's own stage-0 clipping does too but without keeping the norm (it is off in this case:
    deepspeed_config). At stage 0 the optimizer is the trainer's torch AdamW itself."""

    def __init__(self, grad_clip: float):
        self.grad_clip = grad_clip
        self.norm = float("nan")

    def __call__(self, optimizer, args, kwargs) -> None:
        import torch

        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        clip = self.grad_clip
        self.norm = float(torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf")))


@dataclass
class Engine:
    """What `build_engine` leaves: DeepSpeed's engine and optimizer, and how the trainer drives them."""

    engine: Any
    optimizer: Any
    zero_stage: int
    compiled_blocks: int  # transformer blocks under torch.compile (0: eager)
    clip0: Stage0Clip | None  # the trainer's clipping at stage 0 (None: DeepSpeed clips, or a config file)


def build_engine(cfg: TrainConfig, mcfg: Any, ds_config: dict[str, Any], on_cuda: bool) -> Engine:
    """The model (same initial weights on every rank: seed first), AdamW and the DeepSpeed engine."""
    import deepspeed
    import torch

    from trainer.config import compile_enabled
    from trainer.model import Transformer, compile_blocks

    model = Transformer(mcfg)
    # blocks compiled before deepspeed.initialize, so that ZeRO-3's hooks go on the modules whose
    # forward is compiled and stay outside the graphs (trainer/model.py, compile_blocks)
    compiled = compile_blocks(model) if compile_enabled(cfg, on_cuda) else 0
    opt = torch.optim.AdamW(
        param_groups(model, cfg.optimizer.weight_decay),
        lr=cfg.optimizer.lr,
        betas=(cfg.optimizer.beta1, cfg.optimizer.beta2),
        eps=cfg.optimizer.eps,
        foreach=False,
        fused=on_cuda,
    )
    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config)
    stage = int(ds_config.get("zero_optimization", {}).get("stage", 0))
    clip0 = None
    if stage == 0 and not cfg.deepspeed.config_file:
        clip0 = Stage0Clip(cfg.optimizer.grad_clip)
        optimizer.register_step_pre_hook(clip0)
    return Engine(engine, optimizer, stage, compiled, clip0)


def zero3_grad_norm(engine, dist, device) -> float:
    """ZeRO-3: global L2 norm of the accumulated (not yet clipped) gradients, before the update.

    Without optimizer offload, DeepSpeed keeps every gradient partition of this rank in one flat buffer
    (`DeepSpeedZeroOptimizer_Stage3.grad_partitions_flat_buffer`; its padding stays zero): one norm kernel
    over it. The per-parameter path (`safe_get_local_grad`, the public API, which also covers offload)
    costs ~5 kernels and a host round of DeepSpeed bookkeeping per parameter: ~150 parameters at 124m.
    """
    import torch

    opt = engine.optimizer
    flat = getattr(opt, "grad_partitions_flat_buffer", None)
    if flat is not None and not getattr(opt, "offload_optimizer", False):
        from deepspeed.accelerator import get_accelerator

        # the wait DeepSpeed's own per-parameter read does first: the last reduce-scatters write the
        # buffer on their own stream
        stream = getattr(opt, "reduce_and_partition_stream", None)  # None on a synchronized device (CPU)
        if stream is not None and not get_accelerator().resolves_data_dependency():
            stream.synchronize()
        # fp32 accumulation: the norm kernel reduces in a tree, so rounding grows with log n, not n; a
        # float64 copy of the buffer would cost twice its memory
        sq = torch.linalg.vector_norm(flat, dtype=torch.float32).double().square().reshape(())
    else:
        from deepspeed.utils import safe_get_local_grad

        sq = torch.zeros((), dtype=torch.float64, device=device)
        for p in engine.module.parameters():
            g = safe_get_local_grad(p)
            if g is not None:
                sq += g.double().pow(2).sum()
    dist.all_reduce(sq)
    return float(sq.sqrt())


def drop_gradients(engine, optimizer) -> None:
    """Forget the accumulated gradients of a step that is not applied (a spike)."""
    # ZeRO-3's zero_grad also resets its micro-step counter, so the next step's first backward
    # overwrites (not accumulates into) the gradient partitions
    optimizer.zero_grad()
    if hasattr(engine, "_unmanaged_backward_count"):
        engine._unmanaged_backward_count = 0


# ------------------------------------------------------------------ DeepSpeed JSON


# ZeRO-3 bucket and persistence sizes from the model width h (d_model): the formulas the Hugging Face
# Trainer substitutes for DeepSpeed's "auto" values (transformers/integrations/deepspeed.py,
# HfTrainerDeepSpeedConfig.trainer_config_finalize): reduce_bucket_size = h², stage3_prefetch_bucket_size =
# 0.9·h², stage3_param_persistence_threshold = 10·h. A bucket of about one h×h matrix keeps every
# collective large enough to run at bandwidth while a block's gathers still overlap its compute; the
# persistence threshold keeps every vector (norm weights, h elements) and nothing of matrix size resident,
# so they are never gathered at all (DeepSpeed#5047: thousands of tiny gathers triple a small model's step).
def zero3_tuning(d_model: int) -> dict[str, int]:
    h = d_model
    return {
        "reduce_bucket_size": h * h,
        "stage3_prefetch_bucket_size": int(0.9 * h * h),
        "stage3_param_persistence_threshold": 10 * h,
    }


# ZeRO-3 leaf modules (DeepSpeed's `zero_optimization.leaf_module`, utils/z3_leaf_module.py): ZeRO-3
# installs its gather/release hooks on every module that owns parameters, 9 per block here (4 attention
# and 3 FFN linears, 2 norms); a leaf block gets one set, gathers all its parameters in one go when the
# block starts and releases them when it ends. Fewer hooks and collectives per step (DeepSpeed#5047), and
# the reason a compiled block works under ZeRO-3 at all: with hooks on its linears, Dynamo would break
# the block's graph at each of them; with the hooks on the block, they run outside its compiled forward
# (trainer/model.py, compile_blocks). The cost: a whole block's weights live at once (218M parameters,
# 0.44 GB in bf16 at the 8B shape; 0.9 GB with the next block prefetched), which the memory margin holds.
ZERO3_LEAF_MODULES = ["trainer.model.Block"]


def deepspeed_config(
    cfg: TrainConfig, world_size: int, on_cuda: bool, *, stage: int | None = None
) -> dict[str, Any]:
    """The DeepSpeed JSON of a run; `stage` is the resolved ZeRO stage (plan_zero_stage) and may be left
    out only when deepspeed.zero_stage is a number.

    Gradient accumulation is owned by the trainer (`managed_gradient_accumulation: false`): the number of
    micro-batches per step changes with the batch ramp-up, and every `engine.step()` is a boundary. So
    DeepSpeed sees gradient_accumulation_steps = 1 and train_batch_size = micro_batch × world_size.
    The LR is set by the trainer each step (no DeepSpeed scheduler), and the optimizer is the trainer's own
    torch AdamW (two param groups: decay on matrices only), hence zero_allow_untested_optimizer.

    bf16, by stage (DeepSpeed 0.19.8, engine._do_optimizer_sanity_check):
    - 1, 2, 3: bf16 parameters with fp32 master weights (DeepSpeed's bf16 mode) and fp32 gradient
      accumulation (`data_types.grad_accum_dtype`): bf16 accumulation loses low bits over micro-batches
      (DeepSpeed#2768). Stage 1 with this pair is DeepSpeed's BF16_Optimizer (fp32 gradients, sharded
      fp32 master and Adam state), 2 and 3 its ZeRO optimizers.
    - 0: DeepSpeed refuses bf16 parameters with fp32 accumulation without ZeRO (NotImplementedError:
      "unsupported mix"); the one mix it accepts without ZeRO is bf16 gradients (its fp16-style wrapper),
      which this trainer does not want. So stage 0 trains as the plain PyTorch loop does: fp32
      parameters, gradients and Adam state, bf16 compute under torch.autocast (DeepSpeed's
      `torch_autocast`, applied around the engine's forward). fp32 accumulation and fp32 all-reduce, no
      master-weight copy: 16 bytes per parameter (4 + 4 + 8) against bf16 mode's 18 (2 + 4 + 12).
    """
    if cfg.deepspeed.config_file:
        p = Path(cfg.deepspeed.config_file)
        if not p.is_file():
            raise ConfigError(f"deepspeed.config_file: {p} not found")
        return read_json_file(p)  # the user's file: the checked reader (exit 2 naming it)
    if stage is None:
        if cfg.deepspeed.zero_stage == "auto":
            raise ValueError(
                "deepspeed.zero_stage is auto: resolve it first (plan_zero_stage) and pass stage="
            )
        stage = int(cfg.deepspeed.zero_stage)
    precision = resolve_precision(cfg, on_cuda)
    zero: dict[str, Any] = {"stage": stage}
    if stage == 3:
        from trainer.model import model_config

        d_model = model_config(cfg.model.size, **cfg.model.overrides).d_model
        zero.update(
            {
                "overlap_comm": on_cuda,
                "contiguous_gradients": True,
                **zero3_tuning(d_model),
                "stage3_gather_16bit_weights_on_model_save": False,
                "leaf_module": {"classes": list(ZERO3_LEAF_MODULES)},
            }
        )
    ds: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": cfg.schedule.micro_batch,
        "gradient_accumulation_steps": 1,
        "train_batch_size": cfg.schedule.micro_batch * world_size,
        "managed_gradient_accumulation": False,
        # stage 0: the trainer clips (Stage0Clip), because DeepSpeed's stage-0 clipping
        # (engine.clip_fp32_gradients) computes the global norm and drops it, leaving no grad norm to log
        "gradient_clipping": 0.0 if stage == 0 else cfg.optimizer.grad_clip,
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 10**9,  # the trainer logs; DeepSpeed's own progress lines would only add noise
        "wall_clock_breakdown": False,
    }
    if precision == "bf16":
        if stage == 0:
            ds["torch_autocast"] = {"enabled": True, "dtype": "bfloat16"}
        else:
            ds["bf16"] = {"enabled": True}
            ds["data_types"] = {"grad_accum_dtype": "fp32"}
    for k, v in cfg.deepspeed.overrides.items():
        ds[k] = v
    return ds


# ------------------------------------------------------------------ ZeRO stage from memory
#
# Per-rank model-state bytes of Ψ parameters on N data-parallel ranks (ZeRO, Rajbhandari et al. 2020,
# §5 and Figure 1; P, G, O = bytes per parameter of weights, gradients, optimizer state):
#   stage 0: (P + G + O)·Ψ          stage 1: (P + G)·Ψ + O·Ψ/N
#   stage 2: P·Ψ + (G + O)·Ψ/N      stage 3: (P + G + O)·Ψ/N
# with (P, G, O) from what deepspeed_config generates:
#   bf16, stages 1-3: 2 bf16 weights, 4 fp32 accumulated gradients, 12 fp32 master + Adam m + v;
#   bf16, stage 0 (torch_autocast, fp32 model) and fp32: 4, 4, 8 (Adam m + v).
# The paper's transient bf16 gradient buckets and ZeRO-3's gathered block (leaf module) are not counted:
# the memory margin holds them.


def _bytes_per_param(precision: str, stage: int) -> tuple[int, int, int]:
    return (2, 4, 12) if precision == "bf16" and stage > 0 else (4, 4, 8)


def model_state_bytes(n_params: int, world_size: int, precision: str, stage: int) -> int:
    """Bytes of weights + gradients + optimizer state one rank holds at `stage` (formulas above)."""
    p, g, o = _bytes_per_param(precision, stage)
    n = world_size
    per_param = {0: p + g + o, 1: p + g + o / n, 2: p + (g + o) / n, 3: (p + g + o) / n}[stage]
    return int(per_param * n_params)


def activation_bytes(mcfg: Any, seq_len: int, micro_batch: int, precision: str) -> int:
    """Activations one micro-batch keeps for its backward (no recomputation), counted from the block's ops.

    Per token and layer, with h = d_model, kv = n_kv_heads·head_dim, f = ffn_hidden, what the backward
    reads: the block input and the attention-norm output (h each, the latter shared by wq, wk, wv), q, k, v
    after RoPE (h + 2·kv), the attention output feeding wo (h; the fused attention keeps no T×T scores,
    only a logsumexp per row), the FFN-norm input and output (2h), gate, up and their SwiGLU product
    (3f): 6h + 2kv + 3f elements, 2 bytes each in bf16 (4 in fp32). Korthikanti et al. 2022 (Table 2)
    count 34·h bytes for GPT's 4h MLP; this is the same count for SwiGLU and GQA. Plus the LM head's
    (tokens, vocab) fp32 logits, which the reference loss materialises (the fused kernel keeps a chunk).
    Eager reference ops may keep fp32 copies on top; deepspeed.memory_margin covers them.
    """
    a = 2 if precision == "bf16" else 4
    h, kv, f = mcfg.d_model, mcfg.n_kv_heads * mcfg.head_dim, mcfg.ffn_hidden
    tokens = seq_len * micro_batch
    return tokens * (mcfg.n_layers * (6 * h + 2 * kv + 3 * f) * a + mcfg.vocab_size * 4)


@dataclass(frozen=True)
class ZeroPlan:
    """The stage the auto rule picked, and the numbers it compared (logged at start)."""

    stage: int
    device_bytes: int  # memory of one rank's device (CUDA: total; CPU: available RAM / local ranks)
    budget_bytes: int  # device_bytes × (1 − memory_margin)
    activation_bytes: int
    state_bytes: dict[int, int]  # stage → model-state bytes per rank
    fits: bool  # False: not even stage 3 fits the budget (stage 3 is chosen, the run may run out)

    def describe(self) -> str:
        gib = 2**30
        need = ", ".join(
            f"{s}: {(b + self.activation_bytes) / gib:.2f}" for s, b in sorted(self.state_bytes.items())
        )
        verdict = "fits" if self.fits else "does NOT fit even at stage 3"
        return (
            f"ZeRO stage {self.stage} (auto; {verdict}): GiB per rank by stage, model states + "
            f"activations {self.activation_bytes / gib:.2f}: {need}; budget {self.budget_bytes / gib:.2f} "
            f"of {self.device_bytes / gib:.2f} device"
        )


def plan_zero_stage(
    cfg: TrainConfig, mcfg: Any, world_size: int, on_cuda: bool, device_bytes: int
) -> ZeroPlan:
    """The lowest ZeRO stage whose per-rank model states plus activations fit `device_bytes` less the
    margin: the lowest stage fits with the fewest collectives (stage 0 none but the gradient all-reduce,
    3 gathers every block's weights twice per step). Stage 3 when none fits (the most that sharding
    alone does; offloading is the user's call, through deepspeed.overrides)."""
    precision = resolve_precision(cfg, on_cuda)
    n = mcfg.num_params()
    acts = activation_bytes(mcfg, cfg.data.seq_len, cfg.schedule.micro_batch, precision)
    budget = int(device_bytes * (1 - cfg.deepspeed.memory_margin))
    states = {s: model_state_bytes(n, world_size, precision, s) for s in (0, 1, 2, 3)}
    fitting = [s for s in (0, 1, 2, 3) if states[s] + acts <= budget]
    return ZeroPlan(
        stage=fitting[0] if fitting else 3,
        device_bytes=device_bytes,
        budget_bytes=budget,
        activation_bytes=acts,
        state_bytes=states,
        fits=bool(fitting),
    )
