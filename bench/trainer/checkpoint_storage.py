"""Checkpoint save and resume wall time: a local folder vs S3 (moto's server on 127.0.0.1), debug model.

    .venv/bin/python -m bench.trainer.checkpoint_storage [--procs 1] [--size debug]

Shards are built from the tests' real corpus (testkit/corpus.py). For each storage, one run through
the real `deepspeed` launcher: 8 steps, a checkpoint every 2, SIGKILLed after step 7 (test fault
kill_at_step), then relaunched: it resumes from step 6 and finishes. Rows: the median of the trainer's own
save time (`time.checkpoint` of steps 2, 4, 6 and 8: staging, hashing, upload and marker for S3) and the
resume time (`seconds` of the resume event: choosing, downloading and verifying the checkpoint, and
loading it), and the checkpoint's size; and whether the two runs' losses are bit-identical. moto keeps objects in memory in this process, so the S3 column
measures the protocol's cost (hashing, HTTP requests, the extra local copy), not a network. Note the
load (`uptime`) beside the numbers: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(cfg: Path, ckpt_dir: str, log: Path, procs: int, env: dict, faults: dict | None = None) -> int:
    from trainer.launch import launch_command

    cmd = launch_command(str(cfg), [f"checkpoint.dir={ckpt_dir}", f"logging.dir={log}"], processes=procs)
    e = {**env, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    if faults:
        e["REFINERY_TRAIN_FAULTS"] = json.dumps(faults)
    return subprocess.run(cmd, cwd=REPO, env=e, capture_output=True, text=True).returncode


def measure(cfg: Path, ckpt_dir: str, log: Path, procs: int, env: dict) -> dict:
    assert run(cfg, ckpt_dir, log, procs, env, {"kill_at_step": 7}) != 0
    assert run(cfg, ckpt_dir, log, procs, env) == 0
    from trainer.metrics import MetricsLog

    metrics = MetricsLog.read(log)
    # every step record in the file: a save of the killed attempt took its time too
    saves = [
        r["time"]["checkpoint"]
        for r in metrics.records
        if "event" not in r and "checkpoint" in r.get("time", {})
    ]
    resume = [r["seconds"] for r in metrics.events("resume")]
    losses = {r["step"]: r["loss"] for r in metrics.steps()}  # the last record of each step
    return {"save_s": statistics.median(saves), "saves": len(saves), "resume_s": resume[0], "losses": losses}


def main() -> None:
    import yaml

    from core.storage import ObjectStore
    from testkit.corpus import build_corpus, build_source
    from testkit.s3 import S3Server, s3_env
    from tokens.tokenizer import TokenizerConfig, train_tokenizer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--size", default="debug")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-") as tmp:
        root = Path(tmp)
        corpus = build_corpus(root / "corpus")
        tok = train_tokenizer(corpus, root / "tok", TokenizerConfig(vocab_size=512))
        web = build_source(root / "tokens", tok, "web", sorted((corpus / "docs").glob("*.parquet")))
        recipe = {"name": "b", "seed": 5, "total_tokens": 4000, "max_epochs": 50,
                  "sources": {"web": {"shards": str(web)}},
                  "phases": [{"name": "main", "share": 1.0, "weights": {"web": 1}}]}  # fmt: skip
        (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))
        cfg = {"seed": 7, "model": {"size": args.size},
               "schedule": {"steps": 8, "warmup_steps": 2, "global_batch": 2 * args.procs, "micro_batch": 2},
               "data": {"recipe": str(root / "recipe.yaml"), "seq_len": 64},
               "eval": {"sequences_per_source": 0}, "checkpoint": {"every": 2, "keep": 2},
               "spike": {"enabled": False}, "logging": {"sample_tokens": 0, "tensorboard": False},
               "deepspeed": {"zero_stage": 3}}  # the README's numbers are ZeRO-3 shards  # fmt: skip
        cfg_path = root / "train.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg))
        rows = {
            "local": measure(cfg_path, str(root / "ckpt"), root / "log-local", args.procs, dict(os.environ))
        }
        size = sum(p.stat().st_size for p in (root / "ckpt" / "step_00000008").iterdir())
        server = S3Server()
        server.start()
        try:
            with s3_env(server):
                ObjectStore("s3://bench").fs.mkdir("bench")
                env = {**os.environ, **server.env}
                rows["s3 (moto)"] = measure(cfg_path, "s3://bench/ckpt", root / "log-s3", args.procs, env)
        finally:
            server.stop()
    load = os.getloadavg()
    print(f"model {args.size}, {args.procs} rank(s), checkpoint {size / 1e6:.1f} MB; "
          f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    print(f"{'storage':<12} {'save s (median)':>16} {'resume s':>10}")
    for k, r in rows.items():
        print(f"{k:<12} {r['save_s']:>16.3f} {r['resume_s']:>10.3f}")
    # both runs resumed from step 6 (one from the folder, one from S3): the same bytes, the same losses
    same = rows["local"]["losses"] == rows["s3 (moto)"]["losses"]
    print(f"losses of steps 1-8 bit-identical, local vs S3 resume: {same}")


if __name__ == "__main__":
    main()
