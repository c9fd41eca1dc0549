"""Fused, token-chunked LM head + cross-entropy: the full (tokens × vocab) logits never exist.

Layering as Liger does: Triton kernel (`_ce_chunk_kernel`) → launcher (`fused_linear_cross_entropy_forward` /
`_backward`) → `torch.autograd.Function` → functional wrapper. Reference: `reference.linear_cross_entropy`.

Math, per token with hidden h ∈ R^H, head W ∈ R^{V×H}, target y, and z = W·h (the logits):
    loss = logsumexp(z) − z_y,     ∂loss/∂z = softmax(z) − onehot(y)
The forward walks the tokens in chunks of C rows. For each chunk it computes z = h_c Wᵀ (C × V, in the input
dtype: the same cuBLAS matmul the unfused model does), then one Triton program per row makes two passes over
the row in fp32: an online max / sum-exp for logsumexp, then it overwrites z in place with
(softmax − onehot)·s, where s = 1/normalizer (0 on ignored rows). From that gradient of the logits it gets
    ∂h_c = dz · W   and   ∂W += dzᵀ · h_c
so the backward only scales the stored gradients by the incoming grad_output. Peak extra memory is one C × V
chunk plus the gradients the op has to return anyway, instead of N × V logits in the input dtype, their fp32
copy and their gradient.

Mean under gradient accumulation: the loss is Σ (fp32 per-token losses) / normalizer. Pass the number of
non-ignored targets of the whole optimizer step as `normalizer` and the micro-batch losses add up to the step's
true token mean (and so do the gradients); None uses this call's own count (plain mean).

Accumulation dtypes: logsumexp, the loss and its sum are fp32. ∂W is accumulated over chunks in fp32 (a
bf16 running sum would round at every chunk; the unfused matmul rounds once) and cast to W's dtype at the end.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from trainer.kernels.reference import IGNORE_INDEX
from trainer.kernels.triton_utils import to_dtype
from trainer.kernels.utils import cdiv, next_power_of_2

MAX_BLOCK_V = (
    4096  # vocab tile per loop step: large enough to stream at bandwidth, small enough for registers
)


@triton.jit
def _ce_chunk_kernel(
    LOGITS, stride_row, TARGETS, LOSS, SCALE, n_cols, ignore_index,
    BLOCK_V: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)
    row_ptr = LOGITS + row * stride_row
    target = tl.load(TARGETS + row)
    if target == ignore_index:
        # an ignored token contributes neither loss nor gradient
        for start in range(0, n_cols, BLOCK_V):
            cols = start + tl.arange(0, BLOCK_V)
            tl.store(row_ptr + cols, tl.zeros((BLOCK_V,), dtype=LOGITS.dtype.element_ty), mask=cols < n_cols)
        tl.store(LOSS + row, 0.0)
        return
    # pass 1: online logsumexp in fp32 (running max m, running Σ exp(z − m) d)
    m = float("-inf")
    d = 0.0
    for start in range(0, n_cols, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        z = tl.load(row_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(z, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(z - m_new), axis=0)
        m = m_new
    lse = m + tl.log(d)
    z_target = tl.load(row_ptr + target).to(tl.float32)
    scale = tl.load(SCALE)
    # pass 2: overwrite the logits with their gradient (softmax − onehot) · scale
    for start in range(0, n_cols, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        mask = cols < n_cols
        z = tl.load(row_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        p = tl.exp(z - lse)
        grad = tl.where(cols == target, p - 1.0, p) * scale
        tl.store(row_ptr + cols, to_dtype(grad, LOGITS.dtype.element_ty), mask=mask)
    tl.store(LOSS + row, lse - z_target)


def default_chunk_size(n_tokens: int, hidden: int, vocab: int) -> int:
    """Liger's rule: make a (C × V) logits chunk about as large as the (N × H) hidden input."""
    return max(1, min(next_power_of_2(cdiv(n_tokens, cdiv(vocab, hidden))), next_power_of_2(n_tokens)))


