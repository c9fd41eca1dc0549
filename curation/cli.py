"""Command line of the curation jobs: `python -m curation extract|train-tokenizer|tokenize ...`.

All of them also run under spark-submit (`spark-submit curation/__main__.py tokenize ...`).

Bad input (a config that does not validate, inputs that resolve to nothing, an output folder made
by another config) is reported as `error: ...` with exit status 2 before Spark starts. Exit
status 1 means the job ran but some input files failed unexpectedly (a rerun retries them).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from core.cli import add_config_args, add_spark_args, guarded, print_run
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
    add_config_args(ex, "configs/extract.yaml")
    add_spark_args(ex)
    ex.add_argument("--no-progress", action="store_true", help="do not print the progress line")

    tt = sub.add_parser("train-tokenizer", help="documents -> byte-level BPE tokenizer.json")
    tt.add_argument(
        "--input", required=True, metavar="DIR", help="documents: an extract output or Parquet folder"
    )
    tt.add_argument("--output", required=True, metavar="DIR", help="folder for tokenizer.json (+ meta)")
    tt.add_argument("--config", default=None, metavar="FILE", help="YAML TokenizerConfig (vocab_size, ...)")

    tk = sub.add_parser("tokenize", help="documents -> token shards (.bin/.idx + manifest) on Spark")
    tk.add_argument(
        "--input", required=True, metavar="DIR", help="documents: an extract output or Parquet folder"
    )
    tk.add_argument(
        "--tokenizer", required=True, metavar="FILE", help="tokenizer.json (trained here or given)"
    )
    tk.add_argument("--output", required=True, metavar="DIR", help="writes DIR/shards/<source>/")
    tk.add_argument("--source", default="default", help="source name: the shards/<source> folder")
    tk.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="COLUMN=CONDITION",
        help="keep documents where COLUMN matches, e.g. lang=en, 'quality=>= 0.6' (repeatable)",
    )
    tk.add_argument("--eod-token", default=None, help="end-of-document token of a given tokenizer.json")
    tk.add_argument(
        "--master", default=None, help="Spark master URL (default: spark-submit's, else local[*])"
    )
    tk.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting"
    )
    return parser


def _select(pairs: list[str]) -> dict[str, object]:
    """--select COLUMN=CONDITION pairs -> the recipe's `select` mapping (same parser)."""
    import yaml

    out: dict[str, object] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise ConfigError(f"--select expects COLUMN=CONDITION, got {p!r}")
        # A bare value is read as YAML (numbers, true/false, lists); comparisons stay strings.
        out[k.strip()] = v if v.lstrip()[:1] in "<>=!" else yaml.safe_load(v)
    return out


def _tokenize(args: argparse.Namespace) -> int:
    from core.selectors import SelectorError
    from core.stats import funnel_table
    from curation.job import run_tokenize

    try:
        result = run_tokenize(
            args.input,
            args.tokenizer,
            args.output,
            source=args.source,
            select=_select(args.select),
            eod_token=args.eod_token,
            master=args.master,
            spark_conf=parse_spark_conf(args.spark_conf),
        )
    except (ConfigError, InputError, OutputConflict, SelectorError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"\nRefinery tokenize -> {result.output}")
    print(
        f"parts: {result.parts}  processed now: {result.processed}  "
        f"already done: {result.skipped}  failed: {len(result.failed)}\n"
    )
    print(funnel_table(result.stats))
    if result.manifest:
        m = result.manifest
        print(
            f"\n{m['documents']:,} documents, {m['tokens']:,} tokens ({m['dtype']}), "
            f"tokenizer {m['tokenizer']['sha256'][:12]}: {result.output}/manifest.json"
        )
    if result.failed:
        print(
            f"\n{len(result.failed)} part(s) failed; rerun the same command to retry them:", file=sys.stderr
        )
        for r in result.failed:
            print(f"  {r['input']}: {r['error']}", file=sys.stderr)
        return 1
    return 0


def _train_tokenizer(args: argparse.Namespace) -> int:
    from curation.tokenizer import TokenizerConfig, train_tokenizer

    try:
        cfg = TokenizerConfig.load(args.config)
        path = train_tokenizer(args.input, args.output, cfg)
    except (ConfigError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    meta = json.loads(path.with_name("tokenizer_meta.json").read_text())
    print(
        f"Refinery train-tokenizer -> {path}  (config {cfg.fingerprint()}, vocab {meta['vocab_size']}, "
        f"EOD {meta['eod_token']!r} = {meta['eod_id']}, sample {meta['sample']['documents']} docs)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "tokenize":
        return _tokenize(args)
    if args.command == "train-tokenizer":
        return _train_tokenizer(args)
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
