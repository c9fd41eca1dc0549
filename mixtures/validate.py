"""The one check of a recipe against its sources' token shards, before any work starts.

`check_sources(recipe)` is what `MixtureSampler`, `python -m mixtures plan` and the trainer (before its
process group starts) all call, so a recipe the trainer would refuse is refused by each of them with the
same message. It reads only each source's `manifest.json` and stats the files it lists (no shard is
opened), so it costs milliseconds even for thousands of shards:

- a source drawn from by some phase has a `shards` folder holding a readable `manifest.json`;
- the recipe's `select` of a source is the selection its shards were tokenized with (a recipe that says
  `quality: ">= 0.6"` over shards made with `>= 0.4` trains on data other than the one it describes);
  shards made with a percentile (`top 30%`) match it, or the plain selection it resolved to (the
  manifest's `resolved_select`), which selects the same documents. Languages compare as languages
  (`same_selection`): `lang: en` is the selection `--select lang=eng` made, `[deu, fra]` is
  `[fra, deu]`, `zh` is `cmn`; a script is part of the language (`srp` is not `srp_Latn`);
- every `.bin`/`.idx` the manifest lists exists, and each `.bin` has the size the manifest recorded
  (a truncated or missing shard is found here, not by a rank at step 4,000);
- all sources were tokenized with the same tokenizer (sha256 of its file);
- no two drawn sources read the same shard folder, however it is written (a trailing slash, `..`, a
  symlink, another mount of it). One folder holds one manifest, so one selection: under two names its
  documents would be capped twice (each name's `max_epochs` against the same tokens, so a cap of 1 lets
  them be seen twice), and the held-out split, which is per source, would hold out of one name documents
  the other trains on. Refused rather than merged: the sampler's exact per-source quotas and cursors
  are per name, and a recipe that means "more of this data" says so with one source and a larger weight.
  A copy of the folder is found too: two manifests listing the same non-empty `.bin` files (sha256).

`plan` runs before tokenizing too: with `require_shards=False` a source without `shards` or without a
manifest yet is left out of the checks (the plan estimates it from its documents and says so), while a
manifest that exists is held to every check above.

A `shards` folder on an object store (`s3://…`) is checked the same way from its `manifest.json` and one
listing of the folder (sizes), without reading a shard: the trainer fetches them later through its node's
shard cache (tokens/shard_cache.py), which checks each file's sha256 before use.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.errors import ConfigError
from core.languages import LanguageCodeError, split_code
from core.selectors import LANG_COLUMN, parse_selectors
from core.storage import is_object_store, join, open_store
from mixtures.recipe import Recipe, RecipeError
from tokens.manifest import ManifestError, parse_manifest


def drawn_sources(recipe: Recipe) -> list[str]:
    """Sources some phase draws from (weight > 0), in recipe order. A phase weighted by tokens and not
    resolved yet draws from every source (its weights come from all of their counts)."""
    return [s for s in recipe.sources if any(ph.unresolved or s in ph.weights for ph in recipe.phases)]


def check_sources(recipe: Recipe, require_shards: bool = True) -> dict[str, dict[str, Any]]:
    """Each drawn source's manifest, after the checks of the module docstring; RecipeError naming the key."""
    where = recipe.path or recipe.name
    _check_distinct_folders(where, recipe)
    manifests: dict[str, dict[str, Any]] = {}
    for name in drawn_sources(recipe):
        src = recipe.sources[name]
        if src.shards is None or not has_manifest(src.shards):
            if not require_shards:
                continue
            if src.shards is None:
                raise RecipeError(f"{where}: sources.{name} has no `shards` folder; tokenize it first")
            raise RecipeError(
                f"{where}: sources.{name}.shards: no manifest.json in {src.shards} "
                "(run `python -m tokens tokenize` first)"
            )
        manifest = _read_manifest(where, name, src.shards)
        if src.select and not any(
            same_selection(src.select_spec(), manifest.get(k)) for k in ("select", "resolved_select")
        ):
            raise RecipeError(
                f"{where}: sources.{name}.select is {src.select_spec()} but {src.shards} was "
                f"tokenized with {manifest.get('select')}; re-tokenize or fix the recipe"
            )
        _check_files(where, name, src.shards, manifest)
        manifests[name] = manifest
    _check_distinct_shards(where, recipe, manifests)
    tokenizers = {n: m["tokenizer"].get("sha256") for n, m in manifests.items()}
    if len(set(tokenizers.values())) > 1:
        detail = ", ".join(f"{n}: {str(h)[:12]}" for n, h in tokenizers.items())
        raise RecipeError(f"{where}: sources were tokenized with different tokenizers ({detail})")
    return manifests


def _language(value: Any) -> Any:
    """A language code as (ISO 639-3, script or None), the form core/languages.py's `split_code` reads
    every spelling into (`en`, `eng` -> ("eng", None); `eng_Latn` -> ("eng", "Latn")); anything else
    (null, a word that is no code) as itself, so it still compares with its own spelling."""
    if not isinstance(value, str):
        return value
    try:
        return split_code(value)
    except LanguageCodeError:
        return ("", value)


