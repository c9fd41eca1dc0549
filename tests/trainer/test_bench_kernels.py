"""bench/trainer/kernels.py (`python -m bench.trainer.kernels`): refuses clearly without CUDA, and its --interpret smoke run exercises every cell."""

from __future__ import annotations

import pytest
import torch

from bench.trainer import kernels


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_refuses_without_cuda(capsys):
    assert kernels.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter smoke run is the CPU stand-in")
def test_interpret_smoke_run_fills_every_cell(capsys):
    assert kernels.main(["--interpret", "--iters", "1"]) == 0
    captured = capsys.readouterr()
    assert "err" not in captured.out
    # stderr: one progress line per row as it is measured (kept when a time limit cuts the run), no error
    progress = captured.err.splitlines()
    assert len(progress) == 5 and all(x.startswith("[bench] ") and x.endswith("]}") for x in progress), (
        progress
    )
    body = [
        line
        for line in captured.out.splitlines()
        if line.lstrip().startswith(("rms_norm", "rope", "swiglu", "linear_ce"))
    ]
    assert len(body) == 5  # four kernels + the linear+CE sweep
