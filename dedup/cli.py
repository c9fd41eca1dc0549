"""Command line of the dedup job: `python -m dedup run --input DIR --output DIR [...]`.

Bad input (no Parquet, no `id`/`text` column, a config that does not validate, an output folder made
by another config or input) is reported as `error: ...` with exit status 2 before Spark starts.
"""

from __future__ import annotations

import argparse
import logging
import sys

from core.output import OutputConflict
from core.spark import parse_spark_conf
from curation.config import ConfigError
from dedup.config import DedupJobConfig
from dedup.job import InputError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dedup", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="exact, URL, MinHash and line dedup of documents on Spark")
    run.add_argument(
        "--input", required=True, metavar="DIR", help="documents: an extract output, a Parquet folder or file"
    )
    run.add_argument("--output", required=True, metavar="DIR", help="output folder (created; reruns resume)")
    run.add_argument(
        "--master", default=None, help="Spark master URL (default: spark-submit's, else local[*])"
    )
    run.add_argument("--config", default=None, metavar="FILE", help="YAML config (see configs/dedup.yaml)")
    run.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable)",
    )
    run.add_argument("--no-progress", action="store_true", help="do not print a line per stage")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from core.stats import funnel_table
    from dedup.job import run_dedup

    try:
        cfg = DedupJobConfig.load(args.config)
        result = run_dedup(
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
    print(f"\nRefinery dedup -> {result.output}  (config {cfg.fingerprint()}, minhash {cfg.minhash})")
    if result.resumed:
        print(f"resumed: stages {', '.join(result.resumed)} were done by an earlier run")
    print(f"{result.docs_in:,} documents in, {result.docs_out:,} out\n")
    print(funnel_table(result.stats))
    return 0
