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

import dataclasses
import importlib.util
import math
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator, model_validator

from core import config as core_config
from core.config import ConfigModel, check_at_least, check_choice
from core.errors import ConfigError
from core.storage import check_object_store_uri, is_object_store
from tokens.shard_cache import DEFAULT_CACHE_BYTES

__all__ = [
    "Bounds",
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
    "bounds_of",
    "compile_enabled",
    "load_config",
    "load_recipe",
    "resolve_precision",
]


# ------------------------------------------------------------------ bounds of every number
#
# A number that passes its type check can still be one its consumer cannot take: `deepspeed.timeout_s=1e30`
# overflowed in torch's timedelta conversion only once the process group started. So every int and float
# setting declares the range its consumer takes, as `Annotated[int, Bounds(...)]`; each section checks
# them at load (`check_bounds`), and tests/trainer/test_config_bounds.py refuses a numeric field without
# one. Booleans never pass as numbers and NaN/inf never as floats (core.config).

DAY_S = 86_400
"""deepspeed.timeout_s: torch's c10d keeps timeouts as int64 nanoseconds, so above ~9.2e9 s it wraps (a
connect times out at once) and Python's timedelta overflows at ~1e14 s; a collective that may hang for more
than a day is never what a run wants"""
MAX_STEPS = 10**8 - 1
"""checkpoint tags are `step_%08d` (trainer/checkpoint.py, TAG_RE): a 9-digit step would not be listed"""
MAX_TOKENS = 2**53
"""token counts stay exact in a float64 (TensorBoard scalars, JSON readers)"""
MAX_BATCH = 2**20
"""sequences per optimizer step; the largest published runs use about 2**12"""
MAX_SEQ_LEN = 2**20
"""RoPE angles come from fp32 positions (exact to 2**24); one row's attention beyond this fits no device"""


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The values a numeric setting's consumer can take; `why` names the consumer (shown in the error)."""

    lo: float
    hi: float
    why: str
    lo_open: bool = False  # lo itself refused
    hi_open: bool = False  # hi itself refused

    def __str__(self) -> str:
        return f"{'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}{')' if self.hi_open else ']'}"

    def check(self, key: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise ConfigError(f"{key} must be a number in {self}, got {value!r}")
        low = value > self.lo if self.lo_open else value >= self.lo
        high = value < self.hi if self.hi_open else value <= self.hi
        if not (low and high):
            raise ConfigError(f"{key} must be in {self}, got {_num(value)} ({self.why})")


def _num(v: float) -> str:
    """1e+30, 4_096 or 100_000_000: a bound or a value readable at a glance."""
    if isinstance(v, float):
        return f"{v:g}"
    return f"{v:.6g}" if abs(v) >= 10**18 else f"{v:_}" if abs(v) >= 10**5 else str(v)


def bounds_of(model: type[BaseModel], name: str) -> Bounds | None:
    """The Bounds declared on field `name` of `model`, or None."""
    return next((m for m in model.model_fields[name].metadata if isinstance(m, Bounds)), None)


def check_bounds(section: BaseModel, prefix: str) -> None:
    """Every bounded field of `section` within its Bounds; the error names `prefix.field`."""
    for name in type(section).model_fields:
        b = bounds_of(type(section), name)
        if b is not None:
            b.check(f"{prefix}.{name}" if prefix else name, getattr(section, name))


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def check_local_path(key: str, value: str) -> None:
    """ConfigError for a `scheme://` URL in a key that takes a local path: as a path it would become a
    folder named `s3:` under the working directory, written to (or looked for) without a word."""
    m = _SCHEME.match(value)
    if m:
        raise ConfigError(f"{key} {value}: a local path, not a {m.group(1)}:// URL")


def check_location(key: str, value: str) -> None:
    """A local folder or a well-formed object-store URI (core.storage.check_object_store_uri); another
    scheme is refused. Checked at load: `s3://` with no bucket failed in the client with an IndexError."""
    if is_object_store(value):
        try:
            check_object_store_uri(value)
        except ValueError as e:
            raise ConfigError(f"{key}: {e}") from None
    elif _SCHEME.match(value):
        raise ConfigError(f"{key} {value}: neither a local folder nor an object store (s3://bucket/prefix)")


def _steps(why: str, lo: int = 0) -> Bounds:
    return Bounds(lo, MAX_STEPS, why)


# model.overrides: ModelConfig fields a run may change, their types, and what each takes (trainer/model.py
# builds the model from them). Sizes are bounded by what a device can hold: at d_model 65536 one
# projection is 4.3e9 weights (8 GiB of bf16).
MODEL_OVERRIDES: dict[str, tuple[type, Bounds | None]] = {
    "d_model": (int, Bounds(1, 65_536, "residual width: one projection is d_model² weights")),
    "n_layers": (int, Bounds(1, 1_024, "transformer blocks")),
    "n_heads": (int, Bounds(1, 1_024, "query heads; d_model must divide by it")),
    "n_kv_heads": (int, Bounds(1, 1_024, "key/value heads; n_heads must divide by it")),
    "ffn_hidden": (int, Bounds(1, 262_144, "SwiGLU width: three d_model × ffn_hidden matrices")),
    "rope_theta": (float, Bounds(1, 1e9, "RoPE base: frequencies theta**(-2i/D) in fp32", lo_open=True)),
    "norm_eps": (float, Bounds(0, 1, "RMSNorm epsilon", lo_open=True)),
    "init_std": (float, Bounds(0, 1, "std of the weight init", lo_open=True)),
    "tie_embeddings": (bool, None),
}
# set by the trainer from other keys; an override would be passed twice (a TypeError in the trainer)
_MODEL_SET_ELSEWHERE = {
    "vocab_size": "the shards' tokenizer",
    "max_seq_len": "data.seq_len",
    "kernels": "model.kernels",
    "attention": "model.attention",
}


def _model_override(name: str, value: Any) -> Any:
    """One model.overrides entry, typed as core.config types every other number (a number written as a
    string is a number, an integral float an integer, a boolean never a number, no NaN or inf), bounded."""
    key = f"model.overrides.{name}"
    if name in _MODEL_SET_ELSEWHERE:
        raise ConfigError(f"{key}: set by {_MODEL_SET_ELSEWHERE[name]}, not here")
    if name not in MODEL_OVERRIDES:
        raise ConfigError(f"unknown key {key}; allowed: {', '.join(sorted(MODEL_OVERRIDES))}")
    kind, bounds = MODEL_OVERRIDES[name]
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        return value
    number = value
    if isinstance(value, str):  # PyYAML reads `5e5` (no dot) as a string
        try:
            number = float(value)
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise ConfigError(f"{key} must be a number, got {value!r}")
    if not math.isfinite(number):
        raise ConfigError(f"{key} must be a finite number, got {value!r}")
    if kind is int and isinstance(number, float) and not number.is_integer():
        raise ConfigError(f"{key} must be an integer, got {value!r}")
    assert bounds is not None
    bounds.check(key, number)  # before int(): 1e30 is reported as written
    return int(number) if kind is int else float(number)


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

    @field_validator("overrides", mode="after")
    @classmethod
    def _typed_overrides(cls, v: dict[str, Any]) -> dict[str, Any]:
        return {name: _model_override(str(name), value) for name, value in v.items()}

    @model_validator(mode="after")
    def _check(self) -> ModelSection:
        # imported here: trainer.model imports torch, which a config check should not need at import time
        from trainer.model import SIZES, model_config

        check_choice("model.size", self.size, SIZES)
        check_choice("model.kernels", self.kernels, ("triton", "reference", "auto"))
        check_choice("model.attention", self.attention, ("sdpa", "flex", "auto"))
        try:  # the combination: divisibility of the heads, an even head dimension
            model_config(self.size, **self.overrides)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"model.overrides: {e}") from None
        return self


