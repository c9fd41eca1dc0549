"""Training launches on "nodes" of this machine: DeepSpeed's own launcher (trainer/launch.py's command),
one launcher per node, each node in its own mount namespace with a private /tmp (testkit/isolated.py).

What tests/trainer/test_multinode.py (two isolated nodes, checkpoints and shards on S3) and the S3
chain's last step (tests/test_object_storage.py: the chain's own shards, trained on two nodes) share:
the launcher's environment, starting a launcher with its output in a log, waiting for several of
them (killing the others once one fails: a node whose peer died waits in its next collective), and
the two-node run itself. Everything a node reads must be outside /tmp (its /tmp is private), or in
what a private /tmp keeps (the checkout, its Python environment, ../shared: testkit/isolated.py's
`project_paths`): configs, recipes and log folders live under /var/tmp in these tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from testkit.isolated import ROOT, private_tmp, project_pythonpath
from trainer.launch import free_port, launch_command

TIMEOUT = 240  # seconds per launch: ~12 s measured on 2 lightly loaded cores, the rest for a loaded CI box


def hostfile(folder: Path, lines: str = "node-0 slots=1\nnode-1 slots=1\n") -> Path:
    path = folder / "hostfile"
    path.write_text(lines)
    return path


def node_env(extensions: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The launcher's environment: one thread per rank (2 cores), the project importable, a fresh folder
    for torch's JIT-built extensions (the trainer must build none), TMPDIR the node's own /tmp."""
    extensions.mkdir(parents=True)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": project_pythonpath(os.environ.get("PYTHONPATH")),
        "TORCH_EXTENSIONS_DIR": str(extensions),
    }
    return {**env, "TMPDIR": "/tmp", **(extra or {})}


def start(cmd: list[str], env: dict[str, str], log: Path) -> tuple[subprocess.Popen, Path]:
    """`cmd` started in its own process group (so it can be killed whole), its output appended to `log`."""
    with log.open("ab") as f:
        f.write(("\n$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, log


def wait_all(procs: Sequence[tuple[subprocess.Popen, Path]], timeout: float = TIMEOUT) -> None:
    """Every launcher to its end, each exit 0. Once one fails (or at the deadline) the others are killed:
    a node whose peer died waits in its next collective forever. The failed logs' tails are the message."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(p.poll() is None for p, _ in procs):
        if any(p.poll() for p, _ in procs):  # one exited non-zero
            break
        time.sleep(0.5)
    for proc, _ in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    bad = [(p.returncode, log) for p, log in procs if p.returncode != 0]
    tails = [f"--- {log.name}: exit {rc}\n{log.read_text(errors='replace')[-4000:]}" for rc, log in bad]
    assert not bad, "\n".join(tails)


def train_on_one_node(config: Path, overrides: list[str], root: Path, name: str, processes: int = 2) -> None:
    """`config` on one node (not isolated) with `processes` ranks: the reference a two-node run must equal."""
    cmd = launch_command(str(config), overrides, processes=processes)
    wait_all([start(cmd, node_env(root / f"ext-{name}"), root / f"{name}.log")])


def start_two_nodes(
    config: Path, overrides: list[str], root: Path, name: str, env: dict[str, str] | None = None
) -> tuple[list[tuple[subprocess.Popen, Path]], int]:
    """`config` started on two isolated nodes, one rank each: one launcher per node rank of a two-host
    hostfile (`--no_ssh`), the same command but for the rank, `env` added to each; the launchers and
    the master port."""
    hosts = hostfile(root)
    port = free_port()
    procs = []
    for rank in (0, 1):
        cmd = launch_command(str(config), overrides, processes=1, master_port=port, hostfile=hosts,
                             node_rank=rank, master_addr="127.0.0.1")  # fmt: skip
        node = node_env(root / f"ext-{name}-node{rank}", env)
        procs.append(start(private_tmp(cmd), node, root / f"{name}-node{rank}.log"))
    return procs, port


def train_on_two_nodes(
    config: Path, overrides: list[str], root: Path, name: str, env: dict[str, str] | None = None
) -> None:
    """`config` trained to its end on two isolated nodes (`start_two_nodes`), both exit 0. Asserts that
    neither node built a torch extension (DeepSpeed's CPU shm allreduce op is skipped) nor left that op's
    66 MB buffers in /dev/shm, which the nodes share here."""
    procs, port = start_two_nodes(config, overrides, root, name, env)
    wait_all(procs)
    assert not [p for rank in (0, 1) for p in (root / f"ext-{name}-node{rank}").rglob("*")]
    assert not sorted(Path("/dev/shm").glob(f"deepspeed_allreduce_buffer_*_{port}_*"))
