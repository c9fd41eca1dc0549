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

Several nodes: the same launcher, started on each node by hand (or by the cluster's scheduler) with
DeepSpeed's `--no_ssh` multi-node form, so no node needs SSH or pdsh to reach another:

    python -m deepspeed.launcher.runner --hostfile H --no_ssh --node_rank R --master_addr A --master_port P \
        --num_nodes N [--num_gpus K] --module trainer.train --config C --set k=v

H lists the nodes in DeepSpeed's format (`host slots=K` a line; the order gives the node ranks: the
launcher numbers this node's ranks from the slots of the hosts before it). Every node runs the same
command but for R; A is node 0's address and P a port free there, the same on every node (a port picked
free here would differ between nodes). `launch_command` checks them before anything starts (ConfigError,
exit 2): DeepSpeed's own launcher would instead warn on a missing hostfile and run one node alone, fail an
assert on a bad node rank, or fail only when its ranks try to reach an address that does not resolve.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from core.errors import ConfigError

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


# A hostfile line: a host, its slot count, and nothing after it but a comment. DeepSpeed's own pattern
# (launcher/runner.py `_parse_hostfile`, `^(\S+)\s+slots=(\d+)`) ignores whatever follows the digits, so
# `node-1 slots=8x` or `node-1 slots=8 gpus=4` would launch with 8 slots and the rest silently dropped.
_HOST_LINE = re.compile(r"^(?P<host>[A-Za-z0-9_.:\[\]-]+)\s+slots=(?P<slots>\d+)(?:\s+#.*)?$")
MAX_SLOTS = 256
"""ranks per node: no node has more accelerators (DeepSpeed's launcher makes a device list of this length,
one process each; on its CPU accelerator each rank is a process with its own copy of the model)"""
MAX_NODES = 65_536
"""hosts of one hostfile (a world of MAX_NODES × MAX_SLOTS ranks is already far past any cluster)"""


def _count(key: str, value: object, lo: int, hi: int) -> int:
    """`value` as a count in [lo, hi]; a ConfigError naming `key` for anything else (True is not 1)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key}={value!r}: must be an integer in [{lo}, {hi}]")
    if not lo <= value <= hi:
        raise ConfigError(f"{key}={value}: must be in [{lo}, {hi}]")
    return value


def check_port(value: object, key: str = "master_port") -> int:
    """A TCP port number, 1..65535 (0 would let the OS pick one per node: never the same on all)."""
    return _count(key, value, 1, 65_535)


def read_hostfile(path: str | Path) -> dict[str, int]:
    """The hosts of a DeepSpeed hostfile and their slots, in order; ConfigError naming the file and line
    for what the launcher would refuse (or, for a missing file, silently ignore) and for what it would
    misread: trailing text after the slot count, slots outside [1, MAX_SLOTS], a host name with `=`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"hostfile {path}: no such file (the launcher would run on this node alone)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"hostfile {path}: cannot be read: {e}") from None
    hosts: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _HOST_LINE.match(line)
        if not m:
            raise ConfigError(
                f"hostfile {path}:{n}: {line[:200]!r} is not `host slots=K` (an optional `# comment` after it)"
            )
        host, slots = m.group("host"), int(m.group("slots"))
        if not 1 <= slots <= MAX_SLOTS:
            raise ConfigError(f"hostfile {path}:{n}: slots={slots} for {host!r}: must be in [1, {MAX_SLOTS}]")
        if host in hosts:
            raise ConfigError(f"hostfile {path}:{n}: host {host!r} listed twice")
        hosts[host] = slots
        if len(hosts) > MAX_NODES:
            raise ConfigError(f"hostfile {path}: more than {MAX_NODES} hosts")
    if not hosts:
        raise ConfigError(f"hostfile {path}: lists no host")
    return hosts


