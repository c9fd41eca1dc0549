"""What `make demo` runs on: its WARCs and its good text, from the command line or the shared data folder.

WARCs, one of (make variables; `python -m workflows demo` flags in brackets):
    WARCS=...  [--warcs]    local paths or globs, s3:// objects or globs, https:// URLs, or a warc.paths(.gz)
                            listing, local or remote: whatever `extract --input` reads; the relative lines
                            of a remote listing are joined to WARC_BASE [--warc-base] (default
                            https://data.commoncrawl.org/)
    INDEX=...  [--index]    a cc-index table: extract only the records WHERE [--where] selects, fetched by
                            ranged reads from WARC_BASE; RECORDS=N [--records] keeps the first N of them
                            (workflows/pick_records.py), so a real crawl's index gives a demo-sized input
Good text, POSITIVES=... [--positives]: JSONL with a `text` field (or Parquet with a `text` column, or
plain text with one document per line): the quality classifier's positive class and the reference LM's
text. Both held-out sets the demo reports come from its own inputs: train-quality holds out part of
these positives and of the extracted pages, train-lm part of these positives (heldout_fraction).

Without them the shared data folder (--shared-data, else $REFINERY_SHARED_DATA, else ../shared/data)
gives every WARC under warc/ and the Wikipedia/WikiText files under quality/, exactly the inputs the
demo always had. With neither, `MissingInputs` (exit status 2, no traceback) prints the commands to run.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from core.errors import InputError
from workflows.paths import SHARED_DATA_ENV, default_shared_data, shared_warcs
from workflows.pipeline import IndexSource, quality_positives

CC_BASE = "https://data.commoncrawl.org/"
# fetch_status and content_mime_type are in Common Crawl's index and in `python -m curation index`'s
# (content_mime_detected is null for WARCs without WARC-Identified-Payload-Type); languages as ISO 639-3.
DEFAULT_WHERE = "fetch_status = 200 AND content_mime_type = 'text/html' AND content_languages LIKE 'eng%'"
# Real objects of CC-MAIN-2024-22 (the shared whirlwind capture's WARC; the first file of its index table).
EXAMPLE_WARC = "crawl-data/CC-MAIN-2024-22/segments/1715971057216.39/warc/CC-MAIN-20240517233122-20240518023122-00000.warc.gz"
EXAMPLE_INDEX = (
    "cc-index/table/cc-main/warc/crawl=CC-MAIN-2024-22/subset=warc/"
    "part-00000-4dd72944-e9c0-41a1-9026-dfd2d0615bf2.c000.gz.parquet"
)


class MissingInputs(InputError):
    """No WARCs or no good text given, and no shared data folder to take them from."""


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--shared-data",
        default=None,
        help="the shared data folder, for the WARCs and positives not given "
        "(default $REFINERY_SHARED_DATA, else ../shared/data beside the project)",
    )
    source = ap.add_mutually_exclusive_group()
    source.add_argument("--warcs", nargs="+", default=None, metavar="WARC",
                        help="WARC paths/globs, s3:// or https:// URLs, or a warc.paths(.gz) listing "
                             "(default: every WARC in <shared-data>/warc)")  # fmt: skip
    source.add_argument("--index", default=None,
                        help="a cc-index table (Parquet file or folder, local, s3:// or, with --records, "
                             "http(s)://; or CDXJ): extract the records --where selects")  # fmt: skip
    ap.add_argument("--where", default=None, metavar="SQL",
                    help=f'with --index: the condition (default "{DEFAULT_WHERE.replace("%", "%%")}")')  # argparse %-formats help  # fmt: skip
    ap.add_argument("--records", type=int, default=None, metavar="N",
                    help="with --index: only the first N selected records (default: all)")  # fmt: skip
    ap.add_argument("--warc-base", default=None, metavar="URL",
                    help=f"where an index's warc_filename or a remote listing's lines live (default {CC_BASE})")  # fmt: skip
    ap.add_argument("--positives", nargs="+", default=None, metavar="FILE",
                    help="good text: JSONL with a `text` field, Parquet, or one document per line "
                         "(default: <shared-data>/quality's Wikipedia and WikiText)")  # fmt: skip


def layout_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """The Layout's input fields (warcs, index, warc_base, positives, shared_data); MissingInputs if none."""
    shared = Path(args.shared_data) if args.shared_data else default_shared_data()
    if args.index is None and (args.where is not None or args.records is not None):
        raise InputError("--where and --records go with --index (make demo INDEX=...)")
    if args.records is not None and args.records < 1:
        raise InputError(f"--records must be at least 1, got {args.records}")
    missing = []
    warcs: tuple[str, ...] = ()
    index = None
    if args.index is not None:
        index = IndexSource(args.index, args.where or DEFAULT_WHERE, args.warc_base or CC_BASE, args.records)
    elif args.warcs:
        warcs = tuple(args.warcs)
    elif (shared / "warc").is_dir():
        warcs = tuple(shared_warcs(shared))
    else:
        missing.append("WARCS")
    positives = tuple(str(Path(p).expanduser()) for p in args.positives or ())
    for p in positives:
        if not Path(p).exists():
            raise InputError(f"POSITIVES: no such file or folder: {p}")
    if not positives and not all(Path(p).is_file() for p in quality_positives(str(shared))):
        missing.append("POSITIVES")
    if missing:
        raise MissingInputs(missing_message(missing, shared))
    warc_base = args.warc_base if index is None else None
    return {"warcs": warcs, "index": index, "warc_base": warc_base, "positives": positives,
            "shared_data": str(shared)}  # fmt: skip


