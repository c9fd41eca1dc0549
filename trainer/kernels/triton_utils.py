"""Triton helpers shared by the kernels (imports Triton; loaded only with the Triton backend).

`to_dtype` exists because Triton 3.9's CPU interpreter converts fp32 → bf16 by truncation (its
`_convert_float` ignores the rounding mode), while the GPU and `torch.Tensor.to` round to nearest even. Rounding
the fp32 value to a bf16-representable one first (bit trick below) makes the final conversion exact on both,
so interpreted CI tests check the same numbers the GPU produces; the cost is three integer ops per element in
kernels that are memory bound.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def round_to_bf16(x):
    """Round fp32 x to the nearest bf16 value (ties to even), returned as fp32 (exactly representable)."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (
        bits + 0x7FFF + ((bits >> 16) & 1)
    )  # +half ulp, and one more when the kept lsb is odd: ties to even
    return (bits & 0xFFFF0000).to(tl.float32, bitcast=True)


@triton.jit
def to_dtype(x, dtype: tl.constexpr):
    """Cast fp32 x to `dtype` with round-to-nearest-even, identically on GPU and in the interpreter."""
    if dtype == tl.bfloat16:
        x = round_to_bf16(x)
    return x.to(dtype)
