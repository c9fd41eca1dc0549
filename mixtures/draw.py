"""What a recipe draws from each source: the one computation the sampler enforces and the plan prints.

The sampler (mixtures/sampler.py) and `python -m mixtures plan` used to count this twice, and not the
same way: the plan counted tokens (no rows, no held-out split) against the whole shards, the sampler
rows of the trainer's seq_len + 1 against the shards less the held-out documents. On a small crawl the
held-out documents are a large share of a source (16 rows of 257 tokens of a 14K-token source), so a
plan of 2.33 epochs passed and the sampler refused 3.65. Now both call the functions here:

- `resolve_weights`: a recipe's by-tokens temperature weights (p_i ∝ n_i^T) from its sources' token
  counts, so the plan prints and the sampler draws the same floats;
- `phase_quotas`: rows of `seq_len` tokens per source and phase (largest remainder of the weights);
- `heldout_documents`: the documents a source sets aside for evaluation (whole ones, seeded), so the
  pool it repeats is its shards' tokens less theirs (`pool`);
- `source_draws`: per source, tokens drawn per phase against that pool, epochs, and whether the cap
  holds (`drawn <= max_epochs * pool`, compared once, here);
- `fit_total_tokens`: the largest budget of the recipe whose draws keep every source within its cap,
  found with `source_draws` itself, so a budget it returns never fails in the sampler;
- `cap_problems`: the message for sources over their cap, with the numbers and the knobs that fix it.

Pure Python + numpy, like the sampler.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from mixtures.recipe import Phase, Recipe, RecipeError

_HELDOUT_KEY = int.from_bytes(hashlib.sha256(b"heldout").digest()[:8], "little")  # never an epoch number


def name_key(name: str) -> int:
    """A source's name as a seed word (its permutations and held-out split depend on it)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


def largest_remainder(total: int, weights: dict[str, float]) -> dict[str, int]:
    """Split `total` into integers proportional to `weights`, summing to `total` exactly.

    Floors first; the units left go to the largest fractional parts (ties: mapping order).
    """
    wsum = sum(weights.values())
    exact = {k: total * w / wsum for k, w in weights.items()}
    out = {k: int(v) for k, v in exact.items()}
    left = total - sum(out.values())
    order = sorted(weights, key=lambda k: (-(exact[k] - out[k]), list(weights).index(k)))
    for k in order[:left]:
        out[k] += 1
    return out


def temperature_weights(tokens: Mapping[str, int], temperature: float) -> dict[str, float]:
    """p_i = n_i^T / sum_j n_j^T over `tokens` (n_i: source i's tokens), in mapping order.

    mT5 (Xue et al. 2021, §3.1, T = 1/alpha = 0.3) and XLM-R (Conneau et al. 2020, alpha = 0.3) sample
    languages so: T = 1 draws as much as there is, T -> 0 evenly.

    A source with 0 tokens is refused, naming it. It used to get weight 0 with exit 0: the recipe lists
    a language it then never draws, and every other weight shifts to fill its share. 0 tokens is a
    selection that kept nothing or a crawl with none of that language, a mistake to fix, not a mixture
    to train. An explicit weight on such a source already fails (the sampler refuses it, the plan warns:
    `cap_problems`, "has none to train on"); the temperature's weights are held to the same rule, and
    refused rather than warned because a warning in a training job's log scrolls by unread.
    """
    empty = [name for name, n in tokens.items() if n <= 0]
    if empty:
        raise RecipeError(
            f"weights by tokens: {', '.join(f'sources.{n}' for n in empty)} "
            f"{'holds' if len(empty) == 1 else 'hold'} 0 tokens, so the temperature cannot weight "
            f"{'it' if len(empty) == 1 else 'them'} (p ∝ n^T is 0); give it data (a looser select, more "
            "input), drop it from `sources`, or give the phases `weights:` of their own"
        )
    powered = {name: float(n) ** temperature for name, n in tokens.items()}
    total = math.fsum(powered.values())
    if not total or not math.isfinite(total):  # counts are bounded (tokens/manifest.py MAX_COUNT)
        raise RecipeError(f"weights by tokens: the token counts give no weights ({dict(tokens)})")
    return {name: w / total for name, w in powered.items()}


