"""`python -m workflows mixture-search RECIPE --output DIR --eval NAME=PATH ...`: choose a recipe's weights
from a swarm of small proxy runs, with honest error bars (issue 45). The math is mixtures/search.py's;
this file trains the proxies, with the ablation's own trainer path (workflows/ablate.py `train_run`).

    python -m workflows mixture-search mixtures/demo.yaml --output out/search \\
        --eval wiki=out/ablate/eval/wiki_heldout.jsonl --eval dclm_hq=out/ablate/eval/dclm_hq.jsonl \\
        [--config search.yaml] [--set search.swarm.proxies=32] [--budget 2.0] [--validate] [--dry-run]

Steps, each resumable:

1. **Checks, before anything trains** (exit 2): the recipe, the config (MixtureSearchConfig, typed and
   validated on load), the eval sets, the searched phase, the buckets' sources and columns, that the
   proxy budget is at least one optimizer step, that the phases scale to the proxy and target budgets,
   that some mixture fits every epoch cap at the target budget, and the cost estimate against `--budget`.
2. **Buckets** (`search.buckets`): a source cut into quantile buckets of a score column, each a source
   with a band selector (`perplexity_bpb: ">= 2.9 and < 3.1"`), tokenized into DIR/tokens/ by the tokens
   package's own command; the recipe as searched is DIR/searched-recipe.yaml.
3. **Swarm**: the anchors (natural, uniform, the recipe as written, more of the largest source) and
   `search.swarm.proxies` Dirichlet mixtures around natural, each rejected when it breaks a source's
   epoch cap at the *target* budget, counted by mixtures/draw.py (the planner's and the sampler's rows,
   pools and caps) with the target run's row length and held-out split.
4. **Proxies**: each mixture a recipe at the proxy budget (DIR/mixtures/<name>.yaml), trained one after
   another by `train_run` into DIR/proxies/runs/<name>/seed-<s>/ (its config run.json, the recipe, the
   trainer's checkpoints, result.json last): a killed search resumes the proxy it was in and skips the
   finished ones. Anchors train with `anchor_seeds` seeds (the noise gate's seed spread), the swarm
   with one. Names carry a hash of the weights, so a rerun with another swarm reuses every proxy whose
   mixture it draws again.
5. **Fit and solve** (mixtures/search.py), then the chosen mixture trained at the proxy scale with the
   anchors' seeds (predicted against actual, and the regret against the best swarm run).
6. **Outputs**: law-optimum.yaml (always; a recipe the loader accepts, at the target budget),
   chosen.yaml (the same file, only when the noise gate passed: the recommendation), search.json,
   search.md, search.png.
7. `--validate`: the law's optimum, natural and uniform at `transfer.token_multiple` × the proxy tokens on
   a larger model (`transfer.model_overrides`), `transfer.seeds` seeds each, through `workflows ablate`
   (paired by seed, on the same eval sets), into DIR/validate/; the outcome is reported whatever it is.

Cost (printed before anything trains): training FLOPs 6·N·D per run (N the proxy model's parameters, D its
tokens) and core-hours = FLOPs / `cost.core_flops` per core-second + `cost.overhead_s` per run (DeepSpeed's
start, the export and the scoring dominate a tiny proxy), × the cores the runs use.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, model_validator

from core.config import ConfigModel, fingerprint_of, load_config, read_yaml_mapping
from core.errors import ConfigError, InputError
from core.output import atomic_write_json, guard_folder
from mixtures import search as ms
from mixtures.bounds import between
from mixtures.draw import fits, source_draws
from mixtures.plan import available_tokens, training_pool
from mixtures.recipe import MAX_TOKENS, Recipe, RecipeError, TokenCount
from mixtures.validate import check_sources, has_manifest, read_manifest
from workflows import ablate
from workflows.paths import project_path
from workflows.steps import StepFailed, call

# A proxy's trainer settings besides its size: no periodic eval, TensorBoard or sample; checkpoints so a
# killed proxy resumes; no held-out rows of its own: a proxy is scored on the fixed eval sets only (its own
# held-out rows differ between mixtures, so they rank nothing), and on a small source (a bucket of a small
# crawl: ~10 pages) each seed would hold out other whole pages, adding data noise to the seed spread.
PROXY_OVERRIDES = ("eval.every=0", "eval.sequences_per_source=0", "logging.tensorboard=false",
                   "logging.sample_tokens=0", "checkpoint.every=10", "schedule.warmup_steps=2")  # fmt: skip


# Every number below has a stated finite range, checked on load with the key and the range named (the
# ranges of the search itself are mixtures/search.py's): past them a value is a typo, and unbounded
# `transfer.token_multiple=1e308` overflowed math.ceil into an OverflowError traceback on every run,
# `cost.core_flops=1e-320` printed `~inf core-hours` with exit 0. Derived numbers (the validation runs'
# tokens, the cost) are checked as well (`check_finite`, `_check_derived`).
MAX_SEQ_LEN = 1 << 20
"""Tokens per row: a million, far past any proxy or target context."""
MAX_BATCH = 1 << 20
"""Rows per step."""
MAX_PROCESSES = 4096
"""Trainer ranks of one run."""


class ProxySection(ConfigModel):
    tokens: TokenCount = 16_512
    """tokens each proxy trains on (rounded down to whole steps of global_batch rows of seq_len + 1)"""
    seq_len: between(int, 8, MAX_SEQ_LEN) = 128
    global_batch: between(int, 1, MAX_BATCH) = 8
    processes: between(int, 1, MAX_PROCESSES) = 1
    trainer_config: str = ablate.DEFAULT_TRAINER_CONFIG
    overrides: tuple[str, ...] = PROXY_OVERRIDES
    """trainer `key=value` overrides of every proxy"""
    eval_docs: between(int, 1, 1_000_000) = 50
    eval_chunks: between(int, 1, 1024) = 1

    @model_validator(mode="after")
    def _check(self) -> ProxySection:
        if self.global_batch % self.processes:
            raise ConfigError(f"proxy.global_batch {self.global_batch} is not a multiple of processes")
        if not _config_path(self.trainer_config).is_file():
            raise ConfigError(f"proxy.trainer_config: {self.trainer_config} not found")
        return self


class TargetSection(ConfigModel):
    """The full run the recipe is for: its epoch caps decide which mixtures are allowed."""

    tokens: TokenCount | None = None
    """default: the recipe's total_tokens"""
    seq_len: between(int, 1, MAX_SEQ_LEN) = 256
    """the target trainer's data.seq_len (rows of seq_len + 1 tokens)"""
    heldout_sequences: between(int, 0, 1_000_000) = 16
    """the target trainer's eval.sequences_per_source (held-out rows a source cannot repeat)"""


