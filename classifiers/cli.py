"""Command line: `python -m classifiers train-quality | train-toxicity | train-lm | evaluate | score`
(also under spark-submit).

Bad input (missing or empty files, no `text` column, a config that does not validate, a folder
that is not a model, an output that exists) is a core `UserError`, reported as `error: ...` with
exit status 2 before any work starts (core/cli.py). `score` exits 1 when the job ran but some
input files failed (a rerun retries them).
`evaluate` prints a table and, as its last line, one JSON object with the metrics.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from classifiers.config import QualityTrainConfig, ToxicityTrainConfig
from classifiers.evaluate import evaluate
from classifiers.metrics import metrics_table
from classifiers.score import run_score
from classifiers.scorer import ScorerSpec, make_spec
from classifiers.toxicity import train_toxicity
from classifiers.train import train_quality
from core.cli import add_config_args, add_spark_args, guarded, print_run, setup_logging
from core.errors import ConfigError, OutputConflict
from core.output import check_folder_path
from core.safe_yaml import load_yaml
from core.spark import parse_spark_conf


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m classifiers", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    tr = sub.add_parser("train-quality", help="train the fastText quality model (DCLM-style)")
    tr.add_argument("--positive", nargs="+", required=True, metavar="FILE", help="high-quality text")
    tr.add_argument("--negative", nargs="+", required=True, metavar="FILE", help="ordinary web documents")
    tr.add_argument("--output", required=True, metavar="MODEL_DIR", help="model folder (must not exist)")
    add_config_args(tr, "classifiers/config.py for the keys")
    tr.add_argument("--seed", type=int, default=None, help="overrides the config's seed")

    _add_train_toxicity(sub)

    ev = sub.add_parser("evaluate", help="ROC-AUC, precision, recall on labelled JSONL")
    ev.add_argument("--model", required=True, metavar="MODEL_DIR")
    ev.add_argument("--labelled", required=True, metavar="FILE", help="JSONL with text and label (1/0)")
    ev.add_argument("--threshold", type=float, default=0.5, help="for precision/recall (default 0.5)")
    ev.add_argument("--predictions", default=None, metavar="FILE", help="also write per-document scores")

    lm = sub.add_parser(
        "train-lm", help="train the perplexity scorer's reference LM (tokens, trainer, export)"
    )
    lm.add_argument("--output", required=True, metavar="DIR", help="work folder; the model is DIR/model")
    lm.add_argument("--reference", nargs="+", default=None, metavar="FILE",
                    help="reference text, JSONL/Parquet/text (default: the shared Wikipedia and WikiText files)")  # fmt: skip
    lm.add_argument(
        "--tokenizer", default=None, metavar="FILE", help="a tokenizer.json to use instead of training one"
    )
    lm.add_argument(
        "--master", default="local[2]", help="Spark master of the tokenize step (default local[2])"
    )
    add_config_args(lm, "classifiers/train_lm.py, LMTrainConfig")

    sc = sub.add_parser(
        "score", help="add score columns (quality, perplexity, toxicity) to Parquet documents"
    )
    sc.add_argument("--input", required=True, metavar="DIR", help="extract output, or a folder of Parquet")
    sc.add_argument("--output", required=True, metavar="DIR")
    sc.add_argument("--model", default=None, metavar="MODEL_DIR", help="quality model (train-quality)")
    sc.add_argument(
        "--perplexity",
        action="append",
        default=[],
        metavar="LM_DIR",
        help="reference LM (train-lm); repeat for per-language models",
    )
    sc.add_argument(
        "--toxicity",
        action="append",
        default=[],
        metavar="MODEL",
        help="toxicity model (see classifiers/toxicity.py)",
    )
    sc.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KIND.KEY=VALUE",
        help="a scorer option, e.g. perplexity.max_tokens=512 (YAML value)",
    )
    add_spark_args(sc)
    sc.add_argument("--batch-size", type=int, default=1024, help="rows per prediction call")
    sc.add_argument("--no-progress", action="store_true", help="do not print the progress line")
    return parser


def _add_train_toxicity(sub: argparse._SubParsersAction) -> None:
    tt = sub.add_parser("train-toxicity", help="train a fastText toxicity model on your own labelled text")
    tt.add_argument("--positive", nargs="+", required=True, metavar="FILE", help="toxic text")
    tt.add_argument("--negative", nargs="+", required=True, metavar="FILE", help="clean text")
    tt.add_argument("--output", required=True, metavar="MODEL_DIR", help="model folder (must not exist)")
    add_config_args(tt, "classifiers/config.py (ToxicityTrainConfig) for the keys")
    tt.add_argument("--seed", type=int, default=None, help="overrides the config's seed")


def _train_toxicity(args: argparse.Namespace) -> int:
    return _train(args, ToxicityTrainConfig, train_toxicity)


def _train(args: argparse.Namespace, config_cls=QualityTrainConfig, train=train_quality) -> int:
    cfg = config_cls.load(args.config, args.overrides)
    if args.seed is not None:
        cfg = cfg.replace(seed=args.seed)
    meta = train(args.positive, args.negative, args.output, cfg)
    c = meta["counts"]
    print(f"model: {args.output}  (sha256 {meta['model_sha256'][:12]}, {meta['fasttext_version']})")
    print(
        f"documents read: {c['positive_read']} positive, {c['negative_read']} negative; "
        f"trained on {c['train_pos']} + {c['train_neg']}, held out {c['holdout_pos']} + {c['holdout_neg']}"
    )
    print(metrics_table({"held-out": meta["heldout"]}))
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    if args.predictions:  # checked before the model runs, not when its scores are written
        pred = Path(args.predictions).expanduser()
        if pred.is_dir():
            raise OutputConflict(f"--predictions {pred} is a folder; name a file")
        if not pred.parent.is_dir():  # open() does not make folders; neither do we
            raise OutputConflict(f"--predictions {pred}: folder {pred.parent} does not exist")
        check_folder_path(pred.parent, "--predictions folder")
    metrics, scores = evaluate(args.model, args.labelled, args.threshold)
    if args.predictions:
        with open(args.predictions, "w", encoding="utf-8") as f:
            for i, s in enumerate(scores):
                f.write(json.dumps({"index": i, "quality": float(s)}) + "\n")
    print(metrics_table({args.labelled: metrics}))
    print(json.dumps(metrics, sort_keys=True))
    return 0


def _train_lm(args: argparse.Namespace) -> int:
    from classifiers.train_lm import LMTrainConfig, StepFailed, train_lm

    cfg = LMTrainConfig.load(args.config, args.overrides)
    try:
        meta = train_lm(args.output, cfg, args.reference, args.tokenizer, args.master)
    except StepFailed as e:
        print(f"error: {e}\nRerun the same command: finished steps are skipped.", file=sys.stderr)
        return e.status if e.status == 2 else 1
    h, t = meta["heldout"], meta["training"]
    print(f"\nmodel: {Path(args.output) / 'model'}  ({meta['params']:,} params, step {t['step']}, "
          f"final loss {t.get('final_loss', float('nan')):.4f})")  # fmt: skip
    print(f"held-out reference text: {h['documents']} documents, {h['tokens']:,} tokens scored: "
          f"perplexity {h['perplexity']:.2f}, {h['bits_per_byte']:.3f} bits/byte")  # fmt: skip
    return 0


def _scorer_specs(args: argparse.Namespace) -> list[ScorerSpec]:
    """--perplexity/--toxicity models with their --option values, described (checked) before Spark."""
    options: dict[str, dict[str, object]] = {}
    for raw in args.option:
        key, sep, value = raw.partition("=")
        kind, dot, name = key.partition(".")
        if not sep or not dot or not name:
            raise ConfigError(f"--option {raw!r}: expected KIND.KEY=VALUE, e.g. perplexity.max_tokens=512")
        options.setdefault(kind, {})[name] = load_yaml(value, f"--option {key}") if value.strip() else ""
    wanted = {
        "quality": [args.model] if args.model else [],
        "perplexity": args.perplexity,
        "toxicity": args.toxicity,
    }
    for kind in options:
        if kind == "quality":
            raise ConfigError("--option quality.…: the quality scorer takes no options")
        if not wanted.get(kind):
            raise ConfigError(f"--option {kind}.…: no --{kind} model given to take it")
    if not any(wanted.values()):
        raise ConfigError("score: give at least one of --model (quality), --perplexity, --toxicity")
    return [make_spec(k, m, options.get(k)) for k in ("perplexity", "toxicity") for m in wanted[k]]


def _score(args: argparse.Namespace) -> int:
    res = run_score(
        args.input,
        args.output,
        args.model,
        scorers=_scorer_specs(args),
        master=args.master,
        spark_conf=parse_spark_conf(args.spark_conf),
        batch_size=args.batch_size,
        progress=not args.no_progress,
    )
    status = print_run("score", res)
    bins = {k: v for k, v in sorted(res.stats.counters.items()) if k.startswith("quality_bin_")}
    if bins:
        print(
            "quality histogram: "
            + ", ".join(f"{k.removeprefix('quality_bin_')}: {v}" for k, v in bins.items())
        )
    return status


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    run = {
        "train-quality": _train,
        "train-toxicity": _train_toxicity,
        "train-lm": _train_lm,
        "evaluate": _evaluate,
        "score": _score,
    }[args.command]
    return guarded(lambda: run(args))