def resolve_weights(recipe: Recipe, tokens: Mapping[str, int | None]) -> Recipe:
    """`recipe` with its temperature phases weighted from `tokens` (source -> tokens in its shards).

    The plan passes what it found (manifests, or estimates for sources not tokenized yet), the sampler
    its shards' manifest counts: for tokenized sources the same integers, so the same weights. A recipe
    without temperature phases is returned as is; one whose phases are weighted already is left alone
    (resolving twice is harmless)."""
    if not any(ph.unresolved for ph in recipe.phases):
        return recipe
    assert recipe.temperature is not None  # only a recipe-level `weights:` makes unresolved phases
    unknown = [name for name in recipe.sources if tokens.get(name) is None]
    if unknown:
        raise RecipeError(
            f"{recipe.path or recipe.name}: weights by tokens need every source's token count; "
            f"unknown for {', '.join(f'sources.{n}' for n in unknown)} (no manifest.json, no documents): "
            "tokenize it, or give the phases `weights:` of their own"
        )
    counts = {name: int(tokens[name] or 0) for name in recipe.sources}
    try:
        weights = temperature_weights(counts, recipe.temperature)
    except RecipeError as e:
        raise RecipeError(f"{recipe.path or recipe.name}: {e}") from None
    phases = tuple(replace(ph, weights=dict(weights)) if ph.unresolved else ph for ph in recipe.phases)
    return replace(recipe, phases=phases)


