"""Fused kernels for the trainer, behind one backend switch: `kernels: triton | reference | auto`.

    ops = get_ops("auto", device)      # auto: Triton on CUDA, the PyTorch reference elsewhere
    y = ops.rms_norm(x, w, eps)
    q, k = ops.apply_rope(q, k, cos, sin)
    h = ops.swiglu(gate, up)
    loss = ops.linear_cross_entropy(hidden, lm_head_weight, targets, normalizer=n_tokens_in_step)

Both backends expose the same functions with the same numerics (see `reference.py`), so the model never
branches on the backend. Triton is imported only when the Triton backend is chosen, so a CPU-only machine can
import the model and train on the reference path. On CPU the Triton backend runs only under Triton's
interpreter (TRITON_INTERPRET=1, set before the kernels are first imported), which is how CI tests them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch

from trainer.kernels import reference
from trainer.kernels.utils import interpreting

BACKENDS = ("triton", "reference", "auto")


@dataclass(frozen=True, slots=True)
class KernelOps:
    """The four fused ops of one backend; signatures as in `trainer.kernels.reference`."""

    name: str
    rms_norm: Callable[..., torch.Tensor]
    apply_rope: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    swiglu: Callable[..., torch.Tensor]
    linear_cross_entropy: Callable[..., torch.Tensor]


def resolve_backend(kernels: str, device: torch.device | str | None = None) -> str:
    """Map the config value to the backend that will run: 'triton' or 'reference'.

    auto picks Triton only on CUDA (the interpreter is far too slow to train with); an explicit 'triton' on a
    CPU device is honoured only under TRITON_INTERPRET=1, and fails loudly otherwise.
    """
    if kernels not in BACKENDS:
        raise ValueError(f"kernels must be one of {BACKENDS}, got {kernels!r}")
    dev = torch.device(device) if device is not None else None
    on_cuda = dev.type == "cuda" if dev is not None else torch.cuda.is_available()
    if kernels == "auto":
        return "triton" if on_cuda else "reference"
    if kernels == "triton" and not on_cuda and not interpreting():
        raise RuntimeError(
            "kernels='triton' needs a CUDA device, or TRITON_INTERPRET=1 (set before the kernels are imported) "
            "to run them in Triton's CPU interpreter; use kernels='auto' to fall back to the reference ops"
        )
    return kernels


@cache
def _triton_ops() -> KernelOps:
    # imported here, not at module top: Triton is needed only on this path (and must see TRITON_INTERPRET first)
    from trainer.kernels.fused_linear_cross_entropy import linear_cross_entropy
    from trainer.kernels.rms_norm import rms_norm
    from trainer.kernels.rope import apply_rope
    from trainer.kernels.swiglu import swiglu

    return KernelOps("triton", rms_norm, apply_rope, swiglu, linear_cross_entropy)


REFERENCE_OPS = KernelOps(
    "reference", reference.rms_norm, reference.apply_rope, reference.swiglu, reference.linear_cross_entropy
)


def get_ops(kernels: str = "auto", device: torch.device | str | None = None) -> KernelOps:
    """The ops for config value `kernels` on `device` (None: CUDA if available)."""
    return _triton_ops() if resolve_backend(kernels, device) == "triton" else REFERENCE_OPS


__all__ = ["BACKENDS", "REFERENCE_OPS", "KernelOps", "get_ops", "resolve_backend"]
