"""The typed form of a shards folder's `manifest.json`, checked before any of its fields is used.

A manifest is data: it is read from the shards folder, often on a shared object store, and whoever
can write that folder writes it. Its fields choose files: `bin`/`idx` are joined to the folder, and
`bin_sha256`/`idx_sha256` name the shard cache's files and lock files (tokens/shard_cache.py). So every
field that reaches a path, an open or a lock is checked here first (CONVENTIONS 14), at the one
place a manifest is parsed (`parse_manifest`; mixtures/validate.py's `read_manifest` is its reader):

- `files[].bin_sha256`/`idx_sha256`: exactly 64 lowercase hex digits (what hashlib's hexdigest
  writes). A cached file is found by that name alone, with no hash check (its name records that it
  was verified), so `"../victim"` would otherwise make any file outside the cache a verified shard;
- `files[].bin`/`idx`/`ids`: one plain file name in the folder (letters, digits, `.`, `_`, `-`, not
  starting with `.`), so it resolves under the folder: no `/`, `\\`, `..`, `%2F`, NUL or absolute
  path. `idx` is the `.bin`'s name with `.idx`: the local reader (tokens/shards.py IndexedShard)
  opens the pair by that rule, so another name would check one file and read another;
- sizes and counts: JSON integers (not `true`, not `1.5`), >= 0, a file at most `MAX_FILE_BYTES`;
  `bin_bytes` is `tokens` times the dtype's size, as tokenize writes it, so a size the shard cannot
  have is refused as a manifest error here, not blamed on the cache bound later;
- `tokenizer.vocab_size`/`eod_id`, when present: the ids the trainer builds its model from.

The error (`ManifestError`, a `ShardFormatError`) names the manifest and the field
(`…/manifest.json: files[3].bin_sha256 must be 64 lowercase hex digits (a sha256), got '../victim'`).
Fields nobody reads back (`input`, `input_metadata`, ...) are kept as they are: a manifest of a newer
tokenize still loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core import names
from core.names import check_sha256
from core.names import show as _show
from core.safe_json import JSONFileError, loads_checked
from tokens.shards import ShardFormatError

__all__ = [
    "MAX_FILE_BYTES",
    "Manifest",
    "ManifestError",
    "ShardEntry",
    "check_file_name",
    "check_sha256",
    "parse_manifest",
    "read_manifest_file",
]

MAX_FILE_BYTES = 5 * 2**40
"""S3's largest object (5 TiB): a shard file said to be larger cannot exist on any store we read."""
MAX_COUNT = 2**62
"""Token and document counts: anything past this is no corpus, and int64 sums of it cannot overflow."""

MAX_MANIFEST_BYTES = 256 * 2**20
"""A manifest entry is ~600 bytes: room for 400,000 shards; past it a manifest is not tokenize's."""

_ITEM_SIZE = {"uint16": 2, "int32": 4}  # the two dtypes tokens/shards.py writes

Count = Annotated[int, Field(strict=True, ge=0, le=MAX_COUNT)]
FileBytes = Annotated[int, Field(strict=True, ge=0, le=MAX_FILE_BYTES)]


class ManifestError(ShardFormatError):
    """A manifest.json that is not what tokenize writes; the message names the file and the field."""


def check_file_name(value: object, suffix: str) -> str:
    """`value` if it is one plain file name of the shards folder ending in `suffix` (core/names.py's
    rule, shared with every reader of a name from data), else ValueError saying what it must be."""
    return names.check_file_name(value, suffix, "the shards folder")


class _Model(BaseModel):
    # extra keys kept: fields this reader does not use (input, input_metadata, select, ...) pass through
    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)


class ShardEntry(_Model):
    """One `files[]` entry: a shard's two files, their sha256 and sizes, its counts."""

    bin: str
    idx: str
    ids: str | None = None
    bin_sha256: str
    idx_sha256: str
    bin_bytes: FileBytes
    documents: Count
    tokens: Count
    part: str | None = None

    @field_validator("bin_sha256", "idx_sha256", mode="before")
    @classmethod
    def _sha(cls, v: object) -> str:
        return check_sha256(v)

    @field_validator("bin", mode="before")
    @classmethod
    def _bin(cls, v: object) -> str:
        return check_file_name(v, ".bin")

    @field_validator("idx", mode="before")
    @classmethod
    def _idx(cls, v: object) -> str:
        return check_file_name(v, ".idx")

    @field_validator("ids", mode="before")
    @classmethod
    def _ids(cls, v: object) -> str | None:
        return None if v is None else check_file_name(v, ".ids.parquet")

    @model_validator(mode="after")
    def _pair(self) -> ShardEntry:
        if self.idx != self.bin.removesuffix(".bin") + ".idx":
            raise _FieldError(
                "idx", f"must be the .bin's name with .idx ({self.bin!r}), got {_show(self.idx)}"
            )
        if self.documents > self.tokens:  # every document holds at least its EOD token
            raise _FieldError(
                "documents", f"is {self.documents} but tokens is {self.tokens} (a document has >= 1)"
            )
        return self


