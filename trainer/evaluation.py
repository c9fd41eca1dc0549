"""Held-out loss per source (a step hook) and the end-of-run greedy sample.

Every eval.every steps, and once at the end for the final weights, the mean loss per target token on each
source's held-out rows (mixtures/sampler.py, "Held-out split"), logged as `eval/<source>/loss`. Both
functions here are collective: every rank runs the same forwards, because each ZeRO-3 forward gathers the
sharded weights from all ranks.
"""

from __future__ import annotations

import os
import stat
import time

import torch

from core.files import sha256_file
from trainer.hooks import Hook, StepEnd
from trainer.model import document_ids_from_eod


@torch.no_grad()
def evaluate(t) -> dict[str, float]:
    """Mean loss per target token on each source's held-out rows of trainer `t`.

    Rank r takes rows r, r+W, ... of each source, micro_batch rows per forward. Every rank runs the same
    number of forwards: a rank out of rows runs a stand-in row and drops its loss. Sums are float64 and
    all-reduced, so the result depends only on the weights (bit-identical between an uninterrupted and a
    resumed run).
    """
    micro = t.cfg.schedule.micro_batch
    # (sources, 2): summed token loss and target count of each source
    sums = torch.zeros(len(t.sources), 2, dtype=torch.float64, device=t.device)
    t.engine.eval()
    for i, src in enumerate(t.sources):
        rows = t.heldout[src]
        mine = rows[t.rank :: t.world]
        for j in range(0, -(-len(rows) // t.world), micro):
            chunk = mine[j : j + micro]
            x = torch.from_numpy(chunk if len(chunk) else rows[:1]).to(t.device)
            inp, tgt = x[:, :-1], x[:, 1:]  # (B, seq_len) each
            doc_ids = document_ids_from_eod(inp, t.eod_id) if t.cfg.model.document_mask else None
            loss_sum = t.engine(inp, tgt, doc_ids=doc_ids, loss_normalizer=1.0)  # sum over tokens
            if len(chunk):
                sums[i, 0] += loss_sum.double()
                sums[i, 1] += tgt.numel()
    t.engine.train()
    t.dist.all_reduce(sums)
    return {src: float(sums[i, 0] / sums[i, 1]) for i, src in enumerate(t.sources)}


class HeldoutEval(Hook):
    """evaluate() every eval.every steps (not right after a rollback: that step's weights are the
    checkpoint's, evaluated before) and at the end unless the last step was just evaluated."""

    def __init__(self) -> None:
        self.last_eval = -1

    def on_step_end(self, t, step: StepEnd) -> None:
        every = t.cfg.eval.every
        if t.heldout and every and t.step % every == 0 and "rollback" not in step.rec:
            self.run(t)

    def on_train_end(self, t) -> None:
        if t.heldout and self.last_eval != t.step:
            self.run(t)  # the final weights' held-out loss, whatever eval.every is

    def run(self, t) -> None:
        """Evaluate and log `eval/<source>/loss` at the current step; its seconds go to t.seconds."""
        t0 = time.perf_counter()
        losses = evaluate(t)
        dt = time.perf_counter() - t0
        self.last_eval = t.step
        t.metrics.write(
            {
                "event": "eval",
                "step": t.step,
                "eval": {s: {"loss": v} for s, v in losses.items()},
                "sequences_per_source": t.cfg.eval.sequences_per_source,
                "seconds": dt,
            }
        )
        if t.rank == 0:
            print(f"eval  {t.step:5d} " + " ".join(f"{s} {v:.4f}" for s, v in losses.items()), flush=True)
        t.seconds["eval"] += dt


def checked_tokenizer(path: str | None, sha256: str | None) -> str:
    """`path` if it is the tokenizer the shards were made with, else ValueError saying why.

    The path comes from the shards' manifest (data, CONVENTIONS 14), so it is opened only when it is a
    regular file (not /dev/zero, a FIFO or a folder, which would hang or fail the read) whose sha256 is
    the manifest's `tokenizer.sha256`: the check trainer/export_lm.py makes before shipping it."""
    if not path or not sha256:
        raise ValueError("the shards' manifest names no tokenizer path and sha256")
    try:
        st = os.stat(path)
    except OSError as e:
        raise ValueError(f"tokenizer {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"tokenizer {path}: not a regular file")
    got = sha256_file(path)
    if got != sha256:
        raise ValueError(f"tokenizer {path}: sha256 {got[:12]}, the shards were made with {sha256[:12]}")
    return path


@torch.no_grad()
def generate(t, prompt: str, n: int) -> str:
    """Greedy continuation of `prompt` by trainer `t`'s model; every rank runs the same forwards."""
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(checked_tokenizer(t.tokenizer_path, t.tokenizer_sha256))
    except Exception as e:  # the sample is a courtesy; a missing tokenizer file must not fail the run
        return f"<no sample: {e}>"
    ids = tok.encode(prompt).ids or [t.eod_id]
    t.engine.eval()
    for _ in range(n):
        x = torch.tensor([ids[-t.seq_len :]], device=t.device)
        logits = t.engine(x)
        ids.append(int(logits[0, -1].float().argmax()))
    t.engine.train()
    return tok.decode(ids)
