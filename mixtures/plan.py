"""`python -m mixtures plan RECIPE`: what a recipe draws from each source, and what it costs to train on.

Per source: tokens available (exact from its shards' manifest.json; else estimated from its
documents' UTF-8 bytes / `bytes_per_token`, after its selectors (percentiles resolved over its
documents as `tokenize` resolves them), and marked `~`), tokens drawn per phase, implied epochs and
a warning where they exceed the source's `max_epochs`. The draws and the cap are mixtures/draw.py's,
the very function the sampler enforces: with the trainer's row length and held-out split
(`seq_len` = the trainer's data.seq_len + 1, `heldout_sequences` = its eval.sequences_per_source;
the CLI's `--seq-len`, `--heldout-sequences`) a plan without warnings never fails in the sampler,
and epochs count against the training pool (shards less the held-out documents), as it does.
Without them the plan counts tokens against the whole shards, a looser figure it says it is.

With `--model-params N`: training FLOPs ~= 6 * N * D (D = tokens trained; Kaplan et al. 2020,
forward 2ND + backward 4ND, attention ignored), the Chinchilla-optimal D ~= 20 * N (Hoffmann et
al. 2022), and GPU-hours = FLOPs / (MFU * peak FLOP/s) / 3600 at the stated MFU and device peak
(default: H100 SXM dense BF16, 989 TFLOP/s, at 40% MFU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.errors import ConfigError, InputError
from core.files import doc_parquet_files, parquet_schema
from core.selectors import resolve_percentiles, selection_mask
from mixtures.draw import SourceDraw, cap_problems, fit_total_tokens, resolve_weights, source_draws
from mixtures.recipe import Recipe
from mixtures.sampler import SourceStream
from mixtures.validate import check_sources, drawn_sources, has_manifest, read_manifest

CHINCHILLA_TOKENS_PER_PARAM = 20
H100_BF16_DENSE_FLOPS = 989e12


@dataclass
class SourcePlan:
    draw: SourceDraw
    """Tokens drawn per phase against the training pool (mixtures/draw.py, as the sampler counts)."""
    available: int | None
    """Tokens in its shards (exact), or estimated from its documents; None: unknown."""
    exact: bool

    @property
    def name(self) -> str:
        return self.draw.name

    @property
    def drawn(self) -> dict[str, int]:
        return self.draw.drawn

    @property
    def max_epochs(self) -> float:
        return self.draw.max_epochs

    @property
    def total_drawn(self) -> int:
        return self.draw.tokens

    @property
    def epochs(self) -> float | None:
        return self.draw.epochs


@dataclass
class Plan:
    recipe: Recipe
    """The recipe with its weights by tokens resolved (draw.resolve_weights), as the sampler draws it."""
    seq_len: int
    """Tokens per row the sampler cuts (1: counted in tokens)."""
    heldout_sequences: int
    sources: dict[str, SourcePlan]
    warnings: list[str]

    @property
    def tokens_trained(self) -> int:
        return sum(s.total_drawn for s in self.sources.values())

    def fit_total_tokens(self) -> int | None:
        """The largest budget <= the recipe's that keeps every source within its cap (draw.py)."""
        pools = {n: s.draw.pool for n, s in self.sources.items()}
        return fit_total_tokens(self.recipe, self.seq_len, pools)


def available_tokens(recipe: Recipe, name: str) -> tuple[int | None, bool]:
    """(tokens, exact): the manifest's count, or an estimate from the selected documents."""
    src = recipe.sources[name]
    if src.shards is not None and has_manifest(src.shards):  # local or s3://: only the manifest is read
        return int(read_manifest(src.shards)["tokens"]), True
    if src.docs is None:
        return None, False
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        files = doc_parquet_files(src.docs)
    except InputError:  # not extracted yet: the plan says "unknown" and warns
        return None, False
    # a percentile is resolved over the source's documents, as `tokenize` will resolve it
    select, _ = resolve_percentiles(src.select, [str(f) for f in files], source=f"sources.{name}")
    nbytes = 0
    for f in files:
        cols = ["text", *dict.fromkeys(s.column for s in select)]
        names = parquet_schema(f).names
        table = pq.read_table(f, columns=[c for c in cols if c in names])
        mask, _ = selection_mask(table, select, source=str(f))
        texts = table.filter(mask).column("text")
        nbytes += int(pc.sum(pc.binary_length(pc.cast(texts, "binary"))).as_py() or 0)
    return round(nbytes / recipe.bytes_per_token), False


