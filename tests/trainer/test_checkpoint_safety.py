"""Loading a checkpoint never runs code from it (issue 17, defect 1).

A pickle's `__reduce__` can name any callable; `torch.load(..., weights_only=False)` calls it. Each test
plants such a file where the trainer or `trainer.weights` reads one (the trainer's own state, DeepSpeed's
ZeRO shards) and checks that loading fails with the file's name and that the command never ran (the
marker file it would `touch` does not exist); also the shards handed to DeepSpeed's universal-checkpoint
conversion (elastic resume). Also: the JSON trainer state restores every RNG exactly, a legacy
`trainer_rank<r>.pt` of plain data still loads, and a checkpoint of another world size gives each rank its
state by the documented rule.
"""

from __future__ import annotations

import argparse
import json
import os
import random

import numpy as np
import pytest
import torch

from core.files import sha256_file
from core.weights_only import FORCE_WEIGHTS_ONLY
from trainer import checkpoint as ckpt


class _Pwn:
    """Unpickling this runs `touch <marker>`."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _complete(d, step=10, world=1):
    """A COMPLETE.json over every file of `d`, as ckpt.save writes it (the marker guards integrity only)."""
    files = {p.name: [p.stat().st_size, sha256_file(p)] for p in sorted(d.iterdir()) if p.name != ckpt.MARKER}
    (d / ckpt.MARKER).write_text(json.dumps({"step": step, "world_size": world, "files": files}))


def test_pickled_trainer_state_with_code_is_refused(tmp_path):
    d = tmp_path / ckpt.tag_for(10)
    d.mkdir()
    marker = tmp_path / "PWNED"
    torch.save({"world_size": 1, "step": 10, "x": _Pwn(marker)}, d / "trainer_rank0.pt")
    _complete(d)
    assert ckpt.verify(d) is None  # the sha256 marker is satisfied: integrity is not trust
    with pytest.raises(ckpt.CheckpointError, match=r"trainer_rank0\.pt: refused to load") as e:
        ckpt.load_trainer_state(d, 0, 1)
    assert "unsupported GLOBAL posix.system" in str(e.value)  # the refused call is named
    assert not marker.exists()


def test_deepspeed_shard_with_code_is_refused_by_weights_export(tmp_path):
    """`trainer.weights` hands DeepSpeed's zero_to_fp32 (which calls torch.load(weights_only=False)) the
    shards only inside safe_torch_load(): the planted shard fails to load and its command never runs."""
    from trainer import weights

    d = tmp_path / ckpt.tag_for(10)
    d.mkdir()
    marker = tmp_path / "PWNED"
    state = {"world_size": 1, "step": 10, "tokens_trained": 0, "model_config": {}}
    (d / ckpt.trainer_state_name(0)).write_text(json.dumps(state))
    for kind in ("model", "optim"):
        torch.save({"x": _Pwn(marker)}, d / f"zero_pp_rank_0_mp_rank_00_{kind}_states.pt")
    _complete(d)
    with pytest.raises(
        ckpt.CheckpointError, match=r"zero_pp_rank_0_mp_rank_00_model_states\.pt: refused .*system"
    ):
        weights.consolidated(tmp_path, ckpt.tag_for(10))
    assert not marker.exists()
    # without the static pre-check, the forced weights-only load still refuses it (what it cannot see)
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    with ckpt.safe_torch_load(), pytest.raises(Exception, match=r"(?i)weights only load failed"):
        get_fp32_state_dict_from_zero_checkpoint(str(tmp_path), tag=ckpt.tag_for(10))
    assert not marker.exists()


def test_real_deepspeed_files_pass_the_static_check(tmp_path):
    """What DeepSpeed's ZeRO-3 engine writes (the classes of deepspeed_safe_globals) is not refused."""
    from deepspeed.runtime.fp16.loss_scaler import LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum

    torch.save(
        {"loss_scaler": LossScaler(1.0), "zero_stage": ZeroStageEnum.weights}, tmp_path / "o_optim_states.pt"
    )
    torch.save({"module": {"w": torch.ones(2)}}, tmp_path / "m_model_states.pt")
    ckpt.check_deepspeed_files(tmp_path)


def test_deepspeed_checkpoint_engine_load_is_forced_weights_only(tmp_path):
    """What engine.load_checkpoint calls for every file (TorchCheckpointEngine.load, weights_only=False)."""
    from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine

    marker = tmp_path / "PWNED"
    path = tmp_path / "zero_pp_rank_0_mp_rank_00_optim_states.pt"
    torch.save({"x": _Pwn(marker)}, path)
    with ckpt.safe_torch_load(), pytest.raises(Exception, match=r"(?i)weights only load failed"):
        TorchCheckpointEngine().load(str(path))
    assert not marker.exists()
    assert FORCE_WEIGHTS_ONLY not in os.environ  # restored on the way out


