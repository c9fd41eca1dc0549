"""Export a trained checkpoint as a self-contained reference LM folder for the perplexity scorer.

    python -m trainer.export_lm --checkpoints out/lm/train/ckpt --output out/lm/model [--tag step_…]
        [--tokenizer tokenizer.json] [--languages en ...]

The scorer (classifiers/perplexity.py) sits below the trainer in the import layers, so it cannot build
`trainer.model.Transformer`. It gets the model as a `torch.export` program instead, which runs with torch
alone. The folder holds:

    lm.pt2          torch.export program: tokens (B, T) int64 -> hidden states (B, T, C) float32, the
                    final-normed activations the LM head projects; the head's weight (V, C) is the program's
                    parameter named by metadata `head_weight` (`model.output.weight`). B and T are dynamic
                    (T from 2 to the training seq_len). Plain causal attention and RoPE positions from 0:
                    one document per row, as the trainer's document mask showed each document. Reference
                    ops (no Triton), fp32, so it runs on any CPU.
    tokenizer.json  the tokenizer the model was trained with (checked against the shards' manifest)
    metadata.json   format, languages, seq_len, vocab size, EOD id, sha256 of both files, the model config,
                    and the training run: checkpoint, steps, tokens, the trainer config, final loss and
                    held-out losses (from its metrics.jsonl), and the export check below.

Format `refinery-lm/2`. The program stops before the head so that the scorer runs it in chunks and
never holds a batch's (B, T, V) logits: a batch can then be large enough to amortise the program's
per-call cost (bench/classifiers/perplexity_throughput.py). Format 1 (the program returned the logits) is still read
by the scorer, and `program="logits"` still writes it, for the agreement test and the benchmark.

Weights come from `trainer.weights.consolidated` (ZeRO-3 shards merged offline; only checkpoints that
verify, loaded without running code). After saving, the program is loaded back the way the scorer
loads it (`classifiers.lm_archive.load_program`: refused if it could run code) and compared with the
eager module on real-shaped input; the largest logit difference is recorded. The folder is written
under a temporary name and renamed when complete; an existing --output is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if __name__ == "__main__":  # before the imports below (seconds): a Ctrl-C then is `interrupted` too
    from core.cli import handle_interrupts

    handle_interrupts()

import torch
from torch import nn

from classifiers.lm_archive import load_program
from core.cli import guarded
from core.files import sha256_file
from core.storage import is_object_store
from trainer import checkpoint as ckpt
from trainer.metrics import MetricsLog
from trainer.model import ModelConfig, Transformer
from trainer.weights import complete_tags, consolidated

FORMAT = "refinery-lm/2"
FORMAT_LOGITS = "refinery-lm/1"  # the program returns the logits (the scorer's slow path)
HEAD_WEIGHT = "model.output.weight"  # the program parameter the scorer projects hidden states with
PROGRAM, TOKENIZER, METADATA = "lm.pt2", "tokenizer.json", "metadata.json"


class ExportError(Exception):
    """The checkpoint or tokenizer cannot make a model folder; the message says which and why."""


class HiddenLM(nn.Module):
    """What the program computes: one document per row, the final hidden state of every position."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model.hidden(tokens)  # (B, T) -> (B, T, C); logits are hidden @ model.output.weight.T


