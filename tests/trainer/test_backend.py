"""The `kernels: triton | reference | auto` switch, and that the CPU path never needs Triton."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import trainer.model
from trainer.kernels import REFERENCE_OPS, get_ops, resolve_backend
from trainer.model import Transformer, model_config

ROOT = Path(__file__).resolve().parents[2]


def test_auto_is_triton_on_cuda_and_reference_elsewhere():
    assert resolve_backend("auto", "cuda") == "triton"
    assert resolve_backend("auto", "cpu") == "reference"
    assert get_ops("auto", "cpu") is REFERENCE_OPS
    assert resolve_backend("reference", "cuda") == "reference"


def test_unknown_backend_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match="triton"):
        resolve_backend("cuda")


def test_triton_on_cpu_without_the_interpreter_fails_loudly(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        resolve_backend("triton", "cpu")


def test_model_uses_the_backend_it_is_configured_with(monkeypatch):
    seen = []

    def spy(kernels, device):
        ops = get_ops(kernels, device)
        seen.append(ops.name)
        return ops

    monkeypatch.setattr(trainer.model, "get_ops", spy)
    # the device from the machine: on a CUDA machine kernels='triton' on a CPU tensor is refused by design
    # (no interpreter there), so the model and its tokens go to CUDA; elsewhere CPU under the interpreter
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokens = torch.randint(0, 64, (1, 8), device=device)
    for kernels in ("triton", "reference", "auto"):
        Transformer(model_config("debug", vocab_size=64, kernels=kernels)).to(device)(tokens, tokens)
    assert seen == ["triton", "reference", "reference" if not torch.cuda.is_available() else "triton"]


def test_importing_and_running_the_model_on_cpu_does_not_import_triton():
    code = (
        "import sys, torch, trainer.model as m;"
        "net = m.Transformer(m.model_config('debug', vocab_size=64));"
        "t = torch.randint(0, 64, (1, 8)); net(t, t).backward();"
        "assert 'triton' not in sys.modules, 'triton imported'"
    )
    env = {"PATH": "", "CUDA_VISIBLE_DEVICES": ""}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=120)