# with weight_decay <= 1, lr <= 1 keeps AdamW's decay factor 1 - lr·weight_decay in [0, 1)
_LR = Bounds(0, 1, "AdamW's decay factor 1 - lr·weight_decay must stay >= 0", lo_open=True)
_LR_FLOOR = Bounds(0, 1, "at most optimizer.lr")
_BETA = Bounds(0, 1, "Adam's moment decay", hi_open=True)
_CLIP = Bounds(0, 1e6, "a pre-clip norm above it is a diverged run; 0 disables")


class OptimizerSection(ConfigModel):
    lr: Annotated[float, _LR] = 3e-4
    """peak learning rate"""
    min_lr: Annotated[float, _LR_FLOOR] = 3e-5
    """floor of the decay"""
    beta1: Annotated[float, _BETA] = 0.9
    beta2: Annotated[float, _BETA] = 0.95
    eps: Annotated[float, Bounds(0, 1, "Adam's denominator sqrt(v) + eps", lo_open=True)] = 1e-8
    weight_decay: Annotated[float, Bounds(0, 1, "AdamW scales weights by 1 - lr·weight_decay per step")] = 0.1
    """applied to matrices (ndim >= 2) only; norms get none"""
    grad_clip: Annotated[float, _CLIP] = 1.0
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
        check_bounds(self, "optimizer")
        return self


