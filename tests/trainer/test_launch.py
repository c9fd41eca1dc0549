"""trainer/launch.py: the one trainer launch, DeepSpeed's launcher module running `trainer.train` as a module
(the form a `pip --target` install runs; the launcher's own parser accepts it)."""

from __future__ import annotations

import sys

import pytest

from core.errors import ConfigError
from trainer.launch import (
    LAUNCHER_MODULE,
    MAX_SLOTS,
    TRAIN_MODULE,
    launch_command,
    read_hostfile,
    run_command,
    without_port,
)


def test_command_form_and_port():
    cmd = launch_command("c.yaml", ["a=1", "b=2"], processes=2, master_port=29600)
    assert cmd == [sys.executable, "-m", LAUNCHER_MODULE, "--num_gpus", "2", "--master_port", "29600",
                   "--module", TRAIN_MODULE, "--config", "c.yaml", "--set", "a=1", "--set", "b=2"]  # fmt: skip
    free = launch_command("c.yaml", processes=1)
    assert int(free[free.index("--master_port") + 1]) > 0  # picked free, not the shared 29500
    assert without_port(free) == [sys.executable, "-m", LAUNCHER_MODULE, "--num_gpus", "1", "--module",
                                  TRAIN_MODULE, "--config", "c.yaml"]  # fmt: skip
    every_gpu = launch_command("c.yaml", python="python", master_port=None)
    assert every_gpu == ["python", "-m", LAUNCHER_MODULE, "--module", TRAIN_MODULE, "--config", "c.yaml"]


