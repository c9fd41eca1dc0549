"""Small helpers shared by the Triton launchers: launch sizes and the interpreter check.

Kept free of Triton imports so the backend switch can ask "is the interpreter on?" on a CPU-only box without
loading Triton.
"""

from __future__ import annotations

import os

import torch


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1), as CI does."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def tracing(t: torch.Tensor) -> bool:
    """True while torch.compile / AOTAutograd / opcheck trace an op (its tensors are fake or functional).

    The kernels' backwards overwrite their own buffers in eager mode to save memory; under tracing they use
    the functional form the compiler expects and leave buffer reuse to it.
    """
    from torch._subclasses.fake_tensor import is_fake  # private but stable since torch 2.0; no public twin

    return torch.compiler.is_compiling() or is_fake(t)


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def num_programs_cap(device: torch.device) -> int:
    """How many persistent programs a reduction over rows should launch.

    On a GPU: a few per SM so every SM is busy and the per-program partial sums stay few. In the interpreter
    each program is a Python loop iteration, so fewer, larger programs are simply faster.
    """
    if device.type == "cuda":
        return 4 * torch.cuda.get_device_properties(device).multi_processor_count
    return 8


def rows_per_block(n_cols_block: int) -> int:
    """Rows handled by one program tile: enough that a tile holds ~4K elements (1 row at hidden ≥ 4096)."""
    return max(1, min(64, 4096 // n_cols_block))


def num_warps_for(n_elements_per_tile: int) -> int:
    """Warps for a program whose tile holds `n_elements_per_tile` elements (a row block of a row-wise kernel).

    Liger's `calculate_settings` rule, on the tile rather than the row: ≥ 8 elements per thread keeps the
    loads vectorised (16-byte bf16 / 32-byte fp32 per thread) and the per-thread registers bounded, so a wider
    tile gets more warps: 4 warps up to 2K elements, 8 up to 8K, 16 up to 32K, 32 beyond (at most 1024
    threads per program). Ignored by the interpreter.
    """
    if n_elements_per_tile >= 32768:
        return 32
    if n_elements_per_tile >= 8192:
        return 16
    if n_elements_per_tile >= 2048:
        return 8
    return 4
