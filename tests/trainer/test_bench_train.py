"""bench/trainer/throughput.py: one run past its config's recipe, a trainer row and the ceiling loop, a sane table.

The smoke run: the debug model with 64-token rows and batch 8, a config whose recipe holds tokens for 7 steps
(the demo recipe's cap is what stopped the 124m run at step 36), run for 16 steps with a synthetic shard set
smaller than the run needs (so the bench's recipe repeats it), two rows: ZeRO-1 through the real `deepspeed`
launcher and the eager ceiling loop (compiling on a CPU costs a minute; the loop is the same). Also: the
text token source (the shared Wikipedia articles through `tokenize`'s own path) outlasts its own size, and
the row names and error lines the table shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from bench.trainer import throughput as b

REPO = Path(__file__).resolve().parents[2]
SEQ, BATCH, STEPS, WARMUP = 64, 8, 16, 4
SOURCE_TOKENS = 5_000  # the run trains on 16 x 8 x 64 = 8,192 tokens: the shard set is repeated


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    from mixtures.recipe import Recipe

    root = tmp_path_factory.mktemp("bench")
    # the config's own recipe, as small as the demo's is for the 124m model: it holds 7 steps
    recipe = {
        "name": "small",
        "total_tokens": 7 * BATCH * (SEQ + 1),  # exactly 7 steps of 8 rows of 65 sampler tokens
        "sources": {"web": {"shards": str(root / "nowhere")}},  # never read: the bench brings its own
        "phases": [{"name": "main", "share": 1.0, "weights": {"web": 1}}],
    }
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    allowed = Recipe.load(root / "recipe.yaml").total_tokens // (SEQ + 1) // BATCH
    cfg = yaml.safe_load((REPO / "configs" / "train-debug.yaml").read_text())
    cfg["data"] = {"recipe": str(root / "recipe.yaml"), "seq_len": SEQ}
    cfg["schedule"].update(global_batch=BATCH, micro_batch=4, warmup_steps=2)
    (root / "train.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [sys.executable, "-m", "bench.trainer.throughput", "--config", str(root / "train.yaml"), "--data", "synthetic",
           "--vocab", "512", "--source-tokens", str(SOURCE_TOKENS), "--doc-tokens", "40",
           "--steps", str(STEPS), "--warmup", str(WARMUP), "--rows", "z1,ceiling-eager", "--keep", str(root / "k")]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    return res.stdout, allowed, root / "k"


# 34 s on 2 shared cores at load average ~7 (the launcher's start-up and two processes importing torch and
# DeepSpeed): more than the ~30 s of an unmarked test
@pytest.mark.slow
def test_smoke_run_outlasts_the_config_recipe_and_fills_both_rows(smoke):
    out, allowed, kept = smoke
    assert allowed == 7 < STEPS
    summary = json.loads(out.strip().splitlines()[-1])
    rows = {r["name"]: r for r in summary["rows"]}
    assert list(rows) == ["z1", "ceiling-eager"]
    assert summary["data"]["kind"] == "synthetic" and summary["data"]["tokens"] < STEPS * BATCH * SEQ
    for name, r in rows.items():
        assert "error" not in r, (name, r)
        assert r["steps_done"] == STEPS, (name, r)  # never ran out of data
        assert r["tokens_per_s"] > 0 and np.isfinite(r["final_loss"])
        # uniform ids over 512 tokens: the loss starts at ln 512 = 6.24 and a few steps cannot go far below
        assert 4.0 < r["final_loss"] < 7.5, r
    assert rows["z1"]["stage"] == 1 and rows["ceiling-eager"]["vs_ceiling"] == 1.0
    assert rows["z1"]["vs_ceiling"] == pytest.approx(
        rows["z1"]["tokens_per_s"] / rows["ceiling-eager"]["tokens_per_s"]
    )
    # the trainer's own log: every step, the stage asked for, the bench's recipe
    recs = [json.loads(x) for x in (kept / "z1" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs if "event" not in r] == list(range(1, STEPS + 1))
    log = (kept / "z1" / "launcher.log").read_text()
    assert "ZeRO stage 1" in log and "data exhausted" not in log
    # MFU needs a known peak: none on CPU (and the same one for every row on a GPU)
    if summary["peak_flops"] is None:
        assert all(r["mfu"] is None and r["mfu_causal"] is None for r in rows.values())
    else:  # one convention (PaLM's), the causal count beside it, lower by exactly F_causal / F
        ratio = summary["flops_per_token_causal"] / summary["flops_per_token"]
        assert all(
            0 < r["mfu"] < 1 and r["mfu_causal"] == pytest.approx(r["mfu"] * ratio) for r in rows.values()
        )
    table = [line.split()[0] for line in out.splitlines() if line.startswith(("z1 ", "ceiling-eager "))]
    assert table == ["z1", "ceiling-eager"]
    assert "MFU (PaLM appendix B, full attention) = (6·N + 12·L·H·Q·T)" in out
    assert "causal MFU (attention halved) = (6·N + 6·L·H·Q·T)" in out


def test_text_source_is_real_articles_repeated_past_their_size(tmp_path):
    from mixtures.recipe import Recipe
    from mixtures.sampler import MixtureSampler
    from tokens.tokenizer import load_tokenizer

    src = b.build_text_source(tmp_path, None, 150_000)  # the first articles, ~40K tokens
    shards = tmp_path / "tokens" / "shards" / "wiki"
    need = 3 * src["tokens"]
    b.write_recipe(tmp_path / "r.yaml", shards, "wiki", need, src["tokens"])
    sampler = MixtureSampler(Recipe.load(tmp_path / "r.yaml"), 257)
    samples = list(sampler)
    assert len(samples) == need // 257  # every sequence the budget holds, three times the source
    tok = load_tokenizer(src["tokenizer"]).tokenizer
    with open(b.shared_data_path(), encoding="utf-8") as f:
        corpus = "\n".join(json.loads(line)["text"] for line in f)
    # 60 characters from inside each of the first 50 rows are article text (inside: a row's first bytes may
    # be half a character, and a few rows cross a document end); articles are ~30K characters, so 45 of 50
    texts = [tok.decode(s.tokens.tolist()) for s in samples[:50]]
    assert sum(t[20:80] in corpus for t in texts) >= 45


def test_rows_parse_and_errors_read():
    rows = b.parse_rows("default,z3,z1-ref-eager,z0-triton,ceiling,ceiling-eager")
    assert [(r.kind, r.stage, r.kernels, r.compile) for r in rows] == [
        ("trainer", None, None, None),
        ("trainer", 3, None, None),
        ("trainer", 1, "reference", False),
        ("trainer", 0, "triton", None),
        ("ceiling", None, "reference", True),
        ("ceiling", None, "reference", False),
    ]
    assert rows[2].overrides() == ["deepspeed.zero_stage=1", "model.kernels=reference", "model.compile=false"]
    for bad in ("z4", "zero1", "z1-eager-ref", "z1,z1"):
        with pytest.raises(ValueError, match="--rows"):
            b.parse_rows(bad)
    log = "\n".join(
        [
            "[rank0]: Traceback (most recent call last):",
            '[rank0]:   File "trainer/train.py", line 9, in <module>',
            "[rank0]: NotImplementedError: bf16 with grad_accum_dtype fp32 is not supported at stage 0",
            "[2026-01-01] [ERROR] [launch.py:259:sigkill_handler] ['python', 'trainer/train.py', ...] exits with return code = 1",
        ]
    )
    assert b.error_line(log).startswith("NotImplementedError: bf16")
    assert b.error_line("config error: x.yaml: unknown key model.compile\n") == (
        "config error: x.yaml: unknown key model.compile"
    )
    assert b.peak_memory_gib({"step": 3, "peak_memory_gib": 2.5}) == 2.5
    assert b.peak_memory_gib({"step": 3, "loss": 1.0}) is None
