"""Trainer throughput: tokens/s and MFU of one config under ZeRO-3 and ZeRO-0 (plain data parallel), same run.

    python bench/train_throughput.py --config configs/train-124m.yaml --gpus 1 --steps 200
    python bench/train_throughput.py --config configs/train-debug.yaml --gpus 2 --steps 100   # CPU

Each stage runs through the real launcher with its own logging folder; the first `--warmup` steps are left out
(compilation, allocator warmup). Reported: median tokens/s over the remaining steps, the MFU the trainer logs
(None on devices without a known peak), and ZeRO-3's speed as a fraction of ZeRO-0's. Users report ZeRO-3
2.6–4.6× slower than DDP at this size (research/trainer-peers.md §4); the project aims within 10%.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(config: str, gpus: int, steps: int, stage: int, out: Path, extra: list[str]) -> list[dict]:
    cmd = [str(Path(sys.executable).parent / "deepspeed"), "--num_gpus", str(gpus), "trainer/train.py"]
    cmd += ["--config", config, f"schedule.steps={steps}", f"deepspeed.zero_stage={stage}"]
    cmd += [f"logging.dir={out}", "checkpoint.dir=", "logging.sample_tokens=0", *extra]
    subprocess.run(cmd, cwd=REPO, check=True)
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def summarize(recs: list[dict], warmup: int) -> dict:
    steps = [r for r in recs if "event" not in r and r["step"] > warmup]
    tps = statistics.median(r["tokens_per_s"] for r in steps)
    mfus = [r["mfu"] for r in steps if r["mfu"] is not None]
    return {
        "tokens_per_s": tps,
        "mfu": statistics.median(mfus) if mfus else None,
        "final_loss": steps[-1]["loss"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/train-124m.yaml")
    ap.add_argument("--gpus", type=int, default=1, help="processes (GPUs, or CPU ranks without a GPU)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("overrides", nargs="*", help="dotted.key=value, passed to both runs")
    args = ap.parse_args()
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for stage in (3, 0):
            recs = run(args.config, args.gpus, args.steps, stage, Path(tmp) / f"z{stage}", args.overrides)
            res[stage] = summarize(recs, args.warmup)
    print(f"{'ZeRO stage':>10} {'tokens/s':>12} {'MFU':>8} {'final loss':>11}")
    for stage, r in res.items():
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "n/a"
        print(f"{stage:>10} {r['tokens_per_s']:>12,.0f} {mfu:>8} {r['final_loss']:>11.4f}")
    print(f"ZeRO-3 / ZeRO-0 throughput: {res[3]['tokens_per_s'] / res[0]['tokens_per_s']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
