"""Command line of the curation job: `python -m curation extract ...`.

It also runs under spark-submit (`spark-submit curation/__main__.py extract ...`); the token
jobs (train-tokenizer, tokenize) are `python -m tokens ...`.

Bad input (a config that does not validate, inputs that resolve to nothing, an output folder made
by another config) is reported as `error: ...` with exit status 2 before Spark starts. Exit
status 1 means the job ran but some input files failed unexpectedly (a rerun retries them).
"""

from __future__ import annotations

import argparse
import logging
import sys

from core.output import OutputConflict
from core.spark import parse_spark_conf
from curation.config import ConfigError, ExtractJobConfig
from curation.inputs import InputError


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
    ex.add_argument(
        "--master", default=None, help="Spark master URL (default: spark-submit's, else local[*])"
    )
    ex.add_argument("--config", default=None, metavar="FILE", help="YAML config (see configs/extract.yaml)")
    ex.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable)",
    )
    ex.add_argument("--no-progress", action="store_true", help="do not print the progress line")

    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "extract":
        from core.stats import funnel_table
        from curation.job import run_extract

        try:
            cfg = ExtractJobConfig.load(args.config)
            result = run_extract(
                args.input,
                args.output,
                cfg,
                master=args.master,
                spark_conf=parse_spark_conf(args.spark_conf),
                progress=not args.no_progress,
            )
        except (ConfigError, InputError, OutputConflict) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"\nRefinery extract -> {result.output}  (config {cfg.fingerprint()})")
        print(
            f"inputs: {result.inputs}  processed now: {result.processed}  "
            f"already done: {result.skipped}  failed: {len(result.failed)}\n"
        )
        print(funnel_table(result.stats))
        if result.failed:
            print(
                f"\n{len(result.failed)} input(s) failed; rerun the same command to retry them:",
                file=sys.stderr,
            )
            for r in result.failed:
                print(f"  {r['input']}: {r['error']}", file=sys.stderr)
            return 1
        return 0
    return 2