class TokenizerEntry(_Model):
    """The tokenizer the shards were made with; `vocab_size` and `eod_id` size the trainer's model."""

    path: str | None = None
    sha256: str | None = None
    vocab_size: Annotated[int, Field(strict=True, ge=1, le=2**31)] | None = None
    eod_id: Annotated[int, Field(strict=True, ge=0, le=2**31)] | None = None

    @model_validator(mode="after")
    def _eod(self) -> TokenizerEntry:
        if self.vocab_size is not None and self.eod_id is not None and self.eod_id >= self.vocab_size:
            raise _FieldError("eod_id", f"is {self.eod_id}, not an id of a vocabulary of {self.vocab_size}")
        return self


class Manifest(_Model):
    """A whole manifest.json (tokens/shards.py `build_manifest` writes it)."""

    files: list[ShardEntry]
    tokenizer: TokenizerEntry
    tokens: Count
    documents: Count | None = None
    dtype: Literal["uint16", "int32"] | None = None

    @model_validator(mode="after")
    def _sizes(self) -> Manifest:
        if self.files and self.dtype is None:
            raise _FieldError("dtype", "is missing: a manifest with files says their dtype (uint16 or int32)")
        for key in ("vocab_size", "eod_id"):  # the trainer sizes its model and masks documents with them
            if self.files and getattr(self.tokenizer, key) is None:
                raise _FieldError(
                    f"tokenizer.{key}", "is missing: a manifest with files names its tokenizer's"
                )
        for i, f in enumerate(self.files):
            want = f.tokens * _ITEM_SIZE[self.dtype or "uint16"]
            if f.bin_bytes != want:
                raise _FieldError(
                    f"files[{i}].bin_bytes",
                    f"is {f.bin_bytes:,} but {f.tokens:,} tokens of {self.dtype} are {want:,} bytes",
                )
        return self


class _FieldError(ValueError):
    """A check across fields, raised naming the one it blames (pydantic would name the whole entry)."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"{key} {detail}")
        self.key, self.detail = key, detail


def parse_manifest(data: bytes | str, where: str) -> Manifest:
    """The manifest in `data` (JSON), read from `where` (named in every error), checked as the module
    docstring says; ManifestError otherwise."""
    try:  # the project's reader of untrusted JSON: size, depth, duplicate keys, non-finite numbers
        raw = loads_checked(data, where, max_bytes=MAX_MANIFEST_BYTES)
    except JSONFileError as e:  # names `where` already
        raise ManifestError(str(e)) from None
    if not isinstance(raw, dict):
        raise ManifestError(f"{where}: not a tokenize manifest (a JSON object with files and tokenizer)")
    try:
        return Manifest.model_validate(raw)
    except ValidationError as e:
        raise ManifestError(f"{where}: {_describe(e)}") from None


def read_manifest_file(path: str | Path) -> Manifest:
    """The checked manifest.json at a local `path` (its size checked before it is read); ManifestError
    naming the file otherwise. For readers of a local folder (report/); a store's reader is
    mixtures/validate.py `read_manifest`."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise ManifestError(f"{p}: {size:,} bytes, over the {MAX_MANIFEST_BYTES:,} a manifest may have")
        data = p.read_bytes()
    except OSError as e:
        raise ManifestError(f"{p}: cannot be read ({e.strerror or e})") from None
    return parse_manifest(data, str(p))


def _describe(e: ValidationError) -> str:
    """The first error as `files[3].bin_sha256 must be …, got …`: the field path, then what it must be."""
    err = e.errors(include_url=False)[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
    orig = err.get("ctx", {}).get("error")
    if isinstance(orig, _FieldError):
        return f"{loc + '.' if loc else ''}{orig.key} {orig.detail}"
    if isinstance(orig, ValueError):
        return f"{loc} {orig}"
    kind, ctx = err["type"], err.get("ctx", {})
    if kind == "missing":
        return f"{loc} is missing (not a tokenize manifest)"
    if kind == "greater_than_equal":
        must = f"must be >= {ctx['ge']}"
    elif kind == "less_than_equal":
        must = f"must be <= {ctx['le']:,}"
    elif kind.startswith("int_"):  # strict: not true, 1.5 or "10"
        must = "must be an integer"
    elif kind in ("list_type", "model_type", "dict_type", "string_type", "literal_error"):
        must = "must be " + {
            "list_type": "a list",
            "string_type": "a string",
            "literal_error": ctx.get("expected", "another value"),
        }.get(kind, "a JSON object")
    else:
        must = f"is invalid ({err['msg'].lower()})"
    return f"{loc} {must}, got {_show(err.get('input'))}"
