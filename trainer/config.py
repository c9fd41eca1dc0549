"""Typed training config: YAML → nested frozen dataclasses, dotted-key overrides, the DeepSpeed JSON.

torchtitan's habit (one typed config per component, validation in `__post_init__`) with this project's
rule that every error names the file and the key. A run is a YAML file plus overrides:

    deepspeed --num_gpus 8 trainer/train.py --config configs/train-124m.yaml \
        optimizer.lr=6e-4 schedule.warmup_steps=200 checkpoint.dir=/ckpt/run1

Override values are parsed as YAML scalars (`1e-3`, `true`, `[1, 2]`), so they get the same types as the file.
`deepspeed_config(cfg, ...)` generates the DeepSpeed JSON (ZeRO stage 3; bf16 + fp32 master weights and fp32
gradient accumulation on GPU, plain fp32 on CPU); `deepspeed.config_file` replaces it with a given file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from curation.config import ConfigError as CurationConfigError
from curation.config import read_yaml_mapping


class ConfigError(ValueError):
    """Bad training config; the message names the file and the dotted key."""


def _err(key: str, msg: str) -> ConfigError:
    return ConfigError(f"{key}: {msg}")


@dataclass(kw_only=True, slots=True)
class ModelSection:
    size: str = "debug"  # debug | 124m | 350m | 1b (trainer.model.SIZES)
    kernels: str = "auto"  # triton | reference | auto
    attention: str = "auto"  # sdpa | flex | auto
    document_mask: bool = True  # attention stays inside documents of a packed row (EOD-delimited)
    overrides: dict[str, Any] = field(default_factory=dict)  # ModelConfig fields, e.g. {n_layers: 4}

    def validate(self) -> None:
        from trainer.model import SIZES

        if self.size not in SIZES:
            raise _err("model.size", f"unknown size {self.size!r}; allowed: {', '.join(SIZES)}")
        if self.kernels not in ("triton", "reference", "auto"):
            raise _err("model.kernels", f"must be triton | reference | auto, got {self.kernels!r}")
        if self.attention not in ("sdpa", "flex", "auto"):
            raise _err("model.attention", f"must be sdpa | flex | auto, got {self.attention!r}")


@dataclass(kw_only=True, slots=True)
class OptimizerSection:
    lr: float = 3e-4  # peak learning rate
    min_lr: float = 3e-5  # floor of the decay
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1  # applied to matrices (ndim >= 2) only; norms get none
    grad_clip: float = 1.0  # global L2 norm clipping (DeepSpeed's gradient_clipping); 0 disables

    def validate(self) -> None:
        for k in ("lr", "eps"):
            if not getattr(self, k) > 0:
                raise _err(f"optimizer.{k}", f"must be > 0, got {getattr(self, k)}")
        if not 0 <= self.min_lr <= self.lr:
            raise _err("optimizer.min_lr", f"must be in [0, lr={self.lr}], got {self.min_lr}")
        for k in ("beta1", "beta2"):
            if not 0 <= getattr(self, k) < 1:
                raise _err(f"optimizer.{k}", f"must be in [0, 1), got {getattr(self, k)}")
        if self.weight_decay < 0 or self.grad_clip < 0:
            raise _err("optimizer", "weight_decay and grad_clip must be >= 0")


@dataclass(kw_only=True, slots=True)
class RampStage:
    tokens: int  # from this many consumed tokens on ...
    batch: int  # ... the global batch is this many sequences


@dataclass(kw_only=True, slots=True)
class ScheduleSection:
    kind: str = "cosine"  # cosine (linear warmup, cosine decay) | wsd (warmup, stable, decay) | constant
    steps: int = 100  # optimizer steps of the run (the schedule's length)
    warmup_steps: int = 10
    decay_fraction: float = 0.2  # wsd: the last fraction of steps decays linearly to min_lr
    global_batch: int = 8  # sequences per optimizer step (all ranks, all micro-batches)
    micro_batch: int = 1  # sequences per rank per forward/backward
    rampup: list[RampStage] = field(default_factory=list)  # batch-size ramp-up by consumed tokens

    def validate(self) -> None:
        if self.kind not in ("cosine", "wsd", "constant"):
            raise _err("schedule.kind", f"must be cosine | wsd | constant, got {self.kind!r}")
        if self.steps <= 0:
            raise _err("schedule.steps", f"must be > 0, got {self.steps}")
        if not 0 <= self.warmup_steps <= self.steps:
            raise _err(
                "schedule.warmup_steps", f"must be in [0, steps={self.steps}], got {self.warmup_steps}"
            )
        if not 0 <= self.decay_fraction <= 1:
            raise _err("schedule.decay_fraction", f"must be in [0, 1], got {self.decay_fraction}")
        if self.micro_batch <= 0 or self.global_batch <= 0:
            raise _err("schedule.global_batch", "global_batch and micro_batch must be > 0")
        prev = -1
        for i, st in enumerate(self.rampup):
            if st.tokens <= prev or st.batch <= 0:
                raise _err(f"schedule.rampup[{i}]", "tokens must increase strictly and batch must be > 0")
            prev = st.tokens
        if self.rampup and self.rampup[0].tokens != 0:
            raise _err("schedule.rampup[0].tokens", "the first ramp-up stage must start at 0 tokens")

    def check_divisible(self, world_size: int) -> None:
        per = self.micro_batch * world_size
        for key, b in [("schedule.global_batch", self.global_batch)] + [
            (f"schedule.rampup[{i}].batch", s.batch) for i, s in enumerate(self.rampup)
        ]:
            if b % per:
                raise _err(key, f"{b} is not a multiple of micro_batch × world_size = {per}")


@dataclass(kw_only=True, slots=True)
class DataSection:
    recipe: str = ""  # mixture recipe YAML (mixtures/recipe.py)
    seq_len: int = (
        256  # tokens per row fed to the model; the sampler draws seq_len + 1 (inputs + shifted targets)
    )
    allow_over_cap: bool = False  # pass-through to MixtureSampler (repetition cap of the recipe)

    def validate(self) -> None:
        if not self.recipe:
            raise _err("data.recipe", "a mixture recipe path is required")
        if self.seq_len <= 1:
            raise _err("data.seq_len", f"must be > 1, got {self.seq_len}")


@dataclass(kw_only=True, slots=True)
class EvalSection:
    """Held-out loss per source (mixtures/sampler.py, "Held-out split").

    Each source sets aside whole documents worth `sequences_per_source` rows of seq_len + 1 tokens; they
    leave its training stream, so the split is part of the run's data identity (recorded in the sampler
    state: a checkpoint resumes only under the same value). Cost: about that many tokens per source never
    trained on — sequences_per_source × (seq_len + 1) plus the rest of the last held-out document.
    """

    sequences_per_source: int = 16  # held-out rows per source; 0: no split and no eval
    every: int = 50  # mean held-out loss per source every N optimizer steps (and at the end); 0: end only

    def validate(self) -> None:
        if self.sequences_per_source < 0:
            raise _err("eval.sequences_per_source", f"must be >= 0, got {self.sequences_per_source}")
        if self.every < 0:
            raise _err("eval.every", f"must be >= 0, got {self.every}")


@dataclass(kw_only=True, slots=True)
class CheckpointSection:
    dir: str = ""  # checkpoint root; empty disables checkpoints (and resume)
    every: int = 0  # save every N optimizer steps (0: only at the end)
    keep: int = 3  # keep the last K complete checkpoints
    resume: bool = True  # resume from the newest complete checkpoint under dir
    verify: str = "sha256"  # sha256 | size: how a complete checkpoint is checked before resuming from it
    save_final: bool = True

    def validate(self) -> None:
        if self.every < 0 or self.keep < 1:
            raise _err("checkpoint.every", "every must be >= 0 and keep >= 1")
        if self.verify not in ("sha256", "size"):
            raise _err("checkpoint.verify", f"must be sha256 | size, got {self.verify!r}")


@dataclass(kw_only=True, slots=True)
class SpikeSection:
    enabled: bool = True
    window: int = 128  # rolling window of accepted steps (OLMo-core: 128)
    sigmas: float = 6.0  # spike: value > mean + sigmas·std of the window (OLMo-core: 6)
    min_history: int = 20  # no check until the window holds this many steps
    max_consecutive: int = 3  # this many skipped steps in a row → roll back to the last good checkpoint
    max_rollbacks: int = 3  # then give up (exit 3): the run needs a human

    def validate(self) -> None:
        if self.window < 2 or self.min_history < 2 or self.min_history > self.window:
            raise _err("spike.min_history", "need 2 <= min_history <= window")
        if self.sigmas <= 0 or self.max_consecutive < 1 or self.max_rollbacks < 0:
            raise _err("spike.sigmas", "sigmas > 0, max_consecutive >= 1, max_rollbacks >= 0")


@dataclass(kw_only=True, slots=True)
class LoggingSection:
    dir: str = "out/train"  # metrics.jsonl, and TensorBoard events under dir/tensorboard/
    every: int = 1  # metrics line every N steps
    tensorboard: bool = True  # the same scalars as metrics.jsonl, written by rank 0
    sample_tokens: int = 32  # tokens generated greedily at the end (0: none)
    sample_prompt: str = "The"
    log_sample_indices: bool = False  # record global sequence indices per step (tests of ramp-up/no-skip)

    def validate(self) -> None:
        if self.every < 1:
            raise _err("logging.every", f"must be >= 1, got {self.every}")
        if self.sample_tokens < 0:
            raise _err("logging.sample_tokens", f"must be >= 0, got {self.sample_tokens}")
        # checked here, on every rank alike, rather than when rank 0 opens the writer: a rank failing alone
        # after deepspeed.initialize would leave the others waiting in their next collective forever
        import importlib.util

        if self.tensorboard and importlib.util.find_spec("tensorboard") is None:
            raise _err("logging.tensorboard", "tensorboard is not installed: `pip install tensorboard`, "
                       "or set logging.tensorboard=false")  # fmt: skip


@dataclass(kw_only=True, slots=True)
class DeepSpeedSection:
    config_file: str = ""  # use this DeepSpeed JSON instead of the generated one
    zero_stage: int = 3  # 3 for the design; 0 only to measure ZeRO-3's overhead against plain DDP
    precision: str = "auto"  # auto (bf16 on GPU, fp32 on CPU) | bf16 | fp32
    overrides: dict[str, Any] = field(default_factory=dict)  # merged into the generated JSON

    def validate(self) -> None:
        if self.zero_stage not in (0, 1, 2, 3):
            raise _err("deepspeed.zero_stage", f"must be 0..3, got {self.zero_stage}")
        if self.precision not in ("auto", "bf16", "fp32"):
            raise _err("deepspeed.precision", f"must be auto | bf16 | fp32, got {self.precision!r}")


@dataclass(kw_only=True, slots=True)
class TestHooks:
    """Deterministic fault injection, for tests only (never set in a real run's config)."""

    poison_indices: list[int] = field(default_factory=list)  # global sequence indices whose loss is scaled
    poison_factor: float = 1.0  # the loss of a micro-batch holding a poisoned sequence is multiplied by this
    kill_at_step: int = 0  # rank 0 SIGKILLs itself after finishing this step (simulated crash; 0: off)


@dataclass(kw_only=True, slots=True)
class TrainConfig:
    seed: int = 1234
    model: ModelSection = field(default_factory=ModelSection)
    optimizer: OptimizerSection = field(default_factory=OptimizerSection)
    schedule: ScheduleSection = field(default_factory=ScheduleSection)
    data: DataSection = field(default_factory=DataSection)
    eval: EvalSection = field(default_factory=EvalSection)
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    spike: SpikeSection = field(default_factory=SpikeSection)
    logging: LoggingSection = field(default_factory=LoggingSection)
    deepspeed: DeepSpeedSection = field(default_factory=DeepSpeedSection)
    test_hooks: TestHooks = field(default_factory=TestHooks)

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if hasattr(v, "validate"):
                v.validate()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------ loading


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Check/convert one YAML value against a field type; errors name the dotted key."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, key)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise _err(key, f"must be a list, got {value!r}")
        return [_coerce(f"{key}[{i}]", v, item) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise _err(key, f"must be a mapping, got {value!r}")
        return dict(value)
    if origin in (typing.Union, types.UnionType):
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise _err(key, f"must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _err(key, f"must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "2e-3" (no dot) as a string
            with contextlib.suppress(ValueError):
                value = float(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _err(key, f"must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise _err(key, f"must be a string, got {value!r}")
        return value
    return value


def _build(cls: type, data: Any, where: str = "") -> Any:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise _err(where or "<root>", f"must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for k, v in data.items():
        key = f"{where}.{k}" if where else str(k)
        if k not in names:
            raise _err(key, f"unknown key; allowed: {', '.join(names)}")
        kwargs[k] = _coerce(key, v, hints[k])
    try:
        return cls(**kwargs)
    except TypeError as e:  # a required field (e.g. RampStage.tokens) is missing
        raise _err(where or "<root>", str(e)) from None


def _set_dotted(data: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    cur = data
    for p in parts[:-1]:
        nxt = cur.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise _err(dotted, f"{p} is not a section")
        cur = nxt
    cur[parts[-1]] = value


def load_config(path: str | Path | None, overrides: list[str] = ()) -> TrainConfig:
    """Read YAML (or start from defaults), apply `a.b.c=value` overrides, validate; errors name file and key."""
    data: dict[str, Any] = {}
    where = "<defaults>"
    if path is not None:
        where = str(path)
        try:
            data = read_yaml_mapping(path)
        except CurationConfigError as e:  # the trainer's callers catch its own ConfigError
            raise ConfigError(str(e)) from None
    for ov in overrides:
        if "=" not in ov:
            raise ConfigError(f"override {ov!r}: expected dotted.key=value")
        k, v = ov.split("=", 1)
        _set_dotted(data, k.strip(), yaml.safe_load(v) if v.strip() else "")
    try:
        cfg = _build(TrainConfig, data)
        cfg.validate()
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    if path is not None and cfg.data.recipe and not Path(cfg.data.recipe).is_absolute():
        # recipe paths are relative to the working directory (the repo root), as in the Makefile's commands
        cfg.data.recipe = str(Path(cfg.data.recipe))
    return cfg


# ------------------------------------------------------------------ DeepSpeed JSON


def resolve_precision(cfg: TrainConfig, on_cuda: bool) -> str:
    p = cfg.deepspeed.precision
    if p == "auto":
        return "bf16" if on_cuda else "fp32"
    if p == "bf16" and not on_cuda:
        raise _err("deepspeed.precision", "bf16 needs a GPU here; the CPU accelerator path trains in fp32")
    return p


def deepspeed_config(cfg: TrainConfig, world_size: int, on_cuda: bool) -> dict[str, Any]:
    """The DeepSpeed JSON of a run.

    Gradient accumulation is owned by the trainer (`managed_gradient_accumulation: false`): the number of
    micro-batches per step changes with the batch ramp-up, and every `engine.step()` is a boundary. So
    DeepSpeed sees gradient_accumulation_steps = 1 and train_batch_size = micro_batch × world_size.
    The LR is set by the trainer each step (no DeepSpeed scheduler), and the optimizer is the trainer's own
    torch AdamW (two param groups: decay on matrices only), hence zero_allow_untested_optimizer.
    """
    import json

    if cfg.deepspeed.config_file:
        p = Path(cfg.deepspeed.config_file)
        if not p.is_file():
            raise _err("deepspeed.config_file", f"{p} not found")
        return json.loads(p.read_text())
    precision = resolve_precision(cfg, on_cuda)
    zero: dict[str, Any] = {"stage": cfg.deepspeed.zero_stage}
    if cfg.deepspeed.zero_stage == 3:
        zero.update(
            {
                "overlap_comm": on_cuda,
                "contiguous_gradients": True,
                "reduce_bucket_size": 5e7,
                "stage3_prefetch_bucket_size": 5e7,
                "stage3_param_persistence_threshold": 1e5,
                "stage3_gather_16bit_weights_on_model_save": False,
            }
        )
    ds: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": cfg.schedule.micro_batch,
        "gradient_accumulation_steps": 1,
        "train_batch_size": cfg.schedule.micro_batch * world_size,
        "managed_gradient_accumulation": False,
        "gradient_clipping": cfg.optimizer.grad_clip,
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 10**9,  # the trainer logs; DeepSpeed's own progress lines would only add noise
        "wall_clock_breakdown": False,
    }
    if precision == "bf16":
        ds["bf16"] = {"enabled": True}
        # fp32 gradient accumulation: bf16 accumulation loses low bits over micro-batches (DeepSpeed#2768)
        ds["data_types"] = {"grad_accum_dtype": "fp32"}
    for k, v in cfg.deepspeed.overrides.items():
        ds[k] = v
    return ds
