"""Which settings a language is judged by (one job: lookup). `settings_for(code)` reads the language's
own file, else its macrolanguage's in the same script, else the file of the code it shares its written
language with, else default.yaml; `lid_threshold_for(code, scheme)` adds the models/ table measured with
the model that runs. Files and tables are loaded once per process (cached per path); `check_folder`
loads a whole folder so a bad file fails when the config loads."""

from __future__ import annotations

import functools
from pathlib import Path

from core.config import build_config, read_yaml_mapping
from core.errors import ConfigError
from core.languages import MACROLANGUAGE, is_canonical, split_code
from curation.languages.schema import DEFAULT, FOLDER, MODELS, LanguageSettings, ModelThresholds


def load_settings(path: str | Path) -> LanguageSettings:
    """One language file, validated; a ConfigError names the file and the key. Its `language` must
    be its file name, so a copied file cannot silently stand for another language."""
    path = Path(path)
    settings = build_config(LanguageSettings, read_yaml_mapping(path), str(path))
    if settings.language != path.stem:
        raise ConfigError(f"{path}: language is {settings.language!r} but the file is named {path.name}")
    return settings


@functools.lru_cache(maxsize=512)
def _cached(path: str) -> LanguageSettings:
    return load_settings(path)


SAME_WRITTEN_LANGUAGE = {"tgl": "fil"}
"""Codes that name one written language on the web under two ISO 639-3 codes, not a macrolanguage
and its member: lid.176's `tl` is Tagalog (`tgl`), and GlotLID and FineWeb-2 label the same pages
Filipino (`fil_Latn`, the standard form of Tagalog), so a `tgl_Latn` document takes fil_Latn.yaml
where no tgl_Latn.yaml is given. Codes stay as each model gives them; only the settings are shared."""


def settings_for(code: str, folder: str | Path = FOLDER) -> LanguageSettings:
    """The settings of language `code` (`rus_Cyrl`): its own file, else its macrolanguage's in the
    same script, else the file of the code it shares its written language with (SAME_WRITTEN_LANGUAGE),
    else default.yaml (the `language` of what comes back says which). Cached per file."""
    if not is_canonical(code):
        raise ConfigError(f"language code must be xxx_Scrp (e.g. rus_Cyrl), got {code!r}")
    folder = Path(folder)
    lang, script = split_code(code)
    same = SAME_WRITTEN_LANGUAGE.get(lang, "")
    for candidate in (code, f"{MACROLANGUAGE.get(lang, '')}_{script}", f"{same}_{script}"):
        path = folder / f"{candidate}.yaml"
        if path.is_file():
            return _cached(str(path.resolve()))
    return _cached(str((folder / f"{DEFAULT}.yaml").resolve()))


def check_folder(folder: str | Path, key: str) -> None:
    """A settings folder a config names: it exists, has default.yaml, and every file in it loads (a
    ConfigError naming `key` and the file), so a bad file fails on load, before Spark starts."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{key}: no such folder {str(folder)!r}")
    if not (folder / f"{DEFAULT}.yaml").is_file():
        raise ConfigError(
            f"{key}: {folder} has no {DEFAULT}.yaml (the settings of every language without a file)"
        )
    for path in sorted(folder.glob("*.yaml")):
        try:
            _cached(str(path.resolve()))
        except ConfigError as e:
            raise ConfigError(f"{key}: {e}") from None
    for path in sorted((folder / MODELS).glob("*.yaml")):
        try:
            _table(str(path.resolve()))
        except ConfigError as e:
            raise ConfigError(f"{key}: {e}") from None


def lowest_lid_threshold(folder: str | Path) -> float:
    """The lowest LID threshold of any file in the folder, or of its model tables (`models/`): what a
    pre-check may drop below, at most."""
    files = [_cached(str(p.resolve())).lid_threshold for p in Path(folder).glob("*.yaml")]
    tables = [
        t for p in sorted((Path(folder) / MODELS).glob("*.yaml")) for t in _table(str(p)).thresholds.values()
    ]
    return min(files + tables)


@functools.cache
def _table(path: str) -> ModelThresholds:
    table = build_config(ModelThresholds, read_yaml_mapping(path), path)
    if table.model != Path(path).stem:
        raise ConfigError(f"{path}: model is {table.model!r} but the file is named {Path(path).name}")
    return table


def model_thresholds(scheme: str, folder: str | Path = FOLDER) -> dict[str, float]:
    """The thresholds measured with a model of `scheme` (`models/<scheme>.yaml`), {} without a table."""
    path = Path(folder) / MODELS / f"{scheme}.yaml"
    return dict(_table(str(path.resolve())).thresholds) if path.is_file() else {}


def lid_threshold_for(code: str, scheme: str, folder: str | Path = FOLDER) -> float:
    """The threshold `code` is judged by under a model of `scheme`: its settings file's `lid_threshold`,
    or the threshold measured with that model (`model_thresholds`) where that is lower. The files'
    values are FineWeb-2's, set on GlotLID's probabilities; where clean prose in the language
    scores lower under the model we run, FineWeb-2's value would drop it, so the measured one is
    used. Never higher: FineWeb-2's is the bound that web text (not clean prose) was judged by."""
    own = settings_for(code, folder).lid_threshold
    measured = model_thresholds(scheme, folder).get(code)
    return own if measured is None else min(own, measured)
