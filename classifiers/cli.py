"""Command line: `python -m classifiers train-quality | evaluate | score` (also under spark-submit).

Bad input (missing or empty files, no `text` column, a config that does not validate, a folder
that is not a model) is reported as `error: ...` with exit status 2 before any work starts.
`score` exits 1 when the job ran but some input files failed (a rerun retries them).
`evaluate` prints a table and, as its last line, one JSON object with the metrics.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from classifiers.data import DataError
from classifiers.model import ModelError
from core.output import OutputConflict
from curation.config import ConfigError

BAD_INPUT = (ConfigError, DataError, ModelError, OutputConflict, FileExistsError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m classifiers", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    tr = sub.add_parser("train-quality", help="train the fastText quality model (DCLM-style)")
    tr.add_argument("--positive", nargs="+", required=True, metavar="FILE", help="high-quality text")
    tr.add_argument("--negative", nargs="+", required=True, metavar="FILE", help="ordinary web documents")
    tr.add_argument("--output", required=True, metavar="MODEL_DIR", help="model folder (must not exist)")
    tr.add_argument("--config", default=None, metavar="FILE", help="YAML (see configs/quality.yaml keys)")
    tr.add_argument("--seed", type=int, default=None, help="overrides the config's seed")

    ev = sub.add_parser("evaluate", help="ROC-AUC, precision, recall on labelled JSONL")
    ev.add_argument("--model", required=True, metavar="MODEL_DIR")
    ev.add_argument("--labelled", required=True, metavar="FILE", help="JSONL with text and label (1/0)")
    ev.add_argument("--threshold", type=float, default=0.5, help="for precision/recall (default 0.5)")
    ev.add_argument("--predictions", default=None, metavar="FILE", help="also write per-document scores")

    sc = sub.add_parser("score", help="add the quality column to Parquet documents on Spark")
    sc.add_argument("--input", required=True, metavar="DIR", help="extract output, or a folder of Parquet")
    sc.add_argument("--output", required=True, metavar="DIR")
    sc.add_argument("--model", required=True, metavar="MODEL_DIR")
    sc.add_argument(
        "--master", default=None, help="Spark master URL (default: spark-submit's, else local[*])"
    )
    sc.add_argument("--batch-size", type=int, default=1024, help="rows per prediction call")
    return parser


def _train(args: argparse.Namespace) -> int:
    import dataclasses

    from classifiers.config import QualityTrainConfig
    from classifiers.metrics import metrics_table
    from classifiers.train import train_quality

    cfg = QualityTrainConfig.load(args.config)
    if args.seed is not None:
        cfg = dataclasses.replace(cfg, seed=args.seed)
    meta = train_quality(args.positive, args.negative, args.output, cfg)
    c = meta["counts"]
    print(f"model: {args.output}  (sha256 {meta['model_sha256'][:12]}, {meta['fasttext_version']})")
    print(
        f"documents read: {c['positive_read']} positive, {c['negative_read']} negative; "
        f"trained on {c['train_pos']} + {c['train_neg']}, held out {c['holdout_pos']} + {c['holdout_neg']}"
    )
    print(metrics_table({"held-out": meta["heldout"]}))
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from classifiers.evaluate import evaluate
    from classifiers.metrics import metrics_table

    metrics, scores = evaluate(args.model, args.labelled, args.threshold)
    if args.predictions:
        with open(args.predictions, "w", encoding="utf-8") as f:
            for i, s in enumerate(scores):
                f.write(json.dumps({"index": i, "quality": float(s)}) + "\n")
    print(metrics_table({args.labelled: metrics}))
    print(json.dumps(metrics, sort_keys=True))
    return 0


def _score(args: argparse.Namespace) -> int:
    from classifiers.score import run_score
    from core.stats import funnel_table

    res = run_score(args.input, args.output, args.model, master=args.master, batch_size=args.batch_size)
    print(f"\nRefinery score -> {res.output}")
    print(
        f"inputs: {res.inputs}  processed now: {res.processed}  already done: {res.skipped}  failed: {len(res.failed)}\n"
    )
    print(funnel_table(res.stats))
    bins = {k: v for k, v in sorted(res.stats.counters.items()) if k.startswith("quality_bin_")}
    print(
        "quality histogram: " + ", ".join(f"{k.removeprefix('quality_bin_')}: {v}" for k, v in bins.items())
    )
    if res.failed:
        print(f"\n{len(res.failed)} input(s) failed; rerun the same command to retry them:", file=sys.stderr)
        for r in res.failed:
            print(f"  {r['input']}: {r['error']}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run = {"train-quality": _train, "evaluate": _evaluate, "score": _score}[args.command]
    try:
        return run(args)
    except BAD_INPUT as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
