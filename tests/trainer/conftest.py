"""Kernel-test setup: Triton's CPU interpreter when there is no GPU, devices, and the tolerances.

TRITON_INTERPRET must be set before any `@triton.jit` function is defined (Triton decides at decoration time
whether it builds an interpreted or a compiled kernel), and the kernels modules are imported lazily by the
backend switch, so setting it here, before any test module of this folder is imported, is early enough.
"""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

HAS_CUDA = torch.cuda.is_available()

# Tolerances, per dtype, for comparing a Triton kernel with its PyTorch reference (torch.testing.assert_close:
# |actual − expected| ≤ atol + rtol·|expected|).
# - fp32: both sides compute in fp32 from the same inputs and differ only in the order of reductions
#   (≤ a few hundred terms here): typically √n·ε ≈ 3e-6 relative with ε = 1.2e-7. 1e-5 is ~80 ε;
#   atol 1e-5 covers elements that are ~0 after cancellation (e.g. RMSNorm's g − x̂·mean(g·x̂)).
# - bf16: both sides upcast identical bf16 inputs, compute in fp32 and round once, to nearest even, to bf16
#   (the kernels round explicitly so the CPU interpreter matches the GPU, see triton_utils.to_dtype). The
#   fp32 values differ only as above, so the results are equal or one bf16 ulp apart when they straddle a
#   rounding boundary: one ulp is ≤ 2^-7 of the value, hence rtol 2^-7; atol as for fp32 for ~0 elements.
TOLERANCES: dict[torch.dtype, dict[str, float]] = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.bfloat16: {"rtol": 2**-7, "atol": 1e-5},
}


def device_for(full_size: bool) -> torch.device:
    """Full-size cases need a GPU (skipped without one); small cases run on CUDA if present, else interpreted."""
    if full_size and not HAS_CUDA:
        pytest.skip("full-size kernel case needs CUDA")
    return torch.device("cuda" if HAS_CUDA else "cpu")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)
