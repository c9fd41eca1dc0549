"""Command line: `python -m workflows demo | train-lm | ablate | ablate-demo | mixture-search | compose |
pick-records | compare-runs`.

Each workflow's module adds its own arguments (`add_arguments`) and runs them (`run`), except train-lm, whose
config keys come through `--config`/`--set` (LMTrainConfig). Bad input is a core `UserError`: `error: ...`,
exit 2 before any work starts (core/cli.py). A step that fails prints its command and exits 1 (2 when it
refused its input); rerunning the same command skips every finished step.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from core.cli import add_config_args, command_parser, guarded, setup_logging
from workflows import ablate, ablate_demo, compare_runs, compose, demo, pick_records, search
from workflows.steps import StepFailed


def _add_train_lm(sub: argparse._SubParsersAction) -> None:
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
    add_config_args(lm, "workflows/train_lm.py, LMTrainConfig")


def _train_lm(args: argparse.Namespace) -> int:
    from workflows.train_lm import LMTrainConfig, train_lm

    cfg = LMTrainConfig.load(args.config, args.overrides)
    meta = train_lm(args.output, cfg, args.reference, args.tokenizer, args.master)
    h, t = meta["heldout"], meta["training"]
    print(f"\nmodel: {Path(args.output) / 'model'}  ({meta['params']:,} params, step {t['step']}, "
          f"final loss {t.get('final_loss', float('nan')):.4f})")  # fmt: skip
    print(f"held-out reference text: {h['documents']} documents, {h['tokens']:,} tokens scored: "
          f"perplexity {h['perplexity']:.2f}, {h['bits_per_byte']:.3f} bits/byte")  # fmt: skip
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser, sub = command_parser("workflows", __doc__)
    demo.add_arguments(sub.add_parser("demo", help="WARCs to a trained model and report.html (`make demo`)"))
    _add_train_lm(sub)
    ablate.add_arguments(
        sub.add_parser("ablate", help="train one small model per recipe (arm) and seed; bits per byte")
    )
    ablate_demo.add_arguments(
        sub.add_parser("ablate-demo", help="does each stage of the demo path help? (`make ablate`)")
    )
    search.add_arguments(
        sub.add_parser(
            "mixture-search", help="choose a recipe's weights from a swarm of proxy runs (issue 45)"
        )
    )
    compose.add_arguments(sub.add_parser("compose", help="regenerate docker-compose.yml"))
    pick_records.add_arguments(
        sub.add_parser("pick-records", help="the first N records a condition selects in a cc-index")
    )
    compare_runs.add_arguments(
        sub.add_parser("compare-runs", help="do two `make demo` outputs hold the same data? (exit 1: no)")
    )
    return parser


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": demo.run,
    "train-lm": _train_lm,
    "ablate": ablate.run,
    "ablate-demo": ablate_demo.run,
    "mixture-search": search.run,
    "compose": compose.run,
    "pick-records": pick_records.run,
    "compare-runs": compare_runs.run,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()

    def run() -> int:
        try:
            return COMMANDS[args.command](args)
        except StepFailed as e:
            print(f"error: {e}\nRerun the same command: finished steps are skipped.", file=sys.stderr)
            return 2 if e.status == 2 else 1

    return guarded(run)
