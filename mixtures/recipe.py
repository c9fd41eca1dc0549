"""Mixture recipes: YAML (yaml.safe_load) -> typed frozen dataclasses, validated on load.

A recipe names its sources, splits a total token budget into phases, and weights the sources in
each phase. Every error names the recipe file, the key and what is allowed. Relative paths are
resolved against the recipe file's folder, so a recipe runs from any working directory.

    name: demo
    seed: 1234
    total_tokens: 400_000           # the whole budget, all phases
    max_epochs: 4                   # default cap on repetition of any source (tokens drawn / available)
    bytes_per_token: 4.0            # only to estimate sources that are not tokenized yet (plan)
    sources:
      web:
        shards: ../out/demo/tokens/shards/web   # a `tokenize` output folder (manifest.json)
        docs: ../out/demo/extract                # documents the shards were made from (optional)
        select: {lang: en, quality: ">= 0.6"}    # the selection those shards were made with
        max_epochs: 2                            # this source's own cap
    phases:
      - name: main
        share: 0.8                  # of total_tokens; or `tokens: N`
        weights: {web: 3, other: 1} # relative; normalised within the phase
      - name: anneal
        share: 0.2
        weights: {web: 1}
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.errors import ConfigError
from core.selectors import Selector, SelectorError, parse_selectors


class RecipeError(ConfigError):
    """A recipe is invalid; the message names the file, the key and the allowed values."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Source:
    name: str
    shards: Path | None = None
    """Folder with manifest.json + part-*.bin/.idx (curation `tokenize` output)."""
    docs: Path | None = None
    """Documents folder (Parquet) the shards come from; with `select`, what `tokenize` should read."""
    select: tuple[Selector, ...] = ()
    max_epochs: float
    """Cap on tokens drawn / tokens available over the whole recipe."""

    def select_spec(self) -> dict[str, Any]:
        return {s.column: s.to_spec() for s in self.select}


@dataclass(kw_only=True, frozen=True, slots=True)
class Phase:
    name: str
    tokens: int
    """Tokens of this phase (resolved from `share` when the recipe gave a share)."""
    share: float | None = None
    """As written in the recipe, None when the recipe gave `tokens`."""
    weights: dict[str, float] = field(default_factory=dict)
    """Source name -> relative weight (> 0); sources not listed are not drawn in this phase."""

    def fractions(self) -> dict[str, float]:
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

    @classmethod
    def load(cls, path: str | Path) -> Recipe:
        p = Path(path)
        if not p.is_file():
            raise RecipeError(f"recipe file not found: {p}")
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            raise RecipeError(f"{p}: not valid YAML: {e}") from None
        return cls.from_dict(data, source=str(p), base=p.resolve().parent, path=p.resolve())

    @classmethod
    def from_dict(
        cls, data: Any, source: str = "<dict>", base: Path | None = None, path: Path | None = None
    ) -> Recipe:
        try:
            return _parse(data, base or Path.cwd(), path)
        except (RecipeError, SelectorError) as e:
            raise RecipeError(f"{source}: {e}") from None


TOP_KEYS = ("name", "seed", "total_tokens", "max_epochs", "bytes_per_token", "sources", "phases")
SOURCE_KEYS = ("shards", "docs", "select", "max_epochs")
PHASE_KEYS = ("name", "share", "tokens", "weights")


