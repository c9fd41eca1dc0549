"""Fused SwiGLU gate: Triton kernels → launchers → autograd.Function → functional wrapper (Liger's layering).

Math (reference: `trainer.kernels.reference.swiglu`), elementwise in fp32 with σ = sigmoid(a):
    y = silu(a) · b = a·σ · b
    da = dy · b · σ · (1 + a·(1 − σ)),   db = dy · a·σ
The forward saves only a and b (the inputs it needs anyway); σ is recomputed in the backward, which is cheaper
than storing another activation-sized tensor. The backward writes da and db in one pass over dy, a, b.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from trainer.kernels.triton_utils import to_dtype
from trainer.kernels.utils import cdiv

BLOCK = 1024  # elements per program: a multiple of the warp width × vector width; the op is memory bound


@triton.jit
def _swiglu_fwd_kernel(A, B, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(A + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + offs, mask=mask, other=0.0).to(tl.float32)
    y = a * tl.sigmoid(a) * b
    tl.store(Y + offs, to_dtype(y, Y.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_bwd_kernel(DY, A, B, DA, DB, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    dy = tl.load(DY + offs, mask=mask, other=0.0).to(tl.float32)
    a = tl.load(A + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + offs, mask=mask, other=0.0).to(tl.float32)
    sig = tl.sigmoid(a)
    silu = a * sig
    da = dy * b * sig * (1.0 + a * (1.0 - sig))
    db = dy * silu
    tl.store(DA + offs, to_dtype(da, DA.dtype.element_ty), mask=mask)
    tl.store(DB + offs, to_dtype(db, DB.dtype.element_ty), mask=mask)


def swiglu_forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (gate), b (up): same shape and dtype → silu(a) · b."""
    if a.shape != b.shape:
        raise ValueError(f"gate {tuple(a.shape)} and up {tuple(b.shape)} must have the same shape")
    a, b = a.contiguous(), b.contiguous()
    y = torch.empty_like(a)
    n = a.numel()
    _swiglu_fwd_kernel[(cdiv(n, BLOCK),)](a, b, y, n, BLOCK=BLOCK)
    return y


def swiglu_backward(dy: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dy = dy.contiguous()
    da, db = torch.empty_like(a), torch.empty_like(b)
    n = a.numel()
    _swiglu_bwd_kernel[(cdiv(n, BLOCK),)](dy, a, b, da, db, n, BLOCK=BLOCK)
    return da, db


class SwiGLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        a, b = a.contiguous(), b.contiguous()
        ctx.save_for_backward(a, b)
        return swiglu_forward(a, b)

    @staticmethod
    def backward(ctx, dy):
        a, b = ctx.saved_tensors
        return swiglu_backward(dy, a, b)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Functional fused SwiGLU; same signature and numerics as `reference.swiglu`."""
    return SwiGLUFunction.apply(gate, up)
