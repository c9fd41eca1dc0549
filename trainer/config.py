"""Typed training config: YAML -> nested frozen pydantic sections (core.config), and their validation.

torchtitan's habit (one typed config per component, validation next to its fields) on the project's one
loader, `core.config`: every error is a `core.errors.ConfigError` naming the file and the dotted key, and
values get the same coercion everywhere (a number written as a string is a number; only true/false are
booleans). A run is a YAML file plus dotted `--set` overrides, as on every command (the positional
`key=value` form is an alias; trainer/launch.py builds this command):

    python -m deepspeed.launcher.runner --num_gpus 8 --module trainer.train --config configs/train-124m.yaml \
        --set optimizer.lr=6e-4 --set schedule.warmup_steps=200 --set checkpoint.dir=/ckpt/run1

Override values are parsed as YAML scalars (`1e-3`, `true`, `[1, 2]`), so they get the same types as the file.
Sections are frozen: a changed config is a validated copy (`cfg.replace(...)`), never a mutation.
Two `auto` values that depend only on the device are resolved here (`resolve_precision`,
`compile_enabled`); the DeepSpeed JSON and the `deepspeed.zero_stage: auto` planning are in
trainer/deepspeed_setup.py. Fault injection for tests is not configured here: see trainer/faults.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from core import config as core_config
from core.config import ConfigModel, check_at_least, check_choice
from core.errors import ConfigError
from tokens.shard_cache import DEFAULT_CACHE_BYTES

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
    "compile_enabled",
    "load_config",
    "load_recipe",
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
            check_at_least(f"optimizer.{k}", getattr(self, k), 0)
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
    shard_cache_dir: str = ""
    """node-local folder caching the recipe's shards that are on an object store (s3://), shared by the
    node's ranks (tokens/shard_cache.py); "": $TMPDIR/refinery-shards of each node"""
    shard_cache_bytes: int = DEFAULT_CACHE_BYTES
    """bound on that folder (least recently used shards are evicted); at least the largest shard"""

    @model_validator(mode="after")
    def _check(self) -> DataSection:
        if self.seq_len <= 1:
            raise ConfigError(f"data.seq_len must be > 1, got {self.seq_len}")
        if self.shard_cache_bytes <= 0:
            raise ConfigError(f"data.shard_cache_bytes must be > 0 bytes, got {self.shard_cache_bytes}")
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
            check_at_least(f"eval.{k}", getattr(self, k), 0)
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
        check_at_least("checkpoint.every", self.every, 0)
        check_at_least("checkpoint.keep", self.keep, 1)
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
        check_at_least("spike.max_consecutive", self.max_consecutive, 1)
        check_at_least("spike.max_rollbacks", self.max_rollbacks, 0)
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
    profile_start: int = 0
    """torch.profiler from this step on (0: off; trainer/profiling.py): a Chrome trace and an op table per
    rank under dir/profile/, the table's top on rank 0's console"""
    profile_steps: int = 2
    """steps in the profile window"""

    @model_validator(mode="after")
    def _check(self) -> LoggingSection:
        check_at_least("logging.every", self.every, 1)
        check_at_least("logging.sample_tokens", self.sample_tokens, 0)
        check_at_least("logging.profile_start", self.profile_start, 0)
        check_at_least("logging.profile_steps", self.profile_steps, 1)
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
    (deepspeed_setup.plan_zero_stage; the fewest collectives that fit)"""
    memory_margin: float = 0.2
    """auto stage: fraction of device memory not planned for (CUDA context, NCCL and allocator
    fragmentation, temporaries the activation estimate leaves out)"""
    precision: str = "auto"
    """auto (bf16 on GPU, fp32 on CPU) | bf16 | fp32"""
    timeout_s: float = 600
    """seconds a rank waits in a collective (or for the others at start) before the run fails: how long
    a hung node stalls the others (a node that dies fails them at once). DeepSpeed's default; keep it
    above the slowest checkpoint upload, which the other ranks wait for in a barrier"""
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
        if not self.timeout_s > 0:
            raise ConfigError(f"deepspeed.timeout_s must be > 0, got {self.timeout_s}")
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


# ------------------------------------------------------------------ `auto` values resolved on the device


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