def _keys(where: str, data: Any, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict:
    if not isinstance(data, dict):
        raise RecipeError(f"{where or 'recipe'} must be a mapping, got {type(data).__name__}")
    for k in data:
        if k not in allowed:
            raise RecipeError(f"unknown key {where + '.' if where else ''}{k}; allowed: {', '.join(allowed)}")
    for k in required:
        if k not in data:
            raise RecipeError(f"missing key {where + '.' if where else ''}{k}")
    return data


def _int(key: str, v: Any, minimum: int = 0) -> int:
    if isinstance(v, str):
        v = _suffixed(key, v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise RecipeError(f"{key} must be an integer >= {minimum} (or like '2.5B'), got {v!r}")
    return v


def _suffixed(key: str, s: str) -> int | str:
    """'400K', '2.5B', '15T' -> integers (tokens are usually written this way)."""
    mult = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
    s2 = s.strip().replace("_", "").upper()
    if s2 and s2[-1] in mult:
        try:
            return round(float(s2[:-1]) * mult[s2[-1]])
        except ValueError:
            pass
    return s


def _num(key: str, v: Any, positive: bool = True) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or (positive and not v > 0) or math.isnan(v):
        raise RecipeError(f"{key} must be a number{' > 0' if positive else ''}, got {v!r}")
    return float(v)


def _path(key: str, v: Any, base: Path) -> Path:
    if not isinstance(v, str) or not v:
        raise RecipeError(f"{key} must be a path string, got {v!r}")
    p = Path(v).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _parse(data: Any, base: Path, path: Path | None) -> Recipe:
    d = _keys("", data, TOP_KEYS, required=("sources", "phases", "total_tokens"))
    name = d.get("name", path.stem if path else "recipe")
    if not isinstance(name, str):
        raise RecipeError(f"name must be a string, got {name!r}")
    seed = _int("seed", d.get("seed", 0))
    total = _int("total_tokens", d["total_tokens"], minimum=1)
    cap = _num("max_epochs", d.get("max_epochs", 4.0))
    bpt = _num("bytes_per_token", d.get("bytes_per_token", 4.0))

    raw_sources = d["sources"]
    if not isinstance(raw_sources, dict) or not raw_sources:
        raise RecipeError("sources must be a non-empty mapping of name -> {shards, docs, select, max_epochs}")
    sources: dict[str, Source] = {}
    for sname, sd in raw_sources.items():
        where = f"sources.{sname}"
        if not isinstance(sname, str) or not sname or "/" in sname:
            raise RecipeError(f"source names must be plain strings, got {sname!r}")
        sd = _keys(where, sd, SOURCE_KEYS)
        if "shards" not in sd and "docs" not in sd:
            raise RecipeError(f"{where} needs `shards` (a tokenize output folder) or `docs` (documents)")
        sources[sname] = Source(
            name=sname,
            shards=_path(f"{where}.shards", sd["shards"], base) if "shards" in sd else None,
            docs=_path(f"{where}.docs", sd["docs"], base) if "docs" in sd else None,
            select=parse_selectors(sd.get("select"), where=f"{where}.select"),
            max_epochs=_num(f"{where}.max_epochs", sd.get("max_epochs", cap)),
        )

    raw_phases = d["phases"]
    if not isinstance(raw_phases, list) or not raw_phases:
        raise RecipeError("phases must be a non-empty list of {name, share | tokens, weights}")
    parsed: list[dict[str, Any]] = []
    names: set[str] = set()
    for i, pd in enumerate(raw_phases):
        where = f"phases[{i}]"
        pd = _keys(where, pd, PHASE_KEYS, required=("name", "weights"))
        pname = pd["name"]
        if not isinstance(pname, str) or not pname or pname in names:
            raise RecipeError(f"{where}.name must be a unique non-empty string, got {pname!r}")
        names.add(pname)
        where = f"phases.{pname}"
        if ("share" in pd) == ("tokens" in pd):
            raise RecipeError(f"{where} needs exactly one of `share` (of total_tokens) or `tokens`")
        weights = pd["weights"]
        if not isinstance(weights, dict) or not weights:
            raise RecipeError(f"{where}.weights must be a non-empty mapping of source -> weight")
        for src, w in weights.items():
            if src not in sources:
                raise RecipeError(
                    f"{where}.weights.{src}: unknown source; allowed: {', '.join(sorted(sources))}"
                )
            _num(f"{where}.weights.{src}", w)
        share = None
        if "share" in pd:
            share = _num(f"{where}.share", pd["share"])
            if share > 1:
                raise RecipeError(f"{where}.share must be in (0, 1], got {share}")
        tokens = _int(f"{where}.tokens", pd["tokens"], minimum=1) if "tokens" in pd else None
        parsed.append({"name": pname, "share": share, "tokens": tokens, "weights": dict(weights)})

    # Shares are of total_tokens, rounded down; the last share phase takes the rounding remainder
    # so the phases add up to the budget exactly.
    for ph in parsed:
        if ph["share"] is not None:
            ph["tokens"] = math.floor(ph["share"] * total)
    share_phases = [ph for ph in parsed if ph["share"] is not None]
    gap = total - sum(ph["tokens"] for ph in parsed)
    if share_phases and 0 <= gap <= len(share_phases):
        share_phases[-1]["tokens"] += gap
        gap = 0
    if gap != 0:
        detail = ", ".join(f"{ph['name']}={ph['tokens']:,}" for ph in parsed)
        raise RecipeError(
            f"phases add up to {total - gap:,} tokens ({detail}) but total_tokens is {total:,}; "
            "shares must sum to 1 (with token-count phases taken out)"
        )
    phases = tuple(
        Phase(
            name=ph["name"],
            tokens=ph["tokens"],
            share=ph["share"],
            weights={k: float(v) for k, v in ph["weights"].items()},
        )
        for ph in parsed
    )
    return Recipe(
        name=name,
        path=path,
        seed=seed,
        total_tokens=total,
        max_epochs=cap,
        bytes_per_token=bpt,
        sources=sources,
        phases=phases,
    )
