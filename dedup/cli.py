"""Command line of the dedup job: `python -m dedup run --input DIR --output DIR [...]`.

Bad input (no Parquet, no `id`/`text` column, a config that does not validate, an output folder made
by another config or input, an input whose content changed since the output was made from it, an
output that overlaps the input) is reported as `error: ...` with exit status 2 before Spark starts
(core.cli.guarded). `--on-changed-input restart` redoes every stage instead of refusing.
"""

from __future__ import annotations

import argparse

from core.cli import add_config_args, add_io_args, add_spark_args, command_parser, run_subcommand
from core.output import ON_CHANGED_INPUT
from core.spark import SparkOptions
from core.stats import funnel_table
from dedup.config import DedupJobConfig
from dedup.job import run_dedup


def build_parser() -> argparse.ArgumentParser:
    parser, sub = command_parser("dedup", __doc__)
    run = sub.add_parser("run", help="exact, URL, MinHash and line dedup of documents on Spark")
    add_io_args(
        run,
        "documents: an extract output, a Parquet folder or file",
        "output folder (created; reruns resume)",
    )
    add_config_args(run, "configs/dedup.yaml")
    add_spark_args(run)
    run.add_argument(
        "--on-changed-input",
        choices=ON_CHANGED_INPUT,
        default=None,
        help="an input whose content changed since the output's stages were made from it: refuse "
        "(default, or $REFINERY_ON_CHANGED_INPUT) or restart every stage",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_subcommand(build_parser(), {"run": _run}, argv)


def _run(args: argparse.Namespace) -> int:
    cfg = DedupJobConfig.load(args.config, args.overrides)
    result = run_dedup(
        args.input,
        args.output,
        cfg,
        on_changed_input=args.on_changed_input,
        spark=SparkOptions.from_args(args),
    )
    print(f"\nRefinery dedup -> {result.output}  (config {cfg.fingerprint()}, minhash {cfg.minhash})")
    if result.resumed:
        print(f"resumed: stages {', '.join(result.resumed)} were done by an earlier run")
    print(f"{result.docs_in:,} documents in, {result.docs_out:,} out\n")
    print(funnel_table(result.stats))
    return 0
