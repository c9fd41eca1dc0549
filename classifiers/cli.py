"""Command line: `python -m classifiers train-quality | train-toxicity | train-ensemble | evaluate | score | annotate`
(also under spark-submit). The perplexity scorer's reference LM is trained by a workflow, since it takes
the tokens and trainer packages: `python -m workflows train-lm`.

Bad input (missing or empty files, no `text` column, a config that does not validate, a folder
that is not a model, an output that exists) is a core `UserError`, reported as `error: ...` with
exit status 2 before any work starts (core/cli.py). `score` exits 1 when the job ran but some
input files failed (a rerun retries them).
`evaluate` prints a table and, as its last line, one JSON object with the metrics: of one quality model
(`--model`), or with `--signal` / `--cv` of every signal named, each ROC-AUC with its bootstrap interval
(classifiers/evaluate.py).

Every command takes `--config FILE` and `--set key=value` (core/cli.py). For `score` a scorer's options
are the section named by its KIND (`--set perplexity.max_tokens=512`; a file maps KIND to its options);
`--option KIND.KEY=VALUE`, the older spelling, is the same list. `evaluate`'s `--threshold` is an alias of
`--set threshold=...`; `train-*` read their training config. `train-quality` takes its examples one way
of three: `--positive`/`--negative`, a `sources:` list (with weights) in its config, or `--labels` (an
`annotate` labels.jsonl); configs/quality-dclm.yaml holds DCLM's fastText settings (classifiers/train.py). `annotate` labels a sample with an LLM
behind any OpenAI-compatible endpoint (classifiers/annotate.py; configs/annotate.yaml for its keys).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from pydantic import ConfigDict

from classifiers.config import QualityTrainConfig, ToxicityTrainConfig
from classifiers.evaluate import SignalSettings, evaluate
from classifiers.metrics import metrics_table
from classifiers.score import run_score
from classifiers.scorer import BUILTIN, ScorerSpec, make_spec
from classifiers.signal_report import evaluate_signals, signals_table
from classifiers.toxicity import train_toxicity
from classifiers.train import train_quality, train_quality_labels
from core.cli import (
    add_config_args,
    add_io_args,
    add_repeated,
    add_spark_args,
    command_parser,
    load_settings,
    print_run,
    run_subcommand,
)
from core.config import load_config, read_yaml_mapping
from core.errors import ConfigError, OutputConflict
from core.output import check_folder_path
from core.safe_yaml import load_yaml
from core.spark import SparkOptions


class EvaluateSettings(SignalSettings):
    """What `evaluate` reads besides its model and data (`--threshold` is an alias of `threshold`);
    with `--signal`/`--cv`, the keys of classifiers.evaluate.SignalSettings (bootstrap, cv, directions, ...)."""

    # NaN and infinities pass here: classifiers.evaluate refuses every value outside [0, 1] with one
    # message ("--threshold must be in [0, 1]"), whether it came as the flag or by --set.
    model_config = ConfigDict(allow_inf_nan=True)  # merged with ConfigModel's

    threshold: float = 0.5
    """Score at or above which a document counts as positive, for precision and recall."""


def build_parser() -> argparse.ArgumentParser:
    parser, sub = command_parser("classifiers", __doc__)

    tq = sub.add_parser("train-quality", help="train the fastText quality model (DCLM-style)")
    _add_train(
        tq,
        (
            "high-quality text (or a sources: list in --config, or --labels)",
            "ordinary web documents (or a sources: list in --config, or --labels)",
        ),
        "classifiers/config.py for the keys; configs/quality-dclm.yaml for DCLM's settings",
        required=False,
    )
    tq.add_argument(
        "--labels",
        default=None,
        metavar="FILE",
        help="train on the 0-5 scores of a `classifiers annotate` labels.jsonl instead: score >= "
        "score_threshold (3, --set score_threshold=4) is a positive; null scores are skipped and counted",
    )
    _add_train(
        sub.add_parser("train-toxicity", help="train a fastText toxicity model on your own labelled text"),
        ("toxic text", "clean text"),
        "classifiers/config.py (ToxicityTrainConfig) for the keys",
    )

    _add_train_ensemble(sub)
    _add_calibrate_buckets(sub)
    _add_evaluate(sub)
    _add_score(sub)
    _add_annotate(sub)
    return parser


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser(
        "evaluate", help="ROC-AUC (with a bootstrap CI for signals), precision, recall on labelled JSONL"
    )
    ev.add_argument(
        "--model",
        default=None,
        metavar="MODEL_DIR",
        help="a quality model: its ROC-AUC, precision and recall; with --signal, one more signal (quality=DIR)",
    )
    ev.add_argument("--labelled", required=True, metavar="FILE", help="JSONL with text and label (1/0)")
    add_repeated(
        ev,
        "--signal",
        "SIGNAL",
        "a signal to rank the documents by, repeatable: a scorer KIND=MODEL (quality=DIR, perplexity=LM_DIR, "
        "toxicity=profanity-check, mypkg.MyScorer=DIR: each of its columns), a text statistic "
        "(length_chars, gopher_..., c4_..., fineweb_...; 'statistics' = all; classifiers/signals.py), or a "
        "numeric field of the labelled records",
    )
    ev.add_argument(
        "--cv",
        action="store_true",
        help="also train the fastText quality model on the labelled texts, k-fold (--set cv.folds=5), "
        "and report the AUC of its out-of-fold scores; --set cv.models=[fasttext,ensemble] adds the "
        "quality ensemble (nested CV, features --set ensemble.features=[statistics,perplexity_bpb])",
    )
    ev.add_argument(
        "--threshold", type=float, default=None, help="for --model's precision/recall (default 0.5)"
    )
    ev.add_argument(
        "--predictions", default=None, metavar="FILE", help="also write per-document scores (JSONL)"
    )
    add_config_args(ev, "EvaluateSettings in classifiers/cli.py", "threshold=0.6")


def _add_score(sub: argparse._SubParsersAction) -> None:
    sc = sub.add_parser(
        "score", help="add score columns (quality, perplexity, toxicity) to Parquet documents"
    )
    add_io_args(sc, "extract output, or a folder of Parquet")
    add_repeated(
        sc,
        "--scorer",
        "KIND=DIR",
        "a scorer and its model folder, repeatable: KIND is a registry name (quality, perplexity, "
        "toxicity) or the import path of a Scorer class (mypkg.scorers.MyScorer)",
    )
    sc.add_argument("--model", default=None, metavar="MODEL_DIR", help="alias of --scorer quality=MODEL_DIR")
    add_repeated(
        sc,
        "--perplexity",
        "LM_DIR",
        "alias of --scorer perplexity=LM_DIR (a workflows train-lm model; one per language)",
    )
    add_repeated(sc, "--toxicity", "MODEL", "alias of --scorer toxicity=MODEL (see classifiers/toxicity.py)")
    add_config_args(sc, "the scorers' options: a mapping KIND -> options", "perplexity.max_tokens=512")
    sc.add_argument(
        "--option",
        dest="overrides",
        action="append",
        metavar="KIND.KEY=VALUE",
        help="alias of --set KIND.KEY=VALUE",
    )
    add_spark_args(sc)
    sc.add_argument("--batch-size", type=int, default=1024, help="rows per prediction call")


def _add_annotate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "annotate", help="label a sample of documents 0-5 with an LLM (FineWeb-Edu), cached and resumable"
    )
    p.add_argument(
        "--input", required=True, nargs="+", metavar="DOCS", help="JSONL with text, or Parquet file/folder"
    )
    p.add_argument(
        "--endpoint",
        required=True,
        metavar="URL",
        help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1",
    )
    p.add_argument("--model", required=True, metavar="NAME", help="the model name the endpoint serves")
    p.add_argument(
        "--prompt",
        required=True,
        metavar="FILE",
        help="prompt template holding {text} (configs/prompts/fineweb-edu.txt)",
    )
    p.add_argument(
        "--output",
        required=True,
        metavar="DIR",
        help="labels folder: labels.jsonl is the cache, reruns resume",
    )
    p.add_argument(
        "--sample",
        type=int,
        default=None,
        metavar="N",
        help="label N documents drawn with --seed (alias of --set sample=N)",
    )
    p.add_argument("--seed", type=int, default=None, help="alias of --set seed=S")
    p.add_argument(
        "--max-cost",
        type=float,
        default=None,
        metavar="USD",
        help="refuse to start above this estimate (alias of --set cost.max_cost=...)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the cost estimate and stop; nothing is sent or written"
    )
    add_config_args(p, "configs/annotate.yaml", "client.requests_per_minute=60")


def _annotate(args: argparse.Namespace) -> int:
    from classifiers.annotate import AnnotateConfig, check_cost, estimate_line, execute, plan

    cfg = load_settings(AnnotateConfig, args, {"sample": args.sample, "seed": args.seed})
    if args.max_cost is not None:
        cfg = cfg.replace(cost=cfg.cost.replace(max_cost=args.max_cost))
    p = plan(args.input, args.output, args.endpoint, args.model, args.prompt, cfg)
    print(estimate_line(p.estimate, p.counts["cached"], cfg.cost), flush=True)
    check_cost(p)
    if args.dry_run:
        return 0
    summary = execute(p)
    c = summary["counts"]
    print(
        f"annotate -> {p.output}: {c.get('labelled', 0)} labelled now ({c.get('unparseable', 0)} unparseable), "
        f"{c['cached']} already labelled, {c.get('failed', 0)} failed; scores of the sample: "
        + ", ".join(f"{k}: {v}" for k, v in summary["score_histogram"].items())
    )
    print(json.dumps(summary["counts"], sort_keys=True))
    if c.get("failed"):
        print(f"{c['failed']} document(s) failed; rerun the same command to retry them:", file=sys.stderr)
        for f in summary["failed"][:20]:
            print(f"  {f['id']}: {f['error']}", file=sys.stderr)
        return 1
    return 0


def _add_train(
    p: argparse.ArgumentParser, helps: tuple[str, str], config_example: str, required: bool = True
) -> None:
    """The arguments of both fastText trainers (`_train_quality`, `_train_toxicity`): positive and negative text, the model folder
    (`required=False`: train-quality, whose inputs may come from its config or --labels instead)."""
    default = None if required else []
    p.add_argument("--positive", nargs="+", required=required, default=default, metavar="FILE", help=helps[0])
    p.add_argument("--negative", nargs="+", required=required, default=default, metavar="FILE", help=helps[1])
    p.add_argument("--output", required=True, metavar="MODEL_DIR", help="model folder (must not exist)")
    add_config_args(p, config_example)
    p.add_argument("--seed", type=int, default=None, help="overrides the config's seed")


def _add_train_ensemble(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train-ensemble", help="train the quality ensemble (logistic regression over signal columns)"
    )
    p.add_argument("--labels", required=True, metavar="FILE", help="JSONL with text and label (1/0)")
    p.add_argument(
        "--features",
        nargs="+",
        default=None,
        metavar="NAME",
        help="columns to combine (default: statistics = the 28 text statistics of classifiers/signals.py); "
        "a score column (quality, perplexity_bpb, ...) comes from a --scorer or a field of the records",
    )
    add_repeated(
        p,
        "--scorer",
        "KIND=MODEL",
        "a scorer whose columns may be features, repeatable (perplexity=LM_DIR, quality=DIR)",
    )
    p.add_argument("--output", required=True, metavar="MODEL_DIR", help="model folder (must not exist)")
    add_config_args(
        p, "SignalSettings in classifiers/evaluate.py: ensemble.*, cv.*, bootstrap.*", "cv.folds=10"
    )


def _train_ensemble(args: argparse.Namespace) -> int:
    from classifiers.ensemble import train_ensemble

    cfg = load_config(SignalSettings, args.config, args.overrides)
    if args.features is not None:
        cfg = cfg.replace(ensemble=cfg.ensemble.replace(features=args.features))
    meta = train_ensemble(args.labels, args.output, cfg, args.scorer)
    row = meta["cv"]
    print(
        f"model: {args.output}  (sha256 {meta['model_sha256'][:12]}, {len(meta['features'])} features, C={meta['C']})"
    )
    print(
        f"{row['folds']}-fold nested CV on {row['n']} labelled documents: ROC-AUC {row['auc']:.3f} "
        f"[{row['ci'][0]:.3f}, {row['ci'][1]:.3f}] (fold AUCs {', '.join(map(str, row['fold_aucs']))})"
    )
    print(json.dumps({k: meta[k] for k in ("model_sha256", "features", "C", "cv")}, sort_keys=True))
    return 0


def _add_calibrate_buckets(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate-buckets",
        help="Nemotron-CC's quality buckets: percentile cut points per score column (classifiers/buckets.py)",
    )
    p.add_argument("--input", required=True, help="a score job's output (Parquet folder or file, s3:// too)")
    p.add_argument(
        "--column",
        action="append",
        required=True,
        metavar="NAME[:lower]",
        help="a score column, repeatable; :lower where lower is better (perplexity_bpb:lower)",
    )
    p.add_argument("--buckets", type=int, default=20, help="equal-count buckets per column (Nemotron-CC: 20)")
    p.add_argument("--output", required=True, metavar="MODEL_DIR", help="model folder (must not exist)")


def _calibrate_buckets(args: argparse.Namespace) -> int:
    from classifiers.buckets import calibrate_buckets

    meta = calibrate_buckets(args.input, args.column, args.output, args.buckets)
    counts = ", ".join(f"{k}: {v:,}" for k, v in meta["documents"].items())
    print(
        f"buckets: {args.output}  (sha256 {meta['model_sha256'][:12]}, {meta['buckets']} per column; {counts})"
    )
    print(
        f"score with: --scorer quality-buckets={args.output}  (writes quality_bucket, 0-{meta['buckets'] - 1})"
    )
    return 0


def _train_quality(args: argparse.Namespace) -> int:
    """train-quality's inputs, one way of three: --positive/--negative, the config's sources, --labels."""
    cfg = QualityTrainConfig.load(args.config, args.overrides)
    if args.seed is not None:
        cfg = cfg.replace(seed=args.seed)
    given = [flag for flag, v in (("--positive", args.positive), ("--negative", args.negative)) if v]
    if args.labels is not None:
        if given or cfg.sources is not None:
            other = " and ".join(given) or "a sources: list in the config"
            raise ConfigError(f"--labels trains on one labels file alone; drop {other}")
        meta = train_quality_labels(args.labels, args.output, cfg)
        lab = meta["training_data"]["labels"]
        print(
            f"labels: {lab['records']} records, {lab['null_scores']} with a null score skipped; "
            f"score >= {lab['score_threshold']:g}: {lab['positive_documents']} positive, "
            f"{lab['negative_documents']} negative"
        )
        return _print_trained(args.output, meta)
    if cfg.sources is not None and given:
        raise ConfigError(f"the config has a sources: list; drop {' and '.join(given)} (or the list)")
    if cfg.sources is None and len(given) < 2:
        raise ConfigError(
            "train-quality: give --positive FILE... and --negative FILE..., a sources: list in --config, "
            "or --labels FILE"
        )
    return _print_trained(args.output, train_quality(args.positive, args.negative, args.output, cfg))


def _train_toxicity(args: argparse.Namespace) -> int:
    cfg = ToxicityTrainConfig.load(args.config, args.overrides)
    if args.seed is not None:
        cfg = cfg.replace(seed=args.seed)
    return _print_trained(args.output, train_toxicity(args.positive, args.negative, args.output, cfg))


def _print_trained(output: str, meta: dict) -> int:
    c = meta["counts"]
    print(f"model: {output}  (sha256 {meta['model_sha256'][:12]}, {meta['fasttext_version']})")
    print(
        f"documents read: {c['positive_read']} positive, {c['negative_read']} negative; "
        f"trained on {c['train_pos']} + {c['train_neg']}, held out {c['holdout_pos']} + {c['holdout_neg']}"
    )
    sources = meta["training_data"]["sources"]
    for src in sources if len(sources) > 2 else ():  # several sources in a class: show the mix
        print(
            f"  {src['label']} {src['name']}: share {src['share']:.3f}, {src['documents']} documents, "
            f"{src['train_examples']} training examples ({src['train_distinct']} distinct), {src['held_out']} held out"
        )
    print(metrics_table({"held-out": meta["heldout"]}))
    return 0


def _check_predictions(path: str | None) -> None:
    """--predictions names a file in a folder that exists: checked before any model runs."""
    if path:
        pred = Path(path).expanduser()
        if pred.is_dir():
            raise OutputConflict(f"--predictions {pred} is a folder; name a file")
        if not pred.parent.is_dir():  # open() does not make folders; neither do we
            raise OutputConflict(f"--predictions {pred}: folder {pred.parent} does not exist")
        check_folder_path(pred.parent, "--predictions folder")


def _evaluate(args: argparse.Namespace) -> int:
    cfg = load_settings(EvaluateSettings, args, {"threshold": args.threshold})
    if args.signal or args.cv:
        return _evaluate_signals(args, cfg)
    if args.model is None:
        raise ConfigError("evaluate: give --model MODEL_DIR, or --signal SIGNAL (repeatable) and/or --cv")
    _check_predictions(args.predictions)
    metrics, scores = evaluate(args.model, args.labelled, cfg.threshold)
    if args.predictions:
        with open(args.predictions, "w", encoding="utf-8") as f:
            for i, s in enumerate(scores):
                f.write(json.dumps({"index": i, "quality": float(s)}) + "\n")
    print(metrics_table({args.labelled: metrics}))
    print(json.dumps(metrics, sort_keys=True))
    return 0


def _evaluate_signals(args: argparse.Namespace, cfg: EvaluateSettings) -> int:
    if args.threshold is not None:
        raise ConfigError(
            "--threshold is for --model alone (precision and recall); a signal table has no threshold"
        )
    _check_predictions(args.predictions)
    signals = [f"quality={args.model}"] * (args.model is not None) + list(args.signal)
    report, values = evaluate_signals(args.labelled, signals, cfg, cv=args.cv)
    if args.predictions:
        with open(args.predictions, "w", encoding="utf-8") as f:
            for i in range(report["n"]):
                row = {v.name: None if np.isnan(v.values[i]) else float(v.values[i]) for v in values}
                f.write(json.dumps({"index": i, **row}) + "\n")
    print(signals_table(report))
    print(json.dumps(report, sort_keys=True))
    return 0


def _wanted(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(kind, model) of every --scorer and alias, the built-in kinds first in their order (so the old
    flags name the same output folder as before --scorer existed), the others as given."""
    pairs = [("quality", args.model)] if args.model else []
    pairs += [("perplexity", m) for m in args.perplexity] + [("toxicity", m) for m in args.toxicity]
    for raw in args.scorer:
        kind, sep, model = raw.partition("=")
        if not sep or not kind or not model:
            raise ConfigError(f"--scorer {raw!r}: expected KIND=DIR, e.g. quality=out/models/quality")
        pairs.append((kind, model))
    order = list(BUILTIN)
    return sorted(pairs, key=lambda p: order.index(p[0]) if p[0] in order else len(order))


