"""What every command line shares: config and Spark arguments, the exit-status rule, the funnel print.

Exit status, for every command: 0 done; 1 the job ran but some inputs failed unexpectedly (they are
listed; a rerun retries them); 2 a `UserError` (bad config, input or output folder), reported as
`error: <message>` before any Spark job or process group starts.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from core.errors import UserError
from core.runner import RunResult
from core.stats import funnel_table

__all__ = ["add_config_args", "add_spark_args", "guarded", "print_run", "setup_logging"]


def setup_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def add_config_args(parser: argparse.ArgumentParser, example: str) -> None:
    """`--config FILE` and repeatable `--set section.key=value` overrides (core/config.py)."""
    parser.add_argument("--config", default=None, metavar="FILE", help=f"YAML config (see {example})")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one config value, e.g. langid.threshold=0.5 (repeatable; YAML values)",
    )


def add_spark_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master", default=None, help="Spark master URL (default: spark-submit's, else local[*])"
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable)",
    )


def guarded(fn: Callable[[], int]) -> int:
    """Run a command body; a UserError becomes `error: ...` on stderr and exit status 2."""
    try:
        return fn()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def print_run(job: str, result: RunResult, detail: str = "") -> int:
    """The end of a per-file job: what ran, the funnel, the failed inputs; returns the exit status."""
    print(f"\nRefinery {job} -> {result.output}" + (f"  ({detail})" if detail else ""))
    print(
        f"inputs: {result.inputs}  processed now: {result.processed}  "
        f"already done: {result.skipped}  failed: {len(result.failed)}\n"
    )
    print(funnel_table(result.stats))
    if result.failed:
        print(
            f"\n{len(result.failed)} input(s) failed; rerun the same command to retry them:", file=sys.stderr
        )
        for r in result.failed:
            print(f"  {r['input']}: {r['error']}", file=sys.stderr)
        return 1
    return 0
