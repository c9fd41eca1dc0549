"""trainer/config.py: every number of the trainer config is bounded by what its consumer takes, checked at
load with an error naming the key; every path key refuses URLs it cannot take (issue 44 item 4).

Tests of the class, not of the cases that were reported: the numeric fields are found by walking the
pydantic models, so a new field without `Bounds` fails `test_every_numeric_field_declares_its_bounds`,
and each one gets the same absurd values (1e30, -1, NaN, inf, true, a 31-digit integer) and its own
edges. Where the consumer is cheap to reach, the largest accepted value is handed to it
(`test_the_largest_values_work_with_their_consumers`): the bound is the consumer's, not a guess.
"""

from __future__ import annotations

import math
import random
import types
import typing
from datetime import timedelta

import numpy as np
import pytest
import torch
from pydantic import BaseModel

from core.config import ConfigModel
from core.errors import ConfigError
from tests.trainer.test_train_startup import _config, no_process_group  # noqa: F401 (a fixture, used by name)
from trainer import checkpoint as ckpt
from trainer import train
from trainer.config import (
    DAY_S,
    MAX_SEQ_LEN,
    MAX_STEPS,
    MAX_TOKENS,
    MODEL_OVERRIDES,
    Bounds,
    TrainConfig,
    bounds_of,
    load_config,
)

# numeric fields that are a choice, not a quantity (their own validator lists the values)
CHOICES = {"deepspeed.zero_stage"}


def _section(annotation: typing.Any) -> type[BaseModel] | None:
    """The config model a field holds (a section, or the items of a tuple of them)."""
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, ConfigModel):
            return arg
    return None


def _kinds(annotation: typing.Any) -> set[type]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return {a for a in typing.get_args(annotation) if isinstance(a, type)}
    return {annotation} if isinstance(annotation, type) else set()


def _numeric_fields(model: type[BaseModel] = TrainConfig, prefix: str = "") -> list[tuple[str, type, str]]:
    """(dotted key, model, field name) of every int/float field under `model`; a tuple of sections is
    walked as its first item (`schedule.rampup[0].tokens`)."""
    out = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        sub = _section(field.annotation)
        if sub is not None:
            index = "[0]" if typing.get_origin(field.annotation) is tuple else ""
            out += _numeric_fields(sub, f"{key}{index}.")
        elif _kinds(field.annotation) & {int, float} and bool not in _kinds(field.annotation):
            out.append((key, model, name))
    return out


NUMERIC = _numeric_fields()
KEYS = [k for k, _, _ in NUMERIC if k not in CHOICES]


def _load(*overrides: str) -> TrainConfig:
    return load_config(None, ["data.recipe=r.yaml", *overrides])


def _set(key: str, value: str) -> list[str]:
    """Overrides that put `value` (YAML text) at `key`, a ramp-up stage as the second of two."""
    if key.startswith("schedule.rampup[0]."):
        field = key.rsplit(".", 1)[1]
        stage = {"tokens": "1", "batch": "8", field: value}
        return [
            f"schedule.rampup=[{{tokens: 0, batch: 8}}, {{tokens: {stage['tokens']}, batch: {stage['batch']}}}]"
        ]
    return [f"{key}={value}"]


# settings that must move with a key for its edge to be valid on its own (cross-field checks)
COMPANIONS = {
    ("optimizer.min_lr", "hi"): ["optimizer.lr=1"],
    ("optimizer.lr", "lo"): ["optimizer.min_lr=0"],
    ("schedule.warmup_steps", "hi"): [f"schedule.steps={MAX_STEPS}"],
    ("schedule.steps", "lo"): ["schedule.warmup_steps=0"],
    ("spike.min_history", "hi"): ["spike.window=1000000"],
    ("spike.window", "lo"): ["spike.min_history=2"],
}


def test_the_walk_finds_every_section():
    keys = set(KEYS)
    for expected in ("seed", "deepspeed.timeout_s", "schedule.rampup[0].tokens", "data.shard_cache_bytes",
                     "spike.sigmas", "logging.profile_steps", "optimizer.grad_clip"):  # fmt: skip
        assert expected in keys


@pytest.mark.parametrize(("key", "model", "name"), NUMERIC, ids=[k for k, _, _ in NUMERIC])
def test_every_numeric_field_declares_its_bounds(key, model, name):
    if key in CHOICES:
        return
    b = bounds_of(model, name)
    assert isinstance(b, Bounds), f"{key}: declare Annotated[..., Bounds(lo, hi, why)] (trainer/config.py)"
    assert math.isfinite(b.lo) and math.isfinite(b.hi) and b.lo < b.hi and b.why


ABSURD = ["1.0e+30", "-1.0e+30", "-1", ".nan", ".inf", "-.inf", "true", "false", str(10**30), "1.5e+308"]


