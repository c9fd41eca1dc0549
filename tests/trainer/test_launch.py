"""trainer/launch.py: the one trainer launch, DeepSpeed's launcher module running `trainer.train` as a module
(the form a `pip --target` install runs; the launcher's own parser accepts it)."""

from __future__ import annotations

import sys

import pytest

from trainer.launch import LAUNCHER_MODULE, TRAIN_MODULE, launch_command, without_port


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


def test_deepspeeds_parser_reads_it_as_the_module_and_its_arguments():
    pytest.importorskip("deepspeed")
    from deepspeed.launcher.runner import parse_args

    cmd = launch_command("c.yaml", ["schedule.steps=3"], processes=2, master_port=29600)
    args = parse_args(cmd[3:])
    assert args.module and args.user_script == TRAIN_MODULE and args.num_gpus == 2
    assert args.user_args == ["--config", "c.yaml", "--set", "schedule.steps=3"]