def node_args(
    hostfile: str | Path,
    node_rank: int,
    master_addr: str,
    master_port: int | bool | None,
    nodes: int | None,
    processes: int | None,
) -> list[str]:
    """The launcher's multi-node flags for this node (`--no_ssh`: each node starts its own launcher),
    checked first: the hostfile, the node count and rank, one explicit port, an address that resolves."""
    hosts = read_hostfile(hostfile)
    nodes = len(hosts) if nodes is None else _count("nodes", nodes, 1, MAX_NODES)
    if nodes > len(hosts):
        raise ConfigError(f"nodes={nodes}: the hostfile {hostfile} lists {len(hosts)} host(s)")
    if isinstance(node_rank, bool) or not isinstance(node_rank, int):
        raise ConfigError(f"node_rank={node_rank!r}: must be an integer in [0, {nodes})")
    if not 0 <= node_rank < nodes:
        raise ConfigError(f"node_rank={node_rank}: must be in [0, {nodes}) for {nodes} node(s)")
    if master_port is None or master_port is True or master_port is False:
        raise ConfigError("master_port: several nodes need one port number, the same on every node")
    slots = list(hosts.values())[:nodes]
    if processes is not None and processes > min(slots):
        raise ConfigError(f"processes={processes}: more than the hostfile's slots per node ({slots})")
    if not isinstance(master_addr, str) or not master_addr.strip():
        raise ConfigError(f"master_addr={master_addr!r}: must be node 0's host name or address")
    try:
        socket.getaddrinfo(master_addr, master_port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise ConfigError(f"master_addr={master_addr!r} does not resolve here: {e}") from None
    cmd = ["--hostfile", str(hostfile), "--no_ssh", "--node_rank", str(node_rank)]
    return [*cmd, "--master_addr", master_addr, "--num_nodes", str(nodes)]


def launch_command(
    config: str,
    overrides: Sequence[str] = (),
    *,
    processes: int | None = None,
    master_port: int | bool | None = True,
    python: str = sys.executable,
    hostfile: str | Path | None = None,
    node_rank: int | None = None,
    master_addr: str | None = None,
    nodes: int | None = None,
) -> list[str]:
    """The launcher command for `trainer.train --config config --set override ...`.

    overrides: `section.key=value` strings, each passed as `--set section.key=value` (the trainer's
    positional form is an alias of it, kept for hand-typed commands).

    processes: ranks on this node (`--num_gpus`); None leaves the launcher to use every GPU it sees (with
    a hostfile: the host's slots).
    master_port: a port, True for a free one, None/False for the launcher's default.
    python: the interpreter that runs the launcher (and, through it, every rank).
    hostfile, node_rank, master_addr, nodes: one node of several (module docstring); all but `nodes`
    (default: every host of the hostfile) are required together, and master_port must be a number.
    """
    # every number checked before anything starts, so a bad one is a ConfigError naming it, not the
    # launcher's assert or a rank failing to bind (all of them, on each node, for the same mistake)
    if processes is not None:
        _count("processes", processes, 1, MAX_SLOTS)
    if master_port is not None and master_port is not True and master_port is not False:
        check_port(master_port)
    cmd = [python, "-m", LAUNCHER_MODULE]
    several = (hostfile, node_rank, master_addr)
    if any(v is not None for v in several) or nodes is not None:
        if any(v is None for v in several):
            raise ConfigError("several nodes need hostfile, node_rank and master_addr together")
        cmd += node_args(hostfile, node_rank, master_addr, master_port, nodes, processes)  # type: ignore[arg-type]
    if processes is not None:
        cmd += ["--num_gpus", str(processes)]
    if master_port is True:
        master_port = free_port()
    if master_port:
        cmd += ["--master_port", str(master_port)]
    sets = [arg for override in overrides for arg in ("--set", override)]
    return [*cmd, "--module", TRAIN_MODULE, "--config", str(config), *sets]


# What DeepSpeed's launcher (deepspeed/launcher/launch.py) sets for a rank; the trainer reads RANK,
# WORLD_SIZE, LOCAL_RANK and LOCAL_SIZE (trainer/deepspeed_setup.py), init_distributed the MASTER_* pair.
_ONE_RANK_ENV = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_SIZE": "1", "CROSS_RANK": "0",
                 "CROSS_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}  # fmt: skip


def run_command(
    config: str, overrides: Sequence[str] = (), *, processes: int = 1, python: str = sys.executable
) -> tuple[list[str], dict[str, str]]:
    """(command, environment to add) for a run on this machine: one rank started directly, more through
    the launcher (`launch_command`).

    For one rank DeepSpeed's runner starts its `launch` module, which starts the rank: two interpreters
    more, each importing torch and deepspeed, only to set the rendezvous variables (a trivial module run
    through them cost 7.2 CPU-s and 15 s on this project's 2 shared cores). Callers that train many
    short runs (the ablation's arms, the mixture search's proxies: seconds of training each) set those
    variables here instead: the same trainer, deepspeed.init_distributed and process group of one. The
    launcher would show the rank only the first visible GPU; so does this."""
    if processes != 1:
        return launch_command(config, overrides, processes=processes, python=python), {}
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    env = {**_ONE_RANK_ENV, "MASTER_PORT": str(free_port()), "CUDA_VISIBLE_DEVICES": gpu}
    sets = [arg for override in overrides for arg in ("--set", override)]
    return [python, "-m", TRAIN_MODULE, "--config", str(config), *sets], env


def without_port(cmd: list[str]) -> list[str]:
    """The command less its `--master_port P`: what identifies a run (the port changes every time)."""
    if "--master_port" not in cmd:
        return list(cmd)
    i = cmd.index("--master_port")
    return cmd[:i] + cmd[i + 2 :]