def _scorer_options(args: argparse.Namespace, kinds: set[str]) -> dict[str, dict[str, object]]:
    """KIND -> options: the `--config` file's sections, then each `--set`/`--option KIND.KEY=VALUE`.

    Not core.config.apply_overrides: KIND may hold dots (an import path), so a key's section is the
    longest kind given that prefixes it.
    """
    options: dict[str, dict[str, object]] = {}
    if args.config is not None:
        for kind, section in read_yaml_mapping(args.config).items():
            if kind not in kinds or not isinstance(section, dict):
                raise ConfigError(
                    f"{args.config}: {kind!r} must be a scorer given ({', '.join(sorted(kinds))}) "
                    "mapped to its options"
                )
            options[kind] = dict(section)
    for raw in args.overrides or ():
        key, sep, value = raw.partition("=")
        kind = max((k for k in kinds if key.startswith(k + ".")), key=len, default=None)
        if not sep or kind is None or not key[len(kind) + 1 :]:
            raise ConfigError(
                f"--set {raw!r}: expected KIND.KEY=VALUE with KIND a scorer given "
                f"({', '.join(sorted(kinds))}), e.g. perplexity.max_tokens=512"
            )
        name = key[len(kind) + 1 :]
        options.setdefault(kind, {})[name] = load_yaml(value, f"--set {key}") if value.strip() else ""
    if "quality" in options:
        raise ConfigError("--set quality.…: the quality scorer takes no options")
    return options


