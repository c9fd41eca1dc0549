"""Every fused kernel against its PyTorch reference: forward output and every gradient.

Shapes mix powers of two and odd sizes (hidden 64 / 100, tokens 1 / 7 / 513), in fp32 and bf16. Without a GPU
the Triton kernels run in Triton's CPU interpreter (see conftest.py); with one, the same small cases run
compiled and the `gpu` cases add full model sizes. Expected values come from `trainer.kernels.reference`
(plain PyTorch autograd), never from the kernels.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from tests.trainer.conftest import TOLERANCES, device_for
from trainer.kernels import get_ops, reference
from trainer.kernels.utils import interpreting

DTYPES = [pytest.param(torch.float32, id="fp32"), pytest.param(torch.bfloat16, id="bf16")]


def _cases(small, full):
    return [pytest.param(*c, False, id="x".join(map(str, c))) for c in small] + [
        pytest.param(*c, True, id="full-" + "x".join(map(str, c)), marks=pytest.mark.gpu) for c in full
    ]


def _tol(dtype: torch.dtype, n_reduce: int = 1) -> dict[str, float]:
    """TOLERANCES, with the fp32 rtol grown like √n for sums over n > 512 terms (only the full-size GPU cases):
    reduction-order error grows like √n·ε, and 1e-5 was set for n ≤ 513."""
    tol = dict(TOLERANCES[dtype])
    if dtype == torch.float32:
        tol["rtol"] *= max(1.0, math.sqrt(n_reduce / 512))
    return tol


def _leaves(*ts: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_() for t in ts]


@pytest.fixture(scope="module")
def triton_ops():
    ops = get_ops("triton", "cuda" if torch.cuda.is_available() else "cpu")
    assert ops.name == "triton"
    if not torch.cuda.is_available():
        # guard against a silently compiled (unusable) or reference path: the kernels must be interpreted
        from trainer.kernels import rms_norm

        assert interpreting() and type(rms_norm._rms_norm_fwd_kernel).__name__ == "InterpretedFunction"
    return ops


# ---------------------------------------------------------------- RMSNorm

TOKENS_HIDDEN = [(1, 64), (7, 64), (513, 64), (1, 100), (7, 100), (513, 100)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("tokens", "hidden", "full"), _cases(TOKENS_HIDDEN, [(8192, 4096), (4096, 2048)]))
def test_rms_norm_matches_reference(triton_ops, tokens, hidden, full, dtype):
    dev = device_for(full)
    x = torch.randn(tokens, hidden, device=dev).to(dtype)
    w = (1 + 0.1 * torch.randn(hidden, device=dev)).to(dtype)  # not all-ones, so dw and the w-scaling matter
    dy = torch.randn(tokens, hidden, device=dev).to(dtype)
    xa, wa = _leaves(x, w)
    ya = triton_ops.rms_norm(xa, wa, 1e-6)
    ya.backward(dy)
    xb, wb = _leaves(x, w)
    yb = reference.rms_norm(xb, wb, 1e-6)
    yb.backward(dy)
    assert ya.dtype == dtype
    assert_close(ya, yb, **_tol(dtype))
    assert_close(xa.grad, xb.grad, **_tol(dtype))
    assert_close(wa.grad, wb.grad, **_tol(dtype, tokens))  # dw sums over every token


def test_rms_norm_handles_3d_and_noncontiguous_input(triton_ops):
    dev = device_for(False)
    x = torch.randn(3, 100, 5, device=dev).transpose(1, 2)  # (3, 5, 100), last dim strided
    w = torch.randn(100, device=dev)
    xa, wa = _leaves(x, w)
    triton_ops.rms_norm(xa, wa, 1e-5).square().sum().backward()
    xb, wb = _leaves(x, w)
    reference.rms_norm(xb, wb, 1e-5).square().sum().backward()
    assert_close(xa.grad, xb.grad, **_tol(torch.float32))
    assert_close(wa.grad, wb.grad, **_tol(torch.float32))


# ---------------------------------------------------------------- RoPE

# (tokens T, q heads, k heads, head dim): hidden 64 = 4 × 16 (GQA 4/2), hidden 100 = 5 × 20 (odd half dim 10)
ROPE_SMALL = [(t, hq, hk, d) for t in (1, 7, 513) for hq, hk, d in ((4, 2, 16), (5, 1, 20))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("tokens", "hq", "hk", "dim", "full"), _cases(ROPE_SMALL, [(4096, 32, 8, 128), (2048, 12, 12, 64)])
)
def test_rope_matches_reference(triton_ops, tokens, hq, hk, dim, full, dtype):
    dev = device_for(full)
    batch = 2
    q = torch.randn(batch, tokens, hq, dim, device=dev).to(dtype)
    k = torch.randn(batch, tokens, hk, dim, device=dev).to(dtype)
    # per-row angles (as packed rows with restarting positions give), large enough to wrap around 2π
    angles = torch.rand(batch, tokens, dim // 2, device=dev) * 200 - 100
    cos, sin = angles.cos(), angles.sin()
    dq, dk = torch.randn_like(q), torch.randn_like(k)
    qa, ka = _leaves(q, k)
    qoa, koa = triton_ops.apply_rope(qa, ka, cos, sin)
    torch.autograd.backward((qoa, koa), (dq, dk))
    qb, kb = _leaves(q, k)
    qob, kob = reference.apply_rope(qb, kb, cos, sin)
    torch.autograd.backward((qob, kob), (dq, dk))
    for got, want in ((qoa, qob), (koa, kob), (qa.grad, qb.grad), (ka.grad, kb.grad)):
        assert got.dtype == dtype
        assert_close(got, want, **_tol(dtype))


def test_rope_broadcasts_one_table_over_the_batch(triton_ops):
    dev = device_for(False)
    q, k = torch.randn(3, 7, 4, 16, device=dev), torch.randn(3, 7, 2, 16, device=dev)
    angles = torch.arange(7, device=dev)[:, None] * torch.rand(8, device=dev)  # (T, D/2)
    cos, sin = angles.cos()[None], angles.sin()[None]  # (1, T, D/2)
    qa, ka = _leaves(q, k)
    out_a = triton_ops.apply_rope(qa, ka, cos, sin)
    sum(o.square().sum() for o in out_a).backward()
    qb, kb = _leaves(q, k)
    out_b = reference.apply_rope(qb, kb, cos, sin)
    sum(o.square().sum() for o in out_b).backward()
    for got, want in (*zip(out_a, out_b), (qa.grad, qb.grad), (ka.grad, kb.grad)):
        assert_close(got, want, **_tol(torch.float32))


def test_rope_reference_is_a_rotation():
    """Independent math for the reference itself: position 0 is the identity, and RoPE preserves norms."""
    q, k = torch.randn(1, 5, 2, 8, dtype=torch.float64), torch.randn(1, 5, 1, 8, dtype=torch.float64)
    angles = torch.rand(1, 5, 4, dtype=torch.float64) * 10
    angles[:, 0] = 0
    qo, ko = reference.apply_rope(q, k, angles.cos(), angles.sin())
    assert_close(qo[:, 0], q[:, 0])
    assert_close(qo.norm(dim=-1), q.norm(dim=-1))
    assert_close(ko.norm(dim=-1), k.norm(dim=-1))
    # the relative-position property: <R(a) x, R(b) y> depends only on a − b
    x, y = torch.randn(1, 1, 1, 8, dtype=torch.float64), torch.randn(1, 1, 1, 8, dtype=torch.float64)
    freqs = torch.rand(4, dtype=torch.float64)

    def rot(v, pos):
        a = (pos * freqs)[None, None]
        return reference.apply_rope(v, v, a.cos(), a.sin())[0]

    assert_close((rot(x, 3.0) * rot(y, 1.0)).sum(), (rot(x, 7.0) * rot(y, 5.0)).sum())


# ---------------------------------------------------------------- SwiGLU


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("tokens", "hidden", "full"), _cases(TOKENS_HIDDEN, [(4096, 14336), (8192, 5632)]))
def test_swiglu_matches_reference(triton_ops, tokens, hidden, full, dtype):
    dev = device_for(full)
    gate = (3 * torch.randn(tokens, hidden, device=dev)).to(dtype)  # wide range: both silu tails
    up = torch.randn(tokens, hidden, device=dev).to(dtype)
    dy = torch.randn(tokens, hidden, device=dev).to(dtype)
    ga, ua = _leaves(gate, up)
    ya = triton_ops.swiglu(ga, ua)
    ya.backward(dy)
    gb, ub = _leaves(gate, up)
    yb = reference.swiglu(gb, ub)
    yb.backward(dy)
    for got, want in ((ya, yb), (ga.grad, gb.grad), (ua.grad, ub.grad)):
        assert got.dtype == dtype
        assert_close(got, want, **_tol(dtype))


# ---------------------------------------------------------------- fused linear + cross-entropy

# (tokens, hidden, vocab, chunk_size): odd vocab 257, several chunks with a ragged last one (513 = 4·128 + 1)
CE_SMALL = [
    (1, 64, 128, None),
    (7, 64, 128, None),
    (513, 64, 128, 128),
    (1, 100, 257, None),
    (7, 100, 257, 3),
    (513, 100, 257, None),
]


def _targets(tokens: int, vocab: int, dev) -> torch.Tensor:
    targets = torch.randint(0, vocab, (tokens,), device=dev)
    targets[torch.rand(tokens, device=dev) < 0.25] = reference.IGNORE_INDEX
    targets[0] = 3  # at least one counted token, so the mean is not the empty case (tested separately)
    return targets


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("tokens", "hidden", "vocab", "chunk", "full"),
    _cases(CE_SMALL, [(8192, 4096, 128256, None), (16384, 768, 50304, 2048)]),
)
def test_linear_cross_entropy_matches_reference(triton_ops, tokens, hidden, vocab, chunk, full, dtype):
    dev = device_for(full)
    h = torch.randn(tokens, hidden, device=dev).to(dtype)
    w = (torch.randn(vocab, hidden, device=dev) * 2 / math.sqrt(hidden)).to(dtype)  # logits of O(2): peaked
    targets = _targets(tokens, vocab, dev)
    ha, wa = _leaves(h, w)
    la = triton_ops.linear_cross_entropy(ha, wa, targets, chunk_size=chunk)
    (la * 2.5).backward()  # grad_output ≠ 1 exercises the backward's scaling
    hb, wb = _leaves(h, w)
    lb = reference.linear_cross_entropy(hb, wb, targets)
    (lb * 2.5).backward()
    assert la.dtype == torch.float32  # fp32 loss whatever the input dtype
    assert_close(la, lb, **_tol(dtype, tokens))
    if dtype == torch.float32:
        assert_close(ha.grad, hb.grad, **_tol(dtype, vocab))
        assert_close(wa.grad, wb.grad, **_tol(dtype, tokens))
        return
    # bf16: the gradients are bf16 matmuls of ∂logits, which both sides round to bf16 at different points
    # (the reference after scaling by grad_output, the kernel before; the kernel also rounds each chunk's dW
    # product). Each rounding is ≤ 2^-8 relative to its operand, and a matmul can cancel, so the error is
    # bounded relative to Σ|∂z||W|, not to the result: per element, 2 roundings of ∂z (one per side) plus
    # ≤ 2 roundings of products/outputs per side ≤ 2^-6 · (|∂z| @ |W|), with ∂z from independent fp32 math.
    logits = (h @ w.t()).float()
    dz = torch.softmax(logits, dim=-1)
    valid = targets != reference.IGNORE_INDEX
    dz[valid, targets[valid]] -= 1.0
    dz[~valid] = 0.0
    dz *= 2.5 / valid.sum()
    _assert_within(ha.grad, hb.grad, 2**-6 * (dz.abs() @ w.float().abs()))
    _assert_within(wa.grad, wb.grad, 2**-6 * (dz.abs().t() @ h.float().abs()))


def _assert_within(got: torch.Tensor, want: torch.Tensor, bound: torch.Tensor) -> None:
    """Elementwise |got − want| ≤ bound (+1e-6 for exact zeros), reporting the worst offender."""
    err = (got.float() - want.float()).abs()
    excess = err - bound - 1e-6
    worst = int(excess.argmax())
    assert excess.max() <= 0, (
        f"error {err.flatten()[worst]:.3g} > bound {bound.flatten()[worst]:.3g} at {worst}"
    )


def test_linear_cross_entropy_vocab_wider_than_one_tile_and_large_logits(triton_ops):
    """V = 4099 > MAX_BLOCK_V: the online logsumexp spans two tiles; logits up to ~±100 need the max shift."""
    dev = device_for(False)
    h = torch.randn(7, 64, device=dev) * 4
    w = torch.randn(4099, 64, device=dev) * 0.5
    targets = torch.randint(0, 4099, (7,), device=dev)
    ha, wa = _leaves(h, w)
    la = triton_ops.linear_cross_entropy(ha, wa, targets)
    la.backward()
    hb, wb = _leaves(h, w)
    lb = reference.linear_cross_entropy(hb, wb, targets)
    lb.backward()
    assert torch.isfinite(la)
    assert_close(la, lb, **_tol(torch.float32))
    assert_close(ha.grad, hb.grad, **_tol(torch.float32))
    assert_close(wa.grad, wb.grad, **_tol(torch.float32))


def test_linear_cross_entropy_all_ignored_is_zero_not_nan(triton_ops):
    dev = device_for(False)
    h, w = _leaves(torch.randn(5, 64, device=dev), torch.randn(128, 64, device=dev))
    loss = triton_ops.linear_cross_entropy(h, w, torch.full((5,), reference.IGNORE_INDEX, device=dev))
    loss.backward()
    assert loss.item() == 0.0
    assert torch.count_nonzero(h.grad) == 0 and torch.count_nonzero(w.grad) == 0


def test_linear_cross_entropy_sum_reduction_and_custom_ignore_index(triton_ops):
    dev = device_for(False)
    h, w = torch.randn(9, 64, device=dev), torch.randn(128, 64, device=dev) / 8
    targets = torch.randint(0, 128, (9,), device=dev)
    targets[::3] = 7  # ignore_index=7: a real vocabulary id that must be skipped
    ha, wa = _leaves(h, w)
    la = triton_ops.linear_cross_entropy(ha, wa, targets, ignore_index=7, reduction="sum")
    la.backward()
    hb, wb = _leaves(h, w)
    lb = reference.linear_cross_entropy(hb, wb, targets, ignore_index=7, reduction="sum")
    lb.backward()
    for got, want in ((la, lb), (ha.grad, hb.grad), (wa.grad, wb.grad)):
        assert_close(got, want, **_tol(torch.float32))


@pytest.mark.parametrize("backend", ["triton", "reference"])
def test_linear_cross_entropy_mean_is_exact_under_gradient_accumulation(triton_ops, backend):
    """Two micro-batches with the step's token count as normaliser = one batch's mean, loss and gradients.

    Expected values: the reference on the whole batch. A per-micro-batch mean would fail this: the micro-batches
    have different numbers of counted tokens (4 of 5 ignored in the second).
    """
    dev = device_for(False)
    ops = triton_ops if backend == "triton" else get_ops("reference")
    h, w = torch.randn(12, 64, device=dev), torch.randn(128, 64, device=dev) / 8
    targets = torch.randint(0, 128, (12,), device=dev)
    targets[8:11] = reference.IGNORE_INDEX
    targets[7] = reference.IGNORE_INDEX
    n_step = (targets != reference.IGNORE_INDEX).sum()
    ha, wa = _leaves(h, w)
    total = 0.0
    for sl in (slice(0, 7), slice(7, 12)):
        micro = ops.linear_cross_entropy(ha[sl], wa, targets[sl], normalizer=n_step)
        micro.backward()
        total += micro.detach()
    hb, wb = _leaves(h, w)
    full = reference.linear_cross_entropy(hb, wb, targets)
    full.backward()
    assert_close(total, full, **_tol(torch.float32))
    assert_close(ha.grad, hb.grad, **_tol(torch.float32))
    assert_close(wa.grad, wb.grad, **_tol(torch.float32))
    naive = (
        sum(reference.linear_cross_entropy(h[sl], w, targets[sl]) for sl in (slice(0, 7), slice(7, 12))) / 2
    )
    assert not torch.allclose(naive, full)  # the test distinguishes the right normaliser from the naive one


@pytest.mark.gpu
def test_linear_cross_entropy_never_holds_full_logits():
    """Peak memory of the fused op stays far below the unfused (N × V) logits (bf16, their fp32 copy, grads)."""
    dev = device_for(True)
    n, hdim, v = 8192, 4096, 128256
    h = torch.randn(n, hdim, device=dev, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(v, hdim, device=dev, dtype=torch.bfloat16, requires_grad=True)
    targets = torch.randint(0, v, (n,), device=dev)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    get_ops("triton", dev).linear_cross_entropy(h, w, targets).backward()
    peak = torch.cuda.max_memory_allocated() - base
    logits_bytes = n * v * 2
    assert peak < logits_bytes, f"peak {peak / 2**30:.2f} GiB ≥ bf16 logits {logits_bytes / 2**30:.2f} GiB"
