"""The generated DeepSpeed JSON passes DeepSpeed's own checks at every ZeRO stage with bf16 (issue 14, item 4).

DeepSpeed 0.19.8 refused the old stage-0 bf16 config at start (NotImplementedError in
engine._do_optimizer_sanity_check: bf16 parameters with fp32 gradient accumulation without ZeRO). Here
`deepspeed.initialize` runs on each of the four configs `deepspeed_config` writes for a GPU
(`on_cuda=True`, precision bf16), in one process on DeepSpeed's CPU accelerator (it computes in bf16 on
CPU), followed by two optimizer steps of the debug model: the optimizer DeepSpeed builds, the parameter
dtype and the ZeRO-3 leaf blocks are what deepspeed_setup.deepspeed_config says, the loss falls, and ZeRO-3's
gradient norm (deepspeed_setup.zero3_grad_norm) is DeepSpeed's per-parameter one. A subprocess,
so the process group it starts does not outlive the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.launch import free_port

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, sys
import deepspeed, torch
from trainer.config import load_config
from deepspeed.utils import safe_get_local_grad
from trainer.deepspeed_setup import deepspeed_config, param_groups, skip_shm_allreduce, zero3_grad_norm
from trainer.model import Block, Transformer, model_config

# as the trainer does (start_process_group): without it init_distributed JIT-builds DeepSpeed's shm
# allreduce op, a C++ compile of 1-2 minutes on a fresh machine that no training step uses
skip_shm_allreduce()
deepspeed.init_distributed()
cfg = load_config(None, ["data.recipe=r.yaml", "schedule.micro_batch=2", "schedule.global_batch=2",
                         "deepspeed.precision=bf16"])
out = {}
for stage in (0, 1, 2, 3):
    ds = deepspeed_config(cfg, 1, on_cuda=True, stage=stage)
    torch.manual_seed(0)
    model = Transformer(model_config("debug", vocab_size=97, kernels="reference"))
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=1e-2)
    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=ds)
    tok = torch.randint(1, 97, (2, 17), generator=torch.Generator().manual_seed(1))
    losses, norms = [], []
    for _ in range(2):
        loss = engine(tok[:, :-1], tok[:, 1:])
        engine.backward(loss, scale_wrt_gas=False)
        if stage == 3:  # the trainer's one-kernel norm beside DeepSpeed's per-parameter public API
            ref = sum(float(g.double().pow(2).sum()) for p in engine.module.parameters()
                      if (g := safe_get_local_grad(p)) is not None) ** 0.5
            norms.append([zero3_grad_norm(engine, torch.distributed, "cpu"), ref])
        engine.step()
        losses.append(loss.item())
    out[stage] = {
        "optimizer": type(optimizer).__name__,
        "param_dtype": str(next(engine.module.parameters()).dtype),
        "leaf_blocks": sum(bool(getattr(m, "_z3_leaf", False)) for m in engine.module.modules()
                           if isinstance(m, Block)),
        "losses": losses,
        "norms": norms,
    }
print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.mark.inner  # `make quick`'s real DeepSpeed steps: deepspeed.initialize and two optimizer steps per stage
def test_every_stage_with_bf16_passes_deepspeed_initialize_and_trains():
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "RANK": "0", "WORLD_SIZE": "1",
           "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}  # fmt: skip
    # timeout: only so that a hang in a collective cannot stall the suite (the run takes ~20 s)
    p = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    lines = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stderr[-4000:]
    got = {int(k): v for k, v in json.loads(lines[0].removeprefix("RESULT ")).items()}
    # stage 0: fp32 model under DeepSpeed's torch_autocast, the torch optimizer itself (no wrapper);
    # stage 1 with bf16 + fp32 accumulation is DeepSpeed's BF16_Optimizer; 2 and 3 its ZeRO optimizers
    assert {s: (v["optimizer"], v["param_dtype"]) for s, v in got.items()} == {
        0: ("AdamW", "torch.float32"),
        1: ("BF16_Optimizer", "torch.bfloat16"),
        2: ("DeepSpeedZeroOptimizer", "torch.bfloat16"),
        3: ("DeepSpeedZeroOptimizer_Stage3", "torch.bfloat16"),
    }
    assert [got[s]["leaf_blocks"] for s in (0, 1, 2, 3)] == [0, 0, 0, 2]  # both debug blocks, stage 3 only
    for s, v in got.items():
        first, second = v["losses"]
        assert second < first - 0.3, (s, v)  # lr 1e-2 on one repeated batch: 4.57 → 3.87 measured
    # the same first loss at every stage, up to bf16 rounding of the weights (stage 0 keeps them fp32):
    # ln(97) = 4.57 at init; one bf16 ulp of the loss is 2^-6, so 0.02 is about one ulp
    firsts = [v["losses"][0] for v in got.values()]
    assert max(firsts) - min(firsts) < 0.02, firsts
    # ZeRO-3's pre-clip gradient norm from the flat partition buffer is the per-parameter one: fp32 sums
    # in another order than float64's, ~1e-7 relative at these 0.1M elements; 1e-5 leaves room, and a
    # missing or doubled parameter would move it by percents
    assert len(got[3]["norms"]) == 2
    for fused, ref in got[3]["norms"]:
        assert ref > 0 and abs(fused - ref) <= 1e-5 * ref, got[3]["norms"]
