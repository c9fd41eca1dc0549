"""Fused SwiGLU gate: Triton kernels → launchers → torch custom operators with autograd → functional wrapper.

Math (reference: `trainer.kernels.reference.swiglu`), elementwise in fp32 with σ = sigmoid(a):
    y = silu(a) · b = a·σ · b
    da = dy · b · σ · (1 + a·(1 − σ)),   db = dy · a·σ
Memory, as Liger does: the forward saves only a and b (the inputs it needs anyway); σ is recomputed in the
backward. In eager mode the backward writes da and db *over a and b* (`refinery::swiglu_bwd_`, which declares
the mutation): after the backward nothing needs the activations, so the gradients cost no new memory. That is
done only when both inputs are intermediate activations that own their storage (non-leaf, non-view tensors,
as `w1(x)` and `w3(x)` are in the model): a leaf, or a view that may share a leaf's storage, is a user's
tensor and is never overwritten. (Code that keeps a reference to the activations and reads them after the
backward, e.g. a logging hook, would see gradients: the same contract as Liger's.) Because the mutation goes through a custom op that
declares it, the version counters of a and b are bumped, so any *other* autograd node that saved them fails
loudly ("modified by an inplace operation") instead of reading gradients as activations. Under torch.compile
the functional backward (`refinery::swiglu_bwd`) is used and the compiler plans the buffers.

Why custom operators (and not `torch.library.triton_op`): see `trainer.kernels.__init__`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from trainer.kernels.triton_utils import to_dtype
from trainer.kernels.utils import cdiv, tracing

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
    # DA/DB may alias A/B (the in-place backward): every element is loaded before it is stored, by the same
    # program, so the overwrite is safe
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


def _check(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(f"gate {tuple(a.shape)} and up {tuple(b.shape)} must have the same shape")


def swiglu_forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (gate), b (up): same shape → silu(a) · b in a's dtype (contiguous)."""
    _check(a, b)
    a, b = a.contiguous(), b.contiguous()
    y = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    n = a.numel()
    _swiglu_fwd_kernel[(cdiv(n, BLOCK),)](a, b, y, n, BLOCK=BLOCK)
    return y


def swiglu_backward(
    dy: torch.Tensor, a: torch.Tensor, b: torch.Tensor, da: torch.Tensor, db: torch.Tensor
) -> None:
    """Writes the gradients into da, db (contiguous, may be a and b themselves)."""
    dy = dy.contiguous()
    n = a.numel()
    _swiglu_bwd_kernel[(cdiv(n, BLOCK),)](dy, a, b, da, db, n, BLOCK=BLOCK)


# ---------------------------------------------------------------- custom operators


@torch.library.custom_op("refinery::swiglu", mutates_args=())
def _swiglu_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return swiglu_forward(a, b)


@_swiglu_op.register_fake
def _(a, b):
    _check(a, b)
    return torch.empty(a.shape, dtype=a.dtype, device=a.device)


@torch.library.custom_op("refinery::swiglu_bwd", mutates_args=())
def _swiglu_bwd_op(dy: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = a.contiguous(), b.contiguous()
    da = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    db = torch.empty(b.shape, dtype=b.dtype, device=b.device)
    swiglu_backward(dy, a, b, da, db)
    return da, db


@_swiglu_bwd_op.register_fake
def _(dy, a, b):
    return (
        torch.empty(a.shape, dtype=a.dtype, device=a.device),
        torch.empty(b.shape, dtype=b.dtype, device=b.device),
    )


@torch.library.custom_op("refinery::swiglu_bwd_", mutates_args=("a", "b"))
def _swiglu_bwd_inplace_op(dy: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """da over a, db over b (both contiguous): the eager-mode backward that allocates nothing."""
    if not (a.is_contiguous() and b.is_contiguous()):
        raise ValueError("the in-place SwiGLU backward needs contiguous activations")
    swiglu_backward(dy, a, b, a, b)


def _setup_context(ctx, inputs, output):
    a, b, inplace_grads = inputs
    ctx.save_for_backward(a, b)
    ctx.inplace_grads = inplace_grads


def _backward(ctx, dy):
    a, b = ctx.saved_tensors
    if ctx.inplace_grads and not tracing(a):
        torch.ops.refinery.swiglu_bwd_(dy, a, b)
        return a, b, None
    return *torch.ops.refinery.swiglu_bwd(dy, a, b), None


@torch.library.custom_op("refinery::swiglu_train", mutates_args=())
def _swiglu_train_op(a: torch.Tensor, b: torch.Tensor, inplace_grads: bool) -> torch.Tensor:
    """The differentiable entry point: `inplace_grads` picks the backward (decided by the wrapper)."""
    return swiglu_forward(a, b)


@_swiglu_train_op.register_fake
def _(a, b, inplace_grads):
    _check(a, b)
    return torch.empty(a.shape, dtype=a.dtype, device=a.device)


_swiglu_train_op.register_autograd(_backward, setup_context=_setup_context)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Functional fused SwiGLU; same signature and numerics as `reference.swiglu`.

    Autocast needs nothing here: the reference computes in fp32 and returns gate's dtype, as the kernel does,
    whatever the two input dtypes.
    """
    _check(gate, up)
    # the in-place backward only in eager mode, on intermediate activations that own their storage (an op's
    # output such as w1(x), not a view: a view's storage may be a leaf's, e.g. a parameter), contiguous (the
    # kernel's flat indexing), and never on one tensor passed twice
    inplace = (
        not torch.compiler.is_compiling()
        and torch.is_grad_enabled()
        and all(t.grad_fn is not None and t._base is None and t.is_contiguous() for t in (gate, up))
        and gate is not up
    )
    return _swiglu_train_op(gate, up, inplace)
