"""Typed training config: YAML -> nested frozen pydantic sections (core.config), the DeepSpeed JSON.

torchtitan's habit (one typed config per component, validation next to its fields) on the project's one
loader, `core.config`: every error is a `core.errors.ConfigError` naming the file and the dotted key, and
values get the same coercion everywhere (a number written as a string is a number; only true/false are
booleans). A run is a YAML file plus dotted overrides, positional on the trainer's command line:

    deepspeed --num_gpus 8 trainer/train.py --config configs/train-124m.yaml \
        optimizer.lr=6e-4 schedule.warmup_steps=200 checkpoint.dir=/ckpt/run1

Override values are parsed as YAML scalars (`1e-3`, `true`, `[1, 2]`), so they get the same types as the file.
Sections are frozen: a changed config is a validated copy (`cfg.replace(...)`), never a mutation.
`deepspeed_config(cfg, ..., stage=)` generates the DeepSpeed JSON (bf16 + fp32 master weights and fp32
gradient accumulation on GPU, fp32 + torch.autocast at stage 0; plain fp32 on CPU; ZeRO-3 tuned from
d_model); `deepspeed.config_file` replaces it with a given file. `deepspeed.zero_stage: auto` is resolved
by `plan_zero_stage`: the lowest stage whose model states and activations fit the device.
Fault injection for tests is not configured here: see trainer/faults.py.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from core import config as core_config
from core.config import ConfigModel, check_choice
from core.errors import ConfigError

__all__ = [
    "CheckpointSection",
    "ConfigError",
    "DataSection",
    "DeepSpeedSection",
    "EvalSection",
    "LoggingSection",
    "ModelSection",
    "OptimizerSection",
    "RampStage",
    "ScheduleSection",
    "SpikeSection",
    "TrainConfig",
    "ZeroPlan",
    "activation_bytes",
    "compile_enabled",
    "deepspeed_config",
    "load_config",
    "model_state_bytes",
    "plan_zero_stage",
    "resolve_precision",
]


class ModelSection(ConfigModel):
    size: str = "debug"
    """debug | 124m | 350m | 1b (trainer.model.SIZES)"""
    kernels: str = "auto"
    """triton | reference | auto (Triton on CUDA, reference ops elsewhere)"""
    attention: str = "auto"
    """sdpa | flex | auto"""
    document_mask: bool = True
    """attention stays inside documents of a packed row (EOD-delimited)"""
    compile: bool | str = "auto"
    """auto (on when the device is CUDA) | true | false: torch.compile each transformer block
    (trainer/model.py, compile_blocks)"""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """ModelConfig fields, e.g. {n_layers: 4}"""

    @field_validator("compile", mode="before")
    @classmethod
    def _compile_choice(cls, v: Any) -> Any:
        # before pydantic's own coercion, which would read `compile: 1` as true
        if v is True or v is False or v == "auto":
            return v
        raise ConfigError(f"model.compile must be one of auto, true, false; got {v!r}")

    @model_validator(mode="after")
    def _check(self) -> ModelSection:
        # imported here: trainer.model imports torch, which a config check should not need at import time
        from trainer.model import SIZES

        check_choice("model.size", self.size, SIZES)
        check_choice("model.kernels", self.kernels, ("triton", "reference", "auto"))
        check_choice("model.attention", self.attention, ("sdpa", "flex", "auto"))
        return self


class OptimizerSection(ConfigModel):
    lr: float = 3e-4
    """peak learning rate"""
    min_lr: float = 3e-5
    """floor of the decay"""
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    """applied to matrices (ndim >= 2) only; norms get none"""
    grad_clip: float = 1.0
    """global L2 norm clipping (DeepSpeed's gradient_clipping); 0 disables"""

    @model_validator(mode="after")
    def _check(self) -> OptimizerSection:
        for k in ("lr", "eps"):
            if not getattr(self, k) > 0:
                raise ConfigError(f"optimizer.{k} must be > 0, got {getattr(self, k)}")
        if not 0 <= self.min_lr <= self.lr:
            raise ConfigError(f"optimizer.min_lr must be in [0, lr={self.lr}], got {self.min_lr}")
        for k in ("beta1", "beta2"):
            if not 0 <= getattr(self, k) < 1:
                raise ConfigError(f"optimizer.{k} must be in [0, 1), got {getattr(self, k)}")
        for k in ("weight_decay", "grad_clip"):
            if getattr(self, k) < 0:
                raise ConfigError(f"optimizer.{k} must be >= 0, got {getattr(self, k)}")
        return self


class RampStage(ConfigModel):
    tokens: int
    """from this many consumed tokens on ..."""
    batch: int
    """... the global batch is this many sequences"""


class ScheduleSection(ConfigModel):
    kind: str = "cosine"
    """cosine (linear warmup, cosine decay) | wsd (warmup, stable, decay) | constant"""
    steps: int = 100
    """optimizer steps of the run (the schedule's length)"""
    warmup_steps: int = 10
    decay_fraction: float = 0.2
    """wsd: the last fraction of steps decays linearly to min_lr"""
    global_batch: int = 8
    """sequences per optimizer step (all ranks, all micro-batches)"""
    micro_batch: int = 1
    """sequences per rank per forward/backward"""
    rampup: tuple[RampStage, ...] = ()
    """batch-size ramp-up by consumed tokens"""

    @model_validator(mode="after")
    def _check(self) -> ScheduleSection:
        check_choice("schedule.kind", self.kind, ("cosine", "wsd", "constant"))
        if self.steps <= 0:
            raise ConfigError(f"schedule.steps must be > 0, got {self.steps}")
        if not 0 <= self.warmup_steps <= self.steps:
            raise ConfigError(
                f"schedule.warmup_steps must be in [0, steps={self.steps}], got {self.warmup_steps}"
            )
        if not 0 <= self.decay_fraction <= 1:
            raise ConfigError(f"schedule.decay_fraction must be in [0, 1], got {self.decay_fraction}")
        if self.micro_batch <= 0 or self.global_batch <= 0:
            raise ConfigError(
                "schedule.global_batch and schedule.micro_batch must be > 0, got "
                f"{self.global_batch} and {self.micro_batch}"
            )
        prev = -1
        for i, st in enumerate(self.rampup):
            if st.tokens <= prev or st.batch <= 0:
                raise ConfigError(
                    f"schedule.rampup[{i}]: tokens must increase strictly and batch must be > 0"
                )
            prev = st.tokens
        if self.rampup and self.rampup[0].tokens != 0:
            raise ConfigError("schedule.rampup[0].tokens: the first ramp-up stage must start at 0 tokens")
        return self

    def check_divisible(self, world_size: int) -> None:
        """Every batch of the run splits into whole micro-batches on every rank."""
        per = self.micro_batch * world_size
        for key, b in [("schedule.global_batch", self.global_batch)] + [
            (f"schedule.rampup[{i}].batch", s.batch) for i, s in enumerate(self.rampup)
        ]:
            if b % per:
                raise ConfigError(f"{key}: {b} is not a multiple of micro_batch × world_size = {per}")


class DataSection(ConfigModel):
    recipe: str = ""
    """mixture recipe YAML (mixtures/recipe.py); required (TrainConfig checks it)"""
    seq_len: int = 256
    """tokens per row fed to the model; the sampler draws seq_len + 1 (inputs + shifted targets)"""
    allow_over_cap: bool = False
    """pass-through to MixtureSampler (repetition cap of the recipe)"""

    @model_validator(mode="after")
    def _check(self) -> DataSection:
        if self.seq_len <= 1:
            raise ConfigError(f"data.seq_len must be > 1, got {self.seq_len}")
        return self


class EvalSection(ConfigModel):
    """Held-out loss per source (mixtures/sampler.py, "Held-out split").

    Each source sets aside whole documents worth `sequences_per_source` rows of seq_len + 1 tokens; they
    leave its training stream, so the split is part of the run's data identity (recorded in the sampler
    state: a checkpoint resumes only under the same value). Cost: about that many tokens per source never
    trained on — sequences_per_source × (seq_len + 1) plus the rest of the last held-out document.
    """

    sequences_per_source: int = 16
    """held-out rows per source; 0: no split and no eval"""
    every: int = 50
    """mean held-out loss per source every N optimizer steps (and at the end); 0: end only"""

    @model_validator(mode="after")
    def _check(self) -> EvalSection:
        for k in ("sequences_per_source", "every"):
            if getattr(self, k) < 0:
                raise ConfigError(f"eval.{k} must be >= 0, got {getattr(self, k)}")
        return self


class CheckpointSection(ConfigModel):
    dir: str = ""
    """checkpoint root, a local folder or an object-store prefix (s3://bucket/prefix: credentials and
    endpoint from the AWS environment); empty disables checkpoints (and resume)"""
    staging: str = ""
    """object-store checkpoints only: local folder they are made in and downloaded to before loading
    (room for one checkpoint; default: the system temporary folder)"""
    every: int = 0
    """save every N optimizer steps (0: only at the end)"""
    keep: int = 3
    """keep the last K complete checkpoints"""
    resume: bool = True
    """resume from the newest complete checkpoint under dir"""
    verify: str = "sha256"
    """sha256 | size: how a complete checkpoint is checked before resuming from it"""
    save_final: bool = True

    @model_validator(mode="after")
    def _check(self) -> CheckpointSection:
        if self.every < 0:
            raise ConfigError(f"checkpoint.every must be >= 0, got {self.every}")
        if self.keep < 1:
            raise ConfigError(f"checkpoint.keep must be >= 1, got {self.keep}")
        check_choice("checkpoint.verify", self.verify, ("sha256", "size"))
        return self


class SpikeSection(ConfigModel):
    enabled: bool = True
    window: int = 128
    """rolling window of accepted steps (OLMo-core: 128)"""
    sigmas: float = 6.0
    """spike: value > mean + sigmas·std of the window (OLMo-core: 6)"""
    min_history: int = 20
    """no check until the window holds this many steps"""
    max_consecutive: int = 3
    """this many skipped steps in a row → roll back to the last good checkpoint"""
    max_rollbacks: int = 3
    """then give up (exit 3): the run needs a human"""

    @model_validator(mode="after")
    def _check(self) -> SpikeSection:
        if self.window < 2 or self.min_history < 2 or self.min_history > self.window:
            raise ConfigError(
                f"spike.min_history: need 2 <= min_history <= window, got {self.min_history} and {self.window}"
            )
        if not self.sigmas > 0:
            raise ConfigError(f"spike.sigmas must be > 0, got {self.sigmas}")
        if self.max_consecutive < 1:
            raise ConfigError(f"spike.max_consecutive must be >= 1, got {self.max_consecutive}")
        if self.max_rollbacks < 0:
            raise ConfigError(f"spike.max_rollbacks must be >= 0, got {self.max_rollbacks}")
        return self


class LoggingSection(ConfigModel):
    dir: str = "out/train"
    """metrics.jsonl, and TensorBoard events under dir/tensorboard/"""
    every: int = 1
    """metrics line every N steps"""
    tensorboard: bool = True
    """the same scalars as metrics.jsonl, written by rank 0"""
    sample_tokens: int = 32
    """tokens generated greedily at the end (0: none)"""
    sample_prompt: str = "The"
    log_sample_indices: bool = False
    """record global sequence indices per step (tests of ramp-up/no-skip)"""

    @model_validator(mode="after")
    def _check(self) -> LoggingSection:
        if self.every < 1:
            raise ConfigError(f"logging.every must be >= 1, got {self.every}")
        if self.sample_tokens < 0:
            raise ConfigError(f"logging.sample_tokens must be >= 0, got {self.sample_tokens}")
        # checked here, on every rank alike, rather than when rank 0 opens the writer: a rank failing alone
        # after deepspeed.initialize would leave the others waiting in their next collective forever
        if self.tensorboard and importlib.util.find_spec("tensorboard") is None:
            raise ConfigError("logging.tensorboard: tensorboard is not installed: `pip install tensorboard`, "
                              "or set logging.tensorboard=false")  # fmt: skip
        return self


class DeepSpeedSection(ConfigModel):
    config_file: str = ""
    """use this DeepSpeed JSON instead of the generated one"""
    zero_stage: int | str = "auto"
    """0 | 1 | 2 | 3 | auto: the lowest stage whose model states and activations fit the device
    (plan_zero_stage; the fewest collectives that fit)"""
    memory_margin: float = 0.2
    """auto stage: fraction of device memory not planned for (CUDA context, NCCL and allocator
    fragmentation, temporaries the activation estimate leaves out)"""
    precision: str = "auto"
    """auto (bf16 on GPU, fp32 on CPU) | bf16 | fp32"""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """merged into the generated JSON"""

    @field_validator("zero_stage", mode="before")
    @classmethod
    def _stage_choice(cls, v: Any) -> Any:
        # before pydantic's union coercion: `true` is not stage 1, and "3" written as a string is 3
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v)
        if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v in (0, 1, 2, 3)):
            return v
        raise ConfigError(f"deepspeed.zero_stage must be one of 0, 1, 2, 3, auto; got {v!r}")

    @model_validator(mode="after")
    def _check(self) -> DeepSpeedSection:
        check_choice("deepspeed.precision", self.precision, ("auto", "bf16", "fp32"))
        if not 0 <= self.memory_margin < 1:
            raise ConfigError(f"deepspeed.memory_margin must be in [0, 1), got {self.memory_margin}")
        return self


