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

The Triton ops are torch custom operators (namespace `refinery::`: `rms_norm`, `rms_norm_bwd`, `rope`,
`swiglu_train`, `swiglu_bwd`, `swiglu_bwd_`, `linear_cross_entropy`), each with a fake (meta) implementation and
a registered autograd formula, so `torch.compile(fullgraph=True)` traces a model that uses them (each appears
in the graph as one opaque call) and `torch.library.opcheck` can verify them. They are declared with
`torch.library.custom_op`, not `torch.library.triton_op`, because:
- triton_op registers the implementation itself as the fake kernel and decomposes it during tracing, which
  launches the Triton kernel on fake tensors; that works only for compiled JIT kernels. Under the interpreter
  (how the CPU tests run) the kernels are `InterpretedFunction`s, which torch 2.11's `wrap_triton` rejects
  and torch 2.13's passes through unwrapped, so tracing fails either way. custom_op behaves the same on GPU
  and under the interpreter, so what CI checks is what runs on the GPU.
- Inductor gains little from seeing inside: it does not fuse its own code into a user Triton kernel, and each
  op already is one (or, for the linear + cross-entropy, a chunk loop of cuBLAS matmuls and one kernel that
  must stay opaque: inlined, the compiler could schedule the chunks' buffers to live at once).
- The cost is one custom-op dispatch per call (tens of µs of host time, hidden behind GPU work in a training
  step).
Autocast: custom ops fall through autocast, so each wrapper applies the reference's dtype rules itself
(only the linear + cross-entropy needs to: its matmul runs in the autocast dtype, as the reference's does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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


_TRITON_OPS: KernelOps | None = None


def _triton_ops() -> KernelOps:
    # imported here, not at module top: Triton is needed only on this path (and must see TRITON_INTERPRET first).
    # A module global rather than functools.cache: Dynamo reads a global as a constant, while it traces
    # through (and warns about) a cache wrapper on every compile of a model that calls get_ops.
    global _TRITON_OPS
    if _TRITON_OPS is None:
        from trainer.kernels.fused_linear_cross_entropy import linear_cross_entropy
        from trainer.kernels.rms_norm import rms_norm
        from trainer.kernels.rope import apply_rope
        from trainer.kernels.swiglu import swiglu

        _TRITON_OPS = KernelOps("triton", rms_norm, apply_rope, swiglu, linear_cross_entropy)
    return _TRITON_OPS


REFERENCE_OPS = KernelOps(
    "reference", reference.rms_norm, reference.apply_rope, reference.swiglu, reference.linear_cross_entropy
)


def get_ops(kernels: str = "auto", device: torch.device | str | None = None) -> KernelOps:
    """The ops for config value `kernels` on `device` (None: CUDA if available)."""
    return _triton_ops() if resolve_backend(kernels, device) == "triton" else REFERENCE_OPS


__all__ = ["BACKENDS", "REFERENCE_OPS", "KernelOps", "get_ops", "resolve_backend"]
