"""`python -m mixtures plan RECIPE`: what a recipe draws from each source, and what it costs to train on.

Per source: tokens available (exact from its shards' manifest.json; else estimated from its
documents' UTF-8 bytes / `bytes_per_token`, after its selectors (percentiles resolved over its
documents as `tokenize` resolves them), and marked `~`), tokens drawn
per phase (the sampler's exact largest-remainder split, at `--seq-len` granularity), implied
epochs (drawn / available) and a warning where that exceeds the source's `max_epochs`.

With `--model-params N`: training FLOPs ~= 6 * N * D (D = tokens trained; Kaplan et al. 2020,
forward 2ND + backward 4ND, attention ignored), the Chinchilla-optimal D ~= 20 * N (Hoffmann et
al. 2022), and GPU-hours = FLOPs / (MFU * peak FLOP/s) / 3600 at the stated MFU and device peak
(default: H100 SXM dense BF16, 989 TFLOP/s, at 40% MFU).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.errors import ConfigError, InputError
from core.files import doc_parquet_files, parquet_schema
from core.selectors import resolve_percentiles, selection_mask
from mixtures.recipe import Recipe
from mixtures.sampler import phase_quotas
from mixtures.validate import check_sources, has_manifest, read_manifest

CHINCHILLA_TOKENS_PER_PARAM = 20
H100_BF16_DENSE_FLOPS = 989e12


@dataclass
class SourcePlan:
    name: str
    available: int | None
    exact: bool
    drawn: dict[str, int] = field(default_factory=dict)
    max_epochs: float = 0.0

    @property
    def total_drawn(self) -> int:
        return sum(self.drawn.values())

    @property
    def epochs(self) -> float | None:
        return None if not self.available else self.total_drawn / self.available


@dataclass
class Plan:
    recipe: Recipe
    seq_len: int
    sources: dict[str, SourcePlan]
    warnings: list[str]

    @property
    def tokens_trained(self) -> int:
        return sum(s.total_drawn for s in self.sources.values())


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


def make_plan(recipe: Recipe, seq_len: int = 1) -> Plan:
    if seq_len <= 0:  # phase_quotas divides by it
        raise ConfigError(f"sequence length must be a positive integer, got {seq_len}")
    # what the sampler and the trainer refuse, plan refuses too (sources not tokenized yet are estimated)
    check_sources(recipe, require_shards=False)
    sources: dict[str, SourcePlan] = {}
    for name, src in recipe.sources.items():
        avail, exact = available_tokens(recipe, name)
        sources[name] = SourcePlan(name, avail, exact, max_epochs=src.max_epochs)
    for ph in recipe.phases:
        for name, q in phase_quotas(ph, seq_len).items():
            sources[name].drawn[ph.name] = q * seq_len
    warnings = []
    for s in sources.values():
        if s.total_drawn and s.available is None:
            src = recipe.sources[s.name]
            warnings.append(
                f"{s.name}: tokens available unknown (no manifest.json in {src.shards}, "
                f"no documents in {src.docs})"
            )
        elif s.epochs is not None and s.epochs > s.max_epochs:
            warnings.append(
                f"{s.name}: {s.epochs:.2f} epochs exceeds max_epochs {s.max_epochs:g} "
                f"({s.total_drawn:,} drawn of {s.available:,} available)"
            )
        elif s.total_drawn and s.available == 0:
            warnings.append(f"{s.name}: drawn from but has 0 tokens available")
    return Plan(recipe, seq_len, sources, warnings)


def compute_budget(
    params: float, tokens: int, mfu: float = 0.4, peak_flops: float = H100_BF16_DENSE_FLOPS
) -> dict[str, float]:
    if params <= 0 or not 0 < mfu <= 1 or peak_flops <= 0:  # each is a divisor below
        raise ConfigError(
            f"need model params > 0, 0 < MFU <= 1 and peak FLOP/s > 0; got {params:g}, {mfu:g}, {peak_flops:g}"
        )
    flops = 6.0 * params * tokens
    chinchilla = CHINCHILLA_TOKENS_PER_PARAM * params
    return {
        "flops": flops,
        "chinchilla_tokens": chinchilla,
        "tokens_per_param": tokens / params,
        "x_chinchilla": tokens / chinchilla,
        "gpu_hours": flops / (mfu * peak_flops) / 3600.0,
    }


def _fmt(n: float | None) -> str:
    if n is None:
        return "?"
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return f"{n:.0f}"


def format_plan(
    plan: Plan, params: float | None = None, mfu: float = 0.4, peak_flops: float = H100_BF16_DENSE_FLOPS
) -> str:
    r = plan.recipe
    phases = [ph.name for ph in r.phases]
    lines = [
        f"recipe {r.name} ({r.path}): seed {r.seed}, total {r.total_tokens:,} tokens "
        f"({_fmt(r.total_tokens)}), sequence length {plan.seq_len}",
        "phases: "
        + ", ".join(
            f"{ph.name} {ph.tokens:,} tokens"
            + (f" ({ph.share:.0%})" if ph.share is not None else "")
            + " ["
            + ", ".join(f"{k} {v:.1%}" for k, v in ph.fractions().items())
            + "]"
            for ph in r.phases
        ),
        "",
    ]
    headers = ["source", "available", *[f"drawn:{p}" for p in phases], "drawn", "epochs", "cap"]
    rows = []
    for s in plan.sources.values():
        avail = "?" if s.available is None else ("" if s.exact else "~") + _fmt(s.available)
        ep = "?" if s.epochs is None else f"{s.epochs:.2f}"
        rows.append(
            [
                s.name,
                avail,
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


def plan_main(path: str | Path, params: float | None, seq_len: int, mfu: float, peak_flops: float) -> str:
    return format_plan(make_plan(Recipe.load(path), seq_len), params, mfu, peak_flops)
