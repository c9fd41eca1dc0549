"""bench/kernels.py: refuses clearly without CUDA, and its --interpret smoke run exercises every cell."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "bench" / "kernels.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_kernels", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_refuses_without_cuda(capsys):
    assert _bench().main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter smoke run is the CPU stand-in")
def test_interpret_smoke_run_fills_every_cell(capsys):
    assert _bench().main(["--interpret", "--iters", "1"]) == 0
    captured = capsys.readouterr()
    assert "err" not in captured.out and captured.err == ""
    body = [
        line
        for line in captured.out.splitlines()
        if line.lstrip().startswith(("rms_norm", "rope", "swiglu", "linear_ce"))
    ]
    assert len(body) == 5  # four kernels + the linear+CE sweep
