"""Mixture recipes: YAML -> pydantic models (core.config) validated on load -> the resolved recipe.

A recipe names its sources, splits a total token budget into phases, and weights the sources in
each phase. Every error names the recipe file, the key and what is allowed. Relative paths are
resolved against the recipe file's folder, so a recipe runs from any working directory.

Two steps. `RecipeSpec` (and `SourceSpec`, `PhaseSpec`) is the file as written, loaded with the
project's one config loader (core.config: unknown keys refused, the same coercion as every config,
errors as `RecipeError`, a `core.errors.ConfigError`). `resolve` then turns it into the `Recipe`
the sampler, the plan and the trainer use: shares become exact token counts, paths become absolute,
selectors are parsed. Token counts may be written with a suffix: `400K`, `2.5B`, `15T`.

Every number has a stated finite range (`MAX_TOKENS`, `EPOCHS`, ... below; mixtures/bounds.py), and
every name (the recipe's, a source's, a phase's) is one plain file name (core/names.py), since
`workflows ablate` and mixture search make folders of them: both refused on load, naming the key.

    name: demo
    seed: 1234
    total_tokens: 400_000           # the whole budget, all phases
    max_epochs: 4                   # default cap on repetition of any source (tokens drawn / available)
    bytes_per_token: 4.0            # only to estimate sources that are not tokenized yet (plan)
    sources:
      web:
        shards: ../out/demo/tokens/shards/web   # a `tokenize` output folder (manifest.json), or s3://…
        docs: ../out/demo/extract                # documents the shards were made from (optional)
        select: {lang: en, quality: ">= 0.6"}    # the selection those shards were made with
                                                 # (or `quality: "top 30%"`: core.selectors)
        max_epochs: 2                            # this source's own cap
    phases:
      - name: main
        share: 0.8                  # of total_tokens; or `tokens: N`
        weights: {web: 3, other: 1} # relative; normalised within the phase
      - name: anneal
        share: 0.2
        weights: {web: 1}

Temperature weights (mT5, Xue et al. 2021 §3.1; XLM-R, Conneau et al. 2020 §3.1): a recipe-level
`weights: {by: tokens, temperature: T}` weights every phase that gives no `weights:` of its own by
p_i ∝ n_i^T over all sources, n_i the tokens of source i's shards (manifest.json; the plan estimates
a source not tokenized yet). T = 1 is the natural mixture, T -> 0 uniform; T in [0.001, 1]. A phase with
its own `weights:` keeps them (an anneal phase of chosen sources beside a temperature main phase).
The counts are only known from the shards, so `resolve` leaves such phases unweighted
(`Phase.temperature` set, `weights` empty) and mixtures/draw.py's `resolve_weights`, which the plan
and the sampler both call, fills them in.

    weights: {by: tokens, temperature: 0.3}
    sources:
      deu: {shards: ../out/tokens/shards/deu, select: {lang: deu_Latn}}
      fra: {shards: ../out/tokens/shards/fra, select: {lang: fra_Latn}}
    phases:
      - {name: main, share: 1.0}      # no weights: the temperature's
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, model_validator
from pydantic_core import PydanticCustomError

from core.config import ConfigModel, apply_overrides, build_config, read_yaml_mapping
from core.errors import ConfigError
from core.names import check_file_name
from core.selectors import Selector, parse_selectors, selectors_spec
from core.storage import is_object_store
from mixtures.bounds import between


class RecipeError(ConfigError):
    """A recipe is invalid; the message names the file, the key and the allowed values."""


# ------------------------------------------------------------------ the YAML shape

_MULTIPLIERS = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}

# Every number of a recipe has a stated finite range, checked on load: a value past it is a typo, and
# run as written it overflows far from the key (`max_epochs: 1e308` made `floor(cap * pool)` raise
# OverflowError in the plan; `bytes_per_token: 1e-320` made the estimate infinite).
MAX_TOKENS = 10**15
"""A budget or phase of at most 1,000T tokens (Llama 3 trained on 15T): 6·N·D stays a finite float."""
MAX_SEED = 2**63 - 1
"""Seeds fit int64: numpy's SeedSequence, the trainer and JSON readers (core/safe_json.py) all take it."""
EPOCHS = (1e-6, 1e6)
"""max_epochs: from a millionth of a source to a million passes over it."""
BYTES_PER_TOKEN = (0.1, 100.0)
"""UTF-8 bytes per token: byte-level BPE gives 1 to ~10; the ends leave room for odd tokenizers."""
WEIGHT = (1e-9, 1e9)
"""A phase's relative weights: a ratio of 1e18 between two sources is more than any phase can draw
(a budget is at most 1e15 tokens); normal floats, so no precision is lost in subnormals."""
SHARE = (1e-9, 1.0)
"""A phase's share of total_tokens (a share that rounds to 0 tokens is refused on load, `resolve`)."""
TEMPERATURE = (1e-3, 1.0)
"""T of the weights by tokens, p_i ∝ n_i^T: T > 1 would favour the largest source beyond its natural
share, T <= 0 invert or flatten it completely, neither what a temperature over languages is for (mT5
uses 0.3); at T = 1e-3 the mixture is uniform to 4% for any corpus (n^T <= 1e15^0.001 = 1.035)."""


