"""Metrics: the FLOPs formula behind MFU, the device peak table, the JSONL + TensorBoard writer, and the
one reader of a run's metrics.jsonl (`MetricsLog`: workflows, export, report and bench all read through it).

FLOPs per trained token (fwd + bwd, no recomputation counted). MFU here is PaLM's (Chowdhery et al. 2022,
appendix B), the count torchtitan and nanoGPT also use ("we follow the convention and do not account for
sparsity in causal attention", torchtitan's get_num_flop_per_token):

    F = 6·N_matmul + 12·L·T·d          (d = H·Q: heads × head size)

- N_matmul: parameters that take part in a matmul per token: every Linear of every block plus the LM head
  (V·d, counted even when tied, since the head matmul runs whether or not it shares the embedding matrix).
  The embedding *lookup* is not a matmul and RMSNorm weights are elementwise: both excluded.
- 12·L·T·d: per layer, QKᵀ and AV cost 2·T·d multiply-adds each per token forward over the full T×T score
  matrix (4·T·d FLOPs); backward is twice forward → 12·T·d.

Beside it, `mfu_causal` counts the attention term halved for the causal mask (F_causal = 6·N_matmul +
6·L·T·d), the work a causal kernel actually needs; it is the lower number of the two. They differ by
exactly 6·L·T·d per token, so MFU_causal = MFU · F_causal / F (at T 1,024 and vocabulary 4,096: × 0.912 at
124m, × 0.966 at 1b). Document masking skips more work still; neither count follows it, so MFU is not
inflated by packing short documents and compares across data mixes.

MFU = F · tokens/s / (world_size · peak), and MFU_causal the same with F_causal. Peak = dense bf16
tensor-core FLOP/s of the device as its vendor datasheet states it (not the 2:4 sparse figure,
Megatron-LM#1565). A device not in the table (CPU included) gets neither rather than a wrong one
(llm.c#796's −100%).

TensorBoard (`<logging.dir>/tensorboard/`, rank 0) gets every number of metrics.jsonl under its JSON path
joined by "/": a step record gives `loss`, `grad_norm`, `lr`, `tokens_per_s`, `mfu` and `mfu_causal` (only
when known), `per_source_tokens/<source>`, `time/{data,fwd_bwd,optimizer,checkpoint}`; an event record's numbers go under
the event's name (`eval/<source>/loss`, `end/goodput`, `spike_skip/loss`), and the end sample is text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.safe_json import loads_checked

if TYPE_CHECKING:  # annotations only: readers of metrics.jsonl (report, bench) need no torch
    from trainer.model import ModelConfig

METRICS_FILE = "metrics.jsonl"

# Dense bf16 peaks, FLOP/s (NVIDIA datasheets). Matched in order on torch.cuda.get_device_name().
PEAK_BF16: list[tuple[str, float]] = [
    ("H100 SXM", 989.4e12),  # "NVIDIA H100 80GB HBM3"
    ("H100 80GB HBM3", 989.4e12),
    ("H100 NVL", 835.5e12),
    ("H100 PCIe", 756.5e12),
    ("H200", 989.4e12),  # same compute die as H100 SXM
    ("A100", 312e12),  # SXM and PCIe share the dense bf16 peak
]


def matmul_params(cfg: ModelConfig) -> int:
    d, kv = cfg.d_model, cfg.n_kv_heads * cfg.head_dim
    per_layer = 2 * d * d + 2 * d * kv + 3 * d * cfg.ffn_hidden  # wq, wo, wk, wv, w1, w3, w2
    return cfg.n_layers * per_layer + cfg.vocab_size * d


def flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """F of MFU: PaLM's count, full attention (see the module docstring); the project's one convention."""
    return 6.0 * matmul_params(cfg) + 12.0 * cfg.n_layers * seq_len * cfg.d_model


def causal_flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """F_causal: the attention term halved for the causal mask; logged beside MFU as `mfu_causal`."""
    return 6.0 * matmul_params(cfg) + 6.0 * cfg.n_layers * seq_len * cfg.d_model


def device_peak(device_name: str | None) -> float | None:
    if not device_name:
        return None
    for key, peak in PEAK_BF16:
        if key in device_name:
            return peak
    return None


def mfu(flops_tok: float, tokens_per_s: float, world_size: int, peak: float | None) -> float | None:
    if peak is None or tokens_per_s <= 0:
        return None
    return flops_tok * tokens_per_s / (world_size * peak)


def scalar_tags(record: dict[str, Any]) -> Iterator[tuple[str, float]]:
    """(TensorBoard tag, value) of every number in a metrics record; see the module docstring."""
    event = record.get("event")

    def leaves(d: dict[str, Any], prefix: str) -> Iterator[tuple[str, float]]:
        for k, v in d.items():
            path = f"{prefix}{k}"
            if isinstance(v, dict):
                yield from leaves(v, path + "/")
            elif isinstance(v, int | float) and not isinstance(v, bool) and path not in ("step", "time"):
                yield path, v  # top-level "time" is the wall clock; a step's "time/..." split is kept

    for path, v in leaves(record, ""):
        yield (path if event is None or path.split("/")[0] == event else f"{event}/{path}"), v


class MetricsWriter:
    """One JSON object per line in `dir/metrics.jsonl` (appended, so a resumed run continues the file), and
    the same numbers as TensorBoard scalars in `dir/tensorboard/` once `start` opened the event writer."""

    def __init__(self, out_dir: str | Path, enabled: bool, tensorboard: bool):
        self.enabled = enabled
        self.tensorboard = enabled and tensorboard
        self.tb = None
        self.tb_dir = Path(out_dir) / "tensorboard"
        self.path = Path(out_dir) / METRICS_FILE
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = self.path.open("a", encoding="utf-8")

    def start(self, step: int) -> None:
        """Open the TensorBoard writer for a run (re)starting after `step`.

        A resumed run purges what an earlier attempt logged past its checkpoint (TensorBoard's purge_step:
        readers drop events at steps >= step + 1 written before), so each step shows once, as in the JSONL's
        "last record of a step wins".
        """
        if not self.tensorboard:
            return
        from torch.utils.tensorboard import SummaryWriter

        self.tb = SummaryWriter(str(self.tb_dir), purge_step=step + 1 if step > 0 else None)

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        record = {"time": round(time.time(), 3), **record}
        self.fh.write(json.dumps(record) + "\n")
        self.fh.flush()
        if self.tb is not None and "step" in record:
            for tag, v in scalar_tags(record):
                self.tb.add_scalar(tag, v, record["step"])
            if isinstance(record.get("sample"), str):
                self.tb.add_text(f"{record.get('event', 'step')}/sample", record["sample"], record["step"])
            # flushed like the JSONL: a crashed run keeps its curves up to the last step it logged
            self.tb.flush()

    def close(self) -> None:
        if self.enabled:
            self.fh.close()
            if self.tb is not None:
                self.tb.close()


@dataclass(frozen=True, slots=True)
class MetricsLog:
    """A run's metrics.jsonl as MetricsWriter wrote it: step records (no `event` key) and events
    (`eval`, `end`, `resume`, `spike_skip`, ...). A resumed run appends to the file, so a step the
    crashed attempt logged past its checkpoint appears twice: the last record of a step wins."""

    records: tuple[dict[str, Any], ...]

    @classmethod
    def read(cls, where: str | Path) -> MetricsLog:
        """The log in folder `where` (the trainer's logging.dir), or the file itself; none yet: empty."""
        path = Path(where)
        if path.is_dir() or not path.name.endswith(".jsonl"):
            path = path / METRICS_FILE
        if not path.is_file():
            return cls(())
        # the checked reader, a line at a time; finite=False: a diverged loss is logged as NaN
        lines = path.read_text().splitlines()
        return cls(
            tuple(
                loads_checked(line, f"{path}:{n}", finite=False)
                for n, line in enumerate(lines, 1)
                if line.strip()
            )
        )

    def steps(self) -> list[dict[str, Any]]:
        """Step records in step order, the last record of each step."""
        by_step = {r["step"]: r for r in self.records if "event" not in r}
        return [by_step[k] for k in sorted(by_step)]

    def events(self, name: str) -> list[dict[str, Any]]:
        """Every `name` event, in file order."""
        return [r for r in self.records if r.get("event") == name]

    def last(self, name: str) -> dict[str, Any] | None:
        """The last `name` event (the final `eval`, the `end` summary), or None."""
        found = self.events(name)
        return found[-1] if found else None

    def finished(self, steps: int) -> bool:
        """True when the trainer logged its `end` event at `steps`: the run completed."""
        return any(r.get("step") == steps for r in self.events("end"))
