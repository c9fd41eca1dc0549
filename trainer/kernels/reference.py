"""Pure-PyTorch references for every fused kernel in `trainer.kernels`.

These are the ground truth the Triton kernels are tested against, the path the trainer takes on a machine
without CUDA (`kernels: reference` / `auto` on CPU), and the "eager" and "torch.compile" columns of
`bench/trainer/kernels.py`. Each function states its numerics, because the kernels copy them exactly:

- rms_norm:  y = x / sqrt(mean(x², -1) + eps) * w, computed in fp32, result cast to x.dtype
             (one rounding at the end; HF Llama rounds x̂ to the input dtype before the weight multiply).
- apply_rope: rotate-half RoPE (HF/Llama convention): for x = [x1, x2] split on the last dim,
             [x1·cos − x2·sin, x2·cos + x1·sin], in fp32, cast back.
- swiglu:    silu(gate) · up, in fp32, cast back.
- linear_cross_entropy: logits = h @ Wᵀ in the input dtype (the matmul a model would do), then
             cross-entropy in fp32 (logsumexp and the loss sum both fp32), summed over non-ignored tokens
             and divided by `normalizer` (default: this call's non-ignored count).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dim. x: (..., H), weight: (H,) → (..., H) in x.dtype."""
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)


def apply_rope(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q (B, T, Hq, D) and k (B, T, Hk, D) by per-token angles; cos, sin: (B or 1, T, D/2)."""
    return _rotate(q, cos, sin), _rotate(k, cos, sin)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    xf = x.float()
    x1, x2 = xf[..., :half], xf[..., half:]
    c = cos.float().unsqueeze(-2)  # (B, T, 1, D/2): one angle per token, shared by every head
    s = sin.float().unsqueeze(-2)
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """SwiGLU gating: silu(gate) * up, elementwise, same shape as the inputs."""
    return (F.silu(gate.float()) * up.float()).to(gate.dtype)


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    ignore_index: int = IGNORE_INDEX,
    normalizer: float | torch.Tensor | None = None,
    reduction: str = "mean",
    chunk_size: int | None = None,
) -> torch.Tensor:
    """Unfused LM-head loss: materialises the full (N, V) logits. hidden: (N, H), weight: (V, H), targets: (N,).

    reduction="mean" divides the fp32 loss sum by `normalizer`, or by this call's count of non-ignored
    targets when it is None. Under gradient accumulation pass the count over the whole optimizer step, so
    that the sum of micro-batch losses equals the mean over every token of the step (a per-micro-batch mean
    would weight tokens of short micro-batches more). reduction="sum" returns the fp32 sum. `chunk_size` is accepted for signature parity with
    the fused op and ignored: this path is unchunked by definition.
    """
    logits = hidden @ weight.t()  # (N, V) in the input dtype, as the model's lm_head would produce
    total = F.cross_entropy(logits.float(), targets, ignore_index=ignore_index, reduction="sum")
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    if normalizer is None:
        # clamp: a micro-batch with every target ignored contributes 0, not NaN
        normalizer = (targets != ignore_index).sum().clamp(min=1)
    return total / normalizer