def parse_token_count(value: Any) -> Any:
    """'400K', '2.5B', '15T' -> integers (token budgets are usually written this way).

    Other strings that read as numbers are numbers (core.config's rule); pydantic's integer check
    then refuses a fractional one. Booleans and words are refused here, with the forms allowed.
    """
    if isinstance(value, bool):
        raise PydanticCustomError("token_count", "must be an integer or a count like '2.5B', '400K'")
    if not isinstance(value, str):
        return value
    s = value.strip().replace("_", "").upper()
    try:
        x = float(s[:-1]) * _MULTIPLIERS[s[-1]] if s and s[-1] in _MULTIPLIERS else float(s)
    except ValueError:
        raise PydanticCustomError(
            "token_count", "must be an integer or a count like '2.5B', '400K'"
        ) from None
    if not math.isfinite(x):  # round(inf) raises OverflowError: '1e400K' is refused here, by name
        raise PydanticCustomError("token_count", "must be a finite count like '2.5B', '400K'")
    return round(x) if s[-1] in _MULTIPLIERS else x


def _not_boolean(value: Any) -> Any:
    """pydantic's lax mode reads true as 1.0; a weight or a share of `true` is a mistake, not a number."""
    if isinstance(value, bool):
        raise PydanticCustomError("number", "must be a number, not true or false")
    return value


TokenCount = Annotated[between(int, 1, MAX_TOKENS), BeforeValidator(parse_token_count)]
Seed = Annotated[between(int, 0, MAX_SEED), BeforeValidator(parse_token_count)]
Epochs = Annotated[between(float, *EPOCHS), BeforeValidator(_not_boolean)]
BytesPerToken = Annotated[between(float, *BYTES_PER_TOKEN), BeforeValidator(_not_boolean)]
Share = Annotated[between(float, *SHARE), BeforeValidator(_not_boolean)]
Weight = Annotated[between(float, *WEIGHT), BeforeValidator(_not_boolean)]
Temperature = Annotated[between(float, *TEMPERATURE), BeforeValidator(_not_boolean)]


def check_name(key: str, value: str) -> None:
    """A name a recipe gives (its own, a source's, a phase's) is one plain file name (core/names.py):
    `workflows ablate` makes a run folder of the recipe's name, mixture search and tokenize a shards
    folder of a source's; one rule for every name, so none of them can leave a folder when it becomes
    a path, now or later. RecipeError names the key."""
    try:
        check_file_name(value, folder="its output folder")
    except ValueError as e:
        raise RecipeError(f"{key} {e}") from None


