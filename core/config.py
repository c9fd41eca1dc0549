"""One config loader for every package: YAML file + dotted overrides -> a typed, validated pydantic model.

Every job's config (extract, dedup, score, train-quality, tokenizer, recipes, the trainer) is a
`ConfigModel`: a frozen pydantic v2 model that refuses unknown keys. `load_config(cls, path,
overrides)` reads the YAML file with `core.safe_yaml` (safe types, no duplicate keys,
bounded size, depth and aliases), applies `section.key=value` overrides (each
value parsed as a YAML scalar, so it gets the type the file would give it), validates, and raises
one `ConfigError` whose message names the file and the dotted key:

    configs/extract.yaml: langid.threshold must be in [0, 1], got 1.5
    configs/dedup.yaml: unknown key linez; allowed: cluster, exact, lines, minhash, output, url

Coercion rules, the same everywhere (pydantic's lax mode, with two exceptions):
- a number written as a string is a number (PyYAML reads `2e-3`, with no dot, as a string);
  an integral float is an integer (`1e6` -> 1000000), any other float is not;
- a list is accepted for a tuple field;
- exceptions: a boolean is never a number, and only `true`/`false` are booleans (`enabled: 1`
  or `enabled: "yes"` is an error, not a guess);
- infinities and NaN are refused in every float field.

Validation that involves more than a type lives in each model's `@model_validator(mode="after")`
and raises `ConfigError` with a message that names its key ("exact.keep must be one of ...").
"""

from __future__ import annotations

import hashlib
import json
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from core.errors import ConfigError
from core.safe_yaml import load_yaml, read_yaml_file

__all__ = [
    "ConfigError",
    "ConfigModel",
    "apply_overrides",
    "build_config",
    "check_at_least",
    "check_choice",
    "check_positive",
    "fingerprint_of",
    "load_config",
    "read_yaml_mapping",
]


T = typing.TypeVar("T", bound="ConfigModel")


class _FieldError(ValueError):
    """A type error found before pydantic's own checks; `key` is relative to the model that raised it."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"{key} {detail}")
        self.key, self.detail = key, detail


class ConfigModel(BaseModel):
    """Base of every config section: frozen, unknown keys refused, errors raised as ConfigError."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
        use_attribute_docstrings=True,
        validate_default=False,
    )

    def __init__(self, /, **data: Any) -> None:
        # Direct construction (MinHashConfig(bands=4)) reports like a loaded file does.
        try:
            super().__init__(**data)
        except ValidationError as e:
            err = ConfigError(format_validation_error(e, type(self)))
            # pydantic calls this __init__ for a nested section too: the parent re-formats the
            # original error under its own key path (format_validation_error).
            err.validation = (e, type(self))
            raise err from None

    @model_validator(mode="before")
    @classmethod
    def _strict_booleans(cls, data: Any) -> Any:
        """pydantic's lax mode reads True as 1 and "yes" as True; neither is what a user meant."""
        if not isinstance(data, dict):
            return data
        for name, value in data.items():
            field = cls.model_fields.get(name) if isinstance(name, str) else None
            if field is None or value is None:
                continue
            kinds = _scalar_kinds(field.annotation)
            if isinstance(value, bool) and bool not in kinds and kinds & {int, float}:
                raise _FieldError(name, f"must be a number, got {value!r}")
            words = _literals(field.annotation)  # `bool | Literal["auto"]` takes "auto" too, nothing else
            if (
                bool in kinds
                and not isinstance(value, bool)
                and value not in words
                and not kinds & {str, int, float}
            ):
                also = "".join(f" or {w!r}" for w in words)
                raise _FieldError(name, f"must be true or false{also}, got {value!r}")
        return data

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (tuples as lists): what `_config.json` records and fingerprints hash."""
        return self.model_dump(mode="json")

    def replace(self, **changes: Any) -> Self:
        """A validated copy with some fields changed (frozen models are never mutated)."""
        return type(self)(**{**self.model_dump(), **changes})


def _scalar_kinds(annotation: Any) -> set[type]:
    """The plain scalar types a field accepts (`int | None` -> {int}); empty for anything else."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        out: set[type] = set()
        for arg in typing.get_args(annotation):
            out |= _scalar_kinds(arg)
        return out
    return {annotation} if annotation in (bool, int, float, str) else set()


