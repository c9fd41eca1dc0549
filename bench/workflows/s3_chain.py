"""The extract -> dedup -> score -> tokenize chain on local folders vs on a real S3 server (moto).

Each job runs through its command line (`python -m ... --master local[N]`), as a user runs it, once
with every input and output in local folders and once with the WARCs uploaded to and every output
on an S3 server on 127.0.0.1 (moto's threaded server, `testkit/s3.py`; credentials only
through the AWS environment). The tokenizer is trained once on the local run (train-tokenizer
reads local folders only) and used by both. Per job: wall seconds on each side; the last line is
JSON. Both sides also report how many documents and shard tokens they produced: they must match.

What the S3 side adds: the uploads (one PUT per unit file, markers last), listing and reading
markers first, dedup's local staging and upload. moto keeps objects in memory on this machine, so
network transfer time is not in these numbers; a real endpoint adds it.

    .venv/bin/python -m bench.workflows.s3_chain [--cores 2] [--warcs NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testkit.s3 import S3Server, s3_env, upload_tree
from testkit.shared_data import shared_data_dir

WARCS = (
    "crawl-2024-sample-0000.warc.gz",
    "crawl-2024-sample-0001.warc.gz",
    "cc-main-2024-22-whirlwind.warc.gz",
)
JOBS = ("extract", "dedup", "score", "tokenize")


def _run(args: list[str], cores: int, env: dict[str, str] | None = None) -> float:
    cmd = [sys.executable, "-m", *args, "--master", f"local[{cores}]", "--no-progress"]
    t = time.perf_counter()
    proc = subprocess.run(cmd, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args[:2])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall


def _chain(inputs: list[str], root: str, tokenizer: str | None, cores: int, env=None) -> dict[str, float]:
    p = {k: f"{root}/{k}" for k in JOBS}
    walls = {
        "extract": _run(["curation", "extract", "--input", *inputs, "--output", p["extract"]], cores, env)
    }
    walls["dedup"] = _run(["dedup", "run", "--input", p["extract"], "--output", p["dedup"]], cores, env)
    walls["score"] = _run(
        [
            "classifiers",
            "score",
            "--input",
            p["dedup"],
            "--output",
            p["score"],
            "--toxicity",
            "profanity-check",
        ],
        cores,
        env,
    )
    if tokenizer is None:  # local side: train the tokenizer both sides use (not timed)
        tok = f"{root}/tok"
        subprocess.run(
            [sys.executable, "-m", "tokens", "train-tokenizer", "--input", p["score"], "--output", tok,
             "--set", "vocab_size=768"],
            check=True, capture_output=True,
        )  # fmt: skip
        tokenizer = f"{tok}/tokenizer.json"
    walls["tokenize"] = _run(
        ["tokens", "tokenize", "--input", p["score"], "--tokenizer", tokenizer, "--output", p["tokenize"],
         "--source", "web"],
        cores,
        env,
    )  # fmt: skip
    walls["tokenizer"] = tokenizer  # type: ignore[assignment]
    return walls


def _tokens(folder: str) -> int:
    """Tokens in the manifest of a tokenize output's `web` source (local or s3://)."""
    from core.storage import join, open_store

    store = open_store(folder)
    return int(json.loads(store.read_bytes(join(folder, "shards", "web", "manifest.json")))["tokens"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--warcs", nargs="+", default=list(WARCS), help="names in the shared warc/ folder")
    a = ap.parse_args()
    warc_dir = shared_data_dir() / "warc"
    files = [str(next(warc_dir.rglob(n))) for n in a.warcs]
    with tempfile.TemporaryDirectory(prefix="refinery-bench-s3-") as tmp:
        local = _chain(files, f"{tmp}/local", None, a.cores)
        server = S3Server()
        server.start()
        try:
            with s3_env(server):
                import s3fs

                s3fs.S3FileSystem().mkdir("bench-chain")
                t = time.perf_counter()
                uris = [upload_tree(Path(f), f"s3://bench-chain/warc/{Path(f).name}")[0] for f in files]
                upload = time.perf_counter() - t
                remote = _chain(uris, "s3://bench-chain/out", local["tokenizer"], a.cores, server.env)
                tokens = (_tokens(f"{tmp}/local/tokenize"), _tokens("s3://bench-chain/out/tokenize"))
        finally:
            server.stop()
    load = os.getloadavg()
    print(f"{len(files)} WARCs, local[{a.cores}], load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| job | local s | S3 s | S3 / local |\n|---|---|---|---|")
    for j in JOBS:
        print(f"| {j} | {local[j]:.1f} | {remote[j]:.1f} | {remote[j] / local[j]:.2f} |")
    tl, tr = sum(local[j] for j in JOBS), sum(remote[j] for j in JOBS)
    print(f"| chain | {tl:.1f} | {tr:.1f} | {tr / tl:.2f} |")
    print(
        f"WARC upload before the S3 chain: {upload:.2f} s; shard tokens local {tokens[0]:,}, S3 {tokens[1]:,}"
    )
    if tokens[0] != tokens[1]:
        sys.exit("the two chains produced different token counts")
    print(json.dumps({"local_s": {j: local[j] for j in JOBS}, "s3_s": {j: remote[j] for j in JOBS},
                      "local_chain_s": tl, "s3_chain_s": tr, "tokens": tokens[0], "load": load[0]}))  # fmt: skip


if __name__ == "__main__":
    main()
