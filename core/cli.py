"""What every command line shares: config and Spark arguments, the exit-status rule, the funnel print.

One override syntax: every command takes `--config FILE` and repeatable `--set section.key=value`
(`add_config_args`, read by core/config.py). A setting that also has a flag of its own (`tokenize
--source web`) is the same setting: the flag is an alias of `--set source=web`, and a given flag wins
over the file and `--set` (`load_settings`). Spark jobs take `--master`, `--spark-conf` and
`--no-progress` (`add_spark_args`), read into one `core.spark.SparkOptions`. Every package's
`__main__.py` is `run_package`; a command line with subcommands is `command_parser` and
`run_subcommand`.

Exit status, for every command: 0 done; 1 the job ran but some inputs failed unexpectedly (they are
listed; a rerun retries them); 2 a `UserError` (bad config, input or output folder), reported as
`error: <message>` before any Spark job or process group starts; 130 (128 + SIGINT, what a shell
reports for Ctrl-C) interrupted, reported as the one line `interrupted`.

Ctrl-C. Inside `guarded` it is a KeyboardInterrupt as usual, so `finally` blocks run (Spark stops,
temporary outputs are left as temporary names, a process group is destroyed) and `guarded` prints the
line. Before the body runs, while an entry point is still importing torch or pyarrow (seconds), there
is no `try` around it: `handle_interrupts()`, called first thing by every entry point, makes a Ctrl-C
there print the same line and exit 130 at once instead of printing an import traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from core.config import ConfigModel, load_config
from core.errors import UserError
from core.runner import RunResult
from core.stats import funnel_table

__all__ = [
    "INTERRUPTED",
    "add_config_args",
    "add_io_args",
    "add_repeated",
    "add_set_arg",
    "add_spark_args",
    "command_parser",
    "guarded",
    "handle_interrupts",
    "interrupted",
    "load_settings",
    "print_run",
    "run_package",
    "run_subcommand",
    "setup_logging",
]

INTERRUPTED = 130
"""Exit status of a command stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports a killed one."""


def setup_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _quiet_interrupt_logs()


class _NoInterruptTracebacks(logging.Filter):
    """Drop the tracebacks py4j logs for a Ctrl-C; the interrupt is reported once, as `interrupted`.

    Two records, both `logging.exception` on the root logger: the KeyboardInterrupt py4j re-raises when
    Ctrl-C comes while the driver waits on the JVM; and, while a SparkContext lives, the error of
    PySpark's own SIGINT handler, which calls the JVM (cancelAllJobs) from inside the handler on the
    connection the interrupted main thread is reading: py4j refuses the reentrant call, logs it, and the
    handler raises KeyboardInterrupt anyway (guarded's stop of Spark then cancels the jobs).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.exc_info:
            return True
        if isinstance(record.exc_info[1], KeyboardInterrupt):
            return False
        frame = sys._getframe()
        while frame is not None:
            code = frame.f_code
            if code.co_name == "signal_handler" and "pyspark" in code.co_filename:
                return False
            frame = frame.f_back
        return True


def _quiet_interrupt_logs() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _NoInterruptTracebacks) for f in root.filters):
        root.addFilter(_NoInterruptTracebacks())


def command_parser(package: str, doc: str) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """`python -m PACKAGE COMMAND ...`: the parser, described by the first line of `doc` (the CLI
    module's docstring), and its required subcommands (`.add_parser(name, help=...)` each)."""
    parser = argparse.ArgumentParser(prog=f"python -m {package}", description=doc.splitlines()[0])
    return parser, parser.add_subparsers(dest="command", required=True)


def run_subcommand(
    parser: argparse.ArgumentParser,
    bodies: dict[str, Callable[[argparse.Namespace], int]],
    argv: list[str] | None,
) -> int:
    """A `command_parser` command line's `main`: parse `argv`, set up logging, and run the chosen
    subcommand's body under `guarded` (its exit status)."""
    args = parser.parse_args(argv)
    setup_logging()
    body = bodies[args.command]
    return guarded(lambda: body(args))


def add_io_args(parser: argparse.ArgumentParser, input_help: str, output_help: str | None = None) -> None:
    """`--input DIR` (what the job reads) and `--output DIR` (the folder it writes), both required."""
    parser.add_argument("--input", required=True, metavar="DIR", help=input_help)
    parser.add_argument("--output", required=True, metavar="DIR", help=output_help)


