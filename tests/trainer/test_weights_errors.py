"""`python -m trainer.weights` on a checkpoint it cannot use (issue 31, item 12): one line naming the file
and why, exit 2; never a CheckpointError traceback, a KeyError, or torch's advice to retry with
`weights_only=False`. Each case is a real bad checkpoint written here (as tests/trainer/
test_checkpoint_safety.py does: trainer state JSON, torch files, a COMPLETE.json over them), so it passes
the size check and fails where the file is read. Also `saved_zero_stage` on states with and without
the keys it reads.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from core.files import sha256_file
from trainer import checkpoint as ckpt
from trainer import weights

REPO = Path(__file__).resolve().parents[2]
STATE = {"world_size": 1, "step": 10, "tokens_trained": 0, "zero_stage": 0, "model_config": {}}


class _Pwn:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _checkpoint(root: Path, state, files: dict) -> Path:
    d = root / ckpt.tag_for(10)
    d.mkdir(parents=True)
    if state is not None:
        (d / ckpt.trainer_state_name(0)).write_text(state if isinstance(state, str) else json.dumps(state))
    for name, write in files.items():
        write(d / name)
    listed = {p.name: [p.stat().st_size, sha256_file(p)] for p in sorted(d.iterdir())}
    (d / ckpt.MARKER).write_text(json.dumps({"step": 10, "world_size": 1, "files": listed}))
    return d


def _truncated(p: Path) -> None:
    torch.save({"module": {"w": torch.ones(1000)}}, p)
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


MODEL = weights.STAGE0_MODEL_STATES
CASES = {
    # a pickle in torch's legacy (non-zip) format that needs os.system: the static check cannot read it,
    # the forced weights-only load refuses it (torch's message: advice to retry with weights_only=False)
    "legacy_pickle_with_code": (
        STATE,
        {
            MODEL: lambda p: torch.save(
                {"module": _Pwn(p.parent / "PWNED")}, p, _use_new_zipfile_serialization=False
            )
        },
        rf"{MODEL}: refused to load: it is not plain data \(weights-only unpickling failed: .*posix\.system",
    ),
    "truncated_zip": (
        STATE,
        {MODEL: _truncated},
        rf"{MODEL}: not a readable checkpoint file \(RuntimeError: ",
    ),
    "not_a_torch_file": (
        STATE,
        {MODEL: lambda p: p.write_bytes(b"hello, not a torch file")},
        rf"{MODEL}: not a readable",
    ),
    "no_module_entry": (
        STATE,
        {MODEL: lambda p: torch.save({"w": torch.ones(2)}, p)},
        rf"{MODEL}: .*KeyError: 'module'",
    ),
    "state_without_stage_or_config": (
        {k: v for k, v in STATE.items() if k != "zero_stage"},
        {MODEL: lambda p: torch.save({"module": {"w": torch.ones(2)}}, p)},
        r"trainer_rank0\.json: no ZeRO stage recorded",
    ),
    "state_without_model_config": (
        {k: v for k, v in STATE.items() if k != "model_config"},
        {},
        r"trainer_rank0\.json: not a trainer state \(no model_config\)",
    ),
    "state_not_json": ("{not json", {}, r"trainer_rank0\.json: not a readable trainer state"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_checkpoint_is_one_named_error_exit_2(tmp_path, capsys, case):
    state, files, message = CASES[case]
    d = _checkpoint(tmp_path / "ckpt", state, files)
    rc = weights.main(["export", "--checkpoints", str(tmp_path / "ckpt"), "--output", str(tmp_path / "w.st")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and err[0].startswith(f"error: {d}/"), err
    assert re.search(message, err[0]), err[0]
    assert "weights_only=False" not in err[0] and not (tmp_path / "w.st").exists()
    assert not (d / "PWNED").exists()


def test_missing_tag_names_the_folder_and_the_complete_ones(tmp_path, capsys):
    _checkpoint(tmp_path / "ckpt", STATE, {MODEL: lambda p: torch.save({"module": {"w": torch.ones(2)}}, p)})
    rc = weights.main(["export", "--checkpoints", str(tmp_path / "ckpt"), "--tag", "step_00000099",
                       "--output", str(tmp_path / "w.st")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == (
        f"error: {tmp_path / 'ckpt' / 'step_00000099'}: no such checkpoint folder; "
        "complete checkpoints: step_00000010"
    )


def test_the_command_line_prints_no_traceback(tmp_path):
    """The real entry point (`python -m trainer.weights`), where the CheckpointError used to escape."""
    d = _checkpoint(tmp_path / "ckpt", STATE, {MODEL: _truncated})
    cmd = [sys.executable, "-m", "trainer.weights", "average", "--checkpoints", str(tmp_path / "ckpt"),
           "--last", "2", "--output", str(tmp_path / "avg.st")]  # fmt: skip
    p = subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert p.returncode == 2, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith(f"error: {d / MODEL}: not a readable checkpoint file")


def test_saved_zero_stage_reads_the_key_it_has():
    """The fallback to the config used to be evaluated always: a state with `zero_stage` and no `config`
    raised KeyError('config')."""
    assert ckpt.saved_zero_stage({"zero_stage": 0}) == 0
    assert ckpt.saved_zero_stage({"zero_stage": 3, "config": {}}) == 3
    assert ckpt.saved_zero_stage({"config": {"deepspeed": {"zero_stage": 2}}}) == 2  # before the key
    for bad in ({}, {"config": {}}, {"config": {"deepspeed": {"zero_stage": "auto"}}}, {"zero_stage": 7}):
        with pytest.raises(ckpt.CheckpointError, match=r"^x/trainer_rank0\.json: no ZeRO stage recorded"):
            ckpt.saved_zero_stage(bad, "x/trainer_rank0.json")
