"""The trainer refuses a bad config or recipe before its process group starts (issue 17, defect 2).

A missing recipe used to surface after DeepSpeed's distributed start-up (133 s, a traceback per rank).
Now `trainer/train.py` checks the recipe against its shards (mixtures/validate.py, the same check as
`mixtures plan` and the sampler) and builds its data before `deepspeed.init_distributed()`: exit 2 with
`config error: <key>: ...`. The in-process tests replace init_distributed with a function that fails the
test, so "before the process group" is asserted, not timed; the subprocess test runs the script as the
launcher does (the launcher adds only its own start-up; no time is asserted), and one runs the real
launcher command (trainer/launch.py), whose overrides reach each rank as `--set`.

The command line: `--set section.key=value` (repeatable, as on every command) and the older positional
`section.key=value`, its alias: positional ones apply first, then the `--set` ones, a later value wins.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainer import train
from trainer.config import load_config
from trainer.launch import launch_command

REPO = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, recipe: str) -> Path:
    cfg = yaml.safe_load((REPO / "configs" / "train-debug.yaml").read_text())
    cfg["data"]["recipe"] = recipe
    cfg["checkpoint"]["dir"] = str(tmp_path / "ckpt")
    cfg["logging"].update(dir=str(tmp_path / "log"), tensorboard=False)
    p = tmp_path / "train.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.fixture
def no_process_group(monkeypatch):
    """Starting the process group fails the test."""
    import deepspeed

    def refuse(*a, **k):
        raise AssertionError("deepspeed.init_distributed() was called: the check came too late")

    monkeypatch.setattr(deepspeed, "init_distributed", refuse)
    for k in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)


def _recipe_without_manifest(tmp_path: Path) -> Path:
    (tmp_path / "shards" / "web").mkdir(parents=True)  # a tokenize output folder that never finished
    r = {"name": "r", "total_tokens": 10_000, "sources": {"web": {"shards": "shards/web"}},
         "phases": [{"name": "main", "share": 1.0, "weights": {"web": 1}}]}  # fmt: skip
    p = tmp_path / "recipe.yaml"
    p.write_text(yaml.safe_dump(r))
    return p


def _config_from(argv: list[str]):
    """The config the trainer's own command line gives (main's parse, then its loader)."""
    args = train.parse_args(argv)
    return load_config(args.config, args.overrides)


def test_set_gives_the_same_config_as_the_positional_form(tmp_path):
    cfg = str(_config(tmp_path, "r.yaml"))
    pairs = ["optimizer.lr=0.002", "schedule.steps=70", "model.overrides.n_layers=3"]
    by_set = _config_from(["--config", cfg, *(a for p in pairs for a in ("--set", p))])
    assert by_set == _config_from(["--config", cfg, *pairs])
    assert by_set != _config_from(["--config", cfg])  # the overrides did change it
    assert by_set.optimizer.lr == 0.002 and by_set.schedule.steps == 70
    assert by_set.model.overrides == {"n_layers": 3}
    # both forms together, in any order on the line: positional ones first, then --set, a later one wins
    mixed = _config_from(
        ["--set", "optimizer.lr=0.002", "optimizer.lr=0.5", "--config", cfg, "schedule.steps=70"]
    )
    assert (mixed.optimizer.lr, mixed.schedule.steps) == (0.002, 70)
    args = train.parse_args(["--local_rank=1", "--config", cfg, "--set", "c.d=2", "a.b=1"])
    assert args.overrides == ["a.b=1", "c.d=2"]  # the launcher's --local_rank too


@pytest.mark.parametrize("form", ["positional", "--set"])
def test_either_form_reaches_the_check_before_the_process_group(tmp_path, capsys, no_process_group, form):
    cfg = _config(tmp_path, str(_recipe_without_manifest(tmp_path)))
    override = ["checkpoint.keep=0"] if form == "positional" else ["--set", "checkpoint.keep=0"]
    assert train.main(["--config", str(cfg), *override]) == 2
    assert "checkpoint.keep must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "data.recipe=/nonexistent.yaml",
            "config error: data.recipe: recipe file not found: /nonexistent.yaml",
        ),
        (None, r"config error: data.recipe: .*sources\.web\.shards: no manifest\.json in .*shards/web"),
        ("checkpoint.keep=0", r"checkpoint\.keep must be >= 1, got 0"),  # not reported as checkpoint.every
        ("optimizer.lr=.inf", r"optimizer\.lr must be a finite number, got inf"),
        ("optimizer.lr=[1", r"override 'optimizer\.lr=\[1': not valid YAML"),
    ],
)
def test_refused_before_the_process_group(tmp_path, capsys, no_process_group, override, message):
    import re

    cfg = _config(tmp_path, str(_recipe_without_manifest(tmp_path)))
    assert train.main(["--config", str(cfg), *([override] if override else [])]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert "Traceback" not in err


def test_batch_not_dividing_the_launchers_world_is_refused_before_the_process_group(
    tmp_path, capsys, no_process_group, monkeypatch
):
    """The world size comes from the launcher's environment (RANK/WORLD_SIZE) before init_distributed."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "3")
    cfg = _config(tmp_path, str(_recipe_without_manifest(tmp_path)))
    assert train.main(["--config", str(cfg)]) == 2
    assert (
        "schedule.global_batch: 8 is not a multiple of micro_batch × world_size = 6"
        in capsys.readouterr().err
    )


def test_script_exits_2_naming_the_missing_recipe(tmp_path):
    """`python trainer/train.py` as the launcher starts each rank (same argv, no RANK set: world 1)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = str(REPO)
    cmd = [
        sys.executable,
        "trainer/train.py",
        "--config",
        str(_config(tmp_path, "x")),
        "data.recipe=/nonexistent.yaml",
    ]
    # timeout: only so a regression that reaches init_distributed (which waits for peers) cannot hang the suite
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr[-2000:]
    assert (
        p.stderr.strip().splitlines()[-1]
        == "config error: data.recipe: recipe file not found: /nonexistent.yaml"
    )
    assert not (tmp_path / "log").exists() and not (tmp_path / "ckpt").exists()  # nothing was started


def test_launcher_passes_set_overrides_to_each_rank(tmp_path):
    """The real launcher command (trainer/launch.py, ~5 s): its overrides are `--set`, read by the rank;
    run from outside the checkout, as the module form allows. The later of two values wins."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = str(REPO)
    overrides = ["data.recipe=/first.yaml", "data.recipe=/nonexistent.yaml"]
    cmd = launch_command(str(_config(tmp_path, "x")), overrides, processes=1)
    assert cmd[-4:] == ["--set", overrides[0], "--set", overrides[1]]
    # timeout: only so a regression that reaches init_distributed (which waits for peers) cannot hang the suite
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr[-2000:] + p.stdout[-2000:]
    assert (
        p.stderr.strip().splitlines()[-1]
        == "config error: data.recipe: recipe file not found: /nonexistent.yaml"
    )
    assert not (tmp_path / "log").exists() and not (tmp_path / "ckpt").exists()