class TrainConfig(ConfigModel):
    seed: int = 1234
    model: ModelSection = Field(default_factory=ModelSection)
    optimizer: OptimizerSection = Field(default_factory=OptimizerSection)
    schedule: ScheduleSection = Field(default_factory=ScheduleSection)
    data: DataSection = Field(default_factory=DataSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    spike: SpikeSection = Field(default_factory=SpikeSection)
    logging: LoggingSection = Field(default_factory=LoggingSection)
    deepspeed: DeepSpeedSection = Field(default_factory=DeepSpeedSection)

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        # here rather than in DataSection: a section's defaults stay constructible on their own
        if not self.data.recipe:
            raise ConfigError("data.recipe: a mixture recipe path is required")
        return self


def load_config(path: str | Path | None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read YAML (or start from defaults), apply `a.b.c=value` overrides, validate; errors name file and key."""
    cfg = core_config.load_config(TrainConfig, path, overrides)
    if path is not None and not Path(cfg.data.recipe).is_absolute():
        # recipe paths are relative to the working directory (the repo root), as in the Makefile's commands;
        # normalised (`./a//b.yaml` -> `a/b.yaml`) as the checkpoints' recorded config has always had them
        cfg = cfg.replace(data=cfg.data.replace(recipe=str(Path(cfg.data.recipe))))
    return cfg


def load_recipe(cfg: TrainConfig):
    """The run's recipe, checked against its shards' manifests (mixtures/validate.py, the check `plan` and
    the sampler make), as a ConfigError naming `data.recipe`. Not part of load_config: a config is valid
    on its own (tests and `to_dict` round trips build configs whose recipe lives elsewhere); the trainer
    calls this before its process group starts."""
    from mixtures.recipe import Recipe, RecipeError
    from mixtures.validate import check_sources

    try:
        recipe = Recipe.load(cfg.data.recipe)
        check_sources(recipe)
    except RecipeError as e:
        raise ConfigError(f"data.recipe: {e}") from None
    return recipe


# ------------------------------------------------------------------ DeepSpeed JSON


def resolve_precision(cfg: TrainConfig, on_cuda: bool) -> str:
    p = cfg.deepspeed.precision
    if p == "auto":
        return "bf16" if on_cuda else "fp32"
    if p == "bf16" and not on_cuda:
        raise ConfigError(
            "deepspeed.precision: bf16 needs a GPU here; the CPU accelerator path trains in fp32"
        )
    return p


def compile_enabled(cfg: TrainConfig, on_cuda: bool) -> bool:
    """model.compile resolved: auto compiles on CUDA only (on CPU the one-off Inductor compile of every
    block costs more than a short CPU run gains; an explicit true still compiles there, as the tests do)."""
    return on_cuda if cfg.model.compile == "auto" else bool(cfg.model.compile)


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
        return json.loads(p.read_text())
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
        # stage 0: the trainer clips (train.py, Trainer._clip_stage0), because DeepSpeed's stage-0 clipping
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