@pytest.mark.parametrize("value", ABSURD)
@pytest.mark.parametrize("key", KEYS)
def test_absurd_values_are_refused_at_load_naming_the_key(key, value):
    with pytest.raises(ConfigError) as e:
        _load(*_set(key, value))
    assert key.replace("[0]", "[1]") in str(e.value)


def _float_field(key: str) -> bool:
    model, name = next((m, n) for k, m, n in NUMERIC if k == key)
    return float in _kinds(model.model_fields[name].annotation)


def _outside(b: Bounds, edge: str, is_float: bool) -> float:
    """The nearest value past `edge` (the edge itself when it is open)."""
    if edge == "hi":
        return b.hi if b.hi_open else (math.nextafter(b.hi, math.inf) if is_float else b.hi + 1)
    return b.lo if b.lo_open else (math.nextafter(b.lo, -math.inf) if is_float else b.lo - 1)


def _inside(b: Bounds, edge: str, is_float: bool) -> float:
    """The edge, or the nearest value inside an open one."""
    if edge == "hi":
        return math.nextafter(b.hi, -math.inf) if b.hi_open else b.hi
    return math.nextafter(b.lo, math.inf) if b.lo_open else b.lo


def _yaml(v: float, is_float: bool) -> str:
    return repr(float(v)) if is_float else str(int(v))


@pytest.mark.parametrize("edge", ["lo", "hi"])
@pytest.mark.parametrize("key", KEYS)
def test_each_bound_is_exact(key, edge):
    model, name = next((m, n) for k, m, n in NUMERIC if k == key)
    b, is_float = bounds_of(model, name), _float_field(key)
    extra = COMPANIONS.get((key, edge), [])
    inside = _inside(b, edge, is_float)
    if key.startswith("schedule.rampup[0].tokens") and edge == "lo":
        extra, overrides = [], ["schedule.rampup=[{tokens: 0, batch: 8}]"]  # the first stage starts at 0
    else:
        overrides = _set(key, _yaml(inside, is_float))
    _load(*extra, *overrides)  # accepted
    with pytest.raises(ConfigError) as e:
        _load(*extra, *_set(key, _yaml(_outside(b, edge, is_float), is_float)))
    assert key.replace("[0]", "[1]") in str(e.value)


# ------------------------------------------------------------------ model.overrides: ModelConfig fields

# settings that make the edge of one ModelConfig field a valid model (heads divide d_model, and so on)
MODEL_COMPANIONS = {
    "n_heads": {"d_model": 65_536},
    "n_kv_heads": {"d_model": 65_536, "n_heads": 1_024},
}


@pytest.mark.parametrize("name", [n for n, (kind, _) in MODEL_OVERRIDES.items() if kind is not bool])
def test_model_overrides_are_typed_and_bounded(name):
    kind, b = MODEL_OVERRIDES[name]
    key = f"model.overrides.{name}"
    extra = [f"model.overrides.{k}={v}" for k, v in MODEL_COMPANIONS.get(name, {}).items()]
    top = _inside(b, "hi", kind is float)
    cfg = _load(*extra, f"{key}={_yaml(top, kind is float)}")
    assert type(cfg.model.overrides[name]) is kind and cfg.model.overrides[name] == top
    for value in [*ABSURD, _yaml(_outside(b, "hi", kind is float), kind is float)]:
        with pytest.raises(ConfigError, match=rf"model\.overrides\.{name}"):
            _load(*extra, f"{key}={value}")


@pytest.mark.parametrize(
    ("override", "error"),
    [
        ("model.overrides.vocab_size=100", "model.overrides.vocab_size: set by the shards' tokenizer"),
        ("model.overrides.max_seq_len=64", "model.overrides.max_seq_len: set by data.seq_len"),
        ("model.overrides.kernels=triton", "model.overrides.kernels: set by model.kernels"),
        ("model.overrides.n_layer=2", "unknown key model.overrides.n_layer; allowed: d_model,"),
        (
            "model.overrides.n_heads=3",
            "model.overrides: ModelConfig.d_model=64 must be divisible by n_heads=3",
        ),
        ("model.overrides.tie_embeddings=1", "model.overrides.tie_embeddings must be true or false"),
        ("model.overrides.n_layers=2.5", "model.overrides.n_layers must be an integer"),
    ],
)
def test_model_overrides_that_would_fail_in_the_trainer_fail_at_load(override, error):
    with pytest.raises(ConfigError) as e:
        _load(override)
    assert error in str(e.value)


def test_model_override_numbers_are_read_as_every_other_number():
    cfg = _load("model.overrides.rope_theta=5e5", "model.overrides.n_layers=4.0")  # `5e5`: a YAML string
    assert cfg.model.overrides == {"rope_theta": 500000.0, "n_layers": 4}