class RampStage(ConfigModel):
    tokens: Annotated[int, Bounds(0, MAX_TOKENS, "exact in a float64")]
    """from this many consumed tokens on ..."""
    batch: Annotated[int, Bounds(1, MAX_BATCH, "sequences per optimizer step")]
    """... the global batch is this many sequences"""


class ScheduleSection(ConfigModel):
    kind: str = "cosine"
    """cosine (linear warmup, cosine decay) | wsd (warmup, stable, decay) | constant"""
    steps: Annotated[int, _steps("checkpoint tags have 8 digits", 1)] = 100
    """optimizer steps of the run (the schedule's length)"""
    warmup_steps: Annotated[int, _steps("at most schedule.steps")] = 10
    decay_fraction: Annotated[float, Bounds(0, 1, "a fraction of the steps")] = 0.2
    """wsd: the last fraction of steps decays linearly to min_lr"""
    global_batch: Annotated[int, Bounds(1, MAX_BATCH, "sequences per optimizer step")] = 8
    """sequences per optimizer step (all ranks, all micro-batches)"""
    micro_batch: Annotated[int, Bounds(1, MAX_BATCH, "at most the global batch")] = 1
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
        check_bounds(self, "schedule")
        prev = -1
        for i, st in enumerate(self.rampup):
            check_bounds(st, f"schedule.rampup[{i}]")  # batch >= 1, tokens >= 0, each error naming its key
            if st.tokens <= prev:
                raise ConfigError(
                    f"schedule.rampup[{i}].tokens must increase strictly, got {st.tokens} after {prev}"
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
    seq_len: Annotated[int, Bounds(2, MAX_SEQ_LEN, "RoPE positions and attention per row")] = 256
    """tokens per row fed to the model; the sampler draws seq_len + 1 (inputs + shifted targets)"""
    allow_over_cap: bool = False
    """pass-through to MixtureSampler (repetition cap of the recipe)"""
    shard_cache_dir: str = ""
    """node-local folder caching the recipe's shards that are on an object store (s3://), shared by the
    node's ranks (tokens/shard_cache.py); "": $TMPDIR/refinery-shards of each node"""
    shard_cache_bytes: Annotated[int, Bounds(1, 2**50, "a node-local disk (1 PiB)")] = DEFAULT_CACHE_BYTES
    """bound on that folder (least recently used shards are evicted); at least the largest shard"""

    @model_validator(mode="after")
    def _check(self) -> DataSection:
        if self.seq_len <= 1:
            raise ConfigError(f"data.seq_len must be > 1, got {self.seq_len}")
        if self.shard_cache_bytes <= 0:
            raise ConfigError(f"data.shard_cache_bytes must be > 0 bytes, got {self.shard_cache_bytes}")
        check_bounds(self, "data")
        check_local_path("data.shard_cache_dir", self.shard_cache_dir)
        return self


class EvalSection(ConfigModel):
    """Held-out loss per source (mixtures/sampler.py, "Held-out split").

    Each source sets aside whole documents worth `sequences_per_source` rows of seq_len + 1 tokens; they
    leave its training stream, so the split is part of the run's data identity (recorded in the sampler
    state: a checkpoint resumes only under the same value). Cost: about that many tokens per source never
    trained on — sequences_per_source × (seq_len + 1) plus the rest of the last held-out document.
    """

    sequences_per_source: Annotated[int, Bounds(0, MAX_BATCH, "rows evaluated at each eval")] = 16
    """held-out rows per source; 0: no split and no eval"""
    every: Annotated[int, _steps("a step count")] = 50
    """mean held-out loss per source every N optimizer steps (and at the end); 0: end only"""

    @model_validator(mode="after")
    def _check(self) -> EvalSection:
        for k in ("sequences_per_source", "every"):
            check_at_least(f"eval.{k}", getattr(self, k), 0)
        check_bounds(self, "eval")
        return self


class CheckpointSection(ConfigModel):
    dir: str = ""
    """checkpoint root, a local folder or an object-store prefix (s3://bucket/prefix: credentials and
    endpoint from the AWS environment); empty disables checkpoints (and resume)"""
    staging: str = ""
    """object-store checkpoints only: local folder they are made in and downloaded to before loading
    (room for one checkpoint; default: the system temporary folder)"""
    every: Annotated[int, _steps("a step count")] = 0
    """save every N optimizer steps (0: only at the end)"""
    keep: Annotated[int, Bounds(1, 10_000, "each kept checkpoint is a full copy of the model states")] = 3
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
        check_bounds(self, "checkpoint")
        check_location("checkpoint.dir", self.dir)
        check_local_path("checkpoint.staging", self.staging)
        return self


class SpikeSection(ConfigModel):
    enabled: bool = True
    window: Annotated[int, Bounds(2, 10**6, "losses kept in memory")] = 128
    """rolling window of accepted steps (OLMo-core: 128)"""
    sigmas: Annotated[float, Bounds(0, 1e3, "standard deviations", lo_open=True)] = 6.0
    """spike: value > mean + sigmas·std of the window (OLMo-core: 6)"""
    min_history: Annotated[int, Bounds(2, 10**6, "at most spike.window")] = 20
    """no check until the window holds this many steps"""
    max_consecutive: Annotated[int, _steps("a step count", 1)] = 3
    """this many skipped steps in a row → roll back to the last good checkpoint"""
    max_rollbacks: Annotated[int, Bounds(0, 10**6, "rollbacks of one run")] = 3
    """then give up (exit 3): the run needs a human"""

    @model_validator(mode="after")
    def _check(self) -> SpikeSection:
        check_at_least("spike.window", self.window, 2)
        if self.min_history < 2 or self.min_history > self.window:
            raise ConfigError(
                f"spike.min_history: need 2 <= min_history <= window, got {self.min_history} and {self.window}"
            )
        if not self.sigmas > 0:
            raise ConfigError(f"spike.sigmas must be > 0, got {self.sigmas}")
        check_at_least("spike.max_consecutive", self.max_consecutive, 1)
        check_at_least("spike.max_rollbacks", self.max_rollbacks, 0)
        check_bounds(self, "spike")
        return self


class LoggingSection(ConfigModel):
    dir: str = "out/train"
    """metrics.jsonl, and TensorBoard events under dir/tensorboard/"""
    every: Annotated[int, _steps("a step count", 1)] = 1
    """metrics line every N steps"""
    tensorboard: bool = True
    """the same scalars as metrics.jsonl, written by rank 0"""
    sample_tokens: Annotated[int, Bounds(0, 4_096, "one forward each, on every rank, at the end")] = 32
    """tokens generated greedily at the end (0: none)"""
    sample_prompt: str = "The"
    log_sample_indices: bool = False
    """record global sequence indices per step (tests of ramp-up/no-skip)"""
    profile_start: Annotated[int, _steps("a step")] = 0
    """torch.profiler from this step on (0: off; trainer/profiling.py): a Chrome trace and an op table per
    rank under dir/profile/, the table's top on rank 0's console"""
    profile_steps: Annotated[int, Bounds(1, 1_000, "every op of each step is traced")] = 2
    """steps in the profile window"""

    @model_validator(mode="after")
    def _check(self) -> LoggingSection:
        check_at_least("logging.every", self.every, 1)
        check_at_least("logging.sample_tokens", self.sample_tokens, 0)
        check_at_least("logging.profile_start", self.profile_start, 0)
        check_at_least("logging.profile_steps", self.profile_steps, 1)
        check_bounds(self, "logging")
        check_local_path("logging.dir", self.dir)
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
    memory_margin: Annotated[float, Bounds(0, 1, "a fraction of device memory", hi_open=True)] = 0.2
    """auto stage: fraction of device memory not planned for (CUDA context, NCCL and allocator
    fragmentation, temporaries the activation estimate leaves out)"""
    precision: str = "auto"
    """auto (bf16 on GPU, fp32 on CPU) | bf16 | fp32"""
    timeout_s: Annotated[float, Bounds(0, DAY_S, "a hung node stalls the run this long", lo_open=True)] = 600
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
        check_bounds(self, "deepspeed")
        check_local_path("deepspeed.config_file", self.config_file)
        return self


class TrainConfig(ConfigModel):
    seed: Annotated[int, Bounds(0, 2**32 - 1, "numpy.random.seed takes 32 bits")] = 1234
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
        check_local_path("data.recipe", self.data.recipe)  # Recipe.load reads a local file
        check_bounds(self, "")
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
