"""`make ablate`: does each stage of the demo path make the data better? Five arms, one extract run.

    python -m workflows ablate-demo [--out out/ablate] [--seeds 3] [--total-tokens 160K] [--warcs GLOB ...]

Steps (the one step runner, workflows/steps.py: each skipped when its marker exists, each job resuming
its own unfinished units; each package's command called in this process):

    eval/            held-out text no arm trains on: a 30% split of the shared Wikipedia articles (keyed by
                     text, workflows.train_lm.heldout_key), the rest kept for the quality classifier's
                     positives; the shared DCLM human-labelled documents split by label (dclm_hq, dclm_lq)
    extract/         curation extract --set filters.mode=annotate: every page language ID or a
                     filter would drop is written with drop_stage/drop_reason (null when kept)
    decontaminated/  dedup run with only its decontaminate stage (decontaminate.yaml, written here):
                     extract/ without the pages sharing a 13-word n-gram with an eval set, so that no
                     arm trains on the text it is scored on; what it removed is printed and in
                     decontaminated/stages/decontaminate/report.json
    kept/            the `drop_reason: null` rows of decontaminated/ (what drop mode keeps), so that dedup
                     sees exactly the pages the real pipeline gives it
    dedup/           dedup run on kept/
    quality-model/   classifiers train-quality: Wikipedia (training split) + WikiText vs kept/
    scored/          classifiers score of dedup/ (the `quality` column)
    tokenizer/       tokens train-tokenizer on extract/ (all pages: no arm's own data)
    tokens/<arm>/    tokens tokenize of each arm's source, with the arm's `select`
    ablation/        workflows ablate mixtures/ablations/*.yaml (the trainer once per arm and seed)
    report.html      report --ablation ablation/

The arms (mixtures/ablations/) name their folders relative to themselves (../../out/ablate/...); with
another --out or --total-tokens the driver writes copies under <out>/arms/ with the paths and budget
changed, as the demo workflow does for its recipe.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from workflows.paths import PROJECT_ROOT, default_shared_data, project_path, shared_warcs
from workflows.steps import StepRunner, call

ARMS = ("raw", "langid", "filters", "dedup", "quality")
ARM_DIR = PROJECT_ROOT / "mixtures" / "ablations"
DEFAULT_OUT = PROJECT_ROOT / "out" / "ablate"
WIKI_HELDOUT = 0.3
# What every arm is scored on (workflows ablate --eval), and so what every arm is decontaminated against.
EVAL_SETS = ("wiki_heldout", "dclm_hq", "dclm_lq")
# The proxy run: the debug model (configs/train-debug.yaml), 16 rows of 257 tokens a step (fewer, larger
# steps: on 2 shared CPU cores a ZeRO-3 step's fixed cost dominates small ones), warm-up scaled to a run
# of ~24 steps, no intermediate eval, TensorBoard or sample; eval text capped so that scoring stays
# small next to training (50 documents, their first 256 tokens, per set). `--ablate-arg` values come after these and win.
ABLATE_DEFAULTS = ("--global-batch", "16", "--eval-docs", "50", "--eval-chunks", "1",
                   "--set", "schedule.warmup_steps=4", "--set", "eval.every=0", "--set", "logging.tensorboard=false",
                   "--set", "logging.sample_tokens=0", "--set", "checkpoint.every=10")  # fmt: skip


def write_eval_sets(shared: Path, out: Path) -> None:
    """eval/: wiki_heldout + wiki_train (JSONL, a keyed split), dclm_hq + dclm_lq (by human label)."""
    from core.output import atomic_write_json
    from workflows.train_lm import heldout_key

    ev = out / "eval"
    ev.mkdir(parents=True, exist_ok=True)
    wiki = (shared / "quality" / "enwiki_sample_articles.jsonl").read_text().splitlines()
    parts: dict[str, list[str]] = {"wiki_heldout": [], "wiki_train": [], "dclm_hq": [], "dclm_lq": []}
    for line in filter(str.strip, wiki):
        held = heldout_key(json.loads(line)["text"], 0) < WIKI_HELDOUT
        parts["wiki_heldout" if held else "wiki_train"].append(line)
    for line in filter(
        str.strip, (shared / "quality" / "dclm_human_labels_dev.jsonl").read_text().splitlines()
    ):
        parts["dclm_hq" if json.loads(line)["label"] == 1 else "dclm_lq"].append(line)
    for name, lines in parts.items():
        (ev / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    atomic_write_json(ev / "_SUCCESS", {k: len(v) for k, v in parts.items()})


def write_decontaminate_config(out: Path) -> Path:
    """decontaminate.yaml: dedup with only its decontaminate stage, in drop mode, over EVAL_SETS."""
    import yaml

    off = {"enabled": False}
    cfg = {
        "exact": off,
        "url": off,
        "cluster": off,  # and with it minhash
        "lines": off,
        "decontaminate": {
            "sets": [{"name": n, "paths": [str(out / "eval" / f"{n}.jsonl")]} for n in EVAL_SETS],
            "mode": "drop",
        },
    }
    path = out / "decontaminate.yaml"
    path.write_text(
        "# Written by `python -m workflows ablate-demo`: see its docstring\n" + yaml.safe_dump(cfg)
    )
    return path


def decontamination_summary(decon: Path) -> str:
    """One line per eval set: what the decontaminate step removed (its report.json)."""
    report = json.loads((decon / "stages" / "decontaminate" / "report.json").read_text())
    lines = [
        f"decontamination: {report['contaminated_docs']:,} of {report['documents_checked']:,} pages removed"
    ]
    for name, st in report["sets"].items():
        lines.append(
            f"  {name}: {st['documents_hit']:,} pages hit, {st['ngrams_hit']:,} of its {st['ngrams']:,} "
            f"{report['ngram']}-grams found"
            + "".join(f"\n    {e['id']}: {e['ngram']!r}" for e in st["examples"][:2])
        )
    return "\n".join(lines)


def write_kept(extract: Path, kept: Path) -> None:
    """kept/docs/: each extract file's rows with drop_reason null (the same file names)."""
    import pyarrow.parquet as pq

    from core.files import doc_parquet_files
    from core.output import atomic_write_json
    from core.selectors import parse_selectors, selection_mask

    sel = parse_selectors({"drop_reason": None})
    (kept / "docs").mkdir(parents=True, exist_ok=True)
    n = 0
    for f in doc_parquet_files(extract):
        table = pq.read_table(f)
        mask, _ = selection_mask(table, sel, source=str(f))
        tmp = kept / "docs" / f".{f.name}.tmp"
        pq.write_table(table.filter(mask), tmp, compression="zstd")
        tmp.replace(kept / "docs" / f.name)
        n += int(mask.true_count)
    atomic_write_json(kept / "_SUCCESS", {"documents": n})


