"""Fused RMSNorm: Triton kernels → launchers → torch custom operators with autograd → functional wrapper
(Liger's layering, with `torch.library` operators in place of `autograd.Function` so torch.compile can trace
it; why `custom_op` and not `triton_op`: see `trainer.kernels.__init__`).

Math (reference: `trainer.kernels.reference.rms_norm`), per row x ∈ R^H, all in fp32:
    rstd = 1 / sqrt(mean(x²) + eps),   x̂ = x · rstd,   y = x̂ · w
Backward, with g = dy · w:
    dx = rstd · (g − x̂ · mean(g · x̂))
    dw = Σ_rows dy · x̂
Memory: the forward saves x (the input, alive anyway), the weight and rstd (one fp32 per row) — what the
backward needs and nothing else; y is not saved and x̂ is recomputed. Liger additionally writes dx over dy;
that is not done here, because autograd may hand the same gradient tensor to several consumers (the backward
of `a + b` returns one tensor for both), so overwriting it would silently corrupt the other branch's gradient.
The weight
gradient is reduced in two stages: each persistent program accumulates its rows in fp32 registers and writes
one partial row; the host sums the (programs × H) partials. That avoids atomics (non-deterministic order)
and keeps the sum in fp32 whatever the parameter dtype.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from trainer.kernels.triton_utils import to_dtype
from trainer.kernels.utils import cdiv, next_power_of_2, num_programs_cap, num_warps_for, rows_per_block


@triton.jit
def _rms_norm_fwd_kernel(
    X, W, Y, RSTD, n_rows, n_cols, stride_x, stride_y, eps,
    BLOCK_ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < n_rows
    col_mask = cols < n_cols
    mask = row_mask[:, None] & col_mask[None, :]
    rows64 = rows.to(tl.int64)  # rows × stride can pass 2^31 at 8B-class shapes
    x = tl.load(X + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / n_cols + eps)  # (BLOCK_ROWS,)
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + rows64[:, None] * stride_y + cols[None, :], to_dtype(y, Y.dtype.element_ty), mask=mask)
    tl.store(RSTD + rows, rstd, mask=row_mask)


@triton.jit
def _rms_norm_bwd_kernel(
    DY, X, W, RSTD, DX, DW_PARTIAL, n_rows, n_cols, stride_dy, stride_x, stride_dx,
    BLOCK_ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    n_progs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    # persistent loop: this program owns row blocks pid, pid + n_progs, ...
    for start in range(pid * BLOCK_ROWS, n_rows, n_progs * BLOCK_ROWS):
        rows = start + tl.arange(0, BLOCK_ROWS)
        row_mask = rows < n_rows
        mask = row_mask[:, None] & col_mask[None, :]
        rows64 = rows.to(tl.int64)
        dy = tl.load(DY + rows64[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        x = tl.load(X + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(RSTD + rows, mask=row_mask, other=0.0)
        x_hat = x * rstd[:, None]
        g = dy * w[None, :]
        c = tl.sum(g * x_hat, axis=1) / n_cols  # mean(g · x̂) per row
        dx = rstd[:, None] * (g - x_hat * c[:, None])
        tl.store(
            DX + rows64[:, None] * stride_dx + cols[None, :], to_dtype(dx, DX.dtype.element_ty), mask=mask
        )
        dw_acc += tl.sum(dy * x_hat, axis=0)
    tl.store(DW_PARTIAL + pid * n_cols + cols, dw_acc, mask=col_mask)


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    t2 = t.reshape(-1, t.shape[-1])
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _launch_settings(n_cols: int) -> tuple[int, int, int]:
    """(BLOCK_N, BLOCK_ROWS, num_warps) from the row width: a whole row per tile, ~4K elements per tile."""
    block_n = next_power_of_2(n_cols)
    block_rows = rows_per_block(block_n)
    return block_n, block_rows, num_warps_for(block_n * block_rows)


def rms_norm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """x: (..., H), weight: (H,) any float dtype → (y (..., H) contiguous in x.dtype, rstd (...) fp32)."""
    x2 = _as_rows(x)
    n_rows, n_cols = x2.shape
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    block_n, block_rows, num_warps = _launch_settings(n_cols)
    grid = (cdiv(n_rows, block_rows),)
    _rms_norm_fwd_kernel[grid](
        x2, weight, y, rstd, n_rows, n_cols, x2.stride(0), y.stride(0), eps,
        BLOCK_ROWS=block_rows, BLOCK_N=block_n, num_warps=num_warps,
    )  # fmt: skip
    return y.view(x.shape), rstd.view(x.shape[:-1])


def rms_norm_backward(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (dx shaped like x, contiguous, in x.dtype; dw shaped like weight, in weight.dtype)."""
    dy2, x2 = _as_rows(dy), _as_rows(x)
    n_rows, n_cols = x2.shape
    dx = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    block_n, block_rows, num_warps = _launch_settings(n_cols)
    n_progs = max(1, min(cdiv(n_rows, block_rows), num_programs_cap(x.device)))
    dw_partial = torch.empty(n_progs, n_cols, dtype=torch.float32, device=x.device)
    _rms_norm_bwd_kernel[(n_progs,)](
        dy2, x2, weight, rstd, dx, dw_partial, n_rows, n_cols, dy2.stride(0), x2.stride(0), dx.stride(0),
        BLOCK_ROWS=block_rows, BLOCK_N=block_n, num_warps=num_warps,
    )  # fmt: skip
    return dx.view(x.shape), dw_partial.sum(0).to(weight.dtype)


# ---------------------------------------------------------------- custom operators


def _check(x: torch.Tensor, weight: torch.Tensor) -> None:
    if weight.dim() != 1 or x.shape[-1] != weight.shape[0]:
        raise ValueError(
            f"x {tuple(x.shape)} and weight {tuple(weight.shape)}: weight must be (x.shape[-1],)"
        )


@torch.library.custom_op("refinery::rms_norm", mutates_args=())
def _rms_norm_op(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, rstd); rstd is returned (not differentiable) so that autograd can save it for the backward."""
    return rms_norm_forward(x, weight, eps)


@_rms_norm_op.register_fake
def _(x, weight, eps):
    _check(x, weight)
    return (
        torch.empty(x.shape, dtype=x.dtype, device=x.device),
        torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device),
    )


@torch.library.custom_op("refinery::rms_norm_bwd", mutates_args=())
def _rms_norm_bwd_op(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return rms_norm_backward(dy, x, weight, rstd.reshape(-1))


@_rms_norm_bwd_op.register_fake
def _(dy, x, weight, rstd):
    return (
        torch.empty(x.shape, dtype=x.dtype, device=x.device),
        torch.empty(weight.shape, dtype=weight.dtype, device=weight.device),
    )


def _setup_context(ctx, inputs, output):
    x, weight, _ = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)  # rstd's gradient stays None instead of a zeros tensor per call


def _backward(ctx, dy, _drstd):
    x, weight, rstd = ctx.saved_tensors
    if dy is None:  # y unused (only possible without materialised gradients)
        return None, None, None
    dx, dw = torch.ops.refinery.rms_norm_bwd(dy, x, weight, rstd)
    return dx, dw, None


_rms_norm_op.register_autograd(_backward, setup_context=_setup_context)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Functional fused RMSNorm; same signature and numerics as `reference.rms_norm`.

    Autocast needs nothing here: like the reference, the kernel computes in fp32 from whatever dtypes x and
    weight have (bf16 activations with an fp32 weight under autocast) and returns x's dtype.
    """
    _check(x, weight)
    return _rms_norm_op(x, weight, eps)[0]