# ------------------------------------------------------------------ the consumers at the largest values


def test_the_largest_values_work_with_their_consumers():
    import torch.distributed as dist

    # deepspeed.timeout_s: the process group's store takes a day (it converts to int64 nanoseconds);
    # 1e30 s, the reported value, overflows before the store is even asked
    with pytest.raises(OverflowError):
        timedelta(seconds=1e30)
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=DAY_S), wait_for_workers=False)
    store.set("k", "v")
    assert store.get("k") == b"v"
    # seed: numpy's 32 bits are the narrowest of the three generators seeded with it
    top = bounds_of(TrainConfig, "seed").hi
    random.seed(top)
    np.random.seed(top)
    torch.manual_seed(top)
    with pytest.raises(ValueError):
        np.random.seed(top + 1)
    # steps: the last step's checkpoint tag is still one the trainer lists
    assert ckpt.TAG_RE.match(ckpt.tag_for(MAX_STEPS)) and not ckpt.TAG_RE.match(ckpt.tag_for(MAX_STEPS + 1))
    # token counts exact in a float64; positions exact in fp32 (RoPE angles)
    assert int(float(MAX_TOKENS)) == MAX_TOKENS and int(float(MAX_TOKENS + 1)) != MAX_TOKENS + 1
    assert int(torch.tensor(MAX_SEQ_LEN, dtype=torch.float32).item()) == MAX_SEQ_LEN


# ------------------------------------------------------------------ keys that take a path or a URL

# every str field of the config, and what it takes: a URL check of its own for each path-like key
LOCATIONS = {"checkpoint.dir"}  # a local folder or an object-store prefix
LOCAL_PATHS = {
    "checkpoint.staging",
    "logging.dir",
    "data.shard_cache_dir",
    "data.recipe",
    "deepspeed.config_file",
}
NOT_PATHS = {"model.size", "schedule.kind", "model.kernels", "model.attention", "checkpoint.verify", "logging.sample_prompt",
             "deepspeed.precision", "model.compile", "deepspeed.zero_stage"}  # fmt: skip


def _str_fields(model: type[BaseModel] = TrainConfig, prefix: str = "") -> set[str]:
    out = set()
    for name, field in model.model_fields.items():
        sub = _section(field.annotation)
        if sub is not None:
            out |= _str_fields(sub, f"{prefix}{name}.")
        elif str in _kinds(field.annotation):
            out.add(f"{prefix}{name}")
    return out


def test_every_string_key_is_classified():
    assert _str_fields() == LOCATIONS | LOCAL_PATHS | NOT_PATHS


BAD_URLS = ["s3://", "s3:///x", "s3://bucket/..", "s3://bucket/a//b", "s3://bucket/./x", "s3://-bad-/x",
            "gs://", "s3://bucket/../other"]  # fmt: skip


@pytest.mark.parametrize("url", BAD_URLS)
def test_malformed_object_store_urls_are_refused_at_load_naming_the_key(url):
    with pytest.raises(ConfigError, match=r"checkpoint\.dir: .* (names no bucket|path segment|not a bucket)"):
        _load(f"checkpoint.dir={url}")


@pytest.mark.parametrize("url", ["s3://bucket", "s3://bucket/", "s3://my.bucket-1/runs/a/", "gs://b/x"])
def test_well_formed_object_store_urls_load(url):
    assert _load(f"checkpoint.dir={url}").checkpoint.dir == url


@pytest.mark.parametrize("key", sorted(LOCATIONS | LOCAL_PATHS))
def test_a_url_where_the_key_cannot_take_it_is_refused(key):
    url = "hdfs://nn/x" if key in LOCATIONS else "s3://bucket/x"
    with pytest.raises(ConfigError) as e:
        _load(f"{key}={url}")
    assert f"{key} {url}:" in str(e.value)


# ------------------------------------------------------------------ through the trainer's command line


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "deepspeed.timeout_s=1.0e+30",
            "train.yaml (with overrides): deepspeed.timeout_s must be in (0, 86400], got 1e+30",
        ),
        ("checkpoint.dir=s3://", "checkpoint.dir: 's3://' names no bucket"),
        ("seed=true", "seed must be a number, got True"),
        (
            "model.overrides.n_heads=3",
            "model.overrides: ModelConfig.d_model=64 must be divisible by n_heads=3",
        ),
    ],
)
@pytest.mark.usefixtures("no_process_group")
def test_the_reported_values_exit_2_before_the_process_group(tmp_path, capsys, override, message):
    """What crashed in init_distributed or in the object-store client is now an exit 2 naming the key."""
    cfg = _config(tmp_path, "r.yaml")
    assert train.main(["--config", str(cfg), "--set", override]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