class SourceSpec(ConfigModel):
    """One entry of `sources:` as written; paths are resolved against the recipe file later."""

    shards: str | None = None
    """folder with manifest.json + part-*.bin/.idx (curation `tokenize` output), or its `s3://` URI"""
    docs: str | None = None
    """documents folder (Parquet) the shards come from; with `select`, what `tokenize` should read"""
    select: dict[str, Any] | None = None
    """column: condition pairs (core.selectors)"""
    max_epochs: Epochs | None = None
    """this source's cap on tokens drawn / tokens available; default: the recipe's"""


class PhaseSpec(ConfigModel):
    """One entry of `phases:` as written."""

    name: str
    share: Share | None = None
    """fraction of total_tokens, in [1e-9, 1]; or `tokens`"""
    tokens: TokenCount | None = None
    weights: dict[str, Weight] | None = None
    """source name -> relative weight (> 0); sources not listed are not drawn in this phase.
    Omitted: the recipe-level `weights: {by: tokens, temperature: T}` over all sources."""


class WeightsSpec(ConfigModel):
    """The recipe-level `weights:`: source weights from the sources' token counts at a temperature."""

    by: Literal["tokens"]
    """what the weights are proportional to (a power of): the tokens of each source's shards"""
    temperature: Temperature
    """T in [0.001, 1]: p_i ∝ n_i^T; 1 = natural (as much as there is), towards 0 = uniform"""


class RecipeSpec(ConfigModel):
    """A recipe file as written: types and cross-references checked, nothing resolved yet."""

    name: str | None = None
    """default: the recipe file's name without .yaml"""
    seed: Seed = 0
    total_tokens: TokenCount
    """the whole budget, all phases"""
    max_epochs: Epochs = 4.0
    """default cap on repetition of any source (tokens drawn / tokens available)"""
    bytes_per_token: BytesPerToken = 4.0
    """only to estimate sources that are not tokenized yet (plan)"""
    sources: dict[str, SourceSpec]
    phases: tuple[PhaseSpec, ...]
    weights: WeightsSpec | None = None
    """source weights by token count at a temperature, for the phases that give none"""
    train: dict[str, Any] | None = None
    """trainer overrides (`optimizer.lr: 1e-3`) for `python -m workflows ablate`; nothing else reads it"""

    @model_validator(mode="after")
    def _check(self) -> RecipeSpec:
        self._check_sources()
        self._check_phases()
        if self.weights is not None and all(ph.weights is not None for ph in self.phases):
            raise RecipeError(
                "weights: {by: tokens, ...} weights only phases without `weights:` of their own, and "
                "every phase has them; drop it or a phase's weights"
            )
        return self

    def _check_sources(self) -> None:
        if self.name is not None:
            check_name("name", self.name)
        if not self.sources:
            raise RecipeError(
                "sources must be a non-empty mapping of name -> {shards, docs, select, max_epochs}"
            )
        for name, src in self.sources.items():
            check_name("sources: a source name", name)
            if src.shards is None and src.docs is None:
                raise RecipeError(
                    f"sources.{name} needs `shards` (a tokenize output folder) or `docs` (documents)"
                )
            for key in ("shards", "docs"):
                if getattr(src, key) == "":
                    raise RecipeError(f"sources.{name}.{key} must be a path string, got ''")

    def _check_phases(self) -> None:
        if not self.phases:
            raise RecipeError("phases must be a non-empty list of {name, share | tokens, weights}")
        names: set[str] = set()
        for i, ph in enumerate(self.phases):
            check_name(f"phases[{i}].name", ph.name)
            if ph.name in names:
                raise RecipeError(f"phases[{i}].name must be unique, got {ph.name!r} twice")
            names.add(ph.name)
            where = f"phases.{ph.name}"
            if (ph.share is None) == (ph.tokens is None):
                raise RecipeError(f"{where} needs exactly one of `share` (of total_tokens) or `tokens`")
            if ph.weights is None and self.weights is None:
                raise RecipeError(
                    f"{where}.weights: missing; give a mapping of source -> weight, or a recipe-level "
                    "`weights: {by: tokens, temperature: T}` for the phases that give none"
                )
            if ph.weights is None:
                continue
            if not ph.weights:
                raise RecipeError(f"{where}.weights must be a non-empty mapping of source -> weight")
            for src in ph.weights:
                if src not in self.sources:
                    raise RecipeError(
                        f"{where}.weights.{src}: unknown source; allowed: {', '.join(sorted(self.sources))}"
                    )