def _selection_key(spec: Any) -> Any:
    """A `select` mapping in the form two spellings of one selection share: each `lang` condition that
    names codes (`==`, a list, `!=`) as the set of languages it names; every other condition as written.

    Only the spelling is normalised, never the meaning: `eng` (any script) and `eng_Latn` (the Latin
    script only) stay different selections. Documents carry the script of their text, and for
    languages written in two scripts (Serbian, Uzbek, Punjabi) the two select different documents;
    a recipe that said one over shards made with the other would describe other data than it trains on,
    which is what this check is for. (core/languages.py has no function for comparing two selections,
    only for testing a document's code against one: this one is kept here, next to its one caller.)"""
    if not isinstance(spec, dict):
        return spec
    out: dict[Any, Any] = {}
    for column, cond in spec.items():
        out[column] = cond
        if column != LANG_COLUMN:
            continue
        try:
            sels = parse_selectors({column: cond}, where="select")
        except ConfigError:  # not a selection this project writes: compared as written
            continue
        if all(s.op in ("==", "!=", "in") for s in sels):
            out[column] = frozenset(
                (
                    "!=" if s.op == "!=" else "in",
                    frozenset(map(_language, s.value if s.op == "in" else [s.value])),
                )
                for s in sels
            )
    return out


def same_selection(recipe_select: dict[str, Any], shards_select: Any) -> bool:
    """Whether a recipe source's `select` is the selection its shards were tokenized with (a manifest's
    `select` or `resolved_select`), languages compared as languages (`_selection_key`)."""
    return shards_select is not None and _selection_key(recipe_select) == _selection_key(shards_select)


def has_manifest(shards: Path | str) -> bool:
    """Whether the shards folder (local, or an object-store URI) holds a manifest.json yet."""
    manifest = join(shards, "manifest.json")
    try:
        return open_store(manifest).exists(manifest)
    except OSError as e:  # an unreachable store is not "not tokenized yet"
        raise RecipeError(f"cannot read {manifest}: {e}") from None


def read_manifest(shards: Path | str) -> dict[str, Any]:
    """A shards folder's manifest.json (local or on an object store), parsed and checked: its file names,
    hashes and sizes come from data and choose paths (tokens/manifest.py); ManifestError names the field."""
    path = join(shards, "manifest.json")
    return parse_manifest(open_store(path).read_bytes(path), path).model_dump()


def _folder_identity(path: Path | str) -> tuple:
    """The same for every spelling of one folder: the device and inode where it exists (symlinks, `..`,
    a trailing slash, a second mount), else the path with symlinks and `..` resolved. An object-store
    URI is itself (recipe.py already dropped its trailing slash)."""
    if is_object_store(path):
        return ("uri", str(path))
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return ("path", real)
    return ("inode", st.st_dev, st.st_ino)


def _check_distinct_folders(where: Any, recipe: Recipe) -> None:
    seen: dict[tuple, str] = {}
    for name in drawn_sources(recipe):
        shards = recipe.sources[name].shards
        if shards is None:
            continue
        key = _folder_identity(shards)
        first = seen.setdefault(key, name)
        if first != name:
            raise RecipeError(
                f"{where}: sources.{first}.shards ({recipe.sources[first].shards}) and sources.{name}.shards "
                f"({shards}) are the same folder ({os.path.realpath(shards)}): one set of shards under two "
                f"names would be capped twice and drawn as two streams; use one source (weights add up), "
                f"or tokenize the other selection into its own folder"
            )


def _check_distinct_shards(where: Any, recipe: Recipe, manifests: dict[str, dict[str, Any]]) -> None:
    """The same shards copied into a second folder: two drawn sources whose manifests list the same
    non-empty `.bin` files (sha256, recorded by tokenize) hold the same documents. Only the whole set:
    sources selecting overlapping documents into shards of their own (the demo's `web` and its subset
    `web_hq`) can share a file whose every document passes both selections, and that overlap is the point."""
    owner: dict[frozenset, str] = {}
    for name, manifest in manifests.items():
        bins = frozenset(
            f.get("bin_sha256") for f in manifest["files"] if f.get("documents") and f.get("bin_sha256")
        )
        if not bins:
            continue  # no documents: nothing drawn twice
        first = owner.setdefault(bins, name)
        if first != name:
            raise RecipeError(
                f"{where}: sources.{first} and sources.{name} hold the same shards ({recipe.sources[first].shards} "
                f"and {recipe.sources[name].shards}: every .bin has the same sha256): one set of shards under "
                "two names would be capped twice; use one source (weights add up)"
            )


def _read_manifest(where: Any, name: str, shards: Path | str) -> dict[str, Any]:
    path = join(shards, "manifest.json")
    try:
        return read_manifest(shards)
    except ManifestError as e:  # names the manifest and the field
        raise RecipeError(f"{where}: sources.{name}.shards: {e}") from None
    except OSError as e:
        raise RecipeError(f"{where}: sources.{name}.shards: cannot read {path} ({e})") from None


def _check_files(where: Any, name: str, shards: Path | str, manifest: dict[str, Any]) -> None:
    try:  # one listing (an object store) or a stat per file: no shard is read
        sizes = open_store(shards).sizes(str(shards))
    except OSError as e:
        raise RecipeError(f"{where}: sources.{name}.shards: cannot list {shards}: {e}") from None
    for entry in manifest["files"]:
        for key in ("bin", "idx"):
            if entry[key] not in sizes:
                raise RecipeError(
                    f"{where}: sources.{name}.shards: {join(shards, entry[key])} is listed in manifest.json "
                    "but missing"
                )
        size, want = sizes[entry["bin"]], entry.get("bin_bytes")
        if want is not None and size != want:
            raise RecipeError(
                f"{where}: sources.{name}.shards: {join(shards, entry['bin'])} has {size} bytes, manifest.json "
                f"records {want} (truncated or replaced; re-tokenize)"
            )
