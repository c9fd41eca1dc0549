"""The mixture sampler the trainer uses: recipe + shards -> fixed-length token sequences, exact and resumable.

Pure Python + numpy (no torch, no Spark), so the trainer and the tests import it anywhere.

The stream. Each phase p has `tokens_p // seq_len` sequences; each sequence comes from one source,
and source s gets exactly `quota(p, s)` of them: the phase's weights split the sequence count by
largest remainder (`phase_quotas`), so per-source token counts are exact integers known before
training (`quota * seq_len`). Within a phase, step k goes to the source with the largest deficit
`(k+1)*quota_s - emitted_s*n_p` (ties: recipe order), which keeps every prefix of the phase within
one sequence of the target proportions, with no random draws to replay. A source is an endless
token stream: its documents (all shards of its manifest, each ending in EOD) in a permutation
seeded by (recipe seed, source name, epoch), cut into consecutive `seq_len` pieces; document
starts inside a piece are reported as positions.

Ranks. The global stream is the same for every world size; rank r of W takes global sequences
g = r, r+W, r+2W, ... Each `next()` advances one round of W sequences (the others' are skipped
without copying tokens), so all ranks hold the same state after the same number of steps, and a
final incomplete round is dropped (all ranks take the same number of steps).

State. `state_dict()` is a small JSON-able dict: phase, per-source emitted counts in the phase,
per-source cursors (epoch, position in the permutation, token offset in the document), the
global index. `load_state_dict` continues the stream exactly, also with another world size.

Held-out split (`heldout_sequences=n`, the trainer's `eval.sequences_per_source`). Each source sets
aside whole documents, taken in a permutation seeded by (recipe seed, source name, a fixed "heldout"
key) until they hold n·seq_len tokens; `heldout()` cuts their concatenation into n sequences. These
documents are removed from the source's training stream (its epochs permute only the rest), so no
held-out token is ever trained on, and the split is the same on every rank, world size and run.
Quotas and per-source counts are untouched (they count sequences of the stream, not documents); the
cost is that the source's pool shrinks by the held-out documents — n·seq_len tokens plus the tail of
the last one — which the repetition cap accounts for. n = 0 gives exactly the stream without a split.

The cap. Quotas, the held-out choice and the cap check are mixtures/draw.py's, the functions
`python -m mixtures plan` prints with, so a plan made with the sampler's seq_len and split without
warnings never fails here, and the refusal says which knob to turn and to what.

Shards on an object store. A source whose `shards` is an `s3://` URI reads its shards through the node's
shard cache (tokens/shard_cache.py, `shard_cache=`): every `.idx` at start, each `.bin` when a document of
it is first needed, checked against the manifest's sha256, while a background thread fetches the `.bin`s
of the next documents. The stream is the same bytes as from a local copy of the folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.storage import is_object_store
from mixtures.draw import (
    cap_problems,
    heldout_documents,
    name_key,
    phase_quotas,
    resolve_weights,
    source_draws,
)
from mixtures.recipe import Recipe, RecipeError
from mixtures.validate import check_sources, drawn_sources, has_manifest, read_manifest
from tokens.shard_cache import Prefetcher, ShardCache, open_cached_shards
from tokens.shards import IndexedShard

STATE_VERSION = 1
# Remote shards: the next PREFETCH_DOCS documents of the stream are looked at, and the first
# PREFETCH_SHARDS `.bin`s among them not yet on the node are fetched ahead (measured by bench/trainer/shard_fetch.py at 0fec8f6: docs/trainer.md).
PREFETCH_DOCS = 64
PREFETCH_SHARDS = 2


@dataclass(frozen=True, slots=True)
class Sample:
    tokens: np.ndarray
    """(seq_len,) int64 token ids."""
    doc_starts: np.ndarray
    """Positions in `tokens` where a document begins (int64, ascending)."""
    source: str
    phase: str
    index: int
    """Position of this sequence in the global stream (over all ranks)."""


class SourceStream:
    """All documents of one source's shards as an endless, per-epoch permuted token stream."""

    def __init__(
        self,
        name: str,
        shard_dir: Path | str,
        seed: int,
        heldout_tokens: int = 0,
        cache: ShardCache | None = None,
    ) -> None:
        if not has_manifest(shard_dir):
            raise RecipeError(
                f"source {name}: no manifest.json in {shard_dir} (run `python -m tokens tokenize` first)"
            )
        self.name = name
        self.manifest = read_manifest(shard_dir)
        files = self.manifest["files"]
        self.prefetcher: Prefetcher | None = None
        self.shards: list[Any]  # IndexedShard, or CachedShard (its reading interface) for a remote folder
        if is_object_store(shard_dir):
            cache = cache or ShardCache()
            self.shards = open_cached_shards(cache, str(shard_dir), files)
            self.prefetcher = Prefetcher(cache)
        else:
            self.shards = [IndexedShard(Path(shard_dir) / f["bin"]) for f in files]
        for f, s in zip(files, self.shards, strict=True):
            if len(s) != f["documents"] or s.num_tokens != f["tokens"]:
                raise RecipeError(f"source {name}: {s.bin_path} does not match its manifest entry")
        self.lengths = np.concatenate([s.lengths.astype(np.int64) for s in self.shards] or [np.zeros(0, int)])
        self.shard_of = np.concatenate(
            [np.full(len(s), i, dtype=np.int32) for i, s in enumerate(self.shards)] or [np.zeros(0, np.int32)]
        )
        self.local = np.concatenate([np.arange(len(s)) for s in self.shards] or [np.zeros(0, int)])
        self.n_docs = len(self.lengths)
        self.n_tokens = int(self.lengths.sum())
        if self.n_tokens == 0:
            raise RecipeError(f"source {name}: its shards hold no tokens")
        self.seed = seed
        self.heldout_docs = heldout_documents(self.lengths, seed, name, heldout_tokens)
        """Document ids held out, in the order their tokens form the held-out sequences."""
        # training documents ascending: with nothing held out, train_docs[perm] is perm itself, so the
        # stream is bit-identical to a sampler without a split
        self.train_docs = np.setdiff1d(np.arange(self.n_docs), self.heldout_docs)
        if len(self.train_docs) == 0:
            raise RecipeError(
                f"source {name}: holding out {heldout_tokens} tokens takes all of its {self.n_docs} documents"
            )
        self.n_train_tokens = int(self.lengths[self.train_docs].sum())
        self._perm_epoch = -1
        self._perm = np.zeros(0, dtype=np.int64)

    def heldout_tokens(self, n: int) -> np.ndarray:
        """The first n tokens of the held-out documents, concatenated (each document ends in EOD)."""
        parts = [self.shards[self.shard_of[d]][int(self.local[d])] for d in self.heldout_docs]
        return np.concatenate([np.zeros(0, np.int64), *parts]).astype(np.int64)[:n]

    def permutation(self, epoch: int) -> np.ndarray:
        """Training document ids of `epoch`, in their seeded order."""
        if epoch != self._perm_epoch:
            ss = np.random.SeedSequence([self.seed, name_key(self.name), epoch])
            order = np.random.Generator(np.random.PCG64(ss)).permutation(len(self.train_docs))
            self._perm = self.train_docs[order]
            self._perm_epoch = epoch
        return self._perm

    def _fetch_ahead(self, perm: np.ndarray, pos: int) -> None:
        """Queue the `.bin`s of the documents after `pos` (in the order they are needed) for the prefetcher."""
        assert self.prefetcher is not None
        ahead = dict.fromkeys(self.shard_of[perm[pos + 1 : pos + 1 + PREFETCH_DOCS]].tolist())
        self.prefetcher.want((self.shards[i] for i in ahead), limit=PREFETCH_SHARDS)

    def read(self, cursor: list[int], n: int, out: np.ndarray | None) -> tuple[list[int], list[int]]:
        """Advance `cursor` [epoch, pos, offset] by n tokens; copy them into `out` unless None.

        Returns the new cursor and the positions (0..n-1) where a document starts.
        """
        epoch, pos, offset = cursor
        filled = 0
        starts: list[int] = []
        while filled < n:
            perm = self.permutation(epoch)
            doc = int(perm[pos])
            length = int(self.lengths[doc])
            take = min(n - filled, length - offset)
            if out is not None:
                if offset == 0:
                    starts.append(filled)
                    if self.prefetcher is not None:
                        self._fetch_ahead(perm, pos)
                sh = self.shards[self.shard_of[doc]]
                out[filled : filled + take] = sh[int(self.local[doc])][offset : offset + take]
            filled += take
            offset += take
            if offset == length:
                offset, pos = 0, pos + 1
                if pos == len(self.train_docs):
                    epoch, pos = epoch + 1, 0
        return [epoch, pos, offset], starts