def arm_recipes(out: Path, total_tokens: str | None) -> list[Path]:
    """mixtures/ablations/<arm>.yaml, or copies under <out>/arms/ pointing at <out> (module docstring)."""
    import yaml

    if out.resolve() == DEFAULT_OUT.resolve() and total_tokens is None:
        return [ARM_DIR / f"{a}.yaml" for a in ARMS]
    paths = []
    (out / "arms").mkdir(parents=True, exist_ok=True)
    for a in ARMS:
        data = yaml.safe_load((ARM_DIR / f"{a}.yaml").read_text())
        for src in data["sources"].values():
            for key in ("shards", "docs"):
                rel = Path(os.path.relpath((ARM_DIR / src[key]).resolve(), DEFAULT_OUT.resolve()))
                src[key] = str(out.resolve() / rel)
        if total_tokens is not None:
            data["total_tokens"] = total_tokens
        path = out / "arms" / f"{a}.yaml"
        path.write_text(
            f"# Generated by `python -m workflows ablate-demo` from mixtures/ablations/{a}.yaml\n"
            + yaml.safe_dump(data)
        )
        paths.append(path)
    return paths


def tokenize_commands(arms: list[Path], out: Path) -> list[tuple[str, list[str], Path]]:
    """One `tokenize` per arm source, into <out>/tokens/<arm>, with the source's own select."""
    from mixtures.recipe import Recipe

    cmds = []
    for path in arms:
        recipe = Recipe.load(path)
        for src in recipe.sources.values():
            args = ["tokenize", "--input", str(src.docs), "--tokenizer", str(out / "tokenizer" / "tokenizer.json"),
                    "--output", str(src.shards.parent.parent), "--source", src.name, "--no-progress"]  # fmt: skip
            for column, spec in src.select_spec().items():
                args += ["--select", f"{column}={spec if isinstance(spec, str) else json.dumps(spec)}"]
            cmds.append((f"tokenize:{recipe.name}", args, src.shards / "manifest.json"))
    return cmds


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default out/ablate)")
    ap.add_argument(
        "--shared-data",
        default=None,
        help="the shared data folder (default $REFINERY_SHARED_DATA, else ../shared/data beside the project)",
    )
    ap.add_argument("--warcs", nargs="+", default=None, help="WARC paths/globs (default: every shared WARC)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument(
        "--total-tokens", default=None, help="token budget of every arm (default: the arms' own, 100K)"
    )
    ap.add_argument("--prepare-only", action="store_true", help="stop before training (data and shards only)")
    ap.add_argument("--ablate-arg", action="append", default=[], help="more arguments for `workflows ablate`")