def add_config_args(
    parser: argparse.ArgumentParser, example: str, set_example: str = "langid.threshold=0.5"
) -> None:
    """`--config FILE` and repeatable `--set section.key=value` overrides (core/config.py), into
    `args.config` and `args.overrides`."""
    parser.add_argument("--config", default=None, metavar="FILE", help=f"YAML config (see {example})")
    add_set_arg(parser, set_example)


def add_set_arg(parser: argparse.ArgumentParser, example: str) -> None:
    """Repeatable `--set section.key=value` alone, into `args.overrides`: for a command whose settings
    file is not `--config` (`mixtures plan RECIPE`)."""
    add_repeated(
        parser,
        "--set",
        "SECTION.KEY=VALUE",
        f"override one config value, e.g. {example} (repeatable; YAML values)",
        dest="overrides",
    )


def add_repeated(parser: argparse.ArgumentParser, flag: str, metavar: str, help: str, **kwargs: Any) -> None:
    """A flag that may be given several times: its values, in order, into a list (empty when not given)."""
    parser.add_argument(flag, action="append", default=[], metavar=metavar, help=help, **kwargs)


M = TypeVar("M", bound=ConfigModel)


def load_settings(cls: type[M], args: argparse.Namespace, flags: dict[str, Any]) -> M:
    """`--config`/`--set` of a command whose settings also have flags: the flags given (not None) win."""
    cfg = load_config(cls, args.config, args.overrides)
    given = {k: v for k, v in flags.items() if v is not None}
    return cfg.replace(**given) if given else cfg


def add_spark_args(parser: argparse.ArgumentParser) -> None:
    """`--master`, `--spark-conf` and `--no-progress`: read them with `SparkOptions.from_args(args)`."""
    parser.add_argument(
        "--master", default=None, help="Spark master URL (default: spark-submit's, else local[*])"
    )
    add_repeated(parser, "--spark-conf", "KEY=VALUE", "extra Spark setting (repeatable)")
    parser.add_argument("--no-progress", action="store_true", help="do not print progress lines")
    parser.add_argument(
        "--spark-native",
        choices=("auto", "true", "false"),
        default="auto",
        help="object-store URIs through Spark's own Hadoop connector (s3a://, gs://, abfs://) or "
        "through the executors' pyarrow I/O; auto: the connector where the cluster has one",
    )


_bodies = 0  # command bodies running under guarded(): a Ctrl-C then unwinds them (KeyboardInterrupt)


def interrupted() -> int:
    """Report a Ctrl-C: the one line on stderr; returns the exit status."""
    print("interrupted", file=sys.stderr, flush=True)
    return INTERRUPTED


def _on_sigint(signum: int, frame: Any) -> None:
    if _bodies:
        raise KeyboardInterrupt  # guarded() prints the line once the body has cleaned up
    # Still importing or parsing arguments: nothing to clean up, so exit here. Not by raising: an exception
    # raised inside an import can be swallowed by a library's bare `except:` around an optional import, and
    # the command then went on half-imported (measured: numpy.dtypes left broken, a RecursionError later).
    interrupted()
    sys.stdout.flush()
    os._exit(INTERRUPTED)


def handle_interrupts() -> None:
    """Make Ctrl-C before (and after) the command body `interrupted`, exit 130, not a traceback.

    Call it first in an entry point (`if __name__ == "__main__":` before the heavy imports). Only the main
    thread may set a handler; PySpark installs its own while a SparkContext lives (it cancels the jobs and
    raises KeyboardInterrupt, which guarded() handles the same way).
    """
    signal.signal(signal.SIGINT, _on_sigint)
    _quiet_interrupt_logs()


def run_package(name: str, cli: str) -> None:
    """The body of a package's `__main__.py` (`python -m PKG ...` or `spark-submit PKG/__main__.py ...`):
    `handle_interrupts()`, then `main()` of the module `cli`, imported only then (seconds: torch,
    pyarrow) so that a Ctrl-C while it imports is `interrupted` too. `name` is the caller's
    `__name__`: imported rather than run, it does nothing."""
    if name != "__main__":
        return
    handle_interrupts()
    sys.exit(importlib.import_module(cli).main())


def guarded(fn: Callable[[], int]) -> int:
    """Run a command body; a UserError becomes `error: ...` on stderr and exit status 2, Ctrl-C (a
    KeyboardInterrupt, after the body's `finally` blocks ran) the line `interrupted` and exit status 130."""
    global _bodies
    _bodies += 1
    try:
        return fn()
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return interrupted()
    finally:
        _bodies -= 1


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
