"""Trainer throughput, all settings of one model and batch side by side in one run, against a plain-PyTorch ceiling.

    python -m bench.trainer.throughput --model 124m --steps 120              # one GPU: every row, ~15 min
    python -m bench.trainer.throughput --model 1b --steps 60 --rows z3,z1,ceiling
    python -m bench.trainer.throughput --model 124m --vocab 50304 --data synthetic
    python -m bench.trainer.throughput --model debug --steps 30 --warmup 5 --rows z1,ceiling-eager   # CPU

Token source. The bench builds its own (in a temporary folder), so `--steps N` never runs out of data: a
shard set in the project's token format (tokens/shards.py writer and manifest, `tokenize`'s own path for
text) and a one-source recipe (mixtures/recipe.py format) whose token budget is sized from N, the batch and
the sequence length; a small shard set is repeated epoch after epoch (the sampler's own epochs, the
recipe's `max_epochs` set to what N needs). `--data text`: the Wikipedia articles of ../shared/data
tokenized by the demo tokenizer (out/demo/tokenizer/tokenizer.json when `make demo` made it, else one
trained here with configs/tokenizer.yaml on the same articles); `--data synthetic`: uniform random ids
over the tokenizer config's vocabulary (`--vocab` to change it) in documents of log-normal lengths (median
`--doc-tokens`), for machines without ../shared; `auto`: text when ../shared/data is there.

Rows (`--rows`, comma-separated; all run on the same config, batch, sequence length and token source):
- `default`: the config as it is (its ZeRO stage, kernels and compile settings);
- `z<stage>[-triton|-ref][-compile|-eager]`: the trainer through the real `deepspeed` launcher at ZeRO stage
  0-3, with `model.kernels=triton|reference` and `model.compile=true|false` when given (else the config's);
- `ceiling[-eager]`: a plain PyTorch loop around the same `trainer.model.Transformer`, one device: reference
  ops, document mask, bf16 autocast over fp32 weights on CUDA (fp32 on CPU), fused AdamW on CUDA, gradient
  clipping, `torch.compile(model)` (not with `-eager`).
A row whose run fails is kept in the table with its error, and the bench goes on.

Columns: tokens/s (median over the steps after `--warmup`: compilation and allocator warm-up left out); MFU
by PaLM's appendix B, F = 6·N + 12·L·H·Q·T FLOPs per token (N: parameters in a matmul, the LM head's
V·d included, the embedding lookup not; L layers, H heads, Q head size, T sequence length: full
attention), and beside it the causal MFU (attention term halved, 6·L·H·Q·T): both trainer/metrics.py's,
the counts the trainer logs as `mfu` and `mfu_causal`, over the device's dense bf16 peak (None on CPU
and unknown devices); peak memory (the trainer's metrics when it logs
one, the ceiling's torch.cuda.max_memory_allocated); tokens/s per device as a fraction of the ceiling's;
and ZeRO-3's tokens/s over ZeRO-1's. The last line of the output is the whole result as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from trainer.launch import launch_command
from trainer.metrics import MetricsLog

REPO = Path(__file__).resolve().parents[2]

DEMO_TOKENIZER = REPO / "out" / "demo" / "tokenizer" / "tokenizer.json"
TOKENIZER_CONFIG = REPO / "configs" / "tokenizer.yaml"
WIKI = Path("quality") / "enwiki_sample_articles.jsonl"  # under ../shared/data
DEFAULT_ROWS = "default,z3,z2,z1,z0,z1-ref,z1-eager,z1-ref-eager,ceiling,ceiling-eager"
ROW_RE = re.compile(r"^(?:z(?P<stage>[0-3])(?:-(?P<kernels>triton|ref))?(?:-(?P<compile>compile|eager))?"
                    r"|(?P<default>default)|(?P<ceiling>ceiling)(?:-(?P<ceiling_mode>eager))?)$")  # fmt: skip
EOD_TOKEN = "<|endoftext|>"


# ------------------------------------------------------------------ rows


@dataclass
class Row:
    name: str
    kind: str  # "trainer" | "ceiling"
    stage: int | None = None  # ZeRO stage override (None: the config's)
    kernels: str | None = None  # model.kernels override
    compile: bool | None = None  # model.compile override
    result: dict[str, Any] = field(default_factory=dict)

    def overrides(self) -> list[str]:
        out = []
        if self.stage is not None:
            out.append(f"deepspeed.zero_stage={self.stage}")
        if self.kernels is not None:
            out.append(f"model.kernels={self.kernels}")
        if self.compile is not None:
            # the key exists once the trainer compiles (issue 14); before that the row fails with the
            # config loader's unknown-key error, shown in the table
            out.append(f"model.compile={str(self.compile).lower()}")
        return out


def parse_rows(spec: str) -> list[Row]:
    rows = []
    for name in (s.strip() for s in spec.split(",")):
        m = ROW_RE.match(name)
        if not m:
            raise ValueError(
                f"--rows: unknown row {name!r}; rows are default, z<0-3>[-triton|-ref][-compile|-eager], "
                "ceiling, ceiling-eager"
            )
        if m["ceiling"]:
            rows.append(Row(name, "ceiling", kernels="reference", compile=m["ceiling_mode"] is None))
        elif m["default"]:
            rows.append(Row(name, "trainer"))
        else:
            kernels = {"triton": "triton", "ref": "reference", None: None}[m["kernels"]]
            comp = {"compile": True, "eager": False, None: None}[m["compile"]]
            rows.append(Row(name, "trainer", int(m["stage"]), kernels, comp))
    if len({r.name for r in rows}) != len(rows):
        raise ValueError(f"--rows: a row is named twice in {spec!r}")
    return rows


# ------------------------------------------------------------------ token source


def rows_needed(steps: int, global_batch: int, gpus: int) -> int:
    """Sampler rows the trainer draws in `steps` steps, plus one round of slack per rank (the sampler drops
    a final incomplete round) and 2% (the bench's runs must never stop for data)."""
    return math.ceil(steps * global_batch * 1.02) + gpus


def synthetic_docs(n_tokens: int, vocab: int, eod_id: int, median: int, seed: int) -> list[np.ndarray]:
    """Uniform random ids (never the EOD id) in documents of log-normal lengths around `median` tokens.

    Lengths matter for speed (the document mask: flex attention skips the blocks between documents), the
    ids do not; σ = 1 spreads lengths over ~0.1–10× the median, as web pages spread.
    """
    rng = np.random.default_rng(seed)
    docs, total = [], 0
    while total < n_tokens:
        n = int(np.clip(rng.lognormal(math.log(median), 1.0), 8, 64 * median))
        ids = rng.integers(0, vocab - 1, size=n, dtype=np.int64)
        ids[ids >= eod_id] += 1  # skip the EOD id: documents end where the shard writer puts it
        docs.append(ids)
        total += n + 1
    return docs


def build_synthetic_source(out: Path, vocab: int, n_tokens: int, median: int, seed: int) -> dict[str, Any]:
    """shards/synthetic: one part written by the project's shard writer, its manifest by build_manifest."""
    from tokens.shards import build_manifest, dtype_for_vocab, write_shard
    from tokens.tokenizer import LoadedTokenizer

    eod_id = 0  # as the demo tokenizer's (its first special token)
    docs = synthetic_docs(n_tokens, vocab, eod_id, median, seed)
    out.mkdir(parents=True, exist_ok=True)
    info = write_shard(out / "part-00000", docs, eod_id, dtype_for_vocab(vocab))
    part = {"part": "part-00000", "bin": "part-00000.bin", "idx": "part-00000.idx", "ids": None,
            "input": f"synthetic: seed {seed}, median {median} tokens", "input_sha256": None,
            "input_metadata": None, **info}  # fmt: skip
    # no tokenizer file: the identity says what made the ids (the sampler checks sources share it)
    tok = LoadedTokenizer(tokenizer=None, eod_token=EOD_TOKEN, eod_id=eod_id, vocab_size=vocab,
                          sha256=f"synthetic-vocab-{vocab}", path="")  # fmt: skip
    manifest = build_manifest("synthetic", {"select": {}}, "bench", tok, [part])
    (out / "manifest.json").write_text(json.dumps(manifest))
    return {"kind": "synthetic", "vocab": vocab, "tokens": manifest["tokens"], "documents": len(docs),
            "median_doc_tokens": median}  # fmt: skip


def shared_data_path() -> Path:
    """The Wikipedia articles of ../shared/data (FileNotFoundError naming where it looked)."""
    from testkit.shared_data import shared_data_dir

    return shared_data_dir() / WIKI


def build_text_source(work: Path, tokenizer: Path | None, max_chars: int) -> dict[str, Any]:
    """shards/wiki: the shared Wikipedia articles through `tokenize`'s own per-file path and manifest."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from testkit.corpus import build_source
    from tokens.tokenizer import TokenizerConfig, train_tokenizer

    rows, chars = [], 0
    with open(shared_data_path(), encoding="utf-8") as f:
        for i, line in enumerate(f):
            rec = json.loads(line)
            rows.append({"id": f"wiki-{i:04d}", "text": rec["text"]})
            chars += len(rec["text"])
            if max_chars and chars >= max_chars:
                break
    docs = work / "docs" / "wiki.parquet"
    docs.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), docs)
    if tokenizer is None:
        tokenizer = DEMO_TOKENIZER
    if not tokenizer.is_file():
        # the demo's tokenizer config, trained on these articles: seconds, and the vocabulary of the demo
        tokenizer = train_tokenizer(docs, work / "tokenizer", TokenizerConfig.load(TOKENIZER_CONFIG))
    out = build_source(work / "tokens", tokenizer, "wiki", [docs])
    manifest = json.loads((out / "manifest.json").read_text())
    return {"kind": "text", "vocab": manifest["tokenizer"]["vocab_size"], "tokens": manifest["tokens"],
            "documents": manifest["documents"], "tokenizer": str(tokenizer), "chars": chars}  # fmt: skip


def write_recipe(path: Path, shards: Path, name: str, tokens_needed: int, source_tokens: int) -> None:
    """A one-phase, one-source recipe with a budget of `tokens_needed` and the epochs it takes."""
    epochs = max(1.0, math.ceil(tokens_needed / source_tokens * 1.05))  # 5%: the sampler's document tails
    recipe = {
        "name": f"bench-{name}",
        "seed": 1234,
        "total_tokens": int(tokens_needed),
        "max_epochs": float(epochs),
        "sources": {name: {"shards": str(shards)}},
        "phases": [{"name": "bench", "share": 1.0, "weights": {name: 1}}],
    }
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    from mixtures.recipe import Recipe

    Recipe.load(path)  # the recipe loader's own validation, here rather than in every row


# ------------------------------------------------------------------ FLOPs


def flops_per_token(mcfg, seq_len: int) -> tuple[float, float]:
    """(PaLM appendix B's 6·N + 12·L·H·Q·T, the causal 6·N + 6·L·H·Q·T): the trainer's own two counts
    (trainer/metrics.py), so the bench's MFU and the trainer's logged `mfu` are one convention."""
    from trainer.metrics import causal_flops_per_token, flops_per_token

    return flops_per_token(mcfg, seq_len), causal_flops_per_token(mcfg, seq_len)


# ------------------------------------------------------------------ trainer rows


def error_line(log: str) -> str:
    """The line of a failed run's output that says why (the last exception or config error)."""
    # the launcher's own lines ("[launch.py:...] ... exits with return code") only repeat the command line
    lines = [re.sub(r"^\[rank\d+\]:\s*", "", x.strip()) for x in log.splitlines()]
    lines = [x for x in lines if x and "launch.py:" not in x]
    first = [x for x in lines if x.startswith("config error:") or re.match(r"^[\w.]*(Error|Exception)\b", x)]
    other = [x for x in lines if re.search(r"(error|exception|refus|exhausted)", x, re.I)]
    line = (first or other or lines or ["no output"])[-1]
    return line[:300]


def peak_memory_gib(rec: dict[str, Any]) -> float | None:
    """The trainer's `peak_memory_gib` of a metrics record (logged on CUDA: max_memory_allocated), else None."""
    v = rec.get("peak_memory_gib")
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def run_trainer_row(row: Row, a: argparse.Namespace, common: list[str], tmp: Path) -> dict[str, Any]:
    out = tmp / row.name
    shutil.rmtree(out, ignore_errors=True)  # a kept folder of an earlier run: metrics.jsonl is appended to
    out.mkdir()
    # the one launch form (trainer/launch.py): works under a pip --target install too (bench/gpu/checks.sh)
    # the profiled steps are warm-up steps (after step 1's compile), left out of the medians
    prof = [f"logging.profile_start={max(2, a.warmup - 1)}", "logging.profile_steps=2"] if a.profile else []
    cmd = launch_command(a.config, [*a.overrides, *common, f"logging.dir={out}", *prof, *row.overrides()],
                         processes=a.gpus)  # fmt: skip
    path = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    log = out / "launcher.log"
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        try:
            rc = subprocess.run(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                timeout=a.row_timeout).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            rc = None
    wall = time.perf_counter() - t0
    text = log.read_text(errors="replace")
    steps = MetricsLog.read(out).steps()
    res: dict[str, Any] = {"wall_s": wall, "steps_done": steps[-1]["step"] if steps else 0}
    table = out / "profile" / "ops-rank0.txt"
    if a.profile and table.is_file():
        lines = table.read_text().splitlines()  # its top ops and the totals at its foot
        print(f"[bench] row {row.name}: profile\n" + "\n".join([*lines[:34], *lines[-3:]]), file=sys.stderr,
              flush=True)  # fmt: skip
    if rc != 0:
        res["error"] = (
            f"timed out after {a.row_timeout} s" if rc is None else f"exit {rc}: {error_line(text)}"
        )
        return res
    if "data exhausted" in text:
        res["error"] = f"data exhausted at step {res['steps_done']}"
    timed = [r for r in steps if r["step"] > a.warmup]
    if not timed:
        res.setdefault("error", f"no step after the {a.warmup} warm-up steps")
        return res
    res["tokens_per_s"] = statistics.median(r["tokens_per_s"] for r in timed)
    mfus = [r["mfu"] for r in timed if r.get("mfu") is not None]
    res["mfu_trainer"] = statistics.median(mfus) if mfus else None  # the trainer's own log, PaLM's count
    mems = [m for m in (peak_memory_gib(r) for r in steps) if m is not None]
    res["peak_mem_gib"] = max(mems) if mems else None
    res["final_loss"] = timed[-1]["loss"]
    # where a step's time goes (trainer/train.py's split; fwd_bwd ends at the loss all-reduce, so it holds
    # the wait for the device): what to cut first when a row is far below the ceiling
    res["step_ms"] = {k: 1e3 * statistics.median(r["time"][k] for r in timed)
                      for k in ("data", "fwd_bwd", "optimizer", "step") if all(k in r.get("time", {}) for r in timed)}  # fmt: skip
    return res


# ------------------------------------------------------------------ ceiling row


def run_ceiling_row(row: Row, a: argparse.Namespace, common: list[str], tmp: Path) -> dict[str, Any]:
    """The ceiling loop in a process of its own: its own CUDA context and compile caches, a timeout."""
    out = tmp / row.name
    shutil.rmtree(out, ignore_errors=True)  # a kept folder of an earlier run: metrics.jsonl is appended to
    out.mkdir()
    result = out / "result.json"
    cmd = [sys.executable, "-m", "bench.trainer.throughput", "--ceiling-worker", str(result),
           "--config", a.config, "--steps", str(a.steps), "--warmup", str(a.warmup),
           "--ceiling-compile", str(row.compile).lower(), *a.overrides, *common]  # fmt: skip
    log = out / "worker.log"
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        try:
            rc = subprocess.run(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                                timeout=a.row_timeout).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            rc = None
    wall = time.perf_counter() - t0
    if rc != 0 or not result.is_file():
        why = (
            f"timed out after {a.row_timeout} s"
            if rc is None
            else f"exit {rc}: {error_line(log.read_text())}"
        )
        return {"wall_s": wall, "steps_done": 0, "error": why}
    res = json.loads(result.read_text())
    steps = res.pop("steps")
    timed = [s for s in steps if s["step"] > a.warmup]
    res.update(wall_s=wall, steps_done=len(steps), final_loss=steps[-1]["loss"],
               tokens_per_s=statistics.median(s["tokens_per_s"] for s in timed))  # fmt: skip
    return res


def ceiling_worker(a: argparse.Namespace) -> int:
    """The plain-PyTorch loop; writes per-step tokens/s and loss, and the peak memory, to a JSON file."""
    import torch

    from mixtures.sampler import MixtureSampler
    from trainer.config import load_config, load_recipe, resolve_precision
    from trainer.data import Batches
    from trainer.deepspeed_setup import param_groups
    from trainer.model import Transformer, document_ids_from_eod, model_config
    from trainer.schedule import lr_at

    cfg = load_config(a.config, a.overrides)
    on_cuda = torch.cuda.is_available()
    device = torch.device("cuda" if on_cuda else "cpu")
    seq = cfg.data.seq_len
    sampler = MixtureSampler(load_recipe(cfg), seq + 1, 0, 1, allow_over_cap=cfg.data.allow_over_cap)
    batches = Batches(sampler)
    tok = next(iter(sampler.streams.values())).manifest["tokenizer"]
    eod = int(tok["eod_id"])
    torch.manual_seed(cfg.seed)
    mcfg = model_config(cfg.model.size, vocab_size=int(tok["vocab_size"]), max_seq_len=seq,
                        kernels="reference", attention=cfg.model.attention, **cfg.model.overrides)  # fmt: skip
    model = Transformer(mcfg).to(device)
    fwd = torch.compile(model) if a.ceiling_compile == "true" else model
    o = cfg.optimizer
    opt = torch.optim.AdamW(param_groups(model, o.weight_decay), lr=o.lr, betas=(o.beta1, o.beta2),
                            eps=o.eps, fused=on_cuda)  # fmt: skip
    bf16 = resolve_precision(cfg, on_cuda) == "bf16"
    batch, micro = cfg.schedule.global_batch, cfg.schedule.micro_batch
    if batch % micro:
        raise SystemExit(f"schedule.global_batch {batch} is not a multiple of micro_batch {micro}")
    normalizer = batch * seq
    if on_cuda:
        torch.cuda.reset_peak_memory_stats()
    steps = []
    for step in range(a.steps):
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg.schedule, cfg.optimizer)
        loss_sum = torch.zeros((), device=device)
        for _ in range(batch // micro):
            x = torch.from_numpy(batches.next(micro).tokens).to(device, non_blocking=True)
            inp, tgt = x[:, :-1], x[:, 1:]
            doc_ids = document_ids_from_eod(inp, eod) if cfg.model.document_mask else None
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                loss = fwd(inp, tgt, doc_ids=doc_ids, loss_normalizer=normalizer)
            loss.backward()
            loss_sum += loss.detach()
        if o.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_val = float(loss_sum)  # synchronizes: the step's time is the device's
        dt = time.perf_counter() - t0
        steps.append({"step": step + 1, "loss": loss_val, "tokens_per_s": batch * seq / dt})
    peak = torch.cuda.max_memory_allocated() / 2**30 if on_cuda else None
    Path(a.ceiling_worker).write_text(json.dumps({"steps": steps, "peak_mem_gib": peak}))
    return 0


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=("debug", "124m", "1b"), default="124m",
                    help="configs/train-<model>.yaml (unless --config)")  # fmt: skip
    ap.add_argument("--config", default=None, help="a training config (default: from --model)")
    ap.add_argument("--gpus", type=int, default=1, help="trainer processes (GPUs, or CPU ranks without one)")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--warmup", type=int, default=20, help="first steps left out of the medians")
    ap.add_argument("--rows", default=DEFAULT_ROWS, help=f"comma-separated (default: {DEFAULT_ROWS})")
    ap.add_argument("--data", choices=("auto", "text", "synthetic"), default="auto")
    ap.add_argument("--vocab", type=int, default=None,
                    help="synthetic vocabulary (default: configs/tokenizer.yaml's, the demo tokenizer's)")  # fmt: skip
    ap.add_argument("--doc-tokens", type=int, default=1000, help="synthetic: median document length")
    ap.add_argument("--source-tokens", type=int, default=4_000_000,
                    help="synthetic: tokens in the shard set (repeated as the steps need)")  # fmt: skip
    ap.add_argument("--text-chars", type=int, default=0, help="text: characters of articles (0: all)")
    ap.add_argument("--tokenizer", type=Path, default=None, help="text: a tokenizer.json (default: demo's)")
    ap.add_argument("--row-timeout", type=int, default=1800, help="seconds before a row is given up")
    ap.add_argument("--keep", type=Path, default=None, help="keep the token source and every row's logs here")
    ap.add_argument("--profile", action="store_true",
                    help="trainer rows: torch.profiler over the last two warm-up steps (trainer/profiling.py), "
                         "the top of rank 0's op table printed after the row")  # fmt: skip
    ap.add_argument("--ceiling-worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ceiling-compile", default="true", help=argparse.SUPPRESS)
    ap.add_argument("overrides", nargs="*",
                    help="dotted.key=value, passed to every row (the bench's own keys and the row's win)")  # fmt: skip
    a = ap.parse_args(argv)
    a.config = a.config or f"configs/train-{a.model}.yaml"
    if a.ceiling_worker:
        return ceiling_worker(a)
    if not 0 <= a.warmup < a.steps:
        ap.error(f"--warmup must be in [0, --steps), got {a.warmup} and {a.steps}")
    try:
        rows = parse_rows(a.rows)
    except ValueError as e:
        ap.error(str(e))

    from trainer.config import load_config
    from trainer.model import model_config

    cfg = load_config(a.config, a.overrides)  # the config as the rows will see it, checked before any work
    seq, batch = cfg.data.seq_len, cfg.schedule.global_batch
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="train-bench-") as tmp_s:
        tmp = Path(tmp_s)
        if a.keep:
            a.keep.mkdir(parents=True, exist_ok=True)
            tmp = a.keep
        kind = a.data
        if kind == "auto":
            try:
                kind = "text" if shared_data_path().is_file() else "synthetic"
            except FileNotFoundError:
                kind = "synthetic"
        t0 = time.perf_counter()
        if kind == "text":
            source = build_text_source(tmp / "text", a.tokenizer, a.text_chars)
            shards = tmp / "text" / "tokens" / "shards" / "wiki"
        else:
            from tokens.tokenizer import TokenizerConfig

            vocab = a.vocab or TokenizerConfig.load(TOKENIZER_CONFIG).vocab_size
            shards = tmp / "synthetic"
            source = build_synthetic_source(shards, vocab, a.source_tokens, a.doc_tokens, cfg.seed)
        need = rows_needed(a.steps, batch, a.gpus) * (seq + 1)
        recipe = tmp / "recipe.yaml"
        write_recipe(recipe, shards, shards.name, need, source["tokens"])
        source.update(seconds=round(time.perf_counter() - t0, 2), recipe_tokens=need)
        print(f"[bench] token source: {json.dumps(source)}", file=sys.stderr, flush=True)
        # fixed batch, no eval, no checkpoints or samples, no spike guard (a skipped step has no optimizer
        # step and would read as a fast one), LR warm-up within the run
        common = [f"data.recipe={recipe}", "data.allow_over_cap=false", f"schedule.steps={a.steps}",
                  f"schedule.warmup_steps={min(cfg.schedule.warmup_steps, a.steps)}", "schedule.rampup=[]",
                  "eval.sequences_per_source=0", "checkpoint.dir=", "logging.every=1",
                  "logging.tensorboard=false", "logging.sample_tokens=0", "spike.enabled=false"]  # fmt: skip
        for row in rows:
            print(f"[bench] row {row.name} ...", file=sys.stderr, flush=True)
            run = run_trainer_row if row.kind == "trainer" else run_ceiling_row
            row.result = run(row, a, common, tmp)
            print(f"[bench] row {row.name}: {json.dumps(row.result)}", file=sys.stderr, flush=True)

    import torch

    from trainer.metrics import device_peak

    load_after = os.getloadavg()
    mcfg = model_config(cfg.model.size, vocab_size=source["vocab"], max_seq_len=seq, **cfg.model.overrides)
    flops, flops_causal = flops_per_token(mcfg, seq)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    peak = device_peak(device)
    ceiling = next((r.result.get("tokens_per_s") for r in rows if r.name == "ceiling"), None)
    ceiling = ceiling or next((r.result.get("tokens_per_s") for r in rows if r.kind == "ceiling"), None)
    for r in rows:
        tps, devs = r.result.get("tokens_per_s"), (a.gpus if r.kind == "trainer" else 1)
        r.result["mfu"] = flops * tps / (devs * peak) if tps and peak else None
        r.result["mfu_causal"] = flops_causal * tps / (devs * peak) if tps and peak else None
        r.result["vs_ceiling"] = tps / devs / ceiling if tps and ceiling else None
    by = {r.name: r.result.get("tokens_per_s") for r in rows}
    z31 = by["z3"] / by["z1"] if by.get("z3") and by.get("z1") else None

    print(f"model {cfg.model.size} ({mcfg.num_params() / 1e6:.1f}M params, vocab {mcfg.vocab_size}), "
          f"{batch} x {seq} tokens per step, {a.steps} steps (median after {a.warmup}), {a.gpus} trainer "
          f"process(es), device {device or 'cpu'}; data {kind}: {source['tokens']:,} tokens, repeated to "
          f"{need:,}; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")  # fmt: skip
    per_device = "n/a (no known peak)" if peak is None else f"{peak:.4g} FLOP/s per device"
    print(f"MFU (PaLM appendix B, full attention) = (6·N + 12·L·H·Q·T) · tokens/s / (devices · peak) = "
          f"{flops:.4g} FLOPs/token · tokens/s / {per_device}")  # fmt: skip
    print(f"causal MFU (attention halved) = (6·N + 6·L·H·Q·T) · tokens/s / (devices · peak) = "
          f"{flops_causal:.4g} FLOPs/token · tokens/s / {per_device}")  # fmt: skip
    head = f"{'row':<14} {'ZeRO':>4} {'kernels':>9} {'compile':>7} {'tokens/s':>11} {'MFU':>6} {'causal':>6} " \
           f"{'peak GiB':>8} {'/ceiling':>8}  note"  # fmt: skip
    print(head)
    print("-" * len(head))
    for r in rows:
        res = r.result
        stage = "-" if r.kind == "ceiling" else ("cfg" if r.stage is None else str(r.stage))
        kern = r.kernels or "cfg"
        comp = "cfg" if r.compile is None else ("on" if r.compile else "off")
        tps = f"{res['tokens_per_s']:,.0f}" if res.get("tokens_per_s") else "-"
        mfu = f"{res['mfu']:.1%}" if res.get("mfu") is not None else "n/a"
        causal = f"{res['mfu_causal']:.1%}" if res.get("mfu_causal") is not None else "n/a"
        mem = f"{res['peak_mem_gib']:.2f}" if res.get("peak_mem_gib") is not None else "n/a"
        vs = f"{res['vs_ceiling']:.3f}" if res.get("vs_ceiling") is not None else "-"
        note = (
            f"FAILED: {res['error']}"
            if "error" in res and not res.get("tokens_per_s")
            else res.get("error", "")
        )
        print(
            f"{r.name:<14} {stage:>4} {kern:>9} {comp:>7} {tps:>11} {mfu:>6} {causal:>6} {mem:>8} {vs:>8}  {note}"
        )
    print(f"ZeRO-3 / ZeRO-1 tokens/s: {'n/a' if z31 is None else f'{z31:.3f}'}")
    summary = {
        "model": cfg.model.size, "config": a.config, "params": mcfg.num_params(), "vocab": mcfg.vocab_size,
        "global_batch": batch, "seq_len": seq, "steps": a.steps, "warmup": a.warmup, "gpus": a.gpus,
        "device": device or "cpu", "peak_flops": peak, "flops_per_token": flops,
        "flops_per_token_causal": flops_causal,
        "mfu_formula": "PaLM appendix B: (6*N_matmul + 12*L*H*Q*T) * tokens_per_s / (devices * peak)",
        "mfu_causal_formula": "(6*N_matmul + 6*L*H*Q*T) * tokens_per_s / (devices * peak)", "data": source,
        "rows": [{**asdict(r), **r.result} for r in rows], "zero3_over_zero1": z31,
        "load_average": {"before": load_before, "after": load_after},
    }  # fmt: skip
    for r in summary["rows"]:
        r.pop("result")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
