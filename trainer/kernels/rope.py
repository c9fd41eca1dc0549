"""Fused rotary position embedding on q and k in one launch (Liger's layering: kernel → launcher → torch
custom operator with autograd → functional wrapper; why `custom_op` and not `triton_op`: see
`trainer.kernels.__init__`).

Math (reference: `trainer.kernels.reference.apply_rope`), rotate-half convention of HF Llama: a head vector
x ∈ R^D is split into halves x1, x2 ∈ R^{D/2} and each pair (x1[i], x2[i]) is rotated by the token's angle θ_i:
    y1 = x1·cos θ − x2·sin θ,     y2 = x2·cos θ + x1·sin θ
A rotation is orthogonal, so the backward is the rotation by −θ (the same kernel with sin negated):
    dx1 = dy1·cos θ + dy2·sin θ,  dx2 = dy2·cos θ − dy1·sin θ
cos/sin are given per token (B or 1, T, D/2), so packed sequences can restart positions at each document.
One program handles a tile of tokens and every q and k head of those tokens, so cos/sin are read once per
token for all heads. Arithmetic is fp32, stored in the input dtype. The backward is the same operator with
sin negated, so nothing but cos/sin is saved (and it is itself differentiable).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from trainer.kernels.triton_utils import to_dtype
from trainer.kernels.utils import cdiv, next_power_of_2, num_warps_for


@triton.jit
def _rotate_tile(
    X, Y, rows64, row_mask, c, s, n_heads, half, stride_row, stride_head,
    BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr,
):  # fmt: skip
    heads = tl.arange(0, BLOCK_H)
    cols = tl.arange(0, BLOCK_HALF)
    mask = row_mask[:, None, None] & (heads < n_heads)[None, :, None] & (cols < half)[None, None, :]
    offs = rows64[:, None, None] * stride_row + heads[None, :, None] * stride_head + cols[None, None, :]
    x1 = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(X + offs + half, mask=mask, other=0.0).to(tl.float32)
    y1 = x1 * c - x2 * s
    y2 = x2 * c + x1 * s
    tl.store(Y + offs, to_dtype(y1, Y.dtype.element_ty), mask=mask)
    tl.store(Y + offs + half, to_dtype(y2, Y.dtype.element_ty), mask=mask)


@triton.jit
def _rope_kernel(
    Q, K, QO, KO, COS, SIN, n_rows, seq_len, n_q_heads, n_k_heads, half,
    stride_q_row, stride_q_head, stride_k_row, stride_k_head, stride_cos_batch, sin_sign,
    BLOCK_ROWS: tl.constexpr, BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_HALF: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)  # token index in the flattened (B·T)
    row_mask = rows < n_rows
    rows64 = rows.to(tl.int64)
    # cos/sin row: batch stride is 0 when one table is broadcast over the batch
    cs_rows = (rows64 // seq_len) * stride_cos_batch + (rows64 % seq_len) * half
    cols = tl.arange(0, BLOCK_HALF)
    cs_mask = row_mask[:, None] & (cols < half)[None, :]
    c = tl.load(COS + cs_rows[:, None] + cols[None, :], mask=cs_mask, other=0.0).to(tl.float32)
    s = tl.load(SIN + cs_rows[:, None] + cols[None, :], mask=cs_mask, other=0.0).to(tl.float32) * sin_sign
    c = c[:, None, :]  # (rows, 1, half): shared by every head
    s = s[:, None, :]
    _rotate_tile(
        Q, QO, rows64, row_mask, c, s, n_q_heads, half, stride_q_row, stride_q_head, BLOCK_HQ, BLOCK_HALF
    )
    _rotate_tile(
        K, KO, rows64, row_mask, c, s, n_k_heads, half, stride_k_row, stride_k_head, BLOCK_HK, BLOCK_HALF
    )


def _check(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    if (
        q.dim() != 4
        or k.dim() != 4
        or q.shape[:2] != k.shape[:2]
        or q.shape[-1] != k.shape[-1]
        or q.shape[-1] % 2
    ):
        raise ValueError(
            f"q {tuple(q.shape)} and k {tuple(k.shape)} must be (B, T, H, D) with the same B, T, even D"
        )
    b, t, _, d = q.shape
    if cos.numel() not in (t * (d // 2), b * t * (d // 2)) or sin.shape != cos.shape:
        raise ValueError(f"cos/sin {tuple(cos.shape)} must be (1 or {b}, {t}, {d // 2})")


def _launch(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, sin_sign: float):
    _check(q, k, cos, sin)
    b, t, hq, d = q.shape
    hk = k.shape[2]
    half = d // 2
    q, k = q.contiguous(), k.contiguous()
    cos = cos.reshape(-1, t, half).contiguous()
    sin = sin.reshape(-1, t, half).contiguous()
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    n_rows = b * t
    block_half = next_power_of_2(half)
    block_hq, block_hk = next_power_of_2(hq), next_power_of_2(hk)
    # ~4K q elements per tile: 1 token at 8B shapes (32 heads × 64), many in small tests / the interpreter
    block_rows = max(1, min(64, 4096 // (block_hq * block_half)))
    _rope_kernel[(cdiv(n_rows, block_rows),)](
        q, k, qo, ko, cos, sin, n_rows, t, hq, hk, half,
        hq * d, d, hk * d, d, 0 if cos.shape[0] == 1 else t * half, sin_sign,
        BLOCK_ROWS=block_rows, BLOCK_HQ=block_hq, BLOCK_HK=block_hk, BLOCK_HALF=block_half,
        num_warps=num_warps_for(block_rows * (block_hq + block_hk) * block_half),
    )  # fmt: skip
    return qo, ko


# ---------------------------------------------------------------- custom operator


@torch.library.custom_op("refinery::rope", mutates_args=())
def _rope_op(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, sin_sign: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q and k by +θ (sin_sign 1) or −θ (−1): the forward and, with −1, its own backward."""
    return _launch(q, k, cos, sin, sin_sign)


@_rope_op.register_fake
def _(q, k, cos, sin, sin_sign):
    _check(q, k, cos, sin)
    return (
        torch.empty(q.shape, dtype=q.dtype, device=q.device),
        torch.empty(k.shape, dtype=k.dtype, device=k.device),
    )


def _setup_context(ctx, inputs, output):
    _, _, cos, sin, sin_sign = inputs
    ctx.save_for_backward(cos, sin)
    ctx.sin_sign = sin_sign


def _backward(ctx, dq, dk):
    cos, sin = ctx.saved_tensors  # an unused output's gradient arrives as zeros (autograd materialises it)
    dq, dk = _rope_op(dq, dk, cos, sin, -ctx.sin_sign)
    return dq, dk, None, None, None  # cos/sin are fixed tables, not learned


_rope_op.register_autograd(_backward, setup_context=_setup_context)


def apply_rope(q, k, cos, sin) -> tuple[torch.Tensor, torch.Tensor]:
    """Functional fused RoPE; same signature and numerics as `reference.apply_rope`.

    Autocast needs nothing here: like the reference, the kernel computes in fp32 from q/k (bf16 under
    autocast) and fp32 or bf16 tables, and returns q's and k's dtypes.
    """
    return _rope_op(q, k, cos, sin, 1.0)