def training_pool(
    recipe: Recipe, name: str, available: int | None, exact: bool, heldout_tokens: int
) -> int | None:
    """Tokens the source's training stream repeats: its shards less the held-out documents.

    Exact sources with a split read their shards' indexes through the sampler's own `SourceStream`
    (the held-out documents are whole ones, chosen from the document lengths); without a split the
    pool is the manifest's count, which the sampler checks the shards against. An estimate loses
    at least the held-out tokens themselves."""
    if available is None:
        return None
    if not exact:
        return max(0, available - heldout_tokens)
    if heldout_tokens == 0:
        return available
    src = recipe.sources[name]
    assert src.shards is not None  # exact: a manifest was read from it
    stream = SourceStream(name, src.shards, recipe.seed, heldout_tokens)  # s3://: fetches the .idx files
    if stream.prefetcher is not None:  # nothing will be read ahead of
        stream.prefetcher.close()
    return stream.n_train_tokens


def make_plan(recipe: Recipe, seq_len: int = 1, heldout_sequences: int = 0) -> Plan:
    """The recipe's draws at rows of `seq_len` tokens with `heldout_sequences` rows held out per source
    (the sampler's arguments: the trainer passes data.seq_len + 1 and eval.sequences_per_source)."""
    if seq_len <= 0:  # phase_quotas divides by it
        raise ConfigError(f"sequence length must be a positive integer, got {seq_len}")
    if heldout_sequences < 0:
        raise ConfigError(f"held-out sequences must be 0 or more, got {heldout_sequences}")
    # what the sampler and the trainer refuse, plan refuses too (sources not tokenized yet are estimated)
    check_sources(recipe, require_shards=False)
    found = {name: available_tokens(recipe, name) for name in recipe.sources}
    # the sampler resolves from the manifests' counts: the same integers where there is a manifest
    # (an estimate before tokenizing gives estimated weights, marked ~ in the printout)
    recipe = resolve_weights(recipe, {name: found[name][0] for name in recipe.sources})
    drawn = set(drawn_sources(recipe))
    # the sampler holds out only from the sources it draws from
    pools = {
        name: training_pool(recipe, name, *found[name], heldout_sequences * seq_len if name in drawn else 0)
        for name in recipe.sources
    }
    draws = source_draws(recipe, seq_len, pools)
    sources = {name: SourcePlan(draws[name], *found[name]) for name in recipe.sources}
    warnings = []
    for s in sources.values():
        if s.total_drawn and s.available is None:
            src = recipe.sources[s.name]
            warnings.append(
                f"{s.name}: tokens available unknown (no manifest.json in {src.shards}, "
                f"no documents in {src.docs})"
            )
    shard_tokens = {n: s.available for n, s in sources.items() if s.available is not None}
    warnings += cap_problems(recipe, seq_len, draws, shard_tokens)
    return Plan(recipe, seq_len, heldout_sequences, sources, warnings)


def compute_budget(
    params: float, tokens: int, mfu: float = 0.4, peak_flops: float = H100_BF16_DENSE_FLOPS
) -> dict[str, float]:
    if params <= 0 or not 0 < mfu <= 1 or peak_flops <= 0:  # each is a divisor below
        raise ConfigError(
            f"need model params > 0, 0 < MFU <= 1 and peak FLOP/s > 0; got {params:g}, {mfu:g}, {peak_flops:g}"
        )
    flops = 6.0 * params * tokens
    chinchilla = CHINCHILLA_TOKENS_PER_PARAM * params
    out = {
        "flops": flops,
        "chinchilla_tokens": chinchilla,
        "tokens_per_param": tokens / params,
        "x_chinchilla": tokens / chinchilla,
        "gpu_hours": flops / (mfu * peak_flops) / 3600.0,
    }
    # each input is finite and > 0, but `--model-params 1e308` overflows 6ND and `--peak-flops 1e-320`
    # the division: a figure that is not a finite number is refused, never printed as `inf GPU-hours`
    bad = [k for k, v in out.items() if not math.isfinite(v)]
    if bad:
        raise ConfigError(
            f"the compute estimate {bad[0]} is {out[bad[0]]:g} for {params:g} parameters, {tokens:,} tokens, "
            f"MFU {mfu:g} and peak {peak_flops:g} FLOP/s: give numbers a real model and device have"
        )
    return out