def test_one_rank_starts_without_the_launcher_with_the_variables_it_would_set(monkeypatch):
    """run_command: one rank is `python -m trainer.train` with the launcher's rendezvous variables (a
    run of it is every arm of tests/workflows/test_ablate.py); more ranks keep the launcher."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    cmd, env = run_command("c.yaml", ["a=1"])
    assert cmd == [sys.executable, "-m", TRAIN_MODULE, "--config", "c.yaml", "--set", "a=1"]
    assert {k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_SIZE")} == dict.fromkeys(
        ("RANK", "LOCAL_RANK"), "0"
    ) | dict.fromkeys(("WORLD_SIZE", "LOCAL_SIZE"), "1")
    assert env["MASTER_ADDR"] == "127.0.0.1" and int(env["MASTER_PORT"]) > 0
    assert env["CUDA_VISIBLE_DEVICES"] == "3"  # the launcher's --num_gpus 1: the first visible GPU only
    two, env2 = run_command("c.yaml", ["a=1"], processes=2)
    assert without_port(two) == without_port(launch_command("c.yaml", ["a=1"], processes=2)) and env2 == {}


def test_deepspeeds_parser_reads_it_as_the_module_and_its_arguments():
    pytest.importorskip("deepspeed")
    from deepspeed.launcher.runner import parse_args

    cmd = launch_command("c.yaml", ["schedule.steps=3"], processes=2, master_port=29600)
    args = parse_args(cmd[3:])
    assert args.module and args.user_script == TRAIN_MODULE and args.num_gpus == 2
    assert args.user_args == ["--config", "c.yaml", "--set", "schedule.steps=3"]


# ------------------------------------------------------------------ hostfile lines and launch numbers
# (issue 44 item 4: DeepSpeed's own parser ignores what follows `slots=K`, takes any K, and the launcher
# took node_rank=True as rank 1; every such value is now a ConfigError before anything starts)

GOOD_LINES = {
    "node-0 slots=8": {"node-0": 8},
    "node-0\tslots=1   ": {"node-0": 1},
    "10.0.0.7 slots=4 # the big one": {"10.0.0.7": 4},
    "gpu_a.cluster.local slots=256": {"gpu_a.cluster.local": MAX_SLOTS},
    "[fe80::1] slots=2": {"[fe80::1]": 2},
}
BAD_LINES = {
    "node-0 slots=8x": "is not `host slots=K`",
    "node-0 slots=8 gpus=4": "is not `host slots=K`",
    "node-0 slots=8#no space": "is not `host slots=K`",
    "node-0 slots=8, node-1 slots=8": "is not `host slots=K`",
    "node-0 slots=-1": "is not `host slots=K`",
    "node-0 slots=1.5": "is not `host slots=K`",
    "a=b slots=1": "is not `host slots=K`",
    "node-0 slots = 8": "is not `host slots=K`",
    "node-0 slots=0": "slots=0 for 'node-0': must be in [1, 256]",
    "node-0 slots=257": "slots=257 for 'node-0': must be in [1, 256]",
    "node-0 slots=99999999999999999999": "must be in [1, 256]",
}


@pytest.mark.parametrize(("line", "hosts"), GOOD_LINES.items(), ids=list(GOOD_LINES))
def test_hostfile_lines_read_as_deepspeed_reads_them(tmp_path, line, hosts):
    pytest.importorskip("deepspeed")
    from deepspeed.launcher.runner import _parse_hostfile

    path = tmp_path / "hostfile"
    path.write_text(f"# nodes\n\n{line}\n")
    assert read_hostfile(path) == hosts == dict(_parse_hostfile(path.read_text().splitlines()))


@pytest.mark.parametrize(("line", "error"), BAD_LINES.items(), ids=list(BAD_LINES))
def test_hostfile_lines_deepspeed_would_misread_are_refused_naming_file_and_line(tmp_path, line, error):
    path = tmp_path / "hostfile"
    path.write_text(f"node-a slots=1\n# a comment\n{line}\n")
    with pytest.raises(ConfigError) as e:
        read_hostfile(path)
    assert f"hostfile {path}:3: " in str(e.value) and error in str(e.value)


def test_an_unreadable_hostfile_is_a_config_error(tmp_path):
    path = tmp_path / "hostfile"
    path.write_bytes(b"node-0 slots=1\n\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"hostfile .*: cannot be read"):
        read_hostfile(path)


BAD_NUMBERS = [
    ({"node_rank": True}, "node_rank=True: must be an integer"),
    ({"node_rank": 1.0}, "node_rank=1.0: must be an integer"),
    ({"node_rank": -1}, r"node_rank=-1: must be in [0, 2)"),
    ({"nodes": True}, "nodes=True: must be an integer"),
    ({"nodes": 0}, "nodes=0: must be in [1, 65536]"),
    ({"processes": True}, "processes=True: must be an integer"),
    ({"processes": 0}, "processes=0: must be in [1, 256]"),
    ({"processes": 257}, "processes=257: must be in [1, 256]"),
    ({"processes": "2"}, "processes='2': must be an integer"),
    ({"master_port": 0}, "master_port=0: must be in [1, 65535]"),
    ({"master_port": 65_536}, "master_port=65536: must be in [1, 65535]"),
    ({"master_port": "29500"}, "master_port='29500': must be an integer"),
    ({"master_port": 29500.0}, "master_port=29500.0: must be an integer"),
    ({"master_addr": ""}, "master_addr='': must be node 0's host name or address"),
]


@pytest.mark.parametrize(("kwargs", "error"), BAD_NUMBERS, ids=[str(k) for k, _ in BAD_NUMBERS])
def test_launch_numbers_are_checked_naming_the_argument(tmp_path, kwargs, error):
    path = tmp_path / "hostfile"
    path.write_text("node-0 slots=2\nnode-1 slots=2\n")
    args = {"node_rank": 0, "master_addr": "127.0.0.1", "master_port": 29611, "hostfile": path, **kwargs}
    with pytest.raises(ConfigError) as e:
        launch_command("c.yaml", **args)
    assert error in str(e.value)


@pytest.mark.parametrize(("kwargs", "error"), [(k, e) for k, e in BAD_NUMBERS if "processes" in str(k) or
                                               "master_port" in str(k)])  # fmt: skip
def test_single_node_launch_numbers_are_checked_too(kwargs, error):
    with pytest.raises(ConfigError) as e:
        launch_command("c.yaml", **kwargs)
    assert error in str(e.value)


def test_the_largest_launch_numbers_reach_deepspeeds_parser(tmp_path):
    pytest.importorskip("deepspeed")
    from deepspeed.launcher.runner import parse_args

    path = tmp_path / "hostfile"
    path.write_text(f"node-0 slots={MAX_SLOTS}\nnode-1 slots={MAX_SLOTS}\n")
    cmd = launch_command("c.yaml", processes=MAX_SLOTS, master_port=65_535, hostfile=path, node_rank=1,
                         master_addr="127.0.0.1")  # fmt: skip
    args = parse_args(cmd[3:])
    assert (args.num_gpus, args.master_port, args.node_rank, args.num_nodes) == (MAX_SLOTS, 65_535, 1, 2)