def _literals(annotation: Any) -> tuple[Any, ...]:
    """The values of the `Literal[...]` members of a field's type (`bool | Literal["auto"]` -> ("auto",))."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return tuple(v for arg in typing.get_args(annotation) for v in _literals(arg))
    return ()


def _key(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "config"


def _fields_at(cls: type[BaseModel], loc: list[Any]) -> list[str]:
    """Field names of the model found at `loc` under `cls` (for 'unknown key ...; allowed: ...')."""
    model: Any = cls
    for part in loc:
        if isinstance(part, int):
            continue
        field = (
            model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        )
        if field is None:
            return []
        model = field.annotation
        for arg in (*typing.get_args(model), model):  # X | None, list[X]
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                model = arg
                break
    if isinstance(model, type) and issubclass(model, BaseModel):
        return sorted(model.model_fields)
    return []


def format_validation_error(e: ValidationError, cls: type[BaseModel], prefix: tuple[Any, ...] = ()) -> str:
    """The first error of `e` as one line that names the dotted key (under `prefix`)."""
    err = e.errors(include_url=False)[0]
    loc = [*prefix, *err["loc"]]
    kind = err["type"]
    if kind == "value_error":
        orig = err.get("ctx", {}).get("error")
        nested = getattr(orig, "validation", None)
        if nested is not None:  # a nested section's own ConfigModel.__init__ failed
            return format_validation_error(nested[0], nested[1], tuple(loc))
        if isinstance(orig, _FieldError):
            return f"{_key([*loc, orig.key])} {orig.detail}"
        return str(orig) if orig is not None else err["msg"]
    if kind == "extra_forbidden":
        allowed = _fields_at(cls, list(err["loc"])[:-1])
        return f"unknown key {_key(loc)}" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
    if kind == "missing":
        return f"missing key {_key(loc)}"
    if kind in _PLAIN:
        return f"{_key(loc)} must be {_PLAIN[kind]}, got {err.get('input')!r}"
    msg = err["msg"]
    msg = msg[0].lower() + msg[1:] if msg else msg
    return f"{_key(loc)}: {msg}, got {err.get('input')!r}"


# pydantic error types -> what the key must be, in the words every loader of this project uses.
_PLAIN = {
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def build_config(cls: type[T], data: Any, source: str = "<dict>") -> T:
    """A config model from plain data; ConfigError names `source` and the key."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: top level must be a mapping, got {type(data).__name__}")
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{source}: {format_validation_error(e, cls)}") from None
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a YAML config file (empty file: {}); ConfigError names the file.

    Read by core.safe_yaml: UTF-8 only, duplicate keys refused, size, depth and aliases bounded.
    """
    data = read_yaml_file(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Set `section.key=value` pairs in (a copy of) `data`; each value is read as a YAML scalar."""
    # a deep copy in plain JSON types of our own dump (already-loaded YAML), not outside text
    out = json.loads(json.dumps(data, default=str)) if data else {}
    for ov in overrides:
        dotted, sep, raw = ov.partition("=")
        dotted = dotted.strip()
        parts = dotted.split(".")
        if not sep or not dotted or not all(parts):
            raise ConfigError(f"override {ov!r}: expected section.key=value")
        shown = ov if len(ov) <= 80 else ov[:80] + "…"
        value = load_yaml(raw, f"override {shown!r}") if raw.strip() else ""
        cur = out
        for i, p in enumerate(parts[:-1]):
            nxt = cur.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {ov!r}: {'.'.join(parts[: i + 1])} is not a section")
            cur = nxt
        cur[parts[-1]] = value
    return out


def load_config(cls: type[T], path: str | Path | None = None, overrides: Iterable[str] = ()) -> T:
    """Defaults of `cls`, or the YAML file at `path`, with dotted overrides applied; validated."""
    overrides = list(overrides)
    data = read_yaml_mapping(path) if path is not None else {}
    if overrides:
        data = apply_overrides(data, overrides)
    source = str(path) if path is not None else "<defaults>"
    if overrides:
        source += " (with overrides)"
    return build_config(cls, data, source)


def fingerprint_of(data: Any, length: int = 12) -> str:
    """Short sha256 of canonical JSON: names an output folder's config (same data, same name)."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def check_choice(key: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        raise ConfigError(f"{key} must be one of {', '.join(map(str, allowed))}; got {value!r}")


def check_positive(key: str, value: float) -> None:
    if value <= 0:
        raise ConfigError(f"{key} must be > 0, got {value!r}")


def check_at_least(key: str, value: float, minimum: float) -> None:
    if value < minimum:
        raise ConfigError(f"{key} must be >= {minimum}, got {value}")
