"""`python -m mixtures plan RECIPE [--set key=value ...] [--seq-len L [--heldout-sequences N]] [--model-params N]`:
the token plan and compute cost of a recipe, `--set` overriding the recipe's own settings
(`--set total_tokens=2e6`) before it is validated. With the trainer's data.seq_len and
eval.sequences_per_source the plan counts exactly what its sampler will draw and refuse.
`python -m mixtures selector-effect RECIPE --tokenizer FILE`: what each selector removes, in documents
and tokens (mixtures/selector_effect.py). (Ablations of recipes, which train models, are a workflow:
`python -m workflows ablate`.)
`python -m mixtures search RECIPE ...`: mixture search trains proxy models, which this package may not
start (the layers: mixtures sits below the trainer and the workflows); it prints the workflow's command
line with the same arguments, `python -m workflows mixture-search RECIPE ...`, and exits 2. The math of
the search is here (mixtures/search.py); the proxies are trained by workflows/search.py.

Exit status: 0 the plan has no warnings; 1 it printed warnings (a cap exceeded, a source unknown);
2 the recipe is invalid (the message names the file and the key), or so are its inputs.
"""

from __future__ import annotations

import argparse
import sys

if __name__ == "__main__":  # before the imports below (seconds): a Ctrl-C then is `interrupted` too
    from core.cli import handle_interrupts

    handle_interrupts()

from core.cli import add_set_arg, command_parser, guarded
from mixtures.plan import H100_BF16_DENSE_FLOPS, format_plan, make_plan
from mixtures.recipe import Recipe


def _number(s: str) -> float:
    """'8e9', '8B', '125M' -> float."""
    mult = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
    s2 = s.strip().upper()
    try:
        return float(s2[:-1]) * mult[s2[-1]] if s2 and s2[-1] in mult else float(s2)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r} (e.g. 8e9 or 8B)") from None


def _positive(parse):
    """An argparse type: `parse`, then refuse zero, negatives, NaN and infinity (each divides a cost)."""

    def check(s: str):
        v = parse(s)
        if not (0 < v < float("inf")):
            raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {s!r}")
        return v

    check.__name__ = parse.__name__  # argparse names the type in its message
    return check


def _at_least_zero(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {s!r}")
    return v


# trainer/config.py's EvalSection.sequences_per_source default (mixtures may not import the trainer;
# tests/mixtures/test_plan.py checks that the two agree)
TRAINER_HELDOUT_SEQUENCES = 16


def sampler_arguments(seq_len: int | None, heldout: int | None) -> tuple[int, int]:
    """The trainer's data.seq_len and eval.sequences_per_source -> the sampler's row length and split.

    The trainer's sampler cuts rows of seq_len + 1 tokens (inputs and their shifted targets); without a
    seq_len the plan counts single tokens and holds nothing out unless told to."""
    if seq_len is None:
        return 1, heldout or 0
    return seq_len + 1, TRAINER_HELDOUT_SEQUENCES if heldout is None else heldout


def _fraction(s: str) -> float:
    """MFU: a share of the device peak, in (0, 1]."""
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {s!r}")
    return v


def main(argv: list[str] | None = None) -> int:
    parser, sub = command_parser("mixtures", __doc__)
    p = sub.add_parser("plan", help="tokens per source and phase, epochs, caps, FLOPs and GPU-hours")
    p.add_argument("recipe", help="recipe YAML (see mixtures/demo.yaml)")
    add_set_arg(p, "total_tokens=2e6 or sources.web.max_epochs=2")
    p.add_argument(
        "--model-params", type=_positive(_number), default=None, metavar="N", help="parameters, e.g. 8B"
    )
    p.add_argument(
        "--seq-len",
        type=_positive(int),
        default=None,
        help="the trainer's data.seq_len: count rows of seq_len + 1 tokens, as its sampler cuts them "
        "(default: count tokens)",
    )
    p.add_argument(
        "--heldout-sequences",
        type=_at_least_zero,
        default=None,
        metavar="N",
        help="the trainer's eval.sequences_per_source: rows of whole documents held out per source, which "
        f"the source cannot repeat (default {TRAINER_HELDOUT_SEQUENCES} with --seq-len, as the trainer's; "
        "else 0)",
    )
    p.add_argument(
        "--mfu", type=_fraction, default=0.40, help="model FLOPs utilisation assumed (default 0.40)"
    )
    p.add_argument(
        "--peak-flops",
        type=_positive(_number),
        default=H100_BF16_DENSE_FLOPS,
        help="device peak FLOP/s (default 989e12: H100 SXM dense BF16)",
    )
    e = sub.add_parser("selector-effect", help="documents and tokens each selector removes, alone and last")
    e.add_argument("recipe", help="recipe YAML whose sources select")
    e.add_argument("--tokenizer", required=True, help="tokenizer.json the shards were made with")
    sub.add_parser(
        "search", help="mixture search: prints `python -m workflows mixture-search ...` (it trains models)"
    ).add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    def run() -> int:
        if args.command == "search":
            import shlex

            # a message, not a command this package runs (tests/test_architecture.py: no `-m` list here)
            cmd = (
                f"{shlex.quote(sys.executable)} -m workflows mixture-search {shlex.join(args.rest)}".rstrip()
            )
            print(
                "mixture search trains proxy models, so it is a workflow (mixtures/ sits below the trainer); "
                f"run:\n  {cmd}",
                file=sys.stderr,
            )
            return 2
        if args.command == "selector-effect":
            import json

            from mixtures.selector_effect import format_effect, selector_effect

            result = selector_effect(args.recipe, args.tokenizer)
            print(format_effect(result))
            print(json.dumps(result, sort_keys=True))
            return 0
        try:
            recipe = Recipe.load(args.recipe, args.overrides)
            plan = make_plan(recipe, *sampler_arguments(args.seq_len, args.heldout_sequences))
        except FileNotFoundError as e:  # e.g. a manifest listed by a recipe source vanished meanwhile
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(format_plan(plan, args.model_params, args.mfu, args.peak_flops))
        return 1 if plan.warnings else 0

    return guarded(run)  # a bad recipe (RecipeError) or selector: `error: ...`, exit 2


if __name__ == "__main__":
    sys.exit(main())