class TransferSection(ConfigModel):
    token_multiple: between(float, 4, 1000) = 4.0
    """the validation runs' tokens, × the proxy's (the issue: ≥ 4×; past 1000× it is no proxy-scale check)"""
    seeds: between(int, 3, 64) = 3
    model_overrides: dict[str, between(int, 1, 1 << 20)] = Field(
        default_factory=lambda: {
            "d_model": 128,
            "n_layers": 4,
            "n_heads": 4,
            "n_kv_heads": 2,
            "ffn_hidden": 384,
        }
    )
    """trainer model.overrides of the larger model (default: the debug model at twice the width and depth)"""

    @model_validator(mode="after")
    def _check(self) -> TransferSection:
        if not self.model_overrides:
            raise ConfigError("transfer.model_overrides must make a larger model than the proxies'")
        return self


class CostSection(ConfigModel):
    core_flops: between(float, 1e6, 1e16) = 5.0e9
    """training FLOP/s (6ND) one CPU core gives the trainer. Measured on this project's 2 shared cores: ~1e10
    per core for the debug model at load 5-10 (30 steps of 8 x 129 tokens in 3.3 s; the 2x wider and deeper
    validation model 124K tokens in ~25 s), ~1e9 at load 11-21 with 2 ranks (`make ablate`); half the
    quiet figure, so that an estimate errs long"""
    overhead_s: between(float, 0, 86_400) = 30.0
    """seconds per run outside training steps (launcher start, export, scoring): measured 16 s (proxy) to
    35 s (validation run) at load 5-10, up to ~100 s under heavy load"""
    cores: between(int, 1, 1 << 20) = max(os.cpu_count() or 1, 1)


class MixtureSearchConfig(ConfigModel):
    """`--config FILE` / `--set key=value` of `mixture-search` (every key has a default)."""

    search: ms.SearchConfig = Field(default_factory=ms.SearchConfig)
    proxy: ProxySection = Field(default_factory=ProxySection)
    target: TargetSection = Field(default_factory=TargetSection)
    transfer: TransferSection = Field(default_factory=TransferSection)
    """the `--validate` runs: the transfer check at the next scale up"""
    cost: CostSection = Field(default_factory=CostSection)

    @model_validator(mode="after")
    def _check_derived(self) -> MixtureSearchConfig:
        """Products of bounded numbers can still pass a bound: the validation runs' tokens."""
        row = self.proxy.global_batch * (self.proxy.seq_len + 1)
        validation = self.proxy.tokens * self.transfer.token_multiple + row  # ceil to whole steps
        if validation > MAX_TOKENS:
            raise ConfigError(
                f"transfer.token_multiple {self.transfer.token_multiple:g} x proxy.tokens {self.proxy.tokens:,} "
                f"is {validation:.3g} tokens per validation run, over the {MAX_TOKENS:.0e} a recipe may have"
            )
        return self

    @classmethod
    def load(cls, path: str | Path | None, overrides: list[str] = ()) -> MixtureSearchConfig:
        return load_config(cls, path, overrides)


def _config_path(p: str) -> Path:
    return Path(p) if Path(p).is_file() else project_path(p)


def _fmt_tokens(n: float) -> str:
    for unit, div in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:.0f}"


# ------------------------------------------------------------------ the recipe as searched


def recipe_data(path: Path) -> dict[str, Any]:
    """The recipe file's data with its paths made absolute (it is rewritten under DIR)."""
    recipe = Recipe.load(path)
    data = read_yaml_mapping(path)
    for name, src in recipe.sources.items():
        for key in ("shards", "docs"):
            if getattr(src, key) is not None:
                data["sources"][name][key] = str(getattr(src, key))
    data.pop("train", None)
    data["name"] = recipe.name
    return data


def bucket_edges(recipe: Recipe, spec: ms.BucketSpec) -> list[float]:
    """The `count - 1` quantiles of `spec.column` over the source's selected documents (nulls left out)."""
    import pyarrow.parquet as pq

    from core.files import doc_parquet_files, parquet_schema
    from core.selectors import resolve_percentiles, selection_mask

    src = recipe.sources[spec.source]
    files = doc_parquet_files(src.docs)
    select, _ = resolve_percentiles(src.select, [str(f) for f in files], source=f"sources.{spec.source}")
    values: list[float] = []
    for f in files:
        names = parquet_schema(f).names
        if spec.column not in names:
            raise InputError(
                f"search.buckets: column {spec.column!r} is not in {f} (columns: {', '.join(names)})"
            )
        cols = list(dict.fromkeys([spec.column, *(s.column for s in select)]))
        table = pq.read_table(f, columns=[c for c in cols if c in names])
        mask, _ = selection_mask(table, select, source=str(f))
        values += [v for v in table.filter(mask).column(spec.column).to_pylist() if v is not None]
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 2 * spec.count:
        raise InputError(
            f"search.buckets: source {spec.source} has {len(v)} documents with a {spec.column}; "
            f"{spec.count} buckets need at least {2 * spec.count}"
        )
    edges = [float(x) for x in np.quantile(v, np.arange(1, spec.count) / spec.count)]
    if len(set(edges)) < len(edges):
        raise InputError(
            f"search.buckets: {spec.column} of {spec.source} has tied quantiles {edges}: fewer buckets"
        )
    return edges


def bucket_sources(
    recipe: Recipe, data: dict[str, Any], spec: ms.BucketSpec, tokens_dir: Path
) -> dict[str, dict]:
    """name -> source entry of each bucket: the source's own select plus a band on the column."""
    src = recipe.sources[spec.source]
    edges = bucket_edges(recipe, spec)
    out = {}
    for b in range(spec.count):
        band = []
        if b > 0:
            band.append(f">= {edges[b - 1]!r}")
        if b < spec.count - 1:
            band.append(f"< {edges[b]!r}")
        entry = {k: v for k, v in data["sources"][spec.source].items() if k not in ("shards", "select")}
        entry["select"] = {**src.select_spec(), spec.column: " and ".join(band)}
        entry["shards"] = str(tokens_dir / "shards" / f"{spec.source}_q{b + 1}")
        out[f"{spec.source}_q{b + 1}"] = entry
    return out