def run(args: argparse.Namespace) -> int:
    shared = Path(args.shared_data or default_shared_data()).resolve()
    out = Path(args.out).resolve()
    if not (shared / "warc").is_dir() or not (shared / "quality").is_dir():
        print(f"error: no shared data at {shared} (--shared-data)", file=sys.stderr)
        return 2
    warcs = args.warcs or shared_warcs(shared)
    out.mkdir(parents=True, exist_ok=True)
    steps = StepRunner(out / "timings.json")

    def step(name: str, marker: Path, fn) -> None:
        steps.run(name, marker.exists(), fn)

    ev, ex, kept, dd = out / "eval", out / "extract", out / "kept", out / "dedup"
    decon = out / "decontaminated"
    model, scored, tok = out / "quality-model", out / "scored", out / "tokenizer"
    step("eval sets", ev / "_SUCCESS", lambda: write_eval_sets(shared, out))
    step("extract (annotate)", ex / "_SUCCESS", lambda: call("curation", ["extract", "--input", *warcs, "--output",
                                                             str(ex), "--set", "filters.mode=annotate", "--no-progress"]))  # fmt: skip
    step("decontaminate", decon / "_SUCCESS", lambda: call("dedup", ["run", "--input", str(ex), "--output", str(decon),
                                                           "--config", str(write_decontaminate_config(out)), "--no-progress"]))  # fmt: skip
    print(decontamination_summary(decon))
    step("kept", kept / "_SUCCESS", lambda: write_kept(decon, kept))
    step("dedup", dd / "_SUCCESS",
         lambda: call("dedup", ["run", "--input", str(kept), "--output", str(dd), "--no-progress"]))  # fmt: skip
    positives = [str(ev / "wiki_train.jsonl"), str(shared / "quality" / "wikitext-2-valid.txt")]
    step("train-quality", model / "metadata.json", lambda: call("classifiers", ["train-quality", "--positive", *positives,
                                                                "--negative", str(kept), "--output", str(model)]))  # fmt: skip
    step("score", scored / "_SUCCESS", lambda: call("classifiers", ["score", "--input", str(dd), "--output", str(scored),
                                                    "--model", str(model), "--no-progress"]))  # fmt: skip
    step("train-tokenizer", tok / "tokenizer.json", lambda: call("tokens", ["train-tokenizer", "--input", str(ex),
                                                                 "--output", str(tok), "--config", str(project_path("configs/tokenizer.yaml"))]))  # fmt: skip
    arms = arm_recipes(out, args.total_tokens)
    for name, cmd, marker in tokenize_commands(arms, out):
        step(name, marker, lambda c=cmd: call("tokens", c))
    if args.prepare_only:
        return 0
    evals = [f"--eval={n}={ev / n}.jsonl" for n in EVAL_SETS]
    step("ablate", out / "ablation" / "ablation.json", lambda: call("workflows", ["ablate", *map(str, arms), "--output",
                                                                    str(out / "ablation"), "--seeds", str(args.seeds), *evals, *ABLATE_DEFAULTS, *args.ablate_arg]))  # fmt: skip
    call("report", ["--ablation", str(out / "ablation"), "--output", str(out)])
    print(f"\nablation done: {out / 'ablation' / 'ablation.md'}, {out / 'report.html'}")
    return 0
