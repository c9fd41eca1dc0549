"""Metrics: the FLOPs formula behind MFU, the device peak table, and the JSONL (+ TensorBoard) writer.

FLOPs per trained token (fwd + bwd, no recomputation counted; PaLM appendix B / Chinchilla, with the
attention term halved for causal masking):

    F = 6·N_matmul + 6·L·T·d

- N_matmul: parameters that take part in a matmul per token: every Linear of every block plus the LM head
  (V·d, counted even when tied, since the head matmul runs whether or not it shares the embedding matrix).
  The embedding *lookup* is not a matmul and RMSNorm weights are elementwise: both excluded.
- 6·L·T·d: per layer, QKᵀ and AV cost 2·T·d multiply-adds each per token forward over a full T×T score
  matrix (4·T·d FLOPs); causal masking halves it (2·T·d); backward is twice forward → 6·T·d.
  Document masking skips more, but the count stays the causal one (every peer's convention), so MFU is not
  inflated by packing short documents and is comparable across data mixes.

MFU = F · tokens/s / (world_size · peak). Peak = dense bf16 tensor-core FLOP/s of the device as its
vendor datasheet states it (not the 2:4 sparse figure, Megatron-LM#1565). A device not in the table (CPU
included) gets no MFU rather than a wrong one (llm.c#796's −100%).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from trainer.model import ModelConfig

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


class MetricsWriter:
    """One JSON object per line in `dir/metrics.jsonl` (appended, so a resumed run continues the file)."""

    def __init__(self, out_dir: str | Path, enabled: bool, tensorboard: bool):
        self.enabled = enabled
        self.tb = None
        self.path = Path(out_dir) / "metrics.jsonl"
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = self.path.open("a", encoding="utf-8")
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(Path(out_dir) / "tb"))
            except ImportError:
                print("[trainer] tensorboard not installed: metrics go to metrics.jsonl only", flush=True)

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        record = {"time": round(time.time(), 3), **record}
        self.fh.write(json.dumps(record) + "\n")
        self.fh.flush()
        if self.tb is not None and "step" in record:
            for k, v in record.items():
                if isinstance(v, int | float) and not isinstance(v, bool) and k not in ("step", "time"):
                    self.tb.add_scalar(k, v, record["step"])
                elif isinstance(v, dict):
                    for k2, v2 in v.items():
                        if isinstance(v2, int | float):
                            self.tb.add_scalar(f"{k}/{k2}", v2, record["step"])

    def close(self) -> None:
        if self.enabled:
            self.fh.close()
            if self.tb is not None:
                self.tb.close()
