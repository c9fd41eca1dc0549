"""Command line of the curation job: `python -m curation extract ...`.

It also runs under spark-submit (`spark-submit curation/__main__.py extract ...`); the token
jobs (train-tokenizer, tokenize) are `python -m tokens ...`.

Bad input (a config that does not validate, inputs that resolve to nothing, an output folder made
by another config) is reported as `error: ...` with exit status 2 before Spark starts. Exit
status 1 means the job ran but some input files failed unexpectedly (a rerun retries them).
"""

from __future__ import annotations

import argparse

from core.cli import add_config_args, add_spark_args, guarded, print_run, setup_logging
from core.spark import parse_spark_conf
from curation.config import ExtractJobConfig


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m curation", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract", help="WARC files -> filtered documents (Parquet) on Spark")
    ex.add_argument(
        "--input",
        nargs="+",
        required=True,
        metavar="PATH_OR_GLOB",
        help="local paths or globs, s3:// or https:// URLs, or a Common Crawl warc.paths(.gz) listing",
    )
    ex.add_argument("--output", required=True, metavar="DIR", help="output folder (created)")
    add_config_args(ex, "configs/extract.yaml")
    add_spark_args(ex)
    ex.add_argument("--no-progress", action="store_true", help="do not print the progress line")

    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    if args.command == "extract":
        return guarded(lambda: _extract(args))
    return 2


def _extract(args: argparse.Namespace) -> int:
    from curation.job import run_extract

    cfg = ExtractJobConfig.load(args.config, args.overrides)
    result = run_extract(
        args.input,
        args.output,
        cfg,
        master=args.master,
        spark_conf=parse_spark_conf(args.spark_conf),
        progress=not args.no_progress,
    )
    return print_run("extract", result, f"config {cfg.fingerprint()}")