class LogitsLM(nn.Module):
    """Format 1: one document per row, logits for every position."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model(tokens)  # (B, T) -> (B, T, V); no doc_ids: causal attention, positions 0..T-1


def scoring_model(sd: dict[str, torch.Tensor], model_config: dict) -> Transformer:
    """The trained weights in a CPU module with reference ops and SDPA, in eval mode."""
    cfg = ModelConfig(**{**model_config, "kernels": "reference", "attention": "sdpa"})
    model = Transformer(cfg)
    sd = dict(sd)
    if cfg.tie_embeddings:
        sd["output.weight"] = sd["tok_embeddings.weight"]
    model.load_state_dict(sd, strict=True)
    return model.eval()


def export_program(model: Transformer, path: Path, program: str = "hidden") -> None:
    seq = model.config.max_seq_len
    example = torch.randint(0, model.config.vocab_size, (2, min(seq, 16)))
    dims = {
        "tokens": {
            0: torch.export.Dim("batch", min=1, max=1 << 20),
            1: torch.export.Dim("seq", min=2, max=seq),
        }
    }
    with torch.no_grad():
        wrapper = HiddenLM(model) if program == "hidden" else LogitsLM(model)
        exported = torch.export.export(wrapper, (example,), dynamic_shapes=dims)
    torch.export.save(exported, str(path))


def export_check(model: Transformer, path: Path, program: str = "hidden", seed: int = 0) -> dict:
    """Load the saved program as the scorer does and compare its logits (through its head weight, for a
    hidden-state program) with the eager module's."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, model.config.vocab_size, (3, model.config.max_seq_len), generator=gen)
    loaded = load_program(path)
    with torch.no_grad():
        want = model(x)
        got = loaded(x)
        if program == "hidden":
            got = got @ loaded.get_parameter(HEAD_WEIGHT).t()
    return {"shape": list(x.shape), "max_abs_logit_diff": float((want - got).abs().max())}


def training_record(state: dict) -> dict:
    """The run the checkpoint came from: its config, and losses from its metrics.jsonl if it is still there."""
    cfg = state.get("config", {})
    rec = {"config": cfg, "step": state["step"], "tokens_trained": state["tokens_trained"]}
    log_dir = cfg.get("logging", {}).get("dir", "")
    log = MetricsLog.read(log_dir) if log_dir else MetricsLog(())
    if log.records:
        steps = {r["step"]: r["loss"] for r in log.steps()}
        ev, end = log.last("eval"), log.last("end")
        evals = {"step": ev["step"], **{s: v["loss"] for s, v in ev["eval"].items()}} if ev else {}
        if state["step"] in steps:
            rec["final_loss"] = steps[state["step"]]
        rec["heldout_loss"] = evals or None
        if end is not None:
            rec["wall_s"] = end.get("wall_s")
    return rec


def shards_tokenizer(state: dict) -> dict | None:
    """The tokenizer entry of the training shards' manifest (path, sha256, eod_id), if readable."""
    from mixtures.recipe import Recipe, RecipeError

    recipe_path = state.get("config", {}).get("data", {}).get("recipe")
    try:
        recipe = Recipe.load(recipe_path)
    except (RecipeError, OSError, TypeError):
        return None
    from mixtures.validate import has_manifest, read_manifest

    for src in recipe.sources.values():
        try:  # local or on an object store
            if src.shards is not None and has_manifest(src.shards):
                return read_manifest(src.shards)["tokenizer"]
        except (RecipeError, OSError, ValueError):
            continue
    return None


def _tokenizer(state: dict, given: Path | None) -> tuple[Path, dict]:
    """The tokenizer.json to ship, checked against the one the shards were made with."""
    entry = shards_tokenizer(state)
    if given is None and entry and is_object_store(entry.get("path") or ""):
        raise ExportError(
            f"the shards were made with tokenizer {entry['path']} (on an object store): pass --tokenizer, a "
            "local copy of it (it is checked against the shards' sha256)"
        )
    path = given or (Path(entry["path"]) if entry and entry.get("path") else None)
    if path is None:
        raise ExportError("no --tokenizer given and the training shards' manifest cannot be read to find it")
    if not path.is_file():
        raise ExportError(f"tokenizer {path} not found")
    sha = sha256_file(path)
    if entry is not None and entry.get("sha256") != sha:
        raise ExportError(f"tokenizer {path} (sha256 {sha[:12]}) is not the one the model was trained with "
                          f"({entry.get('sha256', '?')[:12]}, {entry.get('path')})")  # fmt: skip
    return path, {
        "sha256": sha,
        "eod_id": entry.get("eod_id") if entry else None,
        "checked": entry is not None,
    }