def check_buckets(recipe: Recipe, cfg: ms.SearchConfig) -> None:
    for spec in cfg.buckets:
        src = recipe.sources.get(spec.source)
        if src is None:
            raise InputError(
                f"search.buckets: unknown source {spec.source!r}; sources: {', '.join(recipe.sources)}"
            )
        if src.docs is None:
            raise InputError(f"search.buckets: source {spec.source} has no `docs` to cut into buckets")
        if any(s.column == spec.column for s in src.select):
            raise InputError(
                f"search.buckets: source {spec.source} already selects on {spec.column}; cut another column "
                "or drop that selector"
            )
        if src.shards is None or not has_manifest(src.shards):
            raise InputError(
                f"search.buckets: source {spec.source} is not tokenized (its tokenizer is the buckets')"
            )


def _source_tokenizer(shards: Path | str, source: str) -> str:
    """The tokenizer.json a source's shards were made with, for its buckets. The path is the manifest's,
    which is data (CONVENTIONS 14): it is used only if the file there is the one the manifest's sha256
    names, so the buckets are tokenized exactly as their source was, or the search stops here."""
    from core.files import sha256_file

    entry = read_manifest(shards)["tokenizer"]
    path, want = entry.get("path"), entry.get("sha256")
    if not isinstance(path, str) or not Path(path).is_file() or want is None or sha256_file(path) != want:
        raise InputError(
            f"search.buckets: source {source}: the tokenizer its manifest names ({path}) is missing or is "
            f"not the file its shards were made with (sha256 {str(want)[:12]}); buckets must use that one"
        )
    return path


def make_buckets(recipe_path: Path, cfg: ms.SearchConfig, out: Path, log) -> Path:
    """DIR/searched-recipe.yaml: the recipe with each bucketed source replaced by its buckets (tokenized
    here), their weight in every phase split by their tokens."""
    import yaml

    recipe = Recipe.load(recipe_path)
    data = recipe_data(recipe_path)
    for spec in cfg.buckets:
        buckets = bucket_sources(recipe, data, spec, out / "tokens")
        tokenizer = _source_tokenizer(recipe.sources[spec.source].shards, spec.source)
        counts = {}
        for name, entry in buckets.items():
            shards = Path(entry["shards"])
            if not (shards / "manifest.json").is_file():
                args = ["tokenize", "--input", entry["docs"], "--tokenizer", tokenizer, "--output", str(out / "tokens"),
                        "--source", name, "--no-progress", "--master", "local[2]"]  # fmt: skip
                for column, cond in entry["select"].items():
                    args += ["--select", f"{column}={cond if isinstance(cond, str) else json.dumps(cond)}"]
                call("tokens", args, log=log)
            counts[name] = int(read_manifest(shards)["tokens"])
            if counts[name] == 0:
                raise InputError(f"search.buckets: bucket {name} holds no tokens ({entry['select']})")
        del data["sources"][spec.source]
        data["sources"].update(buckets)
        total = sum(counts.values())
        for ph in data["phases"]:
            w = (ph.get("weights") or {}).pop(spec.source, None)
            if w is not None:
                ph["weights"].update({n: float(w) * c / total for n, c in counts.items()})
    path = out / "searched-recipe.yaml"
    path.write_text(
        "# Written by `python -m workflows mixture-search`: the recipe as searched\n" + yaml.safe_dump(data)
    )
    # The trainer's own source checks, before any proxy: a bucket that selects exactly the documents of
    # another source (on a small source, a median cut can equal a `top 50%` one) holds the same shards,
    # which every proxy would refuse after its launch.
    try:
        check_sources(Recipe.load(path))
    except RecipeError as e:
        raise InputError(
            f"search.buckets: {e} (cut another column, or into another number of buckets)"
        ) from None
    return path


# ------------------------------------------------------------------ the searched phase and its caps


class Space:
    """The searched phase of the recipe, its sources, their natural mixture and the caps at the target."""

    def __init__(self, path: Path, cfg: MixtureSearchConfig) -> None:
        from mixtures.draw import resolve_weights

        self.path = path
        self.data = recipe_data(path)
        recipe = Recipe.load(path)
        found = {n: available_tokens(recipe, n) for n in recipe.sources}
        missing = [n for n, (_, exact) in found.items() if not exact]
        if missing:
            raise InputError(
                f"{path}: sources {', '.join(missing)} are not tokenized (no manifest.json); a search trains on them"
            )
        self.recipe = resolve_weights(recipe, {n: t for n, (t, _) in found.items()})
        phases = {ph.name: ph for ph in self.recipe.phases}
        name = cfg.search.phase or max(self.recipe.phases, key=lambda ph: ph.tokens).name
        if name not in phases:
            raise InputError(f"search.phase {name!r}: no such phase; phases: {', '.join(phases)}")
        self.phase = name
        self.sources = tuple(self.recipe.sources)
        self.tokens = np.array([found[n][0] for n in self.sources], dtype=float)
        if not (self.tokens > 0).all():
            empty = [n for n, t in zip(self.sources, self.tokens, strict=True) if t <= 0]
            raise InputError(f"sources without tokens cannot be searched: {', '.join(empty)}")
        self.p = ms.natural(self.tokens)
        self.target_tokens = cfg.target.tokens or self.recipe.total_tokens
        self.row = cfg.target.seq_len + 1
        try:
            self.target = self.recipe.with_total_tokens(self.target_tokens)
            self.recipe.with_total_tokens(cfg.proxy.tokens)
        except RecipeError as e:
            raise InputError(f"{path}: its phases do not scale to the proxy or target budget: {e}") from None
        held = cfg.target.heldout_sequences * self.row
        # every source is drawn by some mixture of the swarm, so each holds out its evaluation rows
        self.pools = {n: training_pool(self.recipe, n, int(found[n][0]), True, held) for n in self.sources}
        self.caps = self._caps()

    def with_weights(self, recipe: Recipe, w: np.ndarray) -> Recipe:
        weights = {s: float(x) for s, x in zip(self.sources, w, strict=True) if x > 0}
        phases = tuple(replace(ph, weights=weights) if ph.name == self.phase else ph for ph in recipe.phases)
        return replace(recipe, phases=phases)

    def fits(self, w: np.ndarray) -> bool:
        """Exactly what the sampler would accept at the target budget (mixtures/draw.py)."""
        return fits(self.with_weights(self.target, w), self.row, self.pools)

    def _caps(self) -> np.ndarray:
        """Continuous upper bounds on the searched phase's weights: each source's cap less what the other
        phases draw from it, less one row for the largest-remainder rounding; `fits` has the last word."""
        ph = next(p for p in self.target.phases if p.name == self.phase)
        others = source_draws(self.with_weights(self.target, self.p), self.row, self.pools)
        caps = []
        for s in self.sources:
            d = others[s]
            other = d.tokens - d.drawn.get(self.phase, 0)
            room = (d.cap_tokens or 0) - other - self.row
            caps.append(min(max(room, 0) / ph.tokens, 1.0))
        return np.array(caps)

    def as_written(self) -> np.ndarray:
        ph = next(p for p in self.recipe.phases if p.name == self.phase)
        f = ph.fractions()
        return np.array([f.get(s, 0.0) for s in self.sources])

    def recipe_yaml(self, w: np.ndarray, name: str, total_tokens: int, header: str = "") -> str:
        import yaml

        data = copy.deepcopy(self.data)  # the recipe's own data, not outside JSON
        data["name"] = name
        data["total_tokens"] = total_tokens
        r = ms.rounded(w)
        for ph in data["phases"]:
            if ph["name"] == self.phase:
                ph["weights"] = {s: float(x) for s, x in zip(self.sources, r, strict=True) if x > 0}
        if all("weights" in ph for ph in data["phases"]):  # the loader refuses a temperature nothing uses
            data.pop("weights", None)
        return header + yaml.safe_dump(data, sort_keys=False)


