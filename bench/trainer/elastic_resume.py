"""What resuming on another world size costs: the universal conversion, next to the checkpoint save it follows.

    python -m bench.trainer.elastic_resume --config configs/train-debug.yaml --gpus 2 --sizes debug 124m \
        data.recipe=/path/recipe.yaml data.seq_len=64

For each model size: a `--gpus`-rank run of 2 steps through the real launcher, saving a checkpoint after
each, then, in this process, trainer.checkpoint.convert_to_universal on the step-2 checkpoint (what rank 0
does before an elastic resume), timed. Rows: parameters, the checkpoint's size on disk, the trainer's own
save time of step 2 (`time.checkpoint`, what every save costs, with or without elastic resume: nothing is
added to it), the conversion's time, and the conversion's size (extra disk held until the load is done).
Run it on an idle machine, or note the load (`uptime`) beside the numbers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def train(config: str, gpus: int, size: str, out: Path, extra: list[str]) -> dict:
    """Two steps, a checkpoint after each; the step-2 metrics record."""
    from trainer.launch import launch_command
    from trainer.metrics import MetricsLog

    overrides = [f"model.size={size}", "schedule.steps=2", "schedule.warmup_steps=0", "schedule.rampup=[]",
                 "checkpoint.every=1", f"checkpoint.dir={out / 'ckpt'}", f"logging.dir={out}",
                 "logging.sample_tokens=0", "eval.sequences_per_source=0", "logging.tensorboard=false", *extra]  # fmt: skip
    cmd = launch_command(config, overrides, processes=gpus)
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True)
    return next(r for r in MetricsLog.read(out).steps() if r["step"] == 2)


def measure(config: str, gpus: int, size: str, extra: list[str]) -> dict:
    from trainer import checkpoint as ckpt
    from trainer.model import ModelConfig

    with tempfile.TemporaryDirectory(prefix="elastic-bench-") as tmp:
        out = Path(tmp)
        rec = train(config, gpus, size, out, extra)
        step2 = out / "ckpt" / ckpt.tag_for(2)
        size_ckpt = du(step2)
        t0 = time.perf_counter()
        uni = ckpt.convert_to_universal(step2, log=lambda m: None)
        t_conv = time.perf_counter() - t0
        size_uni = du(uni)
        mcfg = json.loads((step2 / ckpt.trainer_state_name(0)).read_text())["model_config"]
    return {
        "size": size,
        "params": ModelConfig(**mcfg).num_params(),
        "ckpt_bytes": size_ckpt,
        "save_s": rec["time"]["checkpoint"],
        "convert_s": t_conv,
        "universal_bytes": size_uni,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--gpus", type=int, default=2, help="ranks of the run that writes the checkpoint")
    ap.add_argument("--sizes", nargs="+", default=["debug"])
    ap.add_argument("overrides", nargs="*", help="dotted.key=value for the training config")
    args = ap.parse_args()
    rows = [measure(args.config, args.gpus, s, args.overrides) for s in args.sizes]
    print(f"{'size':8} {'params':>12} {'checkpoint':>12} {'save s':>8} {'convert s':>10} {'universal':>12}")
    for r in rows:
        print(f"{r['size']:8} {r['params'] / 1e6:>11.1f}M {r['ckpt_bytes'] / 2**20:>10.1f}MB {r['save_s']:>8.2f} "
              f"{r['convert_s']:>10.2f} {r['universal_bytes'] / 2**20:>10.1f}MB")  # fmt: skip


if __name__ == "__main__":
    main()
