"""The one weights-only load guard: every `torch.load` inside `weights_only_loads()` is weights-only.

A pickle (`torch.load(..., weights_only=False)`) runs whatever its author put in `__reduce__`; a checksum
catches corruption, not a malicious author. Libraries we call (DeepSpeed's checkpoint engine and its
`zero_to_fp32` / `ds_to_universal`, torch.export's sample-input loader) pass `weights_only=False`
themselves. torch reads TORCH_FORCE_WEIGHTS_ONLY_LOAD at each call and lets it override an explicit
`weights_only=False` (torch/serialization.py), so those loaders need no patching: the guard sets it for
the block, with the few plain classes a caller's files are known to hold allowed through torch's
`safe_globals`. torch is imported only when such classes are given (core imports no heavy dependency).
Users: trainer/checkpoint.py (DeepSpeed files, legacy trainer states) and classifiers/lm_archive.py
(the LM archive, no allowed classes).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

FORCE_WEIGHTS_ONLY = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"


@contextlib.contextmanager
def weights_only_loads(allowed_globals: Sequence = ()) -> Iterator[None]:
    """Every `torch.load` inside is weights-only (also callers' `weights_only=False`), with
    `allowed_globals` (classes, functions) accepted besides plain containers and tensors."""
    old = os.environ.get(FORCE_WEIGHTS_ONLY)
    os.environ[FORCE_WEIGHTS_ONLY] = "1"
    try:
        if allowed_globals:
            import torch

            with torch.serialization.safe_globals(list(allowed_globals)):
                yield
        else:
            yield
    finally:
        if old is None:
            os.environ.pop(FORCE_WEIGHTS_ONLY, None)
        else:
            os.environ[FORCE_WEIGHTS_ONLY] = old
