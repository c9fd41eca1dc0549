"""Fused, token-chunked LM head + cross-entropy: the full (tokens × vocab) logits never exist.

Layering as Liger does: Triton kernel (`_ce_chunk_kernel`) → launcher (`fused_linear_cross_entropy_forward`)
→ torch custom operator `refinery::linear_cross_entropy` with registered autograd → functional wrapper
(why `custom_op` and not `triton_op`: see `trainer.kernels.__init__`). Reference: `reference.linear_cross_entropy`.
The design is Liger's fused linear cross-entropy (and the chunked form of Apple's Cut Cross-Entropy):

Math, per token with hidden h ∈ R^H, head W ∈ R^{V×H}, target y, and z = W·h (the logits):
    loss = logsumexp(z) − z_y,     ∂loss/∂z = softmax(z) − onehot(y)
The forward walks the tokens in chunks of C rows. For each chunk:
    1. z = h_c Wᵀ (C × V) with torch.mm (cuBLAS on a GPU), in the matmul dtype (below);
    2. one Triton program per row makes two passes over its row in fp32: an online max / sum-exp for
       logsumexp, then it overwrites z in place with (softmax − onehot)·s, where s = 1/normalizer (0 on
       ignored rows) — the logits buffer becomes ∂loss/∂z, no second C × V buffer;
    3. ∂h_c = dz · W (torch.mm into the rows of ∂h) and ∂W += dzᵀ · h_c (torch addmm_, in place).
So the backward only scales the stored gradients by the incoming grad_output (in place: the op's own
buffers), and the matmuls are the three a plain head does (logits, ∂h, ∂W), on the same library.

Memory, by construction: the op holds ∂W (V × H, which the caller gets anyway), ∂h (N × H, likewise), one
C × V logits chunk, and N fp32 per-token losses. C is chosen so that a chunk is at most a quarter of ∂W's
bytes (at least 64 MiB, so small heads are not cut into GEMMs too thin to run at full rate: a chunk's GEMMs
do ≈ C flop per byte of W read, and an H100 needs ≈ 300; at most 512 MiB), see `default_chunk_size`. The
unfused reference holds N × V logits, their fp32 copy and their gradient: at the 8B head (H 4096, V 128,256)
and 8K tokens that is 1.96 GiB of bf16 logits alone, against 1 GiB ∂W + 64 MiB ∂h + 250 MiB chunk here.

Dtypes. The matmul dtype is hidden's (under torch.autocast, the autocast dtype, as the reference's
`hidden @ weight.t()` would be); a weight of another dtype (fp32 master weights under autocast) is cast once
per call, as autocast casts it for the reference. logsumexp, the per-token losses and their sum are fp32. ∂W
is accumulated over chunks in the matmul dtype by cuBLAS's addmm (fp32 inside each chunk's product, one
rounding per chunk, as Liger does) and cast to the weight's dtype at the end. An fp32 accumulator for a bf16
head would cost 4·V·H bytes — 2.0 GiB at the 8B head, more than the 8K-token logits the op exists to avoid —
and PyTorch's bf16 × bf16 → fp32 matmul (`out_dtype`) is CUDA-only, so it could not be tested on CPU.
With fp32 inputs everything, the accumulation included, is fp32.

Mean under gradient accumulation: the loss is Σ (fp32 per-token losses) / normalizer. Pass the number of
non-ignored targets of the whole optimizer step as `normalizer` and the micro-batch losses add up to the step's
true token mean (and so do the gradients); None uses this call's own count (plain mean).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from trainer.kernels.reference import IGNORE_INDEX
from trainer.kernels.triton_utils import to_dtype
from trainer.kernels.utils import next_power_of_2, num_warps_for, tracing

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


CHUNK_BYTES_MIN = 64 << 20
CHUNK_BYTES_MAX = 512 << 20


def _floor_power_of_2(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def default_chunk_size(n_tokens: int, hidden: int, vocab: int, itemsize: int = 2) -> int:
    """Rows per chunk: a (C × V) logits chunk of at most max(V·H·itemsize / 4, 64 MiB) bytes, ≤ 512 MiB.

    Bounded by V (a chunk's bytes are C·V·itemsize) and H (a quarter of the V × H gradient the op returns
    anyway, so the chunk never dominates the op's memory); a power of two (GEMM tiles), at most the tokens.
    """
    budget = min(max(vocab * hidden * itemsize // 4, CHUNK_BYTES_MIN), CHUNK_BYTES_MAX)
    rows = _floor_power_of_2(budget // (vocab * itemsize))
    return max(1, min(rows, next_power_of_2(n_tokens)))


def _check(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, reduction: str) -> None:
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(
            f"hidden {tuple(hidden.shape)} must be (N, H) and weight {tuple(weight.shape)} (V, H)"
        )
    if targets.shape != hidden.shape[:1]:
        raise ValueError(f"targets {tuple(targets.shape)} must be ({hidden.shape[0]},)")


def fused_linear_cross_entropy_forward(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    ignore_index: int = IGNORE_INDEX,
    normalizer: torch.Tensor | None = None,
    reduction: str = "mean",
    chunk_size: int | None = None,
    need_grad_hidden: bool = True,
    need_grad_weight: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """hidden: (N, H), weight: (V, H), targets: (N,) → (loss fp32 scalar, ∂hidden or None, ∂weight or None).

    The matmuls run in hidden's dtype (weight is cast to it if it differs); ∂hidden is in hidden's dtype,
    ∂weight in weight's. The gradients are of the loss itself (grad_output 1).
    """
    _check(hidden, weight, targets, reduction)
    n, h = hidden.shape
    v = weight.shape[0]
    hidden = hidden.contiguous()
    targets = targets.contiguous()
    w = weight if weight.dtype == hidden.dtype else weight.to(hidden.dtype)  # (V, H) in the matmul dtype
    if reduction == "sum":
        denom = torch.ones((), dtype=torch.float32, device=hidden.device)
    elif normalizer is None:
        # a tensor, not .item(): no host sync; clamp so an all-ignored micro-batch gives 0, not NaN
        denom = (targets != ignore_index).sum().clamp(min=1).to(torch.float32)
    else:
        denom = normalizer.to(device=hidden.device, dtype=torch.float32).reshape(())
    scale = (1.0 / denom).reshape(1)

    grad_hidden = torch.empty(n, h, dtype=hidden.dtype, device=hidden.device) if need_grad_hidden else None
    # accumulated in the matmul dtype (see the module docstring); the first chunk writes it, later ones add
    grad_w = None
    if need_grad_weight:  # zeros only when no chunk will write it (no tokens)
        grad_w = (torch.empty if n else torch.zeros)(v, h, dtype=w.dtype, device=w.device)
    loss_rows = torch.empty(n, dtype=torch.float32, device=hidden.device)
    chunk = chunk_size or default_chunk_size(n, h, v, hidden.element_size())
    block_v = min(MAX_BLOCK_V, next_power_of_2(v))
    for start in range(0, n, chunk):
        end = min(start + chunk, n)
        h_chunk = hidden[start:end]  # (C, H)
        logits = torch.mm(h_chunk, w.t())  # (C, V), becomes ∂loss/∂logits in place
        _ce_chunk_kernel[(end - start,)](
            logits, logits.stride(0), targets[start:end], loss_rows[start:end], scale, v, ignore_index,
            BLOCK_V=block_v, num_warps=num_warps_for(block_v),
        )  # fmt: skip
        if grad_hidden is not None:
            torch.mm(logits, w, out=grad_hidden[start:end])  # (C, H)
        if grad_w is not None:
            if start == 0:
                torch.mm(logits.t(), h_chunk, out=grad_w)  # (V, H) = (V, C)·(C, H)
            else:
                grad_w.addmm_(logits.t(), h_chunk)  # (V, H) += (V, C)·(C, H), no (V, H) temporary
        del logits  # the chunk buffer is free before the next chunk's matmul allocates one
    loss = loss_rows.sum() / denom
    grad_weight = None
    if grad_w is not None:
        grad_weight = grad_w if grad_w.dtype == weight.dtype else grad_w.to(weight.dtype)
    return loss, grad_hidden, grad_weight


# ---------------------------------------------------------------- custom operator


@torch.library.custom_op("refinery::linear_cross_entropy", mutates_args=())
def _linear_cross_entropy_op(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    normalizer: torch.Tensor | None,
    ignore_index: int,
    reduction: str,
    chunk_size: int,
    need_grad_hidden: bool,
    need_grad_weight: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, ∂hidden, ∂weight) — a gradient that is not needed comes back as an empty (0,) tensor."""
    # the wrapper already applied autocast's dtype choice; the matmuls inside run in the dtypes given
    with torch.autocast(hidden.device.type, enabled=False):
        loss, dh, dw = fused_linear_cross_entropy_forward(
            hidden, weight, targets, ignore_index, normalizer, reduction, chunk_size or None,
            need_grad_hidden, need_grad_weight,
        )  # fmt: skip
    empty = hidden.new_empty(0)
    return loss, empty if dh is None else dh, empty if dw is None else dw


@_linear_cross_entropy_op.register_fake
def _(
    hidden,
    weight,
    targets,
    normalizer,
    ignore_index,
    reduction,
    chunk_size,
    need_grad_hidden,
    need_grad_weight,
):
    _check(hidden, weight, targets, reduction)
    loss = hidden.new_empty((), dtype=torch.float32)
    dh = hidden.new_empty(hidden.shape) if need_grad_hidden else hidden.new_empty(0)
    dw = weight.new_empty(weight.shape) if need_grad_weight else hidden.new_empty(0)
    return loss, dh, dw


def _setup_context(ctx, inputs, output):
    _, dh, dw = output
    need_dh, need_dw = inputs[-2], inputs[-1]
    ctx.save_for_backward(dh, dw)
    ctx.mark_non_differentiable(dh, dw)
    # no zero-filled gradients for the two non-differentiable outputs: a materialised one would be a V × H
    # zeros tensor (1 GiB at the 8B head) allocated in every backward
    ctx.set_materialize_grads(False)
    ctx.need = (need_dh, need_dw)


def _backward(ctx, grad_loss, _gdh, _gdw):
    """Chain rule for the scalar loss: scale the forward's gradients by grad_output.

    Eager: in place, because they are the op's own buffers (a scaled copy would double the op's peak: a
    second V × H ∂W). A second backward through the same forward (retain_graph) then fails loudly: the
    in-place scaling bumps the saved tensors' version counters, which autograd checks when it unpacks them.
    Traced (torch.compile): out of place, the functional form the compiler expects (mutating a forward
    output inside the backward graph is rejected by AOTAutograd's partitioner when the output is visible);
    the compiler's buffer planning reuses the dead buffers. Always multiplies (no `grad_output == 1` test:
    that is a host sync on GPU; ×1.0 is exact).
    """
    dh, dw = ctx.saved_tensors
    need_dh, need_dw = ctx.need
    if grad_loss is None:  # not materialised (see _setup_context): the loss did not reach the output
        return None, None, None, None, None, None, None, None, None
    g = grad_loss.to(torch.float32)
    if tracing(dh):
        dh, dw = (dh * g).to(dh.dtype), (dw * g).to(dw.dtype)
    else:
        dh.mul_(g)
        dw.mul_(g)
    return (
        dh if need_dh else None,
        dw if need_dw else None,
        None, None, None, None, None, None, None,
    )  # fmt: skip


_linear_cross_entropy_op.register_autograd(_backward, setup_context=_setup_context)


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

    hidden: (..., H) and targets: (...) are flattened to tokens; weight: (V, H). Under torch.autocast the
    matmuls run in the autocast dtype, as the reference's `hidden @ weight.t()` does (hidden is cast here,
    so its gradient flows back through the cast; the weight keeps its dtype and gets its gradient in it).
    """
    hidden = hidden.reshape(-1, hidden.shape[-1])
    dev_type = hidden.device.type
    if torch.is_autocast_enabled(dev_type):
        hidden = hidden.to(torch.get_autocast_dtype(dev_type))
    elif hidden.dtype != weight.dtype:
        raise ValueError(f"hidden ({hidden.dtype}) and weight ({weight.dtype}) must share a dtype")
    if normalizer is not None and not isinstance(normalizer, torch.Tensor):
        normalizer = torch.tensor(float(normalizer), dtype=torch.float32, device=hidden.device)
    grad_on = torch.is_grad_enabled()
    loss, _, _ = _linear_cross_entropy_op(
        hidden, weight, targets.reshape(-1), normalizer, ignore_index, reduction, chunk_size or 0,
        grad_on and hidden.requires_grad, grad_on and weight.requires_grad,
    )  # fmt: skip
    return loss