# ------------------------------------------------------------------ the resolved recipe


@dataclass(kw_only=True, frozen=True, slots=True)
class Source:
    name: str
    shards: Path | str | None = None
    """Folder with manifest.json + part-*.bin/.idx (curation `tokenize` output): a local Path, or an
    object-store URI as a string (`s3://…`, read through tokens/shard_cache.py)."""
    docs: Path | None = None
    """Documents folder (Parquet) the shards come from; with `select`, what `tokenize` should read."""
    select: tuple[Selector, ...] = ()
    max_epochs: float
    """Cap on tokens drawn / tokens available over the whole recipe."""

    def select_spec(self) -> dict[str, Any]:
        return selectors_spec(self.select)


@dataclass(kw_only=True, frozen=True, slots=True)
class Phase:
    name: str
    tokens: int
    """Tokens of this phase (resolved from `share` when the recipe gave a share)."""
    share: float | None = None
    """As written in the recipe, None when the recipe gave `tokens`."""
    weights: dict[str, float] = field(default_factory=dict)
    """Source name -> relative weight (> 0); sources not listed are not drawn in this phase."""
    temperature: float | None = None
    """Set when the weights are the recipe's by-tokens temperature weights over all sources: empty
    until mixtures/draw.py's `resolve_weights` fills them from the sources' token counts."""

    @property
    def unresolved(self) -> bool:
        return self.temperature is not None and not self.weights

    def fractions(self) -> dict[str, float]:
        if self.unresolved:
            raise RecipeError(
                f"phase {self.name}: weights by tokens are not resolved yet (mixtures.draw.resolve_weights)"
            )
        total = sum(self.weights.values())
        return {k: v / total for k, v in self.weights.items()}


@dataclass(kw_only=True, frozen=True, slots=True)
class Recipe:
    name: str
    path: Path | None
    seed: int
    total_tokens: int
    max_epochs: float
    bytes_per_token: float
    sources: dict[str, Source]
    phases: tuple[Phase, ...]
    temperature: float | None = None
    """The recipe-level `weights: {by: tokens, temperature: T}`'s T; None without one."""
    train: dict[str, Any] = field(default_factory=dict)
    """Trainer overrides of an ablation arm (workflows/ablate.py), as written."""

    def with_total_tokens(self, total: int) -> Recipe:
        """This recipe with another budget, its share phases re-split by the rule of loading it (what
        `--set total_tokens=N` gives, without the file); RecipeError if its token phases do not fit."""
        tokens = phase_tokens(total, self.phases)
        phases = tuple(replace(ph, tokens=t) for ph, t in zip(self.phases, tokens, strict=True))
        return replace(self, total_tokens=total, phases=phases)

    @classmethod
    def load(cls, path: str | Path, overrides: Iterable[str] = ()) -> Recipe:
        """The recipe file, with `key=value` overrides (`--set total_tokens=2e6`, core.config's syntax)
        applied to its data before it is validated; relative paths stay under the file's folder."""
        p = Path(path)
        if not p.is_file():
            raise RecipeError(f"recipe file not found: {p}")
        overrides = list(overrides)
        source = f"{p} (with overrides)" if overrides else str(p)
        try:
            data = read_yaml_mapping(p)
            if overrides:
                data = apply_overrides(data, overrides)
        except ConfigError as e:
            raise RecipeError(str(e)) from None
        return cls.from_dict(data, source=source, base=p.resolve().parent, path=p.resolve())

    @classmethod
    def from_dict(
        cls, data: Any, source: str = "<dict>", base: Path | None = None, path: Path | None = None
    ) -> Recipe:
        """Validate `data` (a recipe's YAML content) and resolve it; relative paths are under `base`."""
        try:
            spec = build_config(RecipeSpec, data, source)
        except ConfigError as e:  # build_config's message already starts with `source`
            raise RecipeError(str(e)) from None
        try:
            return resolve(spec, base or Path.cwd(), path)
        except ConfigError as e:
            raise RecipeError(f"{source}: {e}") from None


