"""The one command that starts the trainer: DeepSpeed's launcher running `trainer.train` as a module.

    python -m deepspeed.launcher.runner [--num_gpus N] [--master_port P] --module trainer.train --config C --set k=v

Every caller that trains (the workflows, the benches, the compose `train` service) builds its command
here. Two choices make it work under any install:
- the launcher's *module* through the running interpreter, not the `deepspeed` script beside it: a
  `pip --target` install (bench/gpu/checks.sh) puts no script there (commit e3f773c);
- `--module trainer.train`, not the file `trainer/train.py`: the trainer is found wherever the project
  is installed, from any working folder, not only from the checkout's root.

The rendezvous port is picked free unless given: the launcher's default (29500) is shared by every
DeepSpeed run on the machine, and a second run on it hangs waiting for ranks that are not its own.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence

TRAIN_MODULE = "trainer.train"
LAUNCHER_MODULE = "deepspeed.launcher.runner"


def free_port() -> int:
    """A TCP port free on the loopback interface now (the launcher binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_processes() -> int:
    """One rank per GPU; 2 on DeepSpeed's CPU accelerator when there is none (or no torch)."""
    try:
        import torch

        return torch.cuda.device_count() or 2
    except ImportError:
        return 2


def launch_command(
    config: str,
    overrides: Sequence[str] = (),
    *,
    processes: int | None = None,
    master_port: int | bool | None = True,
    python: str = sys.executable,
) -> list[str]:
    """The launcher command for `trainer.train --config config --set override ...`.

    overrides: `section.key=value` strings, each passed as `--set section.key=value` (the trainer's
    positional form is an alias of it, kept for hand-typed commands).

    processes: ranks on this node (`--num_gpus`); None leaves the launcher to use every GPU it sees.
    master_port: a port, True for a free one, None/False for the launcher's default.
    python: the interpreter that runs the launcher (and, through it, every rank).
    """
    cmd = [python, "-m", LAUNCHER_MODULE]
    if processes is not None:
        cmd += ["--num_gpus", str(processes)]
    if master_port is True:
        master_port = free_port()
    if master_port:
        cmd += ["--master_port", str(master_port)]
    sets = [arg for override in overrides for arg in ("--set", override)]
    return [*cmd, "--module", TRAIN_MODULE, "--config", str(config), *sets]


def without_port(cmd: list[str]) -> list[str]:
    """The command less its `--master_port P`: what identifies a run (the port changes every time)."""
    if "--master_port" not in cmd:
        return list(cmd)
    i = cmd.index("--master_port")
    return cmd[:i] + cmd[i + 2 :]