def write_model_folder(
    model: Transformer,
    tokenizer: Path,
    output: Path,
    languages: list[str],
    record: dict,
    program: str = "hidden",
) -> dict:
    """lm.pt2 + tokenizer.json + metadata.json (with `record` merged in) under a temporary name, then
    renamed to `output`; returns the metadata. program="logits" writes format 1 (see module docstring)."""
    if program not in ("hidden", "logits"):
        raise ValueError(f"program must be 'hidden' or 'logits', got {program!r}")
    tmp = output.with_name(f".{output.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    export_program(model, tmp / PROGRAM, program)
    shutil.copyfile(tokenizer, tmp / TOKENIZER)
    head = {"head_weight": HEAD_WEIGHT} if program == "hidden" else {}
    metadata = {
        "format": FORMAT if program == "hidden" else FORMAT_LOGITS,
        **head,
        "languages": list(languages),
        "seq_len": model.config.max_seq_len,
        "vocab_size": model.config.vocab_size,
        "files": {PROGRAM: sha256_file(tmp / PROGRAM), TOKENIZER: sha256_file(tmp / TOKENIZER)},
        "model_config": dataclasses.asdict(model.config),
        "params": model.config.num_params(),
        "export_check": export_check(model, tmp / PROGRAM, program),
        "torch_version": torch.__version__,
        **record,
    }
    (tmp / METADATA).write_text(json.dumps(metadata, indent=1, sort_keys=True) + "\n")
    tmp.rename(output)
    return metadata


def export_lm(
    root: Path, tag: str | None, output: Path, languages: list[str], tokenizer: Path | None
) -> dict:
    """Write the model folder `output` from checkpoint root/tag (default: the newest complete one)."""
    if output.exists():
        raise ExportError(f"{output} exists; name a new folder (a model folder is never overwritten)")
    tags = complete_tags(root)
    if not tags:
        raise ExportError(f"no complete checkpoint under {root}")
    tag = tag or tags[0]
    state = ckpt.read_trainer_state(root / tag, 0)
    tok_path, tok = _tokenizer(state, tokenizer)
    sd, meta = consolidated(root, tag)
    record = {
        "eod_id": tok["eod_id"],
        "checkpoint": {"root": str(root.resolve()), "tag": tag},
        "tokenizer_source": {"path": str(tok_path.resolve()), "checked_against_shards": tok["checked"]},
        "training": training_record(state),
    }
    return write_model_folder(scoring_model(sd, meta["model_config"]), tok_path, output, languages, record)


def main(argv: list[str] | None = None) -> int:
    # prog: how it is run, not the file name argparse would show ("export_lm.py")
    ap = argparse.ArgumentParser(prog="python -m trainer.export_lm", description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoints", required=True, type=Path, help="checkpoint root (checkpoint.dir)")
    ap.add_argument("--tag", default=None, help="step_XXXXXXXX (default: the newest complete one)")
    ap.add_argument("--output", required=True, type=Path, help="model folder to create (must not exist)")
    ap.add_argument("--languages", nargs="+", default=["en"], help="languages the model scores (default en)")
    ap.add_argument("--tokenizer", type=Path, default=None, help="default: the training shards' tokenizer")
    args = ap.parse_args(argv)
    return guarded(lambda: _export(args))  # CheckpointError: `error: ...`, 2; Ctrl-C: `interrupted`, 130


def _export(args: argparse.Namespace) -> int:
    try:
        meta = export_lm(args.checkpoints, args.tag, args.output, args.languages, args.tokenizer)
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t = meta["training"]
    print(
        f"exported {args.checkpoints / meta['checkpoint']['tag']} -> {args.output} "
        f"({meta['params']:,} params, step {t['step']}, final loss {t.get('final_loss', float('nan')):.4f}, "
        f"export check max |Δlogit| {meta['export_check']['max_abs_logit_diff']:.2e})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
