"""Command line of the curation job: `python -m curation extract ...` (and `index`).

`extract --input ...` reads whole WARCs; `extract --index INDEX --where SQL --warc-base URL` reads
only the records an index query selects (curation/index/job.py); `index WARC... --output X.parquet`
writes such an index of local WARCs (curation/index/ccindex.py). Both take `--config FILE` and `--set
key=value` (core/cli.py): extract's keys are configs/extract.yaml's, index's are `IndexSettings`
below, whose flags (`--root`, `--no-languages`) are aliases.

It also runs under spark-submit (`spark-submit curation/__main__.py extract ...`); the token
jobs (train-tokenizer, tokenize) are `python -m tokens ...`.

Bad input (a config that does not validate, inputs that resolve to nothing, an output folder made
by another config) is reported as `error: ...` with exit status 2 before Spark starts. Exit
status 1 means the job ran but some input files failed unexpectedly (a rerun retries them).
"""

from __future__ import annotations

import argparse

from core.cli import add_config_args, add_spark_args, command_parser, load_settings, print_run, run_subcommand
from core.config import ConfigModel
from core.errors import InputError
from core.spark import SparkOptions
from curation.config import ExtractJobConfig


class IndexSettings(ConfigModel):
    """What `index` reads besides its WARCs and outputs (`--set languages=false` is `--no-languages`)."""

    root: str | None = None
    """Folder warc_filename is relative to (default: the WARCs' common folder)."""
    languages: bool = True
    """Fill content_languages/content_charset (decodes each HTML page and runs lid.176 on it)."""


def build_parser() -> argparse.ArgumentParser:
    parser, sub = command_parser("curation", __doc__)
    ex = sub.add_parser("extract", help="WARC files -> filtered documents (Parquet) on Spark")
    source = ex.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--input",
        nargs="+",
        metavar="PATH_OR_GLOB",
        help="local paths or globs, s3:// or https:// URLs, or a Common Crawl warc.paths(.gz) listing "
        "(a remote listing's lines must lie under cc_base_url; a local one may name any path)",
    )
    source.add_argument(
        "--index",
        metavar="INDEX",
        help="a cc-index table (Parquet file or folder, local or s3://) or a CDXJ file: extract only "
        "the records --where selects, fetched by ranged reads from --warc-base",
    )
    ex.add_argument(
        "--where",
        metavar="SQL",
        help="with --index: SQL condition over the index columns, e.g. \"content_languages = 'eng'\"",
    )
    ex.add_argument(
        "--warc-base",
        metavar="URL_OR_PREFIX",
        help="with --index: where warc_filename lives: https://data.commoncrawl.org/, s3://commoncrawl/, "
        "an http:// server, or a local folder; a warc_filename that does not resolve under it (.., an "
        "absolute path, another scheme, host or bucket, a link out of the folder) is refused",
    )
    ex.add_argument("--output", required=True, metavar="DIR", help="output folder (created)")
    add_config_args(ex, "configs/extract.yaml")
    add_spark_args(ex)

    ix = sub.add_parser("index", help="local WARCs -> a cc-index table (Parquet), optionally CDXJ")
    ix.add_argument("warcs", nargs="+", metavar="WARC", help="local WARC files (per-record gzip or plain)")
    ix.add_argument("--output", required=True, metavar="INDEX.parquet", help="the Parquet file to write")
    ix.add_argument(
        "--root",
        metavar="DIR",
        help="folder warc_filename is relative to: the one to serve or upload as --warc-base "
        "(default: the WARCs' common folder)",
    )
    ix.add_argument("--cdxj", metavar="FILE", help="also write a sorted CDXJ index (cdxj-indexer)")
    ix.add_argument(
        "--no-languages",
        dest="languages",
        action="store_const",
        const=False,
        default=None,
        help="leave content_languages/content_charset null (skips decoding and lid.176 per HTML page)",
    )
    add_config_args(ix, "IndexSettings in curation/cli.py", "languages=false")
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_subcommand(build_parser(), {"extract": _extract, "index": _index}, argv)


def _extract(args: argparse.Namespace) -> int:
    from curation.job import run_extract

    cfg = ExtractJobConfig.load(args.config, args.overrides)
    if args.index is not None:
        return _extract_index(args, cfg)
    if args.where is not None or args.warc_base is not None:
        raise InputError("--where and --warc-base go with --index, not --input")
    result = run_extract(
        args.input,
        args.output,
        cfg,
        spark=SparkOptions.from_args(args),
    )
    return print_run("extract", result, f"config {cfg.fingerprint()}")


def _extract_index(args: argparse.Namespace, cfg: ExtractJobConfig) -> int:
    from curation.index.job import run_index_extract

    if args.where is None or args.warc_base is None:
        raise InputError("--index needs --where (the SQL condition) and --warc-base (where the WARCs are)")
    result = run_index_extract(
        args.index,
        args.where,
        args.warc_base,
        args.output,
        cfg,
        spark=SparkOptions.from_args(args),
    )
    fetched = {k: v for k, v in result.stats.counters.items() if k.startswith("fetch_")}
    detail = f"config {cfg.fingerprint()}; " + ", ".join(f"{k} {v}" for k, v in sorted(fetched.items()))
    return print_run("extract", result, detail)


def _index(args: argparse.Namespace) -> int:
    from pathlib import Path

    from curation.index.ccindex import build_index

    cfg = load_settings(IndexSettings, args, {"root": args.root, "languages": args.languages})
    missing = [w for w in args.warcs if not Path(w).is_file()]
    if missing:
        raise InputError(f"not a file: {', '.join(missing[:5])}")
    report = build_index(args.warcs, args.output, cfg.root, args.cdxj, languages=cfg.languages)
    print(f"Refinery index -> {args.output}: {report.rows} records of {len(report.files)} WARCs")
    for name, n in report.files.items():
        err = report.errors.get(name)
        print(f"  {name}: {n} records" + (f"  (stopped early: {err})" if err else ""))
    return 1 if report.errors else 0
