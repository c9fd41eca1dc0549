"""A tiny one-source training run for the trainer's launcher tests: the test corpus (testkit/corpus.py)
tokenized into one source, a one-phase recipe over it, and a debug-model ZeRO-3 config.

What tests/trainer/test_checkpoint_s3.py (S3 checkpoints, 1 rank) and tests/trainer/test_multinode.py
(two isolated nodes) both train; each passes its length, sequence length and checkpoint cadence. No
eval, spike guard, sample or TensorBoard: these tests compare per-step losses and checkpoints only.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from testkit.corpus import build_source


def tiny_run(
    root: Path,
    corpus: Path,
    *,
    steps: int,
    seq_len: int,
    warmup_steps: int,
    total_tokens: int,
    checkpoint_every: int,
    keep: int,
) -> Path:
    """Tokenizer, shards, recipe.yaml and train.yaml under `root` from `corpus` (build_corpus's folder);
    returns the config's path. Global batch 4 rows of micro-batches of 2 (2 ranks: no accumulation)."""
    from tokens.tokenizer import TokenizerConfig, train_tokenizer

    tok = train_tokenizer(corpus, root / "tok", TokenizerConfig(vocab_size=512))
    web = build_source(root / "tokens", tok, "web", sorted((corpus / "docs").glob("*.parquet")))
    recipe = {
        "name": "t",
        "seed": 5,
        "total_tokens": total_tokens,
        "max_epochs": 50,
        "sources": {"web": {"shards": str(web)}},
        "phases": [{"name": "main", "share": 1.0, "weights": {"web": 1}}],
    }
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    cfg = {
        "seed": 7,
        "model": {"size": "debug"},
        "optimizer": {"lr": 3e-3, "min_lr": 3e-4},
        "schedule": {"steps": steps, "warmup_steps": warmup_steps, "global_batch": 4, "micro_batch": 2},
        "data": {"recipe": str(root / "recipe.yaml"), "seq_len": seq_len},
        "eval": {"sequences_per_source": 0},
        "checkpoint": {"every": checkpoint_every, "keep": keep},
        "spike": {"enabled": False},
        "logging": {"sample_tokens": 0, "tensorboard": False},
        # ZeRO-3's per-rank checkpoint files (zero_pp_rank_N_*), which these tests were written for
        # (the default, auto, picks stage 0 for this model on CPU)
        "deepspeed": {"zero_stage": 3},
    }
    path = root / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path