def _scorer_specs(args: argparse.Namespace) -> tuple[str | None, list[ScorerSpec]]:
    """(the quality model, every other scorer with its options), described (checked) before Spark."""
    wanted = _wanted(args)
    if not wanted:
        raise ConfigError("score: give at least one --scorer KIND=DIR (or --model, --perplexity, --toxicity)")
    options = _scorer_options(args, {k for k, _ in wanted})
    # The first quality model goes as run_score's `model_dir` (first column, the fingerprint's own
    # key); a second one is a spec, refused by the job's config as a second model of one kind.
    first = next((i for i, (k, _) in enumerate(wanted) if k == "quality"), None)
    quality = wanted[first][1] if first is not None else None
    rest = [km for i, km in enumerate(wanted) if i != first]
    return quality, [make_spec(k, m, options.get(k)) for k, m in rest]


def _score(args: argparse.Namespace) -> int:
    quality, specs = _scorer_specs(args)
    res = run_score(
        args.input,
        args.output,
        quality,
        scorers=specs,
        batch_size=args.batch_size,
        spark=SparkOptions.from_args(args),
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
    bodies = {
        "train-quality": _train_quality,
        "train-toxicity": _train_toxicity,
        "train-ensemble": _train_ensemble,
        "calibrate-buckets": _calibrate_buckets,
        "evaluate": _evaluate,
        "score": _score,
        "annotate": _annotate,
    }
    return run_subcommand(build_parser(), bodies, argv)