class MixtureSampler:
    """Iterator of `Sample`s for one rank; see the module docstring for the exact semantics."""

    def __init__(
        self,
        recipe: Recipe,
        seq_len: int,
        rank: int = 0,
        world_size: int = 1,
        allow_over_cap: bool = False,
        heldout_sequences: int = 0,
        shard_cache: ShardCache | None = None,
    ) -> None:
        """`shard_cache`: where sources on an object store are cached on this node (default: a ShardCache
        with its defaults, made only if a drawn source is remote)."""
        if seq_len <= 0 or world_size <= 0 or not 0 <= rank < world_size or heldout_sequences < 0:
            raise ValueError(
                "need seq_len > 0, 0 <= rank < world_size, heldout_sequences >= 0; "
                f"got {seq_len}, {rank}, {world_size}, {heldout_sequences}"
            )
        self.heldout_sequences = heldout_sequences
        manifests = check_sources(recipe)  # against its shards' manifests: the same check as plan and trainer
        # weights by tokens from the manifests' counts, by the function the plan prints with (draw.py)
        recipe = resolve_weights(recipe, {n: int(m["tokens"]) for n, m in manifests.items()})
        self.recipe, self.seq_len, self.rank, self.world_size = recipe, seq_len, rank, world_size
        drawn = drawn_sources(recipe)
        if shard_cache is None and any(is_object_store(recipe.sources[n].shards or "") for n in drawn):
            shard_cache = ShardCache()
        self.shard_cache = shard_cache
        self.streams: dict[str, SourceStream] = {}
        for name in drawn:
            src = recipe.sources[name]
            assert src.shards is not None  # check_sources refused a drawn source without shards
            self.streams[name] = SourceStream(
                name, src.shards, recipe.seed, heldout_sequences * seq_len, shard_cache
            )
        self.quotas = [phase_quotas(ph, seq_len) for ph in recipe.phases]
        self.phase_sequences = [sum(q.values()) for q in self.quotas]
        self.total_sequences = sum(self.phase_sequences)
        self.steps = self.total_sequences // world_size
        """Samples each rank yields (the final incomplete round is dropped)."""
        # the cap, counted by the function `mixtures plan` prints (mixtures/draw.py): rows against the
        # training pool (held-out documents are not there to repeat)
        pools: dict[str, int | None] = {n: st.n_train_tokens for n, st in self.streams.items()}
        self.draws = {n: d for n, d in source_draws(recipe, seq_len, pools).items() if n in self.streams}
        shard_tokens = {n: st.n_tokens for n, st in self.streams.items()}
        if not allow_over_cap and (over := cap_problems(recipe, seq_len, self.draws, shard_tokens)):
            raise RecipeError(f"{recipe.path}: repetition cap exceeded:\n  " + "\n  ".join(over))
        self.tokens_drawn = {n: d.tokens for n, d in self.draws.items()}
        self._reset()

    # -- state ---------------------------------------------------------------------------------
    def _reset(self) -> None:
        self.global_index = 0
        self.phase = 0
        self.emitted = {n: 0 for n in self.quotas[0]} if self.quotas else {}
        self.cursors = {n: [0, 0, 0] for n in self.streams}

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "recipe": self.recipe.name,
            "seed": self.recipe.seed,
            "seq_len": self.seq_len,
            "heldout_sequences": self.heldout_sequences,
            "global_index": self.global_index,
            "phase": self.phase,
            "emitted": dict(self.emitted),
            "cursors": {n: list(c) for n, c in self.cursors.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        checks = (
            ("version", STATE_VERSION),
            ("seed", self.recipe.seed),
            ("seq_len", self.seq_len),
            ("heldout_sequences", self.heldout_sequences),  # another split is another training stream
        )
        for key, mine in checks:
            if state.get(key, 0 if key == "heldout_sequences" else None) != mine:
                raise ValueError(f"sampler state has {key}={state.get(key)!r}, this sampler {mine!r}")
        if state["global_index"] % self.world_size:
            raise ValueError(
                f"state at global index {state['global_index']} is not a round of {self.world_size}"
            )
        self.global_index = int(state["global_index"])
        self.phase = int(state["phase"])
        self.emitted = {k: int(v) for k, v in state["emitted"].items()}
        self.cursors = {n: [int(x) for x in c] for n, c in state["cursors"].items()}

    def heldout(self) -> dict[str, np.ndarray]:
        """Held-out sequences per source, (heldout_sequences, seq_len) int64; identical on every rank."""
        n, L = self.heldout_sequences, self.seq_len
        return {name: st.heldout_tokens(n * L).reshape(n, L) for name, st in self.streams.items()}

    # -- stream --------------------------------------------------------------------------------
    def _next_source(self) -> str | None:
        """Source of the next global sequence (advancing the phase when one is complete)."""
        while self.phase < len(self.quotas):
            quota, n = self.quotas[self.phase], self.phase_sequences[self.phase]
            k = sum(self.emitted.values())
            if k < n:
                best, best_def = None, None
                for s, q in quota.items():
                    if self.emitted[s] < q:
                        deficit = (k + 1) * q - self.emitted[s] * n
                        if best_def is None or deficit > best_def:
                            best, best_def = s, deficit
                return best
            self.phase += 1
            if self.phase < len(self.quotas):
                self.emitted = {s: 0 for s in self.quotas[self.phase]}
        return None

    def _one(self, materialize: bool) -> Sample | None:
        src = self._next_source()
        if src is None:
            return None
        out = np.empty(self.seq_len, dtype=np.int64) if materialize else None
        self.cursors[src], starts = self.streams[src].read(self.cursors[src], self.seq_len, out)
        self.emitted[src] += 1
        idx = self.global_index
        self.global_index += 1
        if out is None:
            return None
        phase = self.recipe.phases[self.phase].name
        return Sample(out, np.asarray(starts, dtype=np.int64), src, phase, idx)

    def __iter__(self) -> Iterator[Sample]:
        return self

    def close(self) -> None:
        """Stop fetching ahead (waits for a shard being downloaded); reading still works, unprefetched."""
        for st in self.streams.values():
            if st.prefetcher is not None:
                st.prefetcher.close()

    def __next__(self) -> Sample:
        if self.global_index // self.world_size >= self.steps:
            self.close()  # nothing more will be read ahead of
            raise StopIteration
        mine = None
        for r in range(self.world_size):
            s = self._one(materialize=(r == self.rank))
            if r == self.rank:
                mine = s
        assert mine is not None
        return mine
