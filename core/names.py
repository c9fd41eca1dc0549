"""Checks for a name that comes from data before it reaches a path, an open, a lock or a delete.

A manifest, a marker or a metadata file is data: whoever can write the folder it sits in writes it,
and a name read from it is joined to that folder (CONVENTIONS 14). `Path(folder) / "../victim"`,
`Path(folder) / "/etc/passwd"` and `join(uri, "..%2Fvictim")` (some object stores decode `%2F`)
all leave the folder, so every such name is checked here first, by one rule shared by every reader
(tokens/manifest.py's shard names and hashes, core/tables.py's table parts, trainer/checkpoint.py's
marker):

- `check_file_name`: one plain file name (letters, digits, `.`, `_`, `-`, starting with a letter or
  digit, at most 255 characters), so it resolves inside the folder: no `/`, `\\`, `..`, `.`, `%`, NUL,
  empty or absolute name, and no hidden name (the temporary files of a writer start with `.`);
- `check_sha256`: exactly 64 lowercase hex digits, what hashlib's hexdigest writes (a cache that
  names its files by hash finds them by that name alone).

Both raise ValueError with what the value must be and the value itself (`show`, cut short); the
caller prefixes the file and the field it came from, which only it knows.
"""

from __future__ import annotations

import re

__all__ = ["FILE_NAME", "SHA256", "check_file_name", "check_sha256", "show"]

SHA256 = re.compile(r"[0-9a-f]{64}")
# One component of a path, never "." or "..": it starts with a letter or digit. `%` is not allowed
# either, so an object store never sees an encoded "/" (%2F) that some servers decode. 255 bytes is
# the longest name ext4, XFS and APFS allow (a longer one fails at the open, with a traceback).
FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


def show(value: object) -> str:
    """A hostile value shown in an error: its repr, cut short (a manifest can hold megabytes)."""
    text = repr(value)
    return text if len(text) <= 100 else text[:100] + "…"


def check_sha256(value: object) -> str:
    """`value` if it is a sha256 hex digest (64 lowercase hex digits), else ValueError saying so."""
    if not isinstance(value, str) or not SHA256.fullmatch(value):
        raise ValueError(f"must be 64 lowercase hex digits (a sha256), got {show(value)}")
    return value


def check_file_name(value: object, suffix: str = "", folder: str = "the folder") -> str:
    """`value` if it is one plain file name ending in `suffix`, else ValueError saying what it must be
    (`folder` names the folder it is joined to, for the message)."""
    if not isinstance(value, str) or not FILE_NAME.fullmatch(value) or not value.endswith(suffix):
        ending = f" ending in {suffix}" if suffix else ""
        raise ValueError(
            f"must be a file name in {folder}{ending} (letters, digits, . _ -; no folder), got {show(value)}"
        )
    return value
