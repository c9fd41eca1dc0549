"""Training and evaluation documents from JSONL, Parquet or plain-text files, with their provenance.

Formats, by file name:
- `*.jsonl`, `*.json` (optionally `.gz`): one JSON object per line with a string `text` field
  (the form of enwiki_sample_articles.jsonl and dclm_human_labels_dev.jsonl). A line that is not
  JSON or has no `text` string is an error naming the file and line: a broken file should be
  fixed, not half-read.
- `*.parquet`: the `text` column (the `extract` output's docs/). Null texts are counted, skipped.
- a folder: the `.parquet` files under it (an `extract` output root reads its `docs/` only, so the
  `rejected/` sample is never taken for documents).
- anything else is plain text (optionally `.gz`), **one document per non-empty line**: that is
  fastText's own training format and the shape of the shared positives (lee_background.cor has one
  news article per line, WikiText one paragraph per line; WikiText's ` = Heading = ` lines are
  dropped by `min_chars`).
Documents shorter than `min_chars` (after stripping) are skipped and counted, never silently.
Every file read is reported with its sha256 and counts, for the model's metadata.json.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.files import doc_parquet_files, sha256_file
from core.safe_json import JSONFileError, loads_checked


class DataError(InputError):
    """An input file cannot give documents; the message names the file (and line)."""


@dataclass
class FileDocs:
    """The documents of one file and how they were counted."""

    path: str
    format: str
    sha256: str
    docs: list[str] = field(default_factory=list)
    records: int = 0
    """Records seen (lines, rows)."""
    skipped_short: int = 0
    skipped_null: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "sha256": self.sha256,
            "records": self.records,
            "documents": len(self.docs),
            "skipped_short": self.skipped_short,
            "skipped_null": self.skipped_null,
        }


def file_format(path: Path) -> str:
    name = path.name.lower().removesuffix(".gz")
    if name.endswith((".jsonl", ".json")):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    return "text"


def expand(arg: str | Path) -> list[Path]:
    """The files one command-line input stands for (a file, or the Parquet files of a folder).

    A folder is listed by core.files.doc_parquet_files, the rule every job shares.
    """
    p = Path(arg)
    if p.is_dir():
        try:
            return doc_parquet_files(p)
        except InputError:
            raise DataError(f"{p}: folder holds no .parquet files") from None
    if not p.exists():
        raise DataError(f"no such file or folder: {p}")
    return [p]


def _open_text(path: Path) -> io.TextIOBase:
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) per non-blank line; DataError names the line that is not an object."""
    with _open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:  # the checked reader (a data set is outside data)
                obj = loads_checked(line, f"{path}:{lineno}")
            except JSONFileError as e:  # names the line already
                raise DataError(str(e)) from None
            if not isinstance(obj, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def parquet_texts(path: Path) -> Iterator[str | None]:
    """The `text` column of a Parquet file, batch by batch; DataError if unreadable or missing."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(f"{path}: not a readable Parquet file ({e})") from None
    names = pf.schema_arrow.names
    if "text" not in names:
        raise DataError(f"{path} has no 'text' column (columns: {', '.join(names) or 'none'})")
    for batch in pf.iter_batches(columns=["text"], batch_size=4096):
        yield from batch.column(0).to_pylist()


def read_file(path: Path, min_chars: int) -> FileDocs:
    """Documents of one file (see the module docstring for formats); DataError on a broken file."""
    if not path.is_file():
        raise DataError(f"no such file: {path}")
    fmt = file_format(path)
    out = FileDocs(path=str(path), format=fmt, sha256=sha256_file(path))

    def add(text: Any) -> None:
        out.records += 1
        if text is None:
            out.skipped_null += 1
            return
        text = text.strip()
        if len(text) < min_chars:
            out.skipped_short += 1
            return
        out.docs.append(text)

    if fmt == "jsonl":
        for lineno, obj in iter_jsonl(path):
            text = obj.get("text")
            if text is not None and not isinstance(text, str):
                raise DataError(f"{path}:{lineno}: 'text' must be a string, got {type(text).__name__}")
            if "text" not in obj:
                raise DataError(f"{path}:{lineno}: no 'text' field (keys: {', '.join(obj)})")
            add(text)
    elif fmt == "parquet":
        for text in parquet_texts(path):
            add(text)
    else:
        with _open_text(path) as f:
            for line in f:
                if line.strip():
                    add(line)
    return out


def read_inputs(args: list[str | Path], min_chars: int) -> list[FileDocs]:
    """Every file of every input; an input (file or folder) that yields no document is an error."""
    if not args:
        raise DataError("no input files given")
    result: list[FileDocs] = []
    for arg in args:
        files = [read_file(p, min_chars) for p in expand(arg)]
        if not any(f.docs for f in files):
            records = sum(f.records for f in files)
            why = "empty file" if records == 0 else f"all {records} records shorter than {min_chars} chars"
            raise DataError(f"{arg}: no documents ({why})")
        result += files
    return result