def fused_linear_cross_entropy_forward(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    ignore_index: int = IGNORE_INDEX,
    normalizer: float | torch.Tensor | None = None,
    reduction: str = "mean",
    chunk_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """hidden: (N, H), weight: (V, H), targets: (N,) → (loss fp32 scalar, ∂hidden or None, ∂weight or None)."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    if hidden.dtype != weight.dtype:
        raise ValueError(f"hidden ({hidden.dtype}) and weight ({weight.dtype}) must share a dtype")
    n, h = hidden.shape
    v = weight.shape[0]
    hidden = hidden.contiguous()
    targets = targets.contiguous()
    if reduction == "sum":
        denom = torch.ones((), dtype=torch.float32, device=hidden.device)
    elif normalizer is None:
        # a tensor, not .item(): no host sync; clamp so an all-ignored micro-batch gives 0, not NaN
        denom = (targets != ignore_index).sum().clamp(min=1).to(torch.float32)
    else:
        denom = torch.as_tensor(normalizer, dtype=torch.float32, device=hidden.device)
    scale = (1.0 / denom).reshape(1)

    grad_hidden = torch.empty_like(hidden) if hidden.requires_grad else None
    grad_weight = (
        torch.zeros(v, h, dtype=torch.float32, device=weight.device) if weight.requires_grad else None
    )
    loss_rows = torch.empty(n, dtype=torch.float32, device=hidden.device)
    chunk = chunk_size or default_chunk_size(n, h, v)
    block_v = min(MAX_BLOCK_V, next_power_of_2(v))
    for start in range(0, n, chunk):
        end = min(start + chunk, n)
        h_chunk = hidden[start:end]  # (C, H)
        logits = h_chunk @ weight.t()  # (C, V), becomes ∂loss/∂logits in place
        _ce_chunk_kernel[(end - start,)](
            logits, logits.stride(0), targets[start:end], loss_rows[start:end], scale, v, ignore_index,
            BLOCK_V=block_v,
        )  # fmt: skip
        if grad_hidden is not None:
            torch.mm(logits, weight, out=grad_hidden[start:end])  # (C, H)
        if grad_weight is not None:
            if logits.dtype == torch.float32:
                grad_weight.addmm_(logits.t(), h_chunk)  # (V, H), accumulated in place
            else:
                grad_weight += logits.t() @ h_chunk  # bf16 product (fp32 inside cuBLAS), summed in fp32
    loss = loss_rows.sum() / denom
    if grad_weight is not None:
        grad_weight = grad_weight.to(weight.dtype)
    return loss, grad_hidden, grad_weight


def fused_linear_cross_entropy_backward(
    grad_output: torch.Tensor, grad_hidden: torch.Tensor | None, grad_weight: torch.Tensor | None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Chain rule for the scalar loss: scale the gradients computed in the forward by grad_output.

    Always multiplies (no `grad_output == 1` test): that test is a host sync on GPU, and ×1.0 is exact.
    """
    g = grad_output.to(torch.float32)
    if grad_hidden is not None:
        grad_hidden = (grad_hidden * g).to(grad_hidden.dtype)
    if grad_weight is not None:
        grad_weight = (grad_weight * g).to(grad_weight.dtype)
    return grad_hidden, grad_weight


class FusedLinearCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, ignore_index, normalizer, reduction, chunk_size):
        loss, grad_hidden, grad_weight = fused_linear_cross_entropy_forward(
            hidden, weight, targets, ignore_index, normalizer, reduction, chunk_size
        )
        ctx.save_for_backward(grad_hidden, grad_weight)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        grad_hidden, grad_weight = fused_linear_cross_entropy_backward(grad_output, *ctx.saved_tensors)
        return grad_hidden, grad_weight, None, None, None, None, None


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
    """Fused LM-head loss; same signature and numerics as `reference.linear_cross_entropy`.

    hidden: (..., H) and targets: (...) are flattened to tokens; weight: (V, H).
    """
    return FusedLinearCrossEntropyFunction.apply(
        hidden.reshape(-1, hidden.shape[-1]), weight, targets.reshape(-1), ignore_index, normalizer, reduction,
        chunk_size,
    )  # fmt: skip
