"""Loading a checkpoint never runs code from it (issue 17, defect 1).

A pickle's `__reduce__` can name any callable; `torch.load(..., weights_only=False)` calls it. Each test
plants such a file where the trainer or `trainer.weights` reads one (the trainer's own state, DeepSpeed's
ZeRO shards) and checks that loading fails with the file's name and that the command never ran (the
marker file it would `touch` does not exist); also the shards handed to DeepSpeed's universal-checkpoint
conversion (elastic resume). Also: the JSON trainer state restores every RNG exactly, a legacy
`trainer_rank<r>.pt` of plain data still loads, and a checkpoint of another world size gives each rank its
state by the documented rule.

Names from a marker (issue 44 item 1, `pytest -m security`): COMPLETE.json's `files` are joined to the
checkpoint folder on verify, download and load, and whoever can write the folder or its bucket writes the
marker. A hostile name (`../victim`, `/etc/passwd`, `%2F`, NUL, empty, `.`, `..`, 300 characters) or value
makes the checkpoint one that does not verify, with a reason naming the marker and the field; resume falls
back to the older good one, and the victim file outside (with the very size and sha256 the marker claims)
is never opened (testkit/audit.py records every open). Also a link inside a checkpoint or as one, and the
download from an object store (the in-memory one: the same ObjectStore code as S3's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re

import numpy as np
import pytest
import torch

from core.files import sha256_file
from core.storage import ObjectStore, join
from core.weights_only import FORCE_WEIGHTS_ONLY
from testkit.audit import recording, tree
from trainer import checkpoint as ckpt
from trainer import checkpoint_remote as remote


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


# -- names from a marker -------------------------------------------------------------------------------------

HOSTILE_NAMES = ["../victim", "../../victim", "/etc/passwd", "a/../../victim", "..%2Fvictim", "%2E%2E%2Fvictim",
                 "..\\victim", "victim\x00", "a\x00/../../victim", "", ".", "..", ".hidden", "a" * 300,
                 ckpt.MARKER]  # fmt: skip
VICTIM = b"trained on this? no: a file outside the checkpoint folder\n"


def _victim_marker(d, name) -> str:
    """d's marker listing `name` with the victim's true size and sha256, written by the trainer's own
    marker_json, beside a real file: only the name is wrong."""
    (d / "a.pt").write_bytes(b"A" * 10)
    files = {"a.pt": (10, sha256_file(d / "a.pt")), name: (len(VICTIM), hashlib.sha256(VICTIM).hexdigest())}
    return ckpt.marker_json(10, 1, files)


def _plant_victims(root) -> list:
    """The victim where each `..` of HOSTILE_NAMES lands, from a checkpoint folder under root/ckpt/."""
    paths = [root / "victim", root / "ckpt" / "victim"]
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(VICTIM)
    return paths


def _good(root, step) -> None:
    d = root / ckpt.tag_for(step)
    d.mkdir(parents=True)
    (d / "a.pt").write_bytes(b"G" * 10)
    (d / ckpt.MARKER).write_text(ckpt.marker_json(step, 1, {"a.pt": (10, sha256_file(d / "a.pt"))}))


@pytest.mark.security
@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_name_in_the_marker_is_refused_and_opens_nothing_outside(tmp_path, name):
    root = tmp_path / "ckpt"
    victims = _plant_victims(tmp_path)
    _good(root, 10)
    d = root / ckpt.tag_for(20)
    d.mkdir()
    (d / ckpt.MARKER).write_text(_victim_marker(d, name))
    before = tree(tmp_path)
    logs: list[str] = []
    with recording() as opened:
        assert ckpt.newest_good(root, "sha256", log=logs.append) == ckpt.tag_for(10)  # fell back
    assert len(logs) == 1 and logs[0].startswith(f"[checkpoint] skipping {d}: {d / ckpt.MARKER}: files")
    assert ("a name must be a file name in the checkpoint folder" in logs[0]) != (name == ckpt.MARKER)
    assert [p for p in opened if not p.startswith(str(root))] == []
    assert str(victims[0]) not in opened and str(victims[1]) not in opened
    assert tree(tmp_path) == before and all(v.read_bytes() == VICTIM for v in victims)


@pytest.mark.security
@pytest.mark.parametrize(
    ("marker", "needle"),
    [
        ([], "files must be an object"),
        ({"step": 1}, "files must be an object"),
        ({"files": [["a.pt", 10, "0" * 64]]}, "files must be an object"),
        ({"files": {"a.pt": 10}}, r"files\['a.pt'\] must be \[size, sha256\], got 10"),
        ({"files": {"a.pt": [10]}}, r"files\['a.pt'\] must be \[size, sha256\]"),
        ({"files": {"a.pt": [-1, "0" * 64]}}, r"files\['a.pt'\] must be \[size, sha256\]"),
        ({"files": {"a.pt": [True, "0" * 64]}}, r"files\['a.pt'\] must be \[size, sha256\]"),
        ({"files": {"a.pt": ["10", "0" * 64]}}, r"files\['a.pt'\] must be \[size, sha256\]"),
        ({"files": {"a.pt": [10, "../victim"]}}, r"files\['a.pt'\] sha256 must be 64 lowercase hex"),
        ({"files": {"a.pt": [10, None]}}, r"files\['a.pt'\] sha256 must be 64 lowercase hex"),
    ],
)
def test_a_marker_value_that_is_not_the_writers_is_named(tmp_path, marker, needle):
    d = tmp_path / ckpt.tag_for(10)
    d.mkdir()
    (d / ckpt.MARKER).write_text(json.dumps(marker))
    assert re.match(rf"^{re.escape(str(d / ckpt.MARKER))}: {needle}", ckpt.verify(d) or "")


@pytest.mark.security
@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"[" * 100_000, "nests deeper"),
        (b'{"files": {}, "files": {"../x": [1, "' + b"0" * 64 + b'"]}}', "given twice"),
        (b'{"files": {"a.pt": [NaN, "x"]}}', "a.pt"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_marker_that_is_not_json_the_trainer_writes_is_named(tmp_path, raw, needle):
    d = tmp_path / ckpt.tag_for(10)
    d.mkdir()
    (d / ckpt.MARKER).write_bytes(raw)
    why = ckpt.verify(d) or ""
    assert why.startswith(f"{d / ckpt.MARKER}: ") and needle in why, why


@pytest.mark.security
@pytest.mark.parametrize("link", ["a.pt", ckpt.MARKER, "zero_pp_rank_0_mp_rank_00_optim_states.pt"])
def test_a_link_in_a_checkpoint_is_refused_before_anything_is_read(tmp_path, link):
    """A link listed with the victim's size and sha256 (or not listed: DeepSpeed's loader globs its files, and
    the marker itself) would be read through: the folder holding it does not verify, and nothing is opened."""
    root = tmp_path / "ckpt"
    (victim,) = _plant_victims(tmp_path)[:1]
    _good(root, 10)
    d = root / ckpt.tag_for(20)
    d.mkdir()
    (d / ckpt.MARKER).write_text(_victim_marker(d, "b.pt"))
    (d / "b.pt").write_bytes(VICTIM)
    (d / link).unlink(missing_ok=True)
    (d / link).symlink_to(victim)
    logs: list[str] = []
    with recording() as opened:
        assert ckpt.newest_good(root, "sha256", log=logs.append) == ckpt.tag_for(10)
    assert f"holds a symbolic link ('{link}')" in logs[0]
    assert str(victim) not in opened


@pytest.mark.security
def test_a_checkpoint_folder_that_is_a_link_is_not_listed_or_pruned(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    _good(elsewhere, 30)
    root = tmp_path / "ckpt"
    _good(root, 10)
    (root / ckpt.tag_for(30)).symlink_to(elsewhere / ckpt.tag_for(30), target_is_directory=True)
    assert ckpt.list_tags(root) == [ckpt.tag_for(10)]
    ckpt._prune(root, 1, log=lambda _: None)
    assert (elsewhere / ckpt.tag_for(30) / "a.pt").is_file()


@pytest.mark.security
def test_weights_export_names_the_hostile_marker(tmp_path):
    from trainer import weights

    _plant_victims(tmp_path)
    d = tmp_path / "ckpt" / ckpt.tag_for(10)
    d.mkdir(parents=True)
    (d / ckpt.MARKER).write_text(_victim_marker(d, "../../victim"))
    with (
        recording() as opened,
        pytest.raises(ckpt.CheckpointError, match=r"COMPLETE\.json: files: a name must"),
    ):
        weights.consolidated(tmp_path / "ckpt", ckpt.tag_for(10))
    assert not [p for p in opened if "victim" in p]


def _remote_ckpt(uri: str, tag: str, marker: str | bytes, files: dict[str, bytes]) -> None:
    store = ObjectStore(uri)
    for name, data in files.items():
        store.write_bytes(join(uri, tag, name), data)
    store.write_bytes(join(uri, tag, ckpt.MARKER), marker if isinstance(marker, bytes) else marker.encode())


@pytest.fixture()
def bucket():
    uri = f"memory://ckpt-{os.urandom(6).hex()}/run"
    yield uri
    ObjectStore(uri).delete_tree(uri)


@pytest.mark.security
@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_name_in_a_remote_marker_downloads_nothing(tmp_path, bucket, name):
    """fetch() downloads each listed key to `staging/tag/name`: a hostile name is refused before the first
    download, so nothing is written or deleted in staging or outside it; resume falls back."""
    staging = tmp_path / "node" / "staging"
    staging.mkdir(parents=True)
    victims = _plant_victims(tmp_path / "node")  # node/victim, node/ckpt/victim: not in staging
    (staging / "victim").write_bytes(VICTIM)  # where `../victim` from staging/step_…/ lands
    ok = ckpt.marker_json(10, 1, {"a.pt": (10, hashlib.sha256(b"G" * 10).hexdigest())})
    _remote_ckpt(bucket, ckpt.tag_for(10), ok, {"a.pt": b"G" * 10})
    tag = ckpt.tag_for(20)
    d = tmp_path / "scratch"
    d.mkdir()
    _remote_ckpt(bucket, tag, _victim_marker(d, name), {"a.pt": b"A" * 10, "victim": VICTIM})
    before = tree(tmp_path)
    with recording() as opened:
        why = remote.fetch(bucket, tag, staging)
    assert why is not None and why.startswith(f"{join(bucket, tag, ckpt.MARKER)}: files"), why
    assert opened == [] and tree(tmp_path) == before
    assert all(v.read_bytes() == VICTIM for v in [*victims, staging / "victim"])
    logs: list[str] = []
    assert remote.newest_good(bucket, staging, log=logs.append) == ckpt.tag_for(10)
    assert (staging / "victim").read_bytes() == VICTIM


@pytest.mark.security
@pytest.mark.parametrize("tag", ["../victim", "/tmp", "step_1/../..", ""])
def test_fetch_refuses_a_tag_that_is_not_one_before_clearing_anything(tmp_path, bucket, tag):
    staging = tmp_path / "staging"
    staging.mkdir()
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "kept").write_bytes(VICTIM)
    before = tree(tmp_path)
    assert "is not a checkpoint tag" in remote.fetch(bucket, tag, staging)
    assert tree(tmp_path) == before