def phase_quotas(phase: Phase, seq_len: int) -> dict[str, int]:
    """Sequences of `seq_len` tokens each source contributes to `phase` (seq_len=1: tokens)."""
    if phase.unresolved:  # an empty split would draw nothing without saying why
        raise RecipeError(f"phase {phase.name}: weights by tokens are not resolved (draw.resolve_weights)")
    return largest_remainder(phase.tokens // seq_len, phase.weights)


def heldout_documents(lengths: np.ndarray, seed: int, name: str, tokens: int) -> np.ndarray:
    """Fewest documents, in a seeded order, whose tokens reach `tokens` (whole documents: none leaks).

    `lengths`: tokens per document of the source (EOD included), in manifest order. Returns the
    document ids in the order their tokens form the held-out sequences.
    """
    if tokens <= 0:
        return np.zeros(0, dtype=np.int64)
    ss = np.random.SeedSequence([seed, name_key(name), _HELDOUT_KEY])
    order = np.random.Generator(np.random.PCG64(ss)).permutation(len(lengths))
    k = int(np.searchsorted(np.cumsum(lengths[order]), tokens)) + 1  # first prefix with >= tokens
    if k > len(lengths):
        raise RecipeError(
            f"source {name}: holds {int(lengths.sum())} tokens, fewer than the {tokens} held out for "
            "evaluation; lower the trainer's eval.sequences_per_source (plan: --heldout-sequences) or "
            "data.seq_len, or give the source more data"
        )
    return order[:k].astype(np.int64)


@dataclass(frozen=True, slots=True)
class SourceDraw:
    """What the stream takes from one source over the whole recipe."""

    name: str
    drawn: dict[str, int] = field(default_factory=dict)
    """Tokens drawn per phase that weights the source (rows x seq_len)."""
    pool: int | None = None
    """Tokens its training stream repeats: its shards' tokens less the held-out documents; None: unknown."""
    max_epochs: float = 0.0

    @property
    def tokens(self) -> int:
        return sum(self.drawn.values())

    @property
    def epochs(self) -> float | None:
        return None if not self.pool else self.tokens / self.pool

    @property
    def cap_tokens(self) -> int | None:
        """The most tokens the cap allows (tokens are integers: `tokens > cap * pool` iff `> floor`)."""
        return None if self.pool is None else math.floor(self.max_epochs * self.pool)

    @property
    def over_cap(self) -> bool:
        cap = self.cap_tokens
        return cap is not None and self.tokens > cap


def source_draws(recipe: Recipe, seq_len: int, pools: dict[str, int | None]) -> dict[str, SourceDraw]:
    """Per source of the recipe (recipe order): tokens per phase at `seq_len` rows, against `pools`."""
    drawn: dict[str, dict[str, int]] = {name: {} for name in recipe.sources}
    for ph in recipe.phases:
        for name, q in phase_quotas(ph, seq_len).items():
            drawn[name][ph.name] = q * seq_len
    return {
        name: SourceDraw(name, drawn[name], pools.get(name), src.max_epochs)
        for name, src in recipe.sources.items()
    }


def fits(recipe: Recipe, seq_len: int, pools: dict[str, int | None]) -> bool:
    """No source drawn past its cap (sources with an unknown pool are not counted against)."""
    return not any(d.over_cap for d in source_draws(recipe, seq_len, pools).values())


def fit_total_tokens(recipe: Recipe, seq_len: int, pools: dict[str, int | None]) -> int | None:
    """The largest total_tokens <= the recipe's for which `fits` holds; None if the budget cannot be
    rescaled (phases given in `tokens`, not shares, that the smaller budget no longer adds up to).

    Bisection keeps `fits(lo)` true and `fits(hi)` false. Draws grow with the budget except for a
    row moving between sources in the largest-remainder split, so the answer may fall short of the
    true maximum by a few rows; it always fits, because it is checked with `source_draws` itself.
    """
    if fits(recipe, seq_len, pools):
        return recipe.total_tokens
    lo, hi = 0, recipe.total_tokens
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            ok = fits(recipe.with_total_tokens(mid), seq_len, pools)
        except RecipeError:  # a budget below the fixed-size phases
            return None
        lo, hi = (mid, hi) if ok else (lo, mid)
    return lo or None


def cap_problems(
    recipe: Recipe,
    seq_len: int,
    draws: dict[str, SourceDraw],
    shard_tokens: dict[str, int],
) -> list[str]:
    """One line per source over its cap: the numbers, and what to change (the budget that fits, the cap
    that would hold, the weight or more data); [] when every cap holds."""
    over = [d for d in draws.values() if d.over_cap]
    if not over:
        return []
    pools = {n: d.pool for n, d in draws.items()}
    fit = fit_total_tokens(recipe, seq_len, pools)
    budget = (
        f"total_tokens to at most {fit:,} (the demo's --total-tokens, plan's --set total_tokens=N)"
        if fit
        else "total_tokens, or the phases given in tokens"
    )
    lines = []
    for d in over:
        assert d.pool is not None  # over_cap needs a pool
        if d.epochs is None:  # a pool of 0 tokens: no cap holds
            lines.append(
                f"{d.name}: draws {d.tokens:,} tokens but has none to train on "
                f"({shard_tokens.get(d.name, 0):,} tokens, all held out or none selected). Change one: "
                f"more data for {d.name} (more WARCs, a looser select), or take it out of the phases' weights"
            )
            continue
        held = shard_tokens.get(d.name, d.pool) - d.pool
        pool = f"its {d.pool:,} training tokens" + (
            f" ({shard_tokens[d.name]:,} in its shards less {held:,} held out for evaluation)" if held else ""
        )
        need = math.ceil(d.epochs * 100) / 100  # two decimals, rounded up so that it holds
        lines.append(
            f"{d.name}: draws {d.tokens:,} tokens = {d.epochs:.3f} epochs of {pool}, over max_epochs "
            f"{d.max_epochs:g} (at most {d.cap_tokens:,} tokens). Change one: {budget}; "
            f"sources.{d.name}.max_epochs to {need:g} or more; a lower weight of {d.name} in its phases; "
            f"or more data for {d.name} (more WARCs, a looser select)"
        )
    return lines
