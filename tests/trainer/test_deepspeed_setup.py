"""trainer/deepspeed_setup.py: the generated DeepSpeed JSON, ZeRO-3 tuning and the `zero_stage: auto` planning
arithmetic, checked by hand against the formulas in its comments."""

from __future__ import annotations

import pytest

from trainer.config import ConfigError, load_config
from trainer.deepspeed_setup import deepspeed_config, plan_zero_stage
from trainer.model import model_config


def _write(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_generated_deepspeed_json(tmp_path):
    cfg = load_config(_write(tmp_path, "data: {recipe: r.yaml}\nschedule: {micro_batch: 3}\n"))
    assert cfg.deepspeed.zero_stage == "auto"  # the default: the stage is resolved at start (plan_zero_stage)
    with pytest.raises(ValueError, match="resolve it first"):
        deepspeed_config(cfg, world_size=2, on_cuda=False)
    cfg = cfg.replace(deepspeed=cfg.deepspeed.replace(zero_stage=3))
    cpu = deepspeed_config(cfg, world_size=2, on_cuda=False)
    assert cpu["zero_optimization"]["stage"] == 3
    assert cpu["train_batch_size"] == 6 and cpu["gradient_accumulation_steps"] == 1
    assert cpu["managed_gradient_accumulation"] is False and cpu["gradient_clipping"] == 1.0
    assert "bf16" not in cpu and "fp16" not in cpu  # fp32 on CPU
    gpu = deepspeed_config(cfg, world_size=8, on_cuda=True)
    assert gpu["bf16"] == {"enabled": True} and gpu["data_types"]["grad_accum_dtype"] == "fp32"
    bf16 = cfg.replace(deepspeed=cfg.deepspeed.replace(precision="bf16"))
    with pytest.raises(ConfigError, match=r"deepspeed\.precision"):
        deepspeed_config(bf16, world_size=2, on_cuda=False)
    # stage 0 with bf16: DeepSpeed refuses bf16 parameters with fp32 accumulation without ZeRO, so the
    # model stays fp32 and computes in bf16 under DeepSpeed's torch_autocast (deepspeed_setup.deepspeed_config)
    z0 = deepspeed_config(cfg, world_size=8, on_cuda=True, stage=0)
    assert z0["torch_autocast"] == {"enabled": True, "dtype": "bfloat16"}
    assert "bf16" not in z0 and "data_types" not in z0 and z0["zero_optimization"] == {"stage": 0}
    assert z0["gradient_clipping"] == 0.0  # at stage 0 the trainer clips (and keeps the norm it logs)


def test_zero3_buckets_and_persistence_follow_d_model(tmp_path):
    """The Hugging Face "auto" formulas (deepspeed_setup.zero3_tuning): h², 0.9·h², 10·h for h = d_model."""
    cfg = load_config(
        _write(tmp_path, "data: {recipe: r.yaml}\ndeepspeed: {zero_stage: 3}\n"), ["model.size=124m"]
    )
    zero = deepspeed_config(cfg, world_size=1, on_cuda=True)["zero_optimization"]
    assert zero["reduce_bucket_size"] == 768 * 768 == 589_824
    assert zero["stage3_prefetch_bucket_size"] == 530_841  # int(0.9 · 589,824)
    # every norm weight (768 elements) stays resident, every matrix (≥ 768 × 768) is partitioned
    assert zero["stage3_param_persistence_threshold"] == 7_680
    big = deepspeed_config(cfg.replace(model=cfg.model.replace(size="1b")), world_size=1, on_cuda=True)
    assert big["zero_optimization"]["reduce_bucket_size"] == 2048 * 2048
    # the leaf module names the class the trainer builds (DeepSpeed matches module.__module__.__qualname__)
    from trainer.model import Block

    assert zero["leaf_module"]["classes"] == [f"{Block.__module__}.{Block.__qualname__}"]
    for stage in (0, 1, 2):
        assert set(deepspeed_config(cfg, 1, True, stage=stage)["zero_optimization"]) == {"stage"}


GB = 10**9


def _plan(tmp_path, mcfg, world, device_bytes, seq_len, micro, on_cuda=True):
    cfg = load_config(
        _write(tmp_path, "data: {recipe: r.yaml}\n"),
        [
            f"data.seq_len={seq_len}",
            f"schedule.micro_batch={micro}",
            f"schedule.global_batch={micro * world}",
        ],
    )
    return plan_zero_stage(cfg, mcfg, world, on_cuda, device_bytes)


def test_zero_stage_auto_picks_the_lowest_stage_that_fits(tmp_path):
    """Arithmetic (deepspeed_setup.py, "ZeRO stage from memory"; margin 0.2 → budget 0.8 × device):

    - 124m (4,096 vocabulary, 88.1M parameters), 16 × 1024 tokens, one 80 GB GPU: stage 0 needs 16 B ×
      88.1M = 1.41 GB of model states + 16,384 tokens × (12 layers × (6·768 + 2·768 + 3·2048) × 2 B +
      4,096 × 4 B) = 4.83 + 0.27 GB of activations = 6.5 GB ≤ 64 GB → 0.
    - 8B (Llama 3 8B's shape, Ψ = 8.03B parameters), 8 × 80 GB, 1 row of 8,192 tokens: activations
      8,192 × (32 × (6·4096 + 2·1024 + 3·14336) × 2 + 128,256 × 4) = 36.5 + 4.2 = 40.7 GB; with them,
      stage 0 16·Ψ → 169.2 GB, stage 1 (6 + 12/8)·Ψ → 100.9, stage 2 (2 + 16/8)·Ψ → 72.8 (> 64), stage 3
      18/8·Ψ → 58.8 (≤ 64) → 3. At 4,096 tokens the activations halve (20.4 GB): stage 2 → 52.5 GB → 2.
      On one GPU even stage 3 needs 144.5 + 20.4 GB → 3, flagged as not fitting.
    """
    from trainer.model import ModelConfig

    m124 = model_config("124m", vocab_size=4096, max_seq_len=1024)
    assert m124.num_params() == 88_099_584
    p = _plan(tmp_path, m124, world=1, device_bytes=80 * GB, seq_len=1024, micro=16)
    assert (p.stage, p.fits, p.budget_bytes) == (0, True, 64 * GB)
    assert p.state_bytes[0] == 16 * 88_099_584 and p.state_bytes[1] == 18 * 88_099_584
    assert p.activation_bytes == 16_384 * (12 * 12_288 * 2 + 4096 * 4)
    assert "ZeRO stage 0 (auto; fits)" in p.describe()

    m8b = ModelConfig(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_hidden=14336,
                      vocab_size=128_256, tie_embeddings=False, max_seq_len=8192)  # fmt: skip
    assert round(m8b.num_params() / 1e9, 2) == 8.03
    assert _plan(tmp_path, m8b, world=8, device_bytes=80 * GB, seq_len=8192, micro=1).stage == 3
    assert _plan(tmp_path, m8b, world=8, device_bytes=80 * GB, seq_len=4096, micro=1).stage == 2
    alone = _plan(tmp_path, m8b, world=1, device_bytes=80 * GB, seq_len=4096, micro=1)
    assert (alone.stage, alone.fits) == (3, False) and "does NOT fit" in alone.describe()
    # fp32 (the CPU path): 16 bytes per parameter at every stage before sharding, 4-byte activations
    cpu = _plan(tmp_path, m124, world=2, device_bytes=8 * GB, seq_len=1024, micro=16, on_cuda=False)
    assert cpu.state_bytes[1] == (4 + 4 + 8 // 2) * 88_099_584  # stage 1 on 2 ranks: Adam state halved
    assert cpu.activation_bytes == 16_384 * (12 * 12_288 * 4 + 4096 * 4)
    assert cpu.stage == 3 and not cpu.fits  # 9.9 GB of fp32 activations alone exceed 6.4 GB
