"""The demo's token budget fits the data it got (issue 44 item 6), without running the demo.

`make demo` on four small shared WARCs used to fail at its last stage: the recipe's 600K tokens repeat
their pages past `max_epochs`, and the plan before it, counting differently, had passed. Here the
demo's own functions (workflows/demo.py) run on two real sources (testkit/corpus.py: extracted pages
of a real WARC and Leipzig sentences), with the demo recipe's shape, budget and caps and the demo's
trainer config (configs/train-debug.yaml): the budget they size passes the trainer's sampler and the
plan step, a budget that fits is kept, inputs too small for one step are refused saying what to give.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mixtures.__main__ import TRAINER_HELDOUT_SEQUENCES
from mixtures.__main__ import main as mixtures_main
from mixtures.recipe import Recipe, RecipeError
from mixtures.sampler import MixtureSampler
from testkit.corpus import build_two_sources
from trainer.config import EvalSection, load_config
from workflows.demo import TRAIN_CONFIG, done_line, size_budget, steps_in_data
from workflows.paths import project_path
from workflows.steps import StepFailed, StepRunner

DEMO_SHAPE = """name: demo
seed: 1234
total_tokens: 600K
max_epochs: {cap}
sources:
  web: {{shards: {web}}}
  multi: {{shards: {multi}, max_epochs: 3}}
phases:
  - {{name: main, share: 0.8, weights: {{web: 3, multi: 1}}}}
  - {{name: anneal, share: 0.2, weights: {{multi: 1}}}}
"""


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> dict[str, Path]:
    return build_two_sources(tmp_path_factory.mktemp("budget"))


def _recipe(folder: Path, shards: dict[str, Path], cap: float = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "demo.yaml"
    path.write_text(DEMO_SHAPE.format(cap=cap, **shards))
    return path


def _trainer_sampler(recipe: Path, cfg) -> MixtureSampler:
    """The sampler as trainer/data.py opens it (rank 0 of 1: the cap does not depend on the rank)."""
    return MixtureSampler(
        Recipe.load(recipe), cfg.data.seq_len + 1, heldout_sequences=cfg.eval.sequences_per_source
    )


def test_budget_sized_to_the_data_passes_the_trainer_and_the_plan(shards, tmp_path, capsys):
    cfg = load_config(project_path(TRAIN_CONFIG))
    recipe = _recipe(tmp_path / "in", shards)
    with pytest.raises(RecipeError, match="repetition cap exceeded"):  # what the first run died of
        _trainer_sampler(recipe, cfg)
    out = tmp_path / "out"
    out.mkdir()
    sized = size_budget(recipe, out, cfg)
    assert sized == out / "recipe.yaml"
    budget = Recipe.load(sized).total_tokens
    assert 0 < budget < 600_000
    assert f"training on {budget:,} tokens" in capsys.readouterr().out
    sampler = _trainer_sampler(sized, cfg)  # accepted
    # the largest budget within the caps: a source is drawn to within a few rows of its cap
    rows = cfg.data.seq_len + 1
    assert any(d.cap_tokens - d.tokens < 4 * rows for d in sampler.draws.values())
    # the demo's plan step (the trainer's seq_len and split) passes on it, and refused the original
    args = ["--seq-len", str(cfg.data.seq_len), "--heldout-sequences", str(cfg.eval.sequences_per_source)]
    assert mixtures_main(["plan", str(sized), *args]) == 0
    assert mixtures_main(["plan", str(recipe), *args]) == 1
    assert f"total_tokens to at most {budget:,} " in capsys.readouterr().out
    # a budget that fits is kept as it is
    assert size_budget(sized, tmp_path / "again", cfg) == sized


def test_too_little_data_for_one_step_is_refused_naming_what_to_give(shards, tmp_path):
    """Caps of a tenth of an epoch with rows of 2,049 tokens leave fewer rows than the first batch."""
    cfg = load_config(project_path(TRAIN_CONFIG), ["data.seq_len=2048", "eval.sequences_per_source=0"])
    with pytest.raises(StepFailed, match="too little text for one training step") as e:
        size_budget(_recipe(tmp_path, shards, cap=0.1), tmp_path, cfg)
    assert e.value.status == 2 and "more WARCS" in str(e.value)


def test_a_source_smaller_than_its_heldout_split_is_refused_naming_the_key(shards, tmp_path):
    cfg = load_config(project_path(TRAIN_CONFIG), ["eval.sequences_per_source=1000"])
    with pytest.raises(StepFailed, match=r"eval\.sequences_per_source") as e:
        size_budget(_recipe(tmp_path, shards), tmp_path, cfg)
    assert e.value.status == 2


def test_steps_in_data_by_hand(shards, tmp_path):
    """Rows as the trainer takes them (trainer/train.py train_step), so the demo trains to the end of the
    data and a rerun finds the stage finished (on the four WARCs: 56 steps, where the trainer said "data
    exhausted at step 56"). Here 66,820 tokens = 260 rows of 257 (main 208, anneal 52), 130 per rank
    of 2. The demo config's ramp-up: batch 4 (2 rows per rank) until 50,000 tokens are consumed, which
    takes 49 steps (50,372 tokens, 98 rows per rank), then 8 (4 per rank): 32 rows left give 8 more."""
    cfg = load_config(project_path(TRAIN_CONFIG))
    assert [(s.tokens, s.batch) for s in cfg.schedule.rampup] == [(0, 4), (50_000, 8)]
    assert (cfg.schedule.micro_batch, cfg.data.seq_len) == (2, 256)
    recipe = Recipe.load(_recipe(tmp_path, shards)).with_total_tokens(66_820)
    path = tmp_path / "r.yaml"
    path.write_text(
        _recipe(tmp_path, shards)
        .read_text()
        .replace("total_tokens: 600K", f"total_tokens: {recipe.total_tokens}")
    )
    assert steps_in_data(path, cfg, 2, 300) == 49 + 8
    assert steps_in_data(path, cfg, 2, 20) == 20


def test_plan_default_split_is_the_trainers():
    assert EvalSection().sequences_per_source == TRAINER_HELDOUT_SEQUENCES


def test_done_line_says_when_a_run_was_resumed(tmp_path):
    runner = StepRunner(tmp_path / "timings.json", log=lambda m: None)
    runner.run("extract", False, lambda: None)
    assert done_line(runner, ["extract"], 40.4) == "Demo done in 40 s."
    timings = tmp_path / "timings.json"  # as if that extract had taken 500 s
    timings.write_text(json.dumps({"extract": {**runner.timings["extract"], "seconds": 500.0}}))
    again = StepRunner(tmp_path / "timings.json", log=lambda m: None)
    again.run("extract", True, lambda: None)
    again.run("report", False, lambda: None)
    line = done_line(again, ["extract", "report"], 12.0)
    assert line.startswith("Demo done: this run 12 s, resumed (1 of 2 stages were done before and skipped)")
    assert "all stages together 500 s" in line
