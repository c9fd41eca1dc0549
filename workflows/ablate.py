"""`python -m workflows ablate ARM.yaml ... --output DIR`: proxy-model ablations of mixture recipes.

Each arm is a recipe (mixtures/recipe.py, with an optional `train:` mapping of trainer overrides).
Every arm trains the same model (the trainer config, `--set` overrides), from the same
initialisation, on the same number of tokens, with the same tokenizer, once per seed; the arms
are then compared on bits per byte of evaluation text that none of them trains on. As FineWeb and
DCLM justify their filters: same model, same tokens, different data, held-out text.

Checked before any training (exit 2, naming the arms): arm names are unique, every source is
tokenized, every arm has the same `total_tokens` and the same tokenizer (sha256 of the shards'
tokenizer.json), and no arm's `train:` changes the model, the seed or the row length.

Per arm and seed, under DIR/runs/<arm>/seed-<s>/:

    recipe.yaml   the arm's recipe with absolute paths and `seed: s` (data order and held-out split)
    train/        the trainer (trainer/launch.py run_command): trainer.train --config <trainer config>
                  seed=s data.recipe=... ; the trainer's own checkpoints make a killed run resume
    model/        trainer.export_lm, in this process (the final weights as a torch.export program)
    result.json   last: bits per byte per eval set, tokens seen, wall time. A rerun skips a run
                  that has it; a run whose recipe changed since is refused (another --output).

Seed s sets the trainer's `seed` (initialisation) and the recipe's `seed` (data order, held-out
documents) together, and is the same for every arm: arm A seed 1 and arm B seed 1 start from the
same weights. Bits per byte = summed token NLL (nats) / (ln 2 × UTF-8 bytes of the scored text),
from the perplexity scorer (classifiers/perplexity.py) on the exported model, whatever the
tokenizer. `own` is each arm's own held-out documents (the trainer's held-out rows, whole documents
no step trained on): its mean loss per token × target tokens / (ln 2 × their bytes); EOD targets
count in the loss and have no bytes, as in the trainer's loss.

An arm whose sources hold fewer tokens than the budget is trained with repetition
(`data.allow_over_cap`) and flagged in the table (`epochs` > 1). DIR gets ablation.json, the table
(ablation.md) and a chart (ablation.png); `python -m report --ablation DIR` includes them.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from core.config import fingerprint_of, read_yaml_mapping
from core.errors import InputError, OutputConflict
from core.names import check_file_name
from core.output import atomic_write_json, guard_folder
from core.safe_json import read_json_file
from mixtures.draw import resolve_weights
from mixtures.recipe import Recipe, RecipeError
from mixtures.validate import check_sources, drawn_sources
from trainer.launch import run_command
from trainer.metrics import MetricsLog
from workflows.paths import project_path
from workflows.steps import StepFailed, call, launch

DEFAULT_TRAINER_CONFIG = "configs/train-debug.yaml"
_DEFAULT_TRAINER_PATH = project_path(DEFAULT_TRAINER_CONFIG)
# `train:` keys an arm may not set: they would make the arms different models or runs
FIXED_KEYS = ("model.", "seed", "data.seq_len", "schedule.steps", "schedule.global_batch", "data.recipe")
# `train:` keys that name a folder or file: a recipe is a file, and what it says never chooses where a
# run writes or reads (CONVENTIONS 14); ablate puts every run under --output. For all arms: --set.
PATH_KEYS = ("logging.dir", "checkpoint.dir", "checkpoint.staging", "data.shard_cache_dir",
             "deepspeed.config_file")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Options:
    output: Path
    seeds: int = 3
    base_seed: int = 1
    trainer_config: Path = _DEFAULT_TRAINER_PATH
    processes: int = 1
    seq_len: int = 256
    global_batch: int = 8
    overrides: tuple[str, ...] = ()
    """`key=value` for the trainer, after the config and before an arm's own `train:`."""
    eval_docs: int = 200
    """documents per eval set (the first ones of the file): bounds the scoring time"""
    eval_chunks: int = 4
    """windows of seq_len tokens scored per document (the scorer's max_chunks)"""
    baseline: str | None = None
    """arm the differences are taken to; default: the first arm"""

    def record(self) -> dict[str, Any]:
        """What decides the runs (the output folder aside), JSON-ready."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "output"}
        return {
            k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
            for k, v in out.items()
        }

    def identity(self) -> dict[str, Any]:
        """What decides one run's result: not how many seeds there are nor the baseline (a rerun with
        more seeds, or another baseline, reuses the finished runs)."""
        return {k: v for k, v in self.record().items() if k not in ("seeds", "base_seed", "baseline")}


@dataclass
class Arm:
    name: str
    path: Path
    recipe: Recipe
    data: dict[str, Any]
    """the recipe as written, paths made absolute (what each run's recipe.yaml is made from)"""
    tokenizer: dict[str, Any] = field(default_factory=dict)
    unique_tokens: int = 0
    """tokens of the sources the arm's phases draw from"""

    def train_args(self) -> list[str]:
        return [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in self.recipe.train.items()]


def load_arms(paths: list[str]) -> list[Arm]:
    """Every arm's recipe and shard manifests; InputError when the arms cannot be compared.

    The sources are checked by mixtures/validate.py's `check_sources`, the trainer's own check (shards,
    select, files, one tokenizer), and the weights by tokens resolved from their manifests as the
    trainer's sampler resolves them: a temperature phase has no `weights` until then, so the sources it
    draws are known only after (reading `ph.weights` before found none, and no tokenizer: KeyError)."""
    arms = []
    for p in paths:
        recipe = Recipe.load(p)
        # an arm's name is its run folder (DIR/runs/<name>/): the recipe's `name` (checked on load), or
        # the file's stem, held to the same rule here
        try:
            check_file_name(recipe.name, folder=f"{Path(p).parent} (an arm's name is its run folder)")
        except ValueError as e:
            raise InputError(f"arm {p}: its name (the file's name without .yaml) {e}") from None
        try:
            manifests = check_sources(recipe)
            recipe = resolve_weights(recipe, {n: int(m["tokens"]) for n, m in manifests.items()})
        except RecipeError as e:
            raise InputError(f"arm {recipe.name} ({p}): {e}") from None
        data = read_yaml_mapping(Path(p))
        for name, src in recipe.sources.items():
            data["sources"][name] = {
                **data["sources"][name],
                **{k: str(getattr(src, k)) for k in ("shards", "docs") if getattr(src, k) is not None},
            }
        arm = Arm(recipe.name, Path(p).resolve(), recipe, data)
        drawn = drawn_sources(recipe)
        if not drawn:  # cannot happen past the recipe's checks (every phase draws); said, not assumed
            raise InputError(f"arm {arm.name} ({p}): no phase draws from any source")
        tok = manifests[drawn[0]]["tokenizer"]  # check_sources: every drawn source has the same one
        arm.tokenizer = {"sha256": tok.get("sha256"), "path": tok.get("path")}
        arm.unique_tokens = sum(int(manifests[n]["tokens"]) for n in drawn)
        arms.append(arm)
    check_arms(arms)
    return arms


def check_arms(arms: list[Arm]) -> None:
    """Same budget, same tokenizer, unique names, no arm changing the model: else nothing is trained."""
    if not arms:
        raise InputError("give at least one arm (a recipe YAML)")
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise InputError(f"arm names must be unique (a recipe's `name`, else its file name): {names}")

    def differ(what: str, value: Callable[[Arm], Any]) -> None:
        if len({json.dumps(value(a)) for a in arms}) > 1:
            detail = "; ".join(f"{a.name} ({a.path.name}): {value(a)}" for a in arms)
            raise InputError(f"the arms have different {what}, so they cannot be compared: {detail}")

    differ("tokenizers (sha256 of tokenizer.json)", lambda a: a.tokenizer["sha256"])
    differ("token budgets (total_tokens)", lambda a: a.recipe.total_tokens)
    for a in arms:
        keys = train_keys(a.recipe.train)
        bad = [k for k in keys if any(k in (f, f.rstrip(".")) or k.startswith(f) for f in FIXED_KEYS)]
        if bad:
            raise InputError(
                f"arm {a.name}: train.{bad[0]} would make it another model or run; every arm trains the "
                "same model with the same seeds (set it for all arms with --set)"
            )
        # a section set whole (`logging: {}`) replaces the folder ablate set in it, too
        paths = [k for k in keys if any(p == k or p.startswith(k + ".") for p in PATH_KEYS)]
        if paths:
            raise InputError(
                f"arm {a.name} ({a.path}): train.{paths[0]} names a folder or file; a recipe does not "
                f"choose where a run writes or reads (every run is under --output: runs/{a.name}/seed-N/); "
                "set it for all arms with --set"
            )


def train_keys(train: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted keys an arm's `train:` sets, as the trainer's override parser reads them: a nested
    mapping (`train: {logging: {dir: x}}`) sets every key under it, and a key is taken stripped
    (core.config.apply_overrides), so neither hides a key from the checks above."""
    out = []
    for k, v in train.items():
        key = ".".join(part.strip() for part in f"{prefix}{k}".split("."))
        out += train_keys(v, key + ".") if isinstance(v, dict) and v else [key]
    return out


# What is not text in held-out text: C0 and C1 controls other than tab, newlines and form feeds, U+FFFD
# (classifiers.data decodes with errors="replace": each byte that is not UTF-8 becomes one), the
# noncharacters U+FFFE/U+FFFF and lone surrogates (a JSON string can hold "\ud800").
NOT_TEXT = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd\ufffe\uffff\ud800-\udfff]")
MAX_NOT_TEXT = 0.01
"""Share of such characters an eval set (and each of its documents) may hold. Real text holds ~none
(the shared Wikipedia and DCLM sets: 0); random bytes read as text ~55% (about half the bytes are not
ASCII, nearly all of those are not UTF-8, and 28 of the 128 ASCII bytes are controls). 1% leaves room
for a stray mis-decoded character in real pages."""


def check_text(name: str, path: str, docs: list[str]) -> None:
    """InputError unless `docs` read as text: bits per byte of random bytes rank nothing (every model
    is equally bad at them), so a set that is not text is refused, not scored."""
    chars = sum(len(d) for d in docs)
    bad = [len(NOT_TEXT.findall(d)) for d in docs]
    worst = max(range(len(docs)), key=lambda i: bad[i] / max(len(docs[i]), 1), default=None)
    if chars and sum(bad) / chars > MAX_NOT_TEXT:
        raise InputError(
            f"--eval {name}: {path} is not text: {sum(bad) / chars:.1%} of its {chars:,} characters are "
            f"control characters or bytes that are not UTF-8 (at most {MAX_NOT_TEXT:.0%}); give held-out "
            "text (JSONL with a `text` field, Parquet, or UTF-8 plain text)"
        )
    if worst is not None and bad[worst] / max(len(docs[worst]), 1) > 10 * MAX_NOT_TEXT:
        raise InputError(
            f"--eval {name}: document {worst + 1} of {path} is not text: {bad[worst]:,} of its "
            f"{len(docs[worst]):,} characters are control characters or bytes that are not UTF-8"
        )


def load_eval_sets(specs: list[str], max_docs: int) -> dict[str, list[str]]:
    """`NAME=PATH` (JSONL, Parquet, a folder, plain text; classifiers.data) -> the first max_docs texts,
    refused when they are not text (`check_text`)."""
    from classifiers.data import DataError, read_inputs

    sets: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path or name in sets or name == "own":
            raise InputError(f"--eval {spec!r}: give NAME=PATH with a unique NAME other than `own`")
        try:
            docs = [d for f in read_inputs([path], min_chars=1) for d in f.docs]
        except (DataError, OSError) as e:
            raise InputError(f"--eval {name}: {e}") from None
        sets[name] = docs[:max_docs]
        check_text(name, path, sets[name])  # what is scored
    return sets


def steps_for(budget: int, opts: Options) -> int:
    """Optimizer steps that draw the budget: rows of seq_len + 1 tokens, global_batch rows a step."""
    steps = budget // (opts.global_batch * (opts.seq_len + 1))
    if steps < 1:
        raise InputError(
            f"total_tokens {budget:,} is less than one step ({opts.global_batch} rows of {opts.seq_len + 1})"
        )
    return steps


def _write_recipe(arm: Arm, seed: int, run: Path) -> Path:
    import yaml

    data = {k: v for k, v in arm.data.items() if k != "train"} | {"seed": seed, "name": arm.name}
    path = run / "recipe.yaml"
    path.write_text(
        "# Written by `python -m workflows ablate` (workflows/ablate.py)\n" + yaml.safe_dump(data)
    )
    return path


def _guard_run(arm: Arm, seed: int, run: Path, opts: Options) -> None:
    """A run folder belongs to one recipe, seed and trainer setup: another one is refused, not mixed in."""
    ident = {"arm": arm.data, "train": arm.recipe.train, "seed": seed, "options": opts.identity()}
    fp = fingerprint_of(ident)
    marker = run / "run.json"
    if marker.is_file() and _fingerprint(marker) != fp:
        raise OutputConflict(
            f"{run} was trained from another recipe or setup of arm {arm.name}; use another --output "
            "or delete that folder"
        )
    run.mkdir(parents=True, exist_ok=True)
    atomic_write_json(marker, {"fingerprint": fp, **ident})


def _fingerprint(marker: Path) -> object:
    """A run folder's run.json fingerprint; the folder is data (another run, another user, a crash), so
    its JSON is read by the checked reader (core/safe_json.py) and a marker without one is no match."""
    data = read_json_file(marker)
    return data.get("fingerprint") if isinstance(data, dict) else None


def _result(path: Path) -> dict[str, Any]:
    """A finished run's result.json, checked: a file this folder holds, not one this process wrote."""
    data = read_json_file(path)
    if not isinstance(data, dict) or not isinstance(data.get("bpb"), dict):
        raise InputError(f"{path}: not an ablation result (a JSON object with `bpb`); delete it to rerun")
    return data


def train_run(arm: Arm, seed: int, opts: Options, evals: dict[str, list[str]], log) -> dict[str, Any]:
    """Train (or resume), export and evaluate one arm at one seed; result.json is written last."""
    # the one checked helper before a name becomes a path (load_arms checked it; an Arm made elsewhere too)
    run = opts.output / "runs" / check_file_name(arm.name, folder="runs/") / f"seed-{seed}"
    _guard_run(arm, seed, run, opts)
    if (run / "result.json").is_file():
        log(f"==> {arm.name} seed {seed}: done, skipped")
        return _result(run / "result.json")
    recipe = _write_recipe(arm, seed, run)
    steps = steps_for(arm.recipe.total_tokens, opts)
    train = run / "train"
    t0 = time.perf_counter()
    if not MetricsLog.read(train).finished(steps):
        log(f"==> {arm.name} seed {seed}: train {steps} steps")
        overrides = [f"seed={seed}", f"data.recipe={recipe}", f"data.seq_len={opts.seq_len}",
                     f"schedule.steps={steps}", f"schedule.global_batch={opts.global_batch}", "schedule.rampup=[]",
                     f"schedule.micro_batch={opts.global_batch // opts.processes}", "data.allow_over_cap=true",
                     f"logging.dir={train}", f"checkpoint.dir={train / 'ckpt'}", "checkpoint.resume=true",
                     *opts.overrides, *arm.train_args()]  # fmt: skip
        cmd, env = run_command(str(opts.trainer_config), overrides, processes=opts.processes)
        launch(cmd, log, env)
        if not MetricsLog.read(train).finished(steps):
            raise StepFailed(f"the trainer stopped before step {steps} (see {train / 'metrics.jsonl'})", 1)
    model = run / "model"
    if not (model / "metadata.json").is_file():
        tmp = run / ".model.export"
        shutil.rmtree(tmp, ignore_errors=True)  # a crashed export: doing it again is cheap
        call("trainer.export_lm", ["--checkpoints", str(train / "ckpt"), "--output", str(tmp)], log=log)
        tmp.rename(model)
    end = MetricsLog.read(train).last("end") or {}
    result = {
        "arm": arm.name,
        "seed": seed,
        "steps": steps,
        "tokens_seen": int(sum(end.get("per_source_tokens", {}).values())),
        "train_wall_s": round(end.get("wall_s", 0.0), 1),
        "bpb": {name: eval_bpb(model, texts, opts) for name, texts in evals.items()}
        | {"own": own_bpb(train, recipe, opts, model)},
    }
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    atomic_write_json(run / "result.json", result)
    # `own` is None when the run held out no rows (eval.sequences_per_source=0, as mixture-search's proxies)
    log(
        f"==> {arm.name} seed {seed}: "
        + " ".join(f"{k} {'–' if v is None else f'{v:.4f}'}" for k, v in result["bpb"].items())
    )
    return result


def eval_bpb(model: Path, texts: list[str], opts: Options) -> float:
    """Bits per byte of `texts` under the exported model (the perplexity scorer's own NLL and bytes)."""
    from classifiers.perplexity import PerplexityScorer

    scorer = PerplexityScorer.load(str(model), {"max_tokens": opts.seq_len, "max_chunks": opts.eval_chunks})
    r = scorer.nll(texts)
    return float(r.nll.sum() / math.log(2) / r.bytes.sum())


def own_bpb(train: Path, recipe: Path, opts: Options, model: Path) -> float | None:
    """The trainer's final held-out loss per source, as bits per byte of those held-out rows' targets."""
    from mixtures.sampler import MixtureSampler

    ev = MetricsLog.read(train).last("eval")
    if ev is None:
        return None
    n = int(ev["sequences_per_source"])
    held = MixtureSampler(
        Recipe.load(recipe), opts.seq_len + 1, 0, 1, allow_over_cap=True, heldout_sequences=n
    ).heldout()
    nbytes = _token_bytes(model / "tokenizer.json")
    nats = sum(ev["eval"][s]["loss"] * held[s][:, 1:].size for s in ev["eval"])
    total = sum(int(nbytes[held[s][:, 1:]].sum()) for s in ev["eval"])
    return float(nats / math.log(2) / total) if total else None


def _token_bytes(tokenizer_json: Path):
    """UTF-8 bytes each token id stands for: a byte-level BPE token is one character per byte; specials 0."""
    import numpy as np

    # the exported model's tokenizer: a 256K vocabulary is ~20 MB, past read_json_file's default bound
    tok = read_json_file(tokenizer_json, max_bytes=256 << 20)
    vocab = tok["model"]["vocab"]
    out = np.zeros(max([*vocab.values(), *(t["id"] for t in tok["added_tokens"])]) + 1, np.int64)
    for piece, i in vocab.items():
        out[i] = len(piece)
    for t in tok["added_tokens"]:
        out[t["id"]] = 0
    return out


def ablate(paths: list[str], opts: Options, eval_specs: list[str], log=print) -> dict[str, Any]:
    """Check every arm, train the missing runs one after another, write ablation.json/.md/.png."""
    from mixtures.ablation_table import chart, format_table, summarize

    arms = load_arms(paths)
    steps_for(arms[0].recipe.total_tokens, opts)
    evals = load_eval_sets(eval_specs, opts.eval_docs)
    baseline = opts.baseline or arms[0].name
    if baseline not in [a.name for a in arms]:
        raise InputError(f"--baseline {baseline}: not an arm; arms: {', '.join(a.name for a in arms)}")
    evals_id = {k: fingerprint_of(v) for k, v in evals.items()}
    guard_folder(opts.output, "ablate", opts.identity(), fingerprint_of([opts.identity(), evals_id]), {})
    seeds = [opts.base_seed + k for k in range(opts.seeds)]
    # seed by seed, every arm: a run cut short still leaves whole seeds to compare
    results = [train_run(a, s, opts, evals, log) for s in seeds for a in arms]
    arm_info = {
        a.name: {"recipe": str(a.path), "unique_tokens": a.unique_tokens, "budget": a.recipe.total_tokens}
        for a in arms
    }
    summary = summarize(arm_info, results, baseline, [*evals, "own"])
    summary["tokenizer"] = arms[0].tokenizer
    summary["options"] = opts.record()
    atomic_write_json(opts.output / "ablation.json", summary)
    table = format_table(summary)
    (opts.output / "ablation.md").write_text(table + "\n")
    chart(summary, opts.output / "ablation.png")
    log(table)
    return summary


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer in [lo, hi]. Every number has a stated range: `--seeds 10**9` would
    queue a billion runs, `--base-seed -1` fail in numpy's SeedSequence after the launch."""

    def parse(s: str) -> int:
        t = s.strip()
        if not t.isascii() or not t.isdigit() or len(t) > 20 or not lo <= int(t) <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer in [{lo:,}, {hi:,}], got {s!r}")
        return int(t)

    parse.__name__ = "integer"  # argparse names the type in its message
    return parse


_positive_int = _int_in(1, 1 << 20)
"""ranks, sizes: a million at most (a row of a million tokens, a batch of a million rows)"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("arms", nargs="+", metavar="ARM.yaml", help="recipes, one per arm (mixtures/ablations/)")
    p.add_argument("--output", required=True, metavar="DIR", help="output folder (reruns resume)")
    p.add_argument("--seeds", type=_int_in(1, 64), default=3, help="seeds per arm (default 3, at most 64)")
    p.add_argument("--base-seed", type=_int_in(0, 2**31), default=1, help="first seed (default 1)")
    p.add_argument("--eval", action="append", default=[], metavar="NAME=PATH",
                   help="held-out text no arm trains on (JSONL/Parquet/folder/text); repeatable")  # fmt: skip
    p.add_argument("--baseline", default=None, help="arm the differences are taken to (default: the first)")
    p.add_argument(
        "--config", default=DEFAULT_TRAINER_CONFIG, help="trainer config (default: the debug model)"
    )
    p.add_argument(
        "--processes", type=_int_in(1, 4096), default=1, help="trainer ranks (the launcher's --num_gpus)"
    )
    p.add_argument("--seq-len", type=_positive_int, default=256)
    p.add_argument("--global-batch", type=_positive_int, default=8)
    p.add_argument("--eval-docs", type=_positive_int, default=200, help="documents per eval set")
    p.add_argument(
        "--eval-chunks", type=_int_in(1, 1024), default=4, help="windows of seq-len tokens per document"
    )
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="trainer override for every arm, e.g. optimizer.lr=1e-3")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """`python -m workflows ablate`: exit 0 done, 1 a training failed (rerun to resume), 2 bad input."""
    config = Path(args.config) if Path(args.config).is_file() else project_path(args.config)
    if not config.is_file():
        raise InputError(f"--config {args.config}: no such file")
    if args.global_batch % args.processes:
        raise InputError(
            f"--global-batch {args.global_batch} is not a multiple of --processes {args.processes}"
        )
    opts = Options(
        output=Path(args.output).resolve(), seeds=args.seeds, base_seed=args.base_seed,
        trainer_config=config.resolve(), processes=args.processes, seq_len=args.seq_len,
        global_batch=args.global_batch, overrides=tuple(args.overrides), eval_docs=args.eval_docs,
        eval_chunks=args.eval_chunks, baseline=args.baseline,
    )  # fmt: skip
    try:
        ablate(args.arms, opts, args.eval)
    except StepFailed as e:
        print(f"error: {e} (rerun to resume)", file=sys.stderr)
        return 1 if e.status != 2 else 2
    return 0