def resolve(spec: RecipeSpec, base: Path, path: Path | None) -> Recipe:
    """The recipe a sampler runs: paths under `base`, selectors parsed, phases in exact token counts."""
    sources = {
        name: Source(
            name=name,
            shards=_shards(s.shards, base),
            docs=_path(s.docs, base),
            select=parse_selectors(s.select, where=f"sources.{name}.select"),
            max_epochs=s.max_epochs if s.max_epochs is not None else spec.max_epochs,
        )
        for name, s in spec.sources.items()
    }
    temperature = spec.weights.temperature if spec.weights is not None else None
    split = phase_tokens(spec.total_tokens, spec.phases)
    for ph, tokens in zip(spec.phases, split, strict=True):
        if tokens < 1:  # `share: 1e-9` of a small budget: a phase that draws nothing, said nowhere
            raise RecipeError(
                f"phases.{ph.name}.share {ph.share:g} of total_tokens {spec.total_tokens:,} is 0 tokens: "
                "raise the share or the budget, or drop the phase"
            )
    phases = tuple(
        Phase(name=ph.name, tokens=tokens, share=ph.share, weights=dict(ph.weights))
        if ph.weights is not None
        else Phase(name=ph.name, tokens=tokens, share=ph.share, temperature=temperature)
        for ph, tokens in zip(spec.phases, split, strict=True)
    )
    return Recipe(
        name=spec.name if spec.name is not None else (path.stem if path else "recipe"),
        path=path,
        seed=spec.seed,
        total_tokens=spec.total_tokens,
        max_epochs=spec.max_epochs,
        bytes_per_token=spec.bytes_per_token,
        sources=sources,
        phases=phases,
        temperature=temperature,
        train=dict(spec.train or {}),
    )


def phase_tokens(total: int, phases: Sequence[PhaseSpec | Phase]) -> list[int]:
    """Tokens of each phase: shares are of `total`, rounded down, and the last share phase takes the
    rounding remainder, so the phases add up to the budget exactly; anything else is an error.

    Takes the phases as written (on load) or resolved (`Recipe.with_total_tokens`): a resolved phase
    keeps its `share`, so both split a budget by the same rule."""
    tokens = [ph.tokens if ph.share is None else math.floor(ph.share * total) for ph in phases]
    share_idx = [i for i, ph in enumerate(phases) if ph.share is not None]
    gap = total - sum(tokens)
    if share_idx and 0 <= gap <= len(share_idx):
        tokens[share_idx[-1]] += gap
        gap = 0
    if gap != 0:
        detail = ", ".join(f"{ph.name}={t:,}" for ph, t in zip(phases, tokens, strict=True))
        raise RecipeError(
            f"phases add up to {total - gap:,} tokens ({detail}) but total_tokens is {total:,}; "
            "shares must sum to 1 (with token-count phases taken out)"
        )
    return tokens


def _shards(value: str | None, base: Path) -> Path | str | None:
    """A shards folder: an object-store URI as written (no trailing slash), else a path under `base`."""
    if value is not None and is_object_store(value):
        return value.rstrip("/")
    return _path(value, base)


def _path(value: str | None, base: Path) -> Path | None:
    if value is None:
        return None
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).resolve()