def missing_message(missing: list[str], shared: Path) -> str:
    """What to pass, as commands to copy (the module docstring lists the forms)."""
    need = " and ".join(missing)
    pos = "POSITIVES=good.jsonl" if "POSITIVES" in missing else ""
    lines = [
        f"make demo needs {need}: there is no shared data folder at {shared} to take "
        f"{'them' if len(missing) > 1 else 'it'} from (set {SHARED_DATA_ENV} or --shared-data if you have one).",
    ]
    if "WARCS" in missing:
        lines += [
            "Pass the WARCs in one of these forms:",
            "",
            "  # N records of a Common Crawl index, fetched by ranged reads (no whole 1 GB WARC; no account)",
            f"  make demo INDEX={CC_BASE}{EXAMPLE_INDEX} RECORDS=2000 {pos}",
            "  # WARCs on disk: paths, folders or globs",
            f"  make demo WARCS='/data/crawl/*.warc.gz' {pos}",
            "  # https:// or s3:// objects (s3://commoncrawl needs AWS credentials; s3 globs work)",
            f"  make demo WARCS={CC_BASE}{EXAMPLE_WARC} {pos}",
            f"  make demo WARCS=s3://commoncrawl/{EXAMPLE_WARC} {pos}",
            "  # a warc.paths(.gz) listing; its relative lines are joined to WARC_BASE",
            f"  make demo WARCS=https://example.org/crawl/warc.paths.gz WARC_BASE=https://example.org/crawl/ {pos}",
            "",
            f"INDEX also takes a local or s3:// cc-index table or CDXJ (`python -m curation index` writes one of "
            f"your WARCs); WHERE='SQL' selects (default: {DEFAULT_WHERE}); WARC_BASE says where its "
            f"warc_filename lives (default {CC_BASE}).",
        ]
    if "POSITIVES" in missing:
        lines += [
            "POSITIVES=FILE... is good text, the quality classifier's positive class and the reference LM's text:",
            '  JSONL with one {"text": "..."} object per line (or Parquet with a `text` column, or plain text with',
            "  one document per line), a few hundred documents or more: Wikipedia articles, books, pages you trust.",
            "  The held-out text the demo reports on is drawn from these and from the extracted pages.",
        ]
    lines.append("(python -m workflows demo takes the same as --warcs / --index / --records / --where / "
                 "--warc-base / --positives.)")  # fmt: skip
    return "\n".join(lines)