def fit_into_caps(space: Space, w: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """`w` rounded, and nudged off a cap the rounding crossed until the sampler's exact count accepts it."""
    w = ms.rounded(w)
    for _ in range(200):
        if space.fits(w):
            return w
        draws = source_draws(space.with_weights(space.target, w), space.row, space.pools)
        over = np.array([draws[s].over_cap for s in space.sources])
        hi = np.where(over, np.maximum(w - 2 * 10**-ms.ROUND, lo), hi)
        w = ms.rounded(ms.project_box_simplex(w, lo, hi))
    raise InputError("the chosen mixture could not be rounded into the epoch caps; loosen the caps")


def mixture_name(prefix: str, w: np.ndarray) -> str:
    return f"{prefix}-{hashlib.sha256(np.asarray(w).round(ms.ROUND).tobytes()).hexdigest()[:6]}"


# ------------------------------------------------------------------ cost


def model_params(trainer_config: Path, vocab: int, model_overrides: dict[str, int] | None = None) -> int:
    from trainer.model import model_config

    model = read_yaml_mapping(trainer_config).get("model", {}) or {}
    over = {**(model.get("overrides") or {}), **(model_overrides or {})}
    return model_config(model.get("size", "debug"), vocab_size=vocab, **over).num_params()


def estimate(runs: int, tokens: int, params: int, cost: CostSection) -> dict[str, float]:
    flops = 6.0 * params * tokens * runs
    seconds = flops / (cost.core_flops * cost.cores) + cost.overhead_s * runs
    out = {"runs": runs, "tokens_per_run": tokens, "params": params, "flops": flops,
           "wall_hours": seconds / 3600, "core_hours": seconds * cost.cores / 3600}  # fmt: skip
    # the settings are bounded, but a trainer config's model size is not theirs to bound: an estimate
    # that is not a finite number is refused, never printed as `~inf core-hours`
    bad = [k for k, v in out.items() if not math.isfinite(v)]
    if bad:
        raise InputError(
            f"the cost estimate is not a finite number ({bad[0]} = {out[bad[0]]}) for {runs} runs x {tokens:,} "
            f"tokens x {params:,} params: lower proxy.tokens, transfer.token_multiple or the model's size"
        )
    return out


# ------------------------------------------------------------------ the search


def padded_budget(trained: int, n_phases: int, proxy: ProxySection) -> int:
    """The total_tokens of a proxy recipe that trains exactly `trained` tokens (whole steps).

    Each phase is cut into whole rows of seq_len + 1 on its own, so a recipe of exactly `trained` tokens
    in several phases holds up to one row per phase fewer than the steps need (the trainer stops, data
    exhausted). One row per phase more keeps the step count (train_run's `steps_for`) and leaves at
    most those rows of the last phase undrawn."""
    row = proxy.seq_len + 1
    if n_phases >= proxy.global_batch:
        raise InputError(
            f"the recipe has {n_phases} phases and proxy.global_batch is {proxy.global_batch}: "
            "a batch must hold more rows than there are phases"
        )
    return trained + (n_phases - 1) * row if n_phases > 1 else trained


def seed_matched(
    results: dict[str, dict[int, dict]], names: list[str], objective: tuple[str, ...] | list[str]
) -> tuple[list[int], np.ndarray]:
    """(the seeds every one of `names` was trained with, each name's bits per byte per objective set
    averaged over those seeds only): the rows the law is fitted on and the proxies are ranked by.

    A seed moves every mixture's objective together (one initialization and one data order for all of
    them): on the full demo's data seed 2 measured 0.018-0.023 bits per byte below seed 1 for every anchor,
    four times the spread between mixtures. An anchor's mean over both seeds set against a swarm run's
    seed 1 would rank the seed, not the mixture, so mixtures are only compared at the seeds they share."""
    common = sorted(set.intersection(*(set(results[n]) for n in names))) if names else []
    if not common:
        raise InputError("no seed is shared by every proxy mixture: they cannot be compared")
    Y = np.array([[np.mean([results[n][s]["bpb"][e] for s in common]) for e in objective] for n in names])
    return common, Y


def _opts(out: Path, cfg: MixtureSearchConfig, seeds: int, overrides: tuple[str, ...] = (), baseline=None):
    p = cfg.proxy
    return ablate.Options(output=out, seeds=seeds, trainer_config=_config_path(p.trainer_config).resolve(),
                          processes=p.processes, seq_len=p.seq_len, global_batch=p.global_batch,
                          overrides=(*p.overrides, *overrides), eval_docs=p.eval_docs, eval_chunks=p.eval_chunks,
                          baseline=baseline)  # fmt: skip


def mixture_search(
    recipe_path: str | Path,
    output: str | Path,
    cfg: MixtureSearchConfig,
    eval_specs: list[str],
    budget: float | None = None,
    validate: bool = False,
    dry_run: bool = False,
    log=print,
) -> dict[str, Any]:
    """Every step of the module docstring; returns search.json's content (or the estimate on a dry run)."""
    out = Path(output).expanduser().resolve()
    recipe_path = Path(recipe_path)
    recipe, evals, objective = _checked_inputs(recipe_path, cfg, eval_specs)
    ms_cfg = cfg.search
    proxy_opts = _opts(out / "proxies", cfg, ms_cfg.swarm.anchor_seeds)
    steps = ablate.steps_for(cfg.proxy.tokens, proxy_opts)
    proxy_tokens = steps * cfg.proxy.global_batch * (cfg.proxy.seq_len + 1)  # whole steps, exactly trained
    _guard_output(out, recipe_path, cfg, evals)

    searched = make_buckets(recipe_path, ms_cfg, out, log) if ms_cfg.buckets else recipe_path
    space = Space(searched, cfg)
    lo, hi = ms.bounds_for(space.sources, space.caps, ms_cfg.solve)
    anchor_mix, swarm_mix = _draw_mixtures(space, ms_cfg)
    cost, params, vtokens = _estimate_cost(
        space, cfg, proxy_opts, steps, proxy_tokens, anchor_mix, swarm_mix, validate
    )
    _check_budget(cost, cfg.cost, budget, log)
    if dry_run:
        return {"cost": cost, "mixtures": len(swarm_mix) + len(anchor_mix)}

    proxies = _train_proxies(out, space, cfg, proxy_opts, evals, objective, proxy_tokens, len(recipe.phases), anchor_mix, swarm_mix, log)  # fmt: skip
    fit = _fit_and_solve(proxies, anchor_mix, swarm_mix, lo, hi, ms_cfg)
    chosen = _train_chosen(proxies, fit)
    recommended = bool(fit.gate["passed"])

    pred_sets = fit.laws.predict(fit.w_opt[None, :])[0]
    opt_path, chosen_path = _write_optimum(out, recipe_path, proxies, fit, chosen, pred_sets, recommended)
    summary = _summary(recipe_path, searched, proxies, fit, chosen, params, cost, pred_sets, recommended, opt_path, chosen_path)  # fmt: skip
    # written before the validation too: a search whose validation is cut short still has its report
    write_report(out, summary, log if not validate else lambda m: None)
    if validate:
        vbudget = padded_budget(vtokens, proxies.n_phases, cfg.proxy)
        summary["validate"] = run_validation(space, cfg, out, fit.w_opt, vbudget, eval_specs, objective, log)
        write_report(out, summary, log)
    return summary


def _checked_inputs(
    recipe_path: Path, cfg: MixtureSearchConfig, eval_specs: list[str]
) -> tuple[Recipe, dict[str, list[str]], tuple[str, ...]]:
    """(the recipe, the eval sets, the objective's sets), each checked: the buckets, at least one eval set,
    an objective of given sets."""
    recipe = Recipe.load(recipe_path)
    ms_cfg = cfg.search
    check_buckets(recipe, ms_cfg)
    evals = ablate.load_eval_sets(eval_specs, cfg.proxy.eval_docs)
    if not evals:
        raise InputError(
            "give at least one --eval NAME=PATH: the fixed held-out text every proxy is scored on"
        )
    objective = ms_cfg.objective or tuple(evals)
    unknown = [s for s in objective if s not in evals]
    if unknown:
        raise InputError(f"search.objective names eval sets not given: {unknown}; given: {list(evals)}")
    return recipe, evals, objective


def _guard_output(
    out: Path, recipe_path: Path, cfg: MixtureSearchConfig, evals: dict[str, list[str]]
) -> None:
    """Claim DIR for this search: what decides the proxies' and buckets' results (guard_folder)."""
    ms_cfg = cfg.search
    evals_id = {k: fingerprint_of(v) for k, v in evals.items()}
    ident = {"recipe": recipe_data(recipe_path), "buckets": [b.to_dict() for b in ms_cfg.buckets],
             "proxy": cfg.proxy.to_dict(), "evals": evals_id}  # fmt: skip
    # the folder is the proxies' and buckets': fit, solve, swarm size and validation may change between runs
    guard_folder(out, "mixture-search", ident, fingerprint_of(ident), {})


def _draw_mixtures(
    space: Space, ms_cfg: ms.SearchConfig
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(the anchors, rounded, one of each mixture; the swarm drawn around natural, named by their weights)."""
    every_anchor = {"natural": space.p, "uniform": np.full(len(space.p), 1 / len(space.p)),
                    "recipe": space.as_written(), "largest": ms.more_of_largest(space.p)}  # fmt: skip
    anchors = {k: every_anchor[k] for k in ms_cfg.swarm.anchors}
    anchor_mix: dict[str, np.ndarray] = {}
    for name, w in anchors.items():
        r = ms.rounded(w)
        if not any(np.array_equal(r, x) for x in anchor_mix.values()):  # the recipe may be natural
            anchor_mix[name] = r
    swarm = ms.draw_swarm(space.p, ms_cfg.swarm, space.fits, exclude=list(anchor_mix.values()))
    swarm_mix = {mixture_name(f"s{i:03d}", w): w for i, w in enumerate(swarm)}
    return anchor_mix, swarm_mix


def _estimate_cost(
    space: Space, cfg: MixtureSearchConfig, proxy_opts: ablate.Options, steps: int, proxy_tokens: int,
    anchor_mix: dict[str, np.ndarray], swarm_mix: dict[str, np.ndarray], validate: bool,
) -> tuple[dict[str, dict[str, float]], int, int]:  # fmt: skip
    """(the cost estimate of the proxies and of --validate's runs, the proxy's parameters, the validation
    runs' tokens)."""
    tokenizer = read_manifest(space.recipe.sources[space.sources[0]].shards)["tokenizer"]
    vocab = int(tokenizer.get("vocab_size") or 4096)
    n_seeds = cfg.search.swarm.anchor_seeds
    params = model_params(proxy_opts.trainer_config, vocab)
    runs = len(swarm_mix) + (len(anchor_mix) + 1) * n_seeds
    cost = {"proxies": estimate(runs, proxy_tokens, params, cfg.cost)}
    vsteps = math.ceil(steps * cfg.transfer.token_multiple)
    vtokens = vsteps * cfg.proxy.global_batch * (cfg.proxy.seq_len + 1)
    if validate:
        vparams = model_params(proxy_opts.trainer_config, vocab, cfg.transfer.model_overrides)
        cost["validate"] = estimate(3 * cfg.transfer.seeds, vtokens, vparams, cfg.cost)
    return cost, params, vtokens


def _check_budget(
    cost: dict[str, dict[str, float]], settings: CostSection, budget: float | None, log
) -> None:
    """Print each estimate; InputError when their core-hours are over `--budget`."""
    total_core_hours = sum(c["core_hours"] for c in cost.values())
    for what, c in cost.items():
        log(f"cost of {what}: {c['runs']} runs x {_fmt_tokens(c['tokens_per_run'])} tokens x {_fmt_tokens(c['params'])} "
            f"params: 6ND = {c['flops']:.3g} FLOPs, ~{c['core_hours']:.2f} core-hours "
            f"(~{c['wall_hours'] * 60:.0f} min on {settings.cores} cores)")  # fmt: skip
    if budget is not None and total_core_hours > budget:
        raise InputError(
            f"the search would cost ~{total_core_hours:.2f} core-hours, over --budget {budget:g}: lower "
            "search.swarm.proxies or proxy.tokens (or raise --budget)"
        )


@dataclass
class _Proxies:
    """The proxy runs of one search: each mixture's recipe in `folder`, trained by `train` into `results`."""

    space: Space
    cfg: MixtureSearchConfig
    opts: ablate.Options
    evals: dict[str, list[str]]
    objective: tuple[str, ...]
    tokens: int
    """tokens each proxy trains on (whole steps)"""
    n_phases: int
    folder: Path
    log: Any
    seeds: list[int]
    """the anchors' seeds; the swarm trains with the first"""
    results: dict[str, dict[int, dict]] = field(default_factory=dict)
    """name -> seed -> train_run's result"""

    def write_mixture(self, name: str, w: np.ndarray, tokens: int) -> Path:
        """DIR/mixtures/<name>.yaml at `tokens`, rewritten only when its text changed."""
        path = self.folder / f"{name}.yaml"
        text = self.space.recipe_yaml(w, name, tokens, "# Written by `python -m workflows mixture-search`\n")
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        return path

    def train(self, names_w: dict[str, np.ndarray], run_seeds: list[int]) -> None:
        """Train (or reuse) each mixture at each seed, seed by seed, by ablate.train_run."""
        budget = padded_budget(self.tokens, self.n_phases, self.cfg.proxy)
        paths = [self.write_mixture(n, w, budget) for n, w in names_w.items()]
        arms = ablate.load_arms([str(p) for p in paths])
        for s in run_seeds:
            for arm in arms:
                self.results.setdefault(arm.name, {})[s] = ablate.train_run(
                    arm, s, self.opts, self.evals, self.log
                )

    def objective_of(self, r: dict) -> float:
        """A run's objective: its mean bits per byte over the objective's eval sets."""
        return float(np.mean([r["bpb"][s] for s in self.objective]))


def _train_proxies(
    out: Path, space: Space, cfg: MixtureSearchConfig, proxy_opts: ablate.Options, evals: dict[str, list[str]],
    objective: tuple[str, ...], proxy_tokens: int, n_phases: int, anchor_mix: dict[str, np.ndarray],
    swarm_mix: dict[str, np.ndarray], log,
) -> _Proxies:  # fmt: skip
    """Step 4: the anchors (every seed) first, so that a search cut short can already gate its noise, then
    the swarm (one seed)."""
    mix_dir = out / "mixtures"
    mix_dir.mkdir(parents=True, exist_ok=True)
    seeds = [1 + k for k in range(cfg.search.swarm.anchor_seeds)]
    proxies = _Proxies(space, cfg, proxy_opts, evals, objective, proxy_tokens, n_phases, mix_dir, log, seeds)
    proxies.train(anchor_mix, seeds)
    proxies.train(swarm_mix, seeds[:1])
    return proxies


@dataclass
class _Fit:
    """The laws fitted on the proxies, their diagnostics and the optimum they give."""

    rows: dict[str, np.ndarray]
    """every proxy mixture, anchors first"""
    anchors: tuple[str, ...]
    common: list[int]
    """the seeds every mixture has: where they are compared"""
    Y: np.ndarray
    actual: np.ndarray
    laws: ms.Laws
    cv: dict[str, Any]
    gate: dict[str, Any]
    lo: np.ndarray
    hi: np.ndarray
    w_opt: np.ndarray
    boot: ms.Bootstrap | None


def _fit_and_solve(
    proxies: _Proxies, anchor_mix: dict[str, np.ndarray], swarm_mix: dict[str, np.ndarray], lo: np.ndarray,
    hi: np.ndarray, ms_cfg: ms.SearchConfig,
) -> _Fit:  # fmt: skip
    """Step 5's fit, noise gate and solve (mixtures/search.py) on the seed-matched proxy results."""
    space, results, objective, seeds = proxies.space, proxies.results, proxies.objective, proxies.seeds
    rows = {**anchor_mix, **swarm_mix}
    W = np.array([rows[n] for n in rows])
    common, Y = seed_matched(results, list(rows), objective)  # the swarm's seed: anchors at it too
    actual = Y.mean(axis=1)
    laws = ms.fit_laws(W, Y, objective, ms_cfg.fit)
    cv = ms.cross_validate(W, Y, objective, ms_cfg.fit, space.p)
    gate = ms.noise_gate(
        [proxies.objective_of(results[n][seeds[0]]) for n in rows],
        [[proxies.objective_of(results[n][s]) for s in seeds] for n in anchor_mix],
        ms_cfg.gate.ratio,
    )
    w_opt = fit_into_caps(
        space, ms.solve(laws, space.p, lo, hi, ms_cfg.solve.pull, ms_cfg.solve.strength), lo, hi
    )
    boot = ms.bootstrap(W, Y, laws, w_opt, space.p, lo, hi, space.sources, ms_cfg.fit, ms_cfg.solve)
    return _Fit(rows, tuple(anchor_mix), common, Y, actual, laws, cv, gate, lo, hi, w_opt, boot)


@dataclass
class _Chosen:
    """The chosen mixture's runs at the proxy scale, and its regret against the best proxy."""

    name: str
    runs: list[dict]
    """its results, by seed"""
    actual: float
    """mean objective over its seeds"""
    matched: float
    """mean objective at the seeds every proxy has"""
    regret: dict[str, Any]


def _train_chosen(proxies: _Proxies, fit: _Fit) -> _Chosen:
    """Train the optimum with the anchors' seeds (unless a proxy already is it, with every seed), and
    measure its regret at the seeds the swarm has, as the runs it is compared with."""
    results, seeds = proxies.results, proxies.seeds
    chosen_name = mixture_name("chosen", fit.w_opt)
    already = next((n for n, w in fit.rows.items() if np.array_equal(w, fit.w_opt)), None)
    if already is None:
        proxies.train({chosen_name: fit.w_opt}, seeds)
    else:  # the optimum is a mixture the swarm already trained (a strong pull gives natural)
        chosen_name = already
        if len(results[already]) < len(seeds):
            proxies.train({already: fit.w_opt}, seeds)
    chosen_runs = [results[chosen_name][s] for s in sorted(results[chosen_name])]
    chosen_actual = float(np.mean([proxies.objective_of(r) for r in chosen_runs]))
    chosen_matched = float(np.mean([proxies.objective_of(results[chosen_name][s]) for s in fit.common]))
    reg = ms.regret(chosen_matched, {n: float(a) for n, a in zip(fit.rows, fit.actual, strict=True)})
    return _Chosen(chosen_name, chosen_runs, chosen_actual, chosen_matched, reg)


def _write_optimum(
    out: Path, recipe_path: Path, proxies: _Proxies, fit: _Fit, chosen: _Chosen, pred_sets: np.ndarray,
    recommended: bool,
) -> tuple[Path, Path]:  # fmt: skip
    """(law-optimum.yaml, always written; chosen.yaml, its copy only when recommended, else removed)."""
    space, boot = proxies.space, fit.boot
    header = (
        f"# Written by `python -m workflows mixture-search` from {recipe_path}: the log-linear law's optimum\n"
        f"# of phase {space.phase} over {len(fit.rows)} proxy mixtures ({proxies.tokens:,} tokens each).\n"
        f"# recommended: {'yes' if recommended else 'NO: the noise gate failed, proxies cannot tell mixtures apart'}\n"
        + "".join(
            f"# predicted {s}: {v:.4f} bits/byte"
            + (f" [{boot.per_set[s][0]:.4f}, {boot.per_set[s][1]:.4f}]" if boot else "") + "\n"
            for s, v in zip(proxies.objective, pred_sets, strict=True)
        )
        + f"# held-out Spearman rho {fit.cv['predictors']['loglinear']['rho']}, regret {chosen.regret['regret']:+.4f}; see search.md\n"
    )  # fmt: skip
    opt_path = out / "law-optimum.yaml"
    opt_path.write_text(
        space.recipe_yaml(fit.w_opt, f"{space.recipe.name}-searched", space.target_tokens, header)
    )
    Recipe.load(opt_path)  # what we write, the loader accepts
    chosen_path = out / "chosen.yaml"
    if recommended:
        chosen_path.write_text(opt_path.read_text())
    elif chosen_path.exists():
        chosen_path.unlink()  # an earlier run's recommendation that this run's proxies no longer support
    return opt_path, chosen_path


def _summary(
    recipe_path: Path, searched: Path, proxies: _Proxies, fit: _Fit, chosen: _Chosen, params: int,
    cost: dict[str, dict[str, float]], pred_sets: np.ndarray, recommended: bool, opt_path: Path,
    chosen_path: Path,
) -> dict[str, Any]:  # fmt: skip
    """search.json's content (mixtures/search_report.py reads it)."""
    space, results, objective = proxies.space, proxies.results, proxies.objective
    baselines = {
        n: float(np.mean([proxies.objective_of(r) for r in results[n].values()])) for n in fit.anchors
    }
    return {
        "recipe": str(recipe_path.resolve()),
        "searched_recipe": str(Path(searched).resolve()),
        "phase": space.phase,
        "sources": list(space.sources),
        "tokens": dict(zip(space.sources, space.tokens.astype(int).tolist(), strict=True)),
        "natural": dict(zip(space.sources, space.p.tolist(), strict=True)),
        "caps": dict(zip(space.sources, space.caps.tolist(), strict=True)),
        "bounds": {"lo": fit.lo.tolist(), "hi": fit.hi.tolist()},
        "target_tokens": space.target_tokens,
        "proxy_tokens": proxies.tokens,
        "proxy_params": params,
        "objective": list(objective),
        "compared_seeds": fit.common,
        "config": proxies.cfg.to_dict(),
        "cost_estimate": cost,
        "cost_measured": _cost_measured(results, proxies.cfg.cost.cores),
        "runs": _run_records(proxies, fit),
        "laws": {
            s: {
                "loglinear": fit.laws.loglinear[i].record(space.sources),
                "linear": fit.laws.linear[i].record(space.sources),
            }
            for i, s in enumerate(objective)
        },
        "cv": {k: v for k, v in fit.cv.items() if k != "oof_objective"},
        "gate": fit.gate,
        "chosen": _chosen_record(proxies, fit, chosen, pred_sets),
        "regret": chosen.regret,
        "baselines": baselines,
        "recommended": recommended,
        "law_optimum": str(opt_path),
        "chosen_recipe": str(chosen_path) if recommended else None,
    }


def _cost_measured(results: dict[str, dict[int, dict]], cores: int) -> dict[str, Any]:
    """The runs' count, wall time and core-hours, as measured."""
    return {
        "runs": sum(len(v) for v in results.values()),
        "wall_s": (wall := sum(r.get("wall_s", 0.0) for v in results.values() for r in v.values())),
        # what this process's runs took (a run reused from an earlier call counts its own wall time)
        "core_hours": wall * cores / 3600,
    }


def _run_records(proxies: _Proxies, fit: _Fit) -> dict[str, dict[str, Any]]:
    """search.json's `runs`: each proxy mixture's weights, actual, predicted and out-of-fold objective."""
    space, results, objective, cv = proxies.space, proxies.results, proxies.objective, fit.cv
    return {
        n: {
            "kind": "anchor" if n in fit.anchors else "swarm",
            "weights": fit.rows[n].tolist(),
            "fits_target": bool(space.fits(fit.rows[n])),
            "objective": float(fit.actual[i]),
            "bpb": {e: float(fit.Y[i, j]) for j, e in enumerate(objective)},
            "seeds": {s: proxies.objective_of(r) for s, r in sorted(results[n].items())},
            "predicted": float(fit.laws.objective(fit.rows[n][None])[0]),
            "oof_loglinear": cv["oof_objective"]["loglinear"][i],
            "oof_linear": cv["oof_objective"]["linear"][i],
        }
        for i, n in enumerate(fit.rows)
    }


def _chosen_record(proxies: _Proxies, fit: _Fit, chosen: _Chosen, pred_sets: np.ndarray) -> dict[str, Any]:
    """search.json's `chosen`: the optimum's weights, predictions with their intervals, and measurements."""
    space, objective, boot, w_opt = proxies.space, proxies.objective, fit.boot, fit.w_opt
    return {
        "name": chosen.name,
        "weights": dict(zip(space.sources, w_opt.tolist(), strict=True)),
        "weights_interval": boot.weights if boot else None,
        "predicted": float(fit.laws.objective(w_opt[None])[0]),
        "predicted_interval": boot.objective if boot else None,
        "predicted_per_set": {s: float(v) for s, v in zip(objective, pred_sets, strict=True)},
        "predicted_per_set_interval": boot.per_set if boot else None,
        "bootstrap": {"samples": boot.samples, "failed": boot.failed} if boot else None,
        "actual": chosen.actual,
        "actual_seeds": [proxies.objective_of(r) for r in chosen.runs],
        "actual_compared": chosen.matched,
        "fits_target": bool(space.fits(w_opt)),
    }


def write_report(out: Path, summary: dict[str, Any], log) -> None:
    from mixtures.search_report import chart, format_report

    atomic_write_json(out / "search.json", summary)
    text = format_report(summary)
    (out / "search.md").write_text(text + "\n")
    chart(summary, out / "search.png")
    log(text)


def run_validation(
    space: Space, cfg: MixtureSearchConfig, out: Path, w_opt: np.ndarray, tokens: int, eval_specs: list[str],
    objective: tuple[str, ...], log,
) -> dict[str, Any]:  # fmt: skip
    """The optimum, natural and uniform at the next scale, paired by seed (workflows/ablate.py)."""
    vdir = out / "validate"
    (vdir / "mixtures").mkdir(parents=True, exist_ok=True)
    arms = {"natural": space.p, "uniform": np.full(len(space.p), 1 / len(space.p)), "optimum": w_opt}
    paths = []
    for name, w in arms.items():
        path = vdir / "mixtures" / f"{name}.yaml"
        path.write_text(
            space.recipe_yaml(
                w, name, tokens, "# Written by `python -m workflows mixture-search --validate`\n"
            )
        )
        paths.append(str(path))
    model = json.dumps(cfg.transfer.model_overrides)
    opts = _opts(
        vdir / "ablation", cfg, cfg.transfer.seeds, (f"model.overrides={model}",), baseline="natural"
    )
    summary = ablate.ablate(paths, opts, eval_specs, log)
    from scipy import stats

    per_seed = {
        a: [float(np.mean([summary["arms"][a]["bpb"][e]["values"][k] for e in objective])) for k in range(len(summary["seeds"]))]
        for a in arms
    }  # fmt: skip
    out_ = {"tokens": tokens, "model_overrides": cfg.transfer.model_overrides, "seeds": summary["seeds"],
            "objective_per_seed": per_seed, "ablation": str(vdir / "ablation" / "ablation.md"), "vs": {}}  # fmt: skip
    for other in ("natural", "uniform"):
        d = [a - b for a, b in zip(per_seed["optimum"], per_seed[other], strict=True)]
        p = float(stats.ttest_rel(per_seed["optimum"], per_seed[other]).pvalue) if np.std(d) > 0 else None
        out_["vs"][other] = {"mean_diff": float(np.mean(d)), "diffs": d, "p": p,
                             "optimum_better_every_seed": all(x < 0 for x in d)}  # fmt: skip
    return out_


# ------------------------------------------------------------------ command line


def add_arguments(p: argparse.ArgumentParser) -> None:
    from core.cli import add_config_args

    p.add_argument("recipe", help="recipe YAML whose phase weights to search (its sources tokenized)")
    p.add_argument("--output", required=True, metavar="DIR", help="search folder (a rerun resumes)")
    p.add_argument("--eval", action="append", default=[], metavar="NAME=PATH",
                   help="held-out, decontaminated text every proxy is scored on (repeatable; fixed before the search)")  # fmt: skip
    add_config_args(p, "workflows/search.py, MixtureSearchConfig", "search.swarm.proxies=32")
    p.add_argument("--budget", type=float, default=None, metavar="CORE_HOURS",
                   help="refuse to start when the estimated cost is higher")  # fmt: skip
    p.add_argument("--validate", action="store_true",
                   help="also train the optimum, natural and uniform at >= 4x tokens on a larger model, >= 3 seeds")  # fmt: skip
    p.add_argument(
        "--dry-run", action="store_true", help="check the inputs and print the cost; train nothing"
    )


def run(args: argparse.Namespace) -> int:
    """exit 0 done (recommended or not: see search.md), 1 a proxy failed (rerun to resume), 2 bad input."""
    if args.budget is not None and not (0 < args.budget < math.inf):
        raise InputError(f"--budget must be a number of core-hours > 0, got {args.budget}")
    cfg = MixtureSearchConfig.load(args.config, args.overrides)
    try:
        s = mixture_search(args.recipe, args.output, cfg, args.eval, args.budget, args.validate, args.dry_run)
    except StepFailed as e:
        print(f"error: {e} (rerun to resume)", file=sys.stderr)
        return 1 if e.status != 2 else 2
    if not args.dry_run and not s["recommended"]:
        print(
            "\nNO RECOMMENDATION: the noise gate failed (search.md); law-optimum.yaml is written for inspection only"
        )
    return 0
