"""Command line of the token jobs: `python -m tokens train-tokenizer|tokenize ...`.

`tokenize` also runs under spark-submit (`spark-submit tokens/__main__.py tokenize ...`);
`train-tokenizer` is a single process. Every --input, --output and --tokenizer may be a local path
or an object-store URI (`s3://bucket/prefix`, credentials from the standard AWS chain). Both take
`--config FILE` and `--set key=value`; tokenize's flags `--source`, `--select`, `--eod-token`,
`--encoder` are aliases of its keys (tokens/config.py). Exit status (core/cli.py): 0 done; 1 some
input files failed (a rerun retries them); 2 bad input (a config that does not validate, no
documents, a tokenizer without an EOD token, a store that does not answer, an output folder made by
another config), reported as `error: ...` before Spark starts.
"""

from __future__ import annotations

import argparse

import yaml

from core.cli import (
    add_config_args,
    add_io_args,
    add_spark_args,
    command_parser,
    load_settings,
    print_run,
    run_subcommand,
)
from core.config import ConfigError
from core.errors import InputError
from core.safe_yaml import load_yaml
from core.spark import SparkOptions
from tokens.config import TokenizeConfig
from tokens.job import run_tokenize
from tokens.tokenizer import ENCODERS, TokenizerConfig, read_tokenizer_meta, train_tokenizer


def build_parser() -> argparse.ArgumentParser:
    parser, sub = command_parser("tokens", __doc__)

    tt = sub.add_parser("train-tokenizer", help="documents -> byte-level BPE tokenizer.json")
    add_io_args(
        tt,
        "documents: an extract output or Parquet folder (or s3://prefix)",
        "folder (or s3://prefix) for tokenizer.json (+ meta)",
    )
    add_config_args(tt, "configs/tokenizer.yaml")

    tk = sub.add_parser("tokenize", help="documents -> token shards (.bin/.idx + manifest) on Spark")
    tk.add_argument(
        "--input", required=True, metavar="DIR", help="documents: an extract output or Parquet folder"
    )
    tk.add_argument(
        "--tokenizer",
        required=True,
        metavar="FILE",
        help="tokenizer.json or its folder, local or s3:// (trained here or given)",
    )
    tk.add_argument("--output", required=True, metavar="DIR", help="writes DIR/shards/<source>/")
    tk.add_argument(
        "--source", default=None, help="source name: the shards/<source> folder (default: default)"
    )
    tk.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="COLUMN=CONDITION",
        help="keep documents where COLUMN matches, e.g. lang=en, 'quality=>= 0.6', 'quality=top 30%%' "
        "(repeatable; alias of --set select.COLUMN=CONDITION)",
    )
    tk.add_argument("--eod-token", default=None, help="end-of-document token of a given tokenizer.json")
    tk.add_argument(
        "--encoder",
        default=None,
        choices=ENCODERS,
        help="auto (default): tiktoken where exact, else Hugging Face",
    )
    add_config_args(tk, "configs/tokenize.yaml", "select.lang=en")
    add_spark_args(tk)
    return parser


def parse_select(pairs: list[str]) -> dict[str, object]:
    """--select COLUMN=CONDITION pairs -> the recipe's `select` mapping (same parser)."""
    out: dict[str, object] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        k = k.strip()
        if not sep or not k:
            raise ConfigError(f"--select expects COLUMN=CONDITION, got {p!r}")
        if k in out:
            # a second --select of a column would silently replace the first
            raise ConfigError(
                f"--select {k} is given twice; join conditions on one column with 'and' in one "
                f"--select, e.g. '{k}=> 0.2 and < 0.8'"
            )
        if v.lstrip()[:1] in "<>=!":
            out[k] = v  # comparisons stay strings (core.selectors parses them)
            continue
        # A bare value is read as YAML (numbers, true/false, null, lists)
        try:
            out[k] = yaml.safe_load(v)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" at column {mark.column + 1}" if mark is not None else ""
            why = getattr(e, "problem", None) or type(e).__name__
            raise ConfigError(
                f"--select {p!r}: {v!r} is not a value or a YAML list ({why}{where}); "
                "e.g. lang=en, 'lang=[en, de]', 'quality=>= 0.6'"
            ) from None
        # well-formed: the project's reader's bounds too (aliases, depth, duplicate keys)
        out[k] = load_yaml(v, f"--select {k}")
    return out


def _tokenize(args: argparse.Namespace) -> int:
    flags = {"source": args.source, "eod_token": args.eod_token, "encoder": args.encoder}
    cfg = load_settings(TokenizeConfig, args, flags)
    select = {**cfg.select, **parse_select(args.select)}  # a --select column replaces the config's
    result = run_tokenize(
        args.input,
        args.tokenizer,
        args.output,
        source=cfg.source,
        select=select,
        eod_token=cfg.eod_token,
        encoder=cfg.encoder,
        spark=SparkOptions.from_args(args),
        allow_remove_all=cfg.allow_remove_all,
    )
    status = print_run("tokenize", result, f"encoder {result.encoder}")
    if result.manifest:
        m = result.manifest
        print(
            f"\n{m['documents']:,} documents, {m['tokens']:,} tokens ({m['dtype']}), "
            f"tokenizer {m['tokenizer']['sha256'][:12]}: {result.output}/manifest.json"
        )
        for column, c in m.get("percentiles", {}).items():
            print(
                f"  {column}: {c['percentile']} -> {c['resolved']} ({c['selected']:,} of {c['ranked']:,} "
                f"ranked documents, {c['ties']:,} of them by ties at the threshold)"
            )
    return status


def _train_tokenizer(args: argparse.Namespace) -> int:
    cfg = TokenizerConfig.load(args.config, args.overrides)
    try:
        path = train_tokenizer(args.input, args.output, cfg)
    except ValueError as e:
        # pyarrow reports a documents file without an `id` or `text` column as ArrowInvalid (a
        # ValueError): a bad input, reported as such rather than as a traceback.
        raise InputError(str(e)) from None
    meta = read_tokenizer_meta(str(path))
    print(
        f"Refinery train-tokenizer -> {path}  (config {cfg.fingerprint()}, vocab {meta['vocab_size']}, "
        f"EOD {meta['eod_token']!r} = {meta['eod_id']}, sample {meta['sample']['documents']} docs)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_subcommand(build_parser(), {"train-tokenizer": _train_tokenizer, "tokenize": _tokenize}, argv)
