"""Deterministic fault injection for the trainer's tests — never set in a real run.

The end-to-end tests (tests/trainer/test_train_deepspeed.py) need a crash at a known step and a "bad
batch" at known rows, through the real DeepSpeed launcher. They ask for them with one environment
variable holding JSON, so the production config (trainer/config.py) carries no test-only keys:

    REFINERY_TRAIN_FAULTS='{"kill_at_step": 17}'
    REFINERY_TRAIN_FAULTS='{"poison_indices": [52, 120], "poison_factor": 1000.0}'
    REFINERY_TRAIN_FAULTS='{"dump_state_steps": [15, 25]}'      # full optimizer state, to compare
    REFINERY_TRAIN_FAULTS='{"kill_in_upload_step": 8}'          # killed mid-upload of an S3 checkpoint

The launcher starts every rank with the environment it was given, so every rank sees the same faults
(the poison must scale the loss on whichever rank draws a poisoned row, and the spike guard decides on
all-reduced values). Only on one host: a multi-node launch (pdsh) passes on only what `.deepspeed_env`
lists. A run with faults says so on its first lines, so one cannot go unnoticed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from pydantic import model_validator

from core.config import ConfigModel, build_config
from core.errors import ConfigError

ENV_VAR = "REFINERY_TRAIN_FAULTS"


class Faults(ConfigModel):
    """What to break, and where; the defaults break nothing."""

    poison_indices: tuple[int, ...] = ()
    """global sequence indices whose micro-batch loss is scaled by poison_factor"""
    poison_factor: float = 1.0
    """the loss of a micro-batch holding a poisoned sequence is multiplied by this"""
    kill_at_step: int = 0
    """rank 0 SIGKILLs itself after finishing this step (a crash with no cleanup; 0: off)"""
    kill_in_upload_step: int = 0
    """checkpoints on object storage: rank 0 SIGKILLs itself after uploading the first file of this step's
    checkpoint, before its marker (0: off)"""
    dump_state_steps: tuple[int, ...] = ()
    """at these steps, after a save or a resume, write the full optimizer state to <logging.dir>/state_dump/
    (an observation, not a fault: it changes nothing; the elastic-resume test compares the dumps)"""

    @model_validator(mode="after")
    def _check(self) -> Faults:
        for k in ("kill_at_step", "kill_in_upload_step"):
            if getattr(self, k) < 0:
                raise ConfigError(f"{k} must be >= 0, got {getattr(self, k)}")
        return self

    @property
    def active(self) -> bool:
        return (
            bool(self.poison_indices)
            or self.kill_at_step > 0
            or self.kill_in_upload_step > 0
            or bool(self.dump_state_steps)
        )


def faults_from_env(environ: Mapping[str, str] = os.environ) -> Faults:
    """The faults `REFINERY_TRAIN_FAULTS` asks for (none when it is unset or empty)."""
    raw = environ.get(ENV_VAR, "").strip()
    if not raw:
        return Faults()
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{ENV_VAR}: not valid JSON ({e})") from None
    return build_config(Faults, data, source=ENV_VAR)
