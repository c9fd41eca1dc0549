"""Consolidated weights out of the trainer's checkpoints: export one, or average the last K (Llama 3's anneal practice).

    python -m trainer.weights export  --checkpoints out/run/ckpt [--tag step_00000300] --output model.safetensors
    python -m trainer.weights average --checkpoints out/run/ckpt --last 3 --output avg.safetensors

ZeRO-3 shards each fp32 master parameter across ranks (zero_pp_rank_<r>_…_optim_states.pt); DeepSpeed's own
`zero_to_fp32` merges them offline, on CPU, without a process group — we call it and write safetensors with
the model config in the metadata, so `load_model(path)` rebuilds the exact module. A tied LM head is stored
once (safetensors refuses aliased tensors) and re-tied on load. Only checkpoints that verify (COMPLETE.json,
sizes and sha256) are read, and none of their files can run code when loaded (trainer/checkpoint.py).

A ZeRO stage-0 checkpoint (what `deepspeed.zero_stage: auto` picks for a model that fits, e.g. train-lm's
reference LM) has no shards: zero_to_fp32 cannot read it (it finds no partitioned parameters), and it
needs none, as its mp_rank_00_model_states.pt holds the whole module, whose parameters are the fp32 master
weights at stage 0 (bf16 runs keep fp32 weights under autocast: trainer/config.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if __name__ == "__main__":  # before the imports below (seconds): a Ctrl-C then is `interrupted` too
    from core.cli import handle_interrupts

    handle_interrupts()

import torch

from core.cli import guarded
from core.safe_json import loads_checked
from trainer import checkpoint as ckpt

# DeepSpeed's file of the whole module (model-parallel rank 0): all a stage-0 checkpoint has of the weights
STAGE0_MODEL_STATES = "mp_rank_00_model_states.pt"


def consolidated(root: Path, tag: str) -> tuple[dict[str, torch.Tensor], dict]:
    """fp32 full state dict of checkpoint root/tag and its model config (as a dict)."""
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    why = ckpt.verify(root / tag, "size")
    if why is not None:
        raise ckpt.CheckpointError(f"{root / tag}: {why}")
    st = ckpt.read_trainer_state(root / tag, 0)  # first: a refused file stops before DeepSpeed reads any
    state_file = root / tag / ckpt.trainer_state_name(0)
    missing = [k for k in ("model_config", "step", "tokens_trained") if k not in st]
    if missing or not isinstance(st.get("model_config"), dict):
        raise ckpt.CheckpointError(
            f"{state_file}: not a trainer state (no {', '.join(missing) or 'model_config'})"
        )
    ckpt.check_deepspeed_files(root / tag)  # a file that is not plain data is named before anything else
    stage = ckpt.saved_zero_stage(st, state_file)
    # Every way torch.load or zero_to_fp32 fails on a file (refused global, truncated zip, not a torch file,
    # an entry missing) is one CheckpointError naming it, not a traceback or torch's advice to retry with
    # weights_only=False; zero_to_fp32 reads many files and does not say which, so there the folder.
    src = root / tag / STAGE0_MODEL_STATES if stage == 0 else root / tag
    try:
        with ckpt.safe_torch_load():  # zero_to_fp32 calls torch.load(weights_only=False): forced weights-only
            if stage == 0:
                sd = torch.load(src, map_location="cpu")["module"]
            else:
                sd = get_fp32_state_dict_from_zero_checkpoint(str(root), tag=tag)
        sd = {k: v.detach().to(torch.float32).contiguous() for k, v in sd.items()}
    except (ckpt.CheckpointError, MemoryError):
        raise
    except Exception as e:
        raise ckpt.load_error(src, e) from None
    mcfg = st["model_config"]
    if mcfg.get("tie_embeddings", True):
        sd.pop("output.weight", None)  # the same tensor as tok_embeddings.weight
    return sd, {"model_config": mcfg, "step": st["step"], "tokens": st["tokens_trained"]}


def save(sd: dict[str, torch.Tensor], meta: dict, out: Path) -> None:
    from safetensors.torch import save_file

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    save_file(sd, str(tmp), metadata={k: json.dumps(v) for k, v in meta.items()})
    tmp.replace(out)


def load_model(path: str | Path, **overrides):
    """Transformer with the weights of an exported/averaged safetensors file."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    from trainer.model import ModelConfig, Transformer

    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
    # the checked reader: a weights file's metadata is outside data
    cfg = ModelConfig(**{**loads_checked(meta["model_config"], f"{path}: model_config"), **overrides})
    model = Transformer(cfg)
    sd = load_file(str(path))
    if cfg.tie_embeddings:
        sd["output.weight"] = sd["tok_embeddings.weight"]
    model.load_state_dict(sd, strict=True)
    return model


def complete_tags(root: Path) -> list[str]:
    return [t for t in ckpt.list_tags(root) if ckpt.verify(root / t, "size") is None]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m trainer.weights",  # how it is run, not the file name argparse would show
        description="export / average consolidated weights from ZeRO-3 checkpoints",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="one checkpoint → safetensors")
    e.add_argument("--checkpoints", required=True, type=Path, help="checkpoint root (checkpoint.dir)")
    e.add_argument("--tag", default=None, help="step_XXXXXXXX (default: the newest complete one)")
    e.add_argument("--output", required=True, type=Path)
    a = sub.add_parser("average", help="mean of the last K complete checkpoints → safetensors")
    a.add_argument("--checkpoints", required=True, type=Path)
    a.add_argument("--last", type=int, default=3)
    a.add_argument("--output", required=True, type=Path)
    args = ap.parse_args(argv)
    # a checkpoint that cannot be read (CheckpointError, an InputError): `error: <file>: <why>`, exit 2
    return guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    tags = complete_tags(args.checkpoints)
    if not tags:
        print(f"no complete checkpoint under {args.checkpoints}", file=sys.stderr)
        return 2
    if args.cmd == "export":
        if args.tag is not None and args.tag not in tags:
            path = args.checkpoints / args.tag
            why = ckpt.verify(path, "size") if path.is_dir() else "no such checkpoint folder"
            raise ckpt.CheckpointError(f"{path}: {why}; complete checkpoints: {', '.join(tags)}")
        tag = args.tag or tags[0]
        sd, meta = consolidated(args.checkpoints, tag)
        meta["checkpoint"] = tag
        save(sd, meta, args.output)
        print(
            f"exported {args.checkpoints / tag} → {args.output} ({sum(v.numel() for v in sd.values()):,} params)"
        )
        return 0
    if args.last < 1:
        print("--last must be >= 1", file=sys.stderr)
        return 2
    chosen = tags[: args.last]
    if len(chosen) < args.last:
        print(f"only {len(chosen)} complete checkpoints: averaging those", file=sys.stderr)
    total: dict[str, torch.Tensor] = {}
    meta: dict = {}
    for tag in chosen:
        sd, m = consolidated(args.checkpoints, tag)
        meta = meta or m  # the newest one's config/step
        for k, v in sd.items():
            # fp64 sum: the mean of K fp32 tensors is then rounded once
            total[k] = total[k] + v.double() if k in total else v.double()
    avg = {k: (v / len(chosen)).to(torch.float32).contiguous() for k, v in total.items()}
    meta["averaged"] = chosen
    save(avg, meta, args.output)
    print(f"averaged {', '.join(chosen)} → {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
