"""Small file helpers every stage shares: the one rule for "the Parquet files of a documents folder",
and the one streaming sha256 of a file (manifests, model metadata, checkpoints).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from core.errors import InputError

__all__ = ["doc_parquet_files", "sha256_file"]


def doc_parquet_files(path: str | Path) -> list[Path]:
    """The Parquet files of a documents dataset, sorted: the one listing rule of every job.

    `path` is a Parquet file, a job's output folder (its `docs/` is read), or a folder of Parquet
    files, searched recursively (Spark writes `part-*.parquet`, possibly under partition folders).
    Names starting with `.` or `_` are skipped at every level: temporary files of a running job,
    `_SUCCESS`, `_temporary/`. Raises InputError when there is nothing to read.
    """
    p = Path(path).expanduser()
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise InputError(f"input not found: {path}")
    root = p / "docs" if (p / "docs").is_dir() else p
    files = sorted(
        f
        for f in root.rglob("*.parquet")
        if f.is_file() and not any(part.startswith((".", "_")) for part in f.relative_to(root).parts)
    )
    if not files:
        raise InputError(f"no Parquet files under {root}")
    return files


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks (model files and shards can be GBs)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
