"""The trainer's view of the mixture sampler: micro-batches of one rank, quarantined windows, token counts.

`mixtures.sampler.MixtureSampler` already gives each rank its own slice of one global stream (rank r takes
global sequences r, r+W, …) with exact per-source quotas and a resumable cursor; this adapter only stacks
its samples into (micro_batch, seq_len + 1) arrays and skips data windows the spike guard quarantined.
Every rank calls it the same number of times, so the samplers stay in lockstep. `open_rank_data` builds
a rank's batches and held-out rows from the run's config, before the process group starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mixtures.recipe import RecipeError
from mixtures.sampler import MixtureSampler
from tokens.shard_cache import ShardCache, ShardCacheError
from tokens.shards import ShardFormatError
from trainer.config import ConfigError, TrainConfig, load_recipe


@dataclass(slots=True)
class MicroBatch:
    tokens: np.ndarray  # (B, seq_len + 1) int64: inputs are [:, :-1], targets [:, 1:]
    sources: list[str]  # source of each row
    indices: list[int]  # global stream index of each row
    phase: str


class Batches:
    def __init__(self, sampler: MixtureSampler):
        self.sampler = sampler
        self.quarantine: list[tuple[int, int]] = []  # [start, end) global indices never trained on

    @property
    def global_index(self) -> int:
        return self.sampler.global_index

    def rows_left(self) -> int:
        """Rows this rank can still draw (the sampler's own count of remaining rounds)."""
        return self.sampler.steps - self.sampler.global_index // self.sampler.world_size

    def skip_quarantined(self) -> int:
        """Advance past any quarantined window the cursor is in; returns global sequences skipped."""
        skipped = 0
        moved = True
        while moved:
            moved = False
            for a, b in self.quarantine:
                while a <= self.sampler.global_index < b and self.rows_left() > 0:
                    next(self.sampler)  # one round of W sequences (the other ranks skip theirs alike)
                    skipped += self.sampler.world_size
                    moved = True
        return skipped

    def next(self, n: int) -> MicroBatch:
        rows = [next(self.sampler) for _ in range(n)]
        return MicroBatch(
            tokens=np.stack([r.tokens for r in rows]),
            sources=[r.source for r in rows],
            indices=[r.index for r in rows],
            phase=rows[-1].phase,
        )


@dataclass
class RankData:
    """What one rank trains and evaluates on."""

    batches: Batches  # this rank's slice of the recipe's stream
    heldout: dict[str, np.ndarray]  # (sequences_per_source, seq_len + 1) per source, the same on every rank
    sources: list[str]  # sorted source names
    tokenizer: dict  # the shards' tokenizer entry: vocab_size, eod_id, path


def open_rank_data(cfg: TrainConfig, rank: int, world: int) -> RankData:
    """Rank `rank`'s slice of the recipe's stream and the held-out rows (never in the training stream).

    Runs before the process group starts: every recipe and shard error is a ConfigError naming
    `data.recipe` (exit 2), from the same checks as `mixtures plan` (mixtures/validate.py); a cache
    bound smaller than a shard, one naming `data.shard_cache_bytes`; a cache folder that cannot hold the
    indexes (full, not writable), one naming it and `data.shard_cache_dir`. Shards on an object store are
    read through the node's cache (`data.shard_cache_dir`), shared by the ranks of the node."""
    try:
        sampler = MixtureSampler(
            load_recipe(cfg),
            cfg.data.seq_len + 1,
            rank,
            world,
            allow_over_cap=cfg.data.allow_over_cap,
            heldout_sequences=cfg.eval.sequences_per_source,
            shard_cache=ShardCache(cfg.data.shard_cache_dir or None, cfg.data.shard_cache_bytes),
        )
    except (RecipeError, ShardFormatError) as e:
        raise ConfigError(f"data.recipe: {e}") from None
    except ShardCacheError as e:  # the indexes are fetched here: a full or unusable cache folder, named
        raise ConfigError(e.strerror) from None
    heldout = sampler.heldout() if cfg.eval.sequences_per_source else {}
    tok = next(iter(sampler.streams.values())).manifest["tokenizer"]
    return RankData(Batches(sampler), heldout, sorted(sampler.streams), tok)