def _fmt(n: float | None) -> str:
    if n is None:
        return "?"
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return f"{n:.0f}"


def _granularity(plan: Plan) -> str:
    """How the plan counted: the sampler's rows and split, or plain tokens (then it says how to match)."""
    if plan.seq_len == 1 and plan.heldout_sequences == 0:
        return (
            "counted in tokens against whole shards (the trainer counts rows of data.seq_len + 1 "
            "against shards less its held-out documents: give --seq-len and --heldout-sequences)"
        )
    return f"rows of {plan.seq_len} tokens, {plan.heldout_sequences} rows held out per source"


def _temperature_lines(plan: Plan) -> list[str]:
    """The resolved weights by tokens: each source's count and weight, and the temperature."""
    r = plan.recipe
    if r.temperature is None:
        return []
    weights = next((ph.weights for ph in r.phases if ph.temperature is not None), {})
    per = ", ".join(
        f"{name} {weights.get(name, 0.0):.4f} (n={'' if s.exact else '~'}{_fmt(s.available)})"
        for name, s in plan.sources.items()
    )
    phases = ", ".join(ph.name for ph in r.phases if ph.temperature is not None)
    return [
        f"weights by tokens, temperature {r.temperature:g} (p_i ∝ n_i^{r.temperature:g}; phases {phases}): {per}"
    ]


def format_plan(
    plan: Plan, params: float | None = None, mfu: float = 0.4, peak_flops: float = H100_BF16_DENSE_FLOPS
) -> str:
    r = plan.recipe
    phases = [ph.name for ph in r.phases]
    lines = [
        f"recipe {r.name} ({r.path}): seed {r.seed}, total {r.total_tokens:,} tokens "
        f"({_fmt(r.total_tokens)}), {_granularity(plan)}",
        "phases: "
        + ", ".join(
            f"{ph.name} {ph.tokens:,} tokens"
            + (f" ({ph.share:.0%})" if ph.share is not None else "")
            + " ["
            + ", ".join(f"{k} {v:.1%}" for k, v in ph.fractions().items())
            + "]"
            for ph in r.phases
        ),
        *_temperature_lines(plan),
        "",
    ]
    split = plan.heldout_sequences > 0  # then epochs count against the pool, not what is available
    headers = ["source", "available", *(["pool"] if split else []), *[f"drawn:{p}" for p in phases]]
    headers += ["drawn", "epochs", "cap"]
    rows = []
    for s in plan.sources.values():
        est = "" if s.exact else "~"
        avail = "?" if s.available is None else est + _fmt(s.available)
        pool = "?" if s.draw.pool is None else est + _fmt(s.draw.pool)
        ep = "?" if s.epochs is None else f"{s.epochs:.2f}"
        rows.append(
            [
                s.name,
                avail,
                *([pool] if split else []),
                *[_fmt(s.drawn.get(p, 0)) for p in phases],
                _fmt(s.total_drawn),
                ep,
                f"{s.max_epochs:g}",
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines.append(
        "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))
    )
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        )
    lines.append("(~ = estimated from document bytes / bytes_per_token; exact counts come from manifests)")
    if split:
        lines.append(
            f"(pool = available less the documents held out for {plan.heldout_sequences} evaluation rows; "
            "epochs = drawn / pool)"
        )
    if plan.tokens_trained != r.total_tokens:
        lines.append(
            f"tokens trained {plan.tokens_trained:,}: {r.total_tokens - plan.tokens_trained:,} budget tokens "
            f"do not fill a whole sequence of {plan.seq_len} in their phase and are not drawn"
        )
    for w in plan.warnings:
        lines.append(f"WARNING: {w}")
    if params:
        b = compute_budget(params, plan.tokens_trained, mfu, peak_flops)
        lines += [
            "",
            f"model: {_fmt(params)} parameters, D = {plan.tokens_trained:,} tokens",
            f"training compute 6*N*D = {b['flops']:.3e} FLOPs",
            f"Chinchilla-optimal tokens (20 per parameter) = {_fmt(b['chinchilla_tokens'])}; this recipe is "
            f"{b['x_chinchilla']:.3g}x that ({b['tokens_per_param']:.1f} tokens per parameter)",
            f"GPU-hours at {mfu:.0%} MFU of {peak_flops / 1e12:g} TFLOP/s per GPU = {b['gpu_hours']:,.1f}",
        ]
    return "\n".join(lines)