def test_deepspeed_optimizer_state_classes_load_weights_only(tmp_path):
    """The two DeepSpeed classes a ZeRO optimizer shard holds are allowed, as data: they load."""
    from deepspeed.runtime.fp16.loss_scaler import LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum

    path = tmp_path / "optim.pt"
    torch.save(
        {"loss_scaler": LossScaler(1.0), "zero_stage": ZeroStageEnum.weights, "t": torch.ones(2)}, path
    )
    with ckpt.safe_torch_load():
        got = torch.load(path, weights_only=False)  # as DeepSpeed calls it
    assert got["zero_stage"] is ZeroStageEnum.weights and got["loss_scaler"].cur_scale == 1.0


def test_json_trainer_state_restores_every_rng_exactly(tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    np.random.randn()  # a cached Gaussian is part of NumPy's state
    st = json.loads(json.dumps(ckpt.rng_state()))  # what the checkpoint file holds
    first = (random.random(), np.random.randn(), torch.rand(3))
    ckpt.set_rng_state(st)
    again = (random.random(), np.random.randn(), torch.rand(3))
    assert first[0] == again[0] and first[1] == again[1] and torch.equal(first[2], again[2])


def test_legacy_pickled_trainer_state_of_plain_data_still_loads(tmp_path):
    """Checkpoints written before the JSON format hold tuples, NumPy's RNG array and a torch byte tensor."""
    d = tmp_path / ckpt.tag_for(10)
    d.mkdir()
    for r in (0, 1):
        rng = {
            "python": random.getstate(),
            "numpy": np.random.get_state(),
            "torch_cpu": torch.get_rng_state(),
        }
        torch.save({"world_size": 2, "step": 10, "rank": r, "rng": rng}, d / f"trainer_rank{r}.pt")
    st = ckpt.load_trainer_state(d, 1, 2)
    assert st["step"] == 10 and st["rank"] == 1
    ckpt.set_rng_state(st["rng"])
    # on 1 rank (elastic resume): rank 0's state
    assert ckpt.load_trainer_state(d, 0, 1)["rank"] == 0


def _rank_states(d, world, seeds):
    """JSON trainer states of `world` ranks, rank r's RNG seeded with seeds[r]; what save() writes."""
    for r in range(world):
        random.seed(seeds[r])
        np.random.seed(seeds[r])
        torch.manual_seed(seeds[r])
        st = {
            "world_size": world,
            "rank": r,
            "step": 10,
            "sampler": {"global_index": 80},
            "rng": ckpt.rng_state(),
        }
        (d / ckpt.trainer_state_name(r)).write_text(json.dumps(st))


def _draws(st):
    ckpt.set_rng_state(st["rng"])
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_other_world_size_takes_rank0_state_and_the_rng_of_rank_mod_n(tmp_path):
    """Elastic resume: every rank takes rank 0's trainer state and the RNG states of old rank (rank mod N)."""
    d = tmp_path / ckpt.tag_for(10)
    d.mkdir()
    _rank_states(d, 2, seeds=[11, 22])
    own = [_draws(ckpt.load_trainer_state(d, r, 2)) for r in (0, 1)]
    assert own[0] != own[1]
    for rank, world in [(0, 1), (0, 4), (1, 4), (2, 4), (3, 4), (1, 3), (2, 3)]:
        st = ckpt.load_trainer_state(d, rank, world)
        assert st["rank"] == 0 and st["sampler"] == {"global_index": 80}, (rank, world)
        assert _draws(st) == own[rank % 2], (rank, world)


def test_universal_conversion_refuses_a_shard_with_code(tmp_path):
    """Elastic resume converts DeepSpeed's shards (ds_to_universal, which loads with weights_only=False):
    the planted shard is refused by name, and without the static check the forced weights-only load
    still refuses it. Its command never runs."""
    from deepspeed.checkpoint.ds_to_universal import main as ds_to_universal

    d = tmp_path / ckpt.tag_for(10)
    d.mkdir()
    marker = tmp_path / "PWNED"
    for kind in ("model", "optim"):
        torch.save({"x": _Pwn(marker)}, d / f"zero_pp_rank_0_mp_rank_00_{kind}_states.pt")
    with pytest.raises(ckpt.CheckpointError, match=r"zero_pp_rank_0_mp_rank_00_model_states\.pt: refused"):
        ckpt.convert_to_universal(d)
    assert not marker.exists() and not (d / ckpt.UNIVERSAL).exists()
    args = argparse.Namespace(input_folder=str(d), output_folder=str(tmp_path / "u"), num_extract_workers=1,
                              num_merge_workers=1, keep_temp_folder=False, strict=True,
                              inject_missing_state=False)  # fmt: skip
    with ckpt.safe_torch_load(), pytest.raises(Exception, match=r"(?i)weights only load failed"):
        ds_to_universal(args)
    assert not marker.exists()


def test_no_unsafe_torch_load_in_trainer():
    """No call in trainer/ is `torch.load(..., weights_only=False)` (found in the syntax tree, not comments)."""
    import ast
    from pathlib import Path

    hits = []
    for p in Path(ckpt.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("torch.load"):
                for kw in node.keywords:
                    if kw.arg == "weights_only" and not (
                        isinstance(kw.value, ast.Constant) and kw.value.value
                    ):
                        hits.append(f"{p}:{node.lineno}")
    assert hits == [], hits
