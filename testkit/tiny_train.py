"""A tiny one-source training run for the trainer's launcher tests: a one-phase recipe over one source's
shards and a debug-model ZeRO-3 config (`write_run`), by default over the test corpus (testkit/corpus.py)
tokenized here (`tiny_run`).

What tests/trainer/test_checkpoint_s3.py (S3 checkpoints, 1 rank), tests/trainer/test_multinode.py
(two isolated nodes) and the S3 chain's last step (tests/test_object_storage.py, shards the chain
made) train; each passes its length, sequence length and checkpoint cadence. No eval, spike guard,
sample or TensorBoard: these tests compare per-step losses and checkpoints only.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from testkit.corpus import build_source


def tiny_run(root: Path, corpus: Path, **run: int) -> Path:
    """Tokenizer, shards, recipe.yaml and train.yaml under `root` from `corpus` (build_corpus's folder);
    `run` is write_run's keywords (steps, seq_len, ...). Returns the config's path."""
    from tokens.tokenizer import TokenizerConfig, train_tokenizer

    tok = train_tokenizer(corpus, root / "tok", TokenizerConfig(vocab_size=512))
    web = build_source(root / "tokens", tok, "web", sorted((corpus / "docs").glob("*.parquet")))
    return write_run(root, str(web), **run)


def write_run(
    root: Path,
    shards: str,
    *,
    steps: int,
    seq_len: int,
    warmup_steps: int,
    total_tokens: int,
    checkpoint_every: int,
    keep: int,
    name: str = "train",
) -> Path:
    """<name>-recipe.yaml (one source `web` read from `shards`, a local folder or s3://) and <name>.yaml
    under `root`; returns the config's path. Global batch 4 rows of micro-batches of 2 (2 ranks: no
    accumulation)."""
    recipe = {
        "name": "t",
        "seed": 5,
        "total_tokens": total_tokens,
        "max_epochs": 50,
        "sources": {"web": {"shards": shards}},
        "phases": [{"name": "main", "share": 1.0, "weights": {"web": 1}}],
    }
    recipe_path = root / ("recipe.yaml" if name == "train" else f"{name}-recipe.yaml")
    recipe_path.write_text(yaml.safe_dump(recipe))
    cfg = {
        "seed": 7,
        "model": {"size": "debug"},
        "optimizer": {"lr": 3e-3, "min_lr": 3e-4},
        "schedule": {"steps": steps, "warmup_steps": warmup_steps, "global_batch": 4, "micro_batch": 2},
        "data": {"recipe": str(recipe_path), "seq_len": seq_len},
        "eval": {"sequences_per_source": 0},
        "checkpoint": {"every": checkpoint_every, "keep": keep},
        "spike": {"enabled": False},
        "logging": {"sample_tokens": 0, "tensorboard": False},
        # ZeRO-3's per-rank checkpoint files (zero_pp_rank_N_*), which these tests were written for
        # (the default, auto, picks stage 0 for this model on CPU)
        "deepspeed": {"zero_stage": 3},
    }
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path
