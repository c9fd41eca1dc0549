"""Deterministic fault injection for the trainer's tests — never set in a real run.

The end-to-end tests (tests/trainer/test_train_deepspeed.py) need a crash at a known step and a "bad
batch" at known rows, through the real DeepSpeed launcher. They ask for them with one environment
variable holding JSON, so the production config (trainer/config.py) carries no test-only keys:

    REFINERY_TRAIN_FAULTS='{"kill_at_step": 17}'
    REFINERY_TRAIN_FAULTS='{"hang_at_step": 2, "fault_rank": 1}'    # another node's rank hangs
    REFINERY_TRAIN_FAULTS='{"poison_indices": [52, 120], "poison_factor": 1000.0}'
    REFINERY_TRAIN_FAULTS='{"dump_state_steps": [15, 25]}'      # full optimizer state, to compare
    REFINERY_TRAIN_FAULTS='{"kill_in_upload_step": 8}'          # killed mid-upload of an S3 checkpoint

The launcher starts every rank with the environment it was given, so every rank sees the same faults
(the poison must scale the loss on whichever rank draws a poisoned row, and the spike guard decides on
all-reduced values). Only on one host: a multi-node launch (pdsh) passes on only what `.deepspeed_env`
lists. A run with faults says so on its first lines, so one cannot go unnoticed.

`FaultHook` puts them at their sites through the trainer's step hooks (trainer/hooks.py): one registration
in trainer/train.py, no fault code in the loop.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import model_validator

from core.config import ConfigModel, build_config, check_at_least
from core.errors import ConfigError
from core.safe_json import JSONFileError, loads_checked
from trainer.hooks import Hook, StepEnd

ENV_VAR = "REFINERY_TRAIN_FAULTS"


class Faults(ConfigModel):
    """What to break, and where; the defaults break nothing."""

    poison_indices: tuple[int, ...] = ()
    """global sequence indices whose micro-batch loss is scaled by poison_factor"""
    poison_factor: float = 1.0
    """the loss of a micro-batch holding a poisoned sequence is multiplied by this"""
    kill_at_step: int = 0
    """rank `fault_rank` SIGKILLs itself after finishing this step (a crash with no cleanup; 0: off)"""
    hang_at_step: int = 0
    """rank `fault_rank` SIGSTOPs itself after finishing this step: a hung node, which its peers wait for
    until deepspeed.timeout_s (0: off)"""
    fault_rank: int = 0
    """the rank kill_at_step and hang_at_step act on (another node's: what its peers do then)"""
    kill_in_upload_step: int = 0
    """checkpoints on object storage: rank 0 SIGKILLs itself after uploading the first file of this step's
    checkpoint, before its marker (0: off)"""
    dump_state_steps: tuple[int, ...] = ()
    """at these steps, after a save or a resume, write the full optimizer state to <logging.dir>/state_dump/
    (an observation, not a fault: it changes nothing; the elastic-resume test compares the dumps)"""

    @model_validator(mode="after")
    def _check(self) -> Faults:
        for k in ("kill_at_step", "hang_at_step", "fault_rank", "kill_in_upload_step"):
            check_at_least(k, getattr(self, k), 0)
        return self

    @property
    def active(self) -> bool:
        return (
            bool(self.poison_indices)
            or self.kill_at_step > 0
            or self.hang_at_step > 0
            or self.kill_in_upload_step > 0
            or bool(self.dump_state_steps)
        )


def faults_from_env(environ: Mapping[str, str] = os.environ) -> Faults:
    """The faults `REFINERY_TRAIN_FAULTS` asks for (none when it is unset or empty)."""
    raw = environ.get(ENV_VAR, "").strip()
    if not raw:
        return Faults()
    try:  # the checked reader: the environment is outside the process
        data = loads_checked(raw, ENV_VAR)
    except JSONFileError as e:  # names the variable
        raise ConfigError(str(e)) from None
    return build_config(Faults, data, source=ENV_VAR)


class FaultHook(Hook):
    """The faults of one run at their sites in the loop (trainer/hooks.py): a poisoned micro-batch loss, a
    SIGKILL after a step or mid-upload, and the state dumps after a save or a resume."""

    def __init__(self, faults: Faults):
        self.faults = faults
        self.poison = set(faults.poison_indices)

    def on_start(self, t) -> None:
        if self.faults.active and t.rank == 0:  # a run with faults says so, so one cannot go unnoticed
            print(f"[trainer] TEST FAULTS ACTIVE ({ENV_VAR}): {self.faults.to_dict()}", flush=True)

    def on_loss(self, t, loss, indices: Sequence[int]):
        if self.poison and self.poison.intersection(indices):
            return loss * self.faults.poison_factor  # a deterministic "bad batch"
        return loss

    def on_step_end(self, t, step: StepEnd) -> None:
        # 0 is "off" in each setting, checked as such: not left to the loop never ending a step 0
        if t.rank != self.faults.fault_rank:
            return
        if self.faults.kill_at_step and t.step == self.faults.kill_at_step:
            _kill_self()
        if self.faults.hang_at_step and t.step == self.faults.hang_at_step:
            os.kill(os.getpid(), signal.SIGSTOP)  # alive but silent: its sockets stay open

    def on_upload(self, t, n: int) -> None:
        step = self.faults.kill_in_upload_step
        if step and step == t.step and t.rank == 0 and n == 1:
            _kill_self()

    def on_checkpoint(self, t, event: str) -> None:
        """dump_state_steps: the full fp32 weights, Adam moments, step counts and optimizer hyperparameters
        (checkpoint.gather_full_state) go to `<logging.dir>/state_dump/<event>_step_XXXXXXXX.safetensors`.
        Collective; it only reads the state."""
        if t.step not in self.faults.dump_state_steps:
            return
        from trainer import checkpoint as ckpt

        tensors, meta = ckpt.gather_full_state(t.engine, t.optimizer)
        if t.rank == 0:
            from safetensors.torch import save_file

            out = Path(t.cfg.logging.dir or ".") / "state_dump"
            out.mkdir(parents=True, exist_ok=True)
            name = out / f"{event}_{ckpt.tag_for(t.step)}.safetensors"
            save_file(tensors, str(name), metadata={"state": json.dumps(meta)})


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # a crash with no cleanup at all
