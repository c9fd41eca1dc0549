"""`python -m workflows ablate` (workflows/ablate.py): arms refused before training when they cannot be compared; identical
arms give identical bits per byte; a killed run resumes to the same result; the table and chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from core.errors import InputError
from testkit.corpus import build_corpus, build_source
from testkit.shared_data import shared_data_dir
from tokens.tokenizer import TokenizerConfig, train_tokenizer
from trainer.faults import ENV_VAR as FAULTS_ENV
from workflows.ablate import Options, ablate, load_arms
from workflows.cli import main
from workflows.steps import StepFailed

SEQ, BATCH, STEPS = 64, 4, 10
BUDGET = STEPS * BATCH * (SEQ + 1)
# a tiny run of the debug model: checkpoints often (the resume test kills it between two), no extras
TRAIN = ("checkpoint.every=3", "eval.sequences_per_source=2", "eval.every=0", "logging.tensorboard=false",
         "logging.sample_tokens=0", "optimizer.lr=3e-3", "schedule.warmup_steps=2")  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("ablate")
    corpus = build_corpus(tmp_path_factory.mktemp("corpus"))
    docs = sorted((corpus / "docs").glob("*.parquet"))
    web_docs = [d for d in docs if d.name != "multi.parquet"]
    tok = train_tokenizer(corpus, root / "tok", TokenizerConfig(vocab_size=512))
    other = train_tokenizer(corpus, root / "tok2", TokenizerConfig(vocab_size=400))
    shards = {
        "web": build_source(root / "t1", tok, "web", web_docs),
        "multi": build_source(root / "t1", tok, "multi", [d for d in docs if d.name == "multi.parquet"]),
        "web_other_tok": build_source(root / "t2", other, "web", web_docs),
    }
    # the eval text: real Wikipedia articles, which no arm here trains on
    wiki = root / "wiki.jsonl"
    lines = (shared_data_dir() / "quality" / "enwiki_sample_articles.jsonl").read_text().splitlines()
    wiki.write_text("\n".join(lines[:4]) + "\n")
    return root, shards, wiki


def arm(root: Path, name: str, sources: dict[str, Path], budget: int = BUDGET, **extra) -> str:
    recipe = {
        "name": name,
        "total_tokens": budget,
        "max_epochs": 2,
        "sources": {k: {"shards": str(v)} for k, v in sources.items()},
        "phases": [{"name": "main", "share": 1.0, "weights": dict.fromkeys(sources, 1)}],
        **extra,
    }
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return str(path)


def test_arms_that_cannot_be_compared_are_refused_before_training(data, tmp_path, capsys):
    root, shards, wiki = data
    a = arm(root, "a", {"web": shards["web"]})
    other_tok = arm(root, "b", {"web": shards["web_other_tok"]})
    with pytest.raises(InputError, match="different tokenizers"):
        load_arms([a, other_tok])
    bigger = arm(root, "c", {"web": shards["web"]}, budget=2 * BUDGET)
    with pytest.raises(InputError, match=r"different token budgets \(total_tokens\)"):
        load_arms([a, bigger])
    model = arm(root, "d", {"web": shards["web"]}, train={"model.size": "124m"})
    with pytest.raises(InputError, match=r"train\.model\.size would make it another model"):
        load_arms([a, model])
    # the CLI: exit 2 with the message, and no output folder made (nothing trained)
    out = tmp_path / "out"
    assert main(["ablate", a, other_tok, "--output", str(out), "--eval", f"wiki={wiki}"]) == 2
    assert "different tokenizers" in capsys.readouterr().err and not out.exists()
    assert main(["ablate", a, "--output", str(out), "--eval", "wiki=/nonexistent.jsonl"]) == 2
    assert not out.exists()


def _opts(out: Path, seeds: int = 1) -> Options:
    return Options(output=out, seeds=seeds, seq_len=SEQ, global_batch=BATCH, overrides=TRAIN, eval_docs=4,
                   eval_chunks=2)  # fmt: skip


@pytest.mark.slow
def test_identical_arms_agree_and_a_killed_run_resumes_to_the_same_result(data, tmp_path, monkeypatch):
    root, shards, wiki = data
    src = {"web": shards["web"], "multi": shards["multi"]}
    a, b = arm(root, "same_a", src), arm(root, "same_b", src)
    summary = ablate([a, b], _opts(tmp_path / "ab"), [f"wiki={wiki}"], log=lambda m: None)
    ra, rb = (json.loads((tmp_path / "ab" / "runs" / n / "seed-1" / "result.json").read_text())
              for n in ("same_a", "same_b"))  # fmt: skip
    assert ra["bpb"] == rb["bpb"]  # same recipe, seed, model: the same bits, exactly
    assert ra["tokens_seen"] == BUDGET  # rows of SEQ + 1 tokens, as the trainer counts them
    assert 0.5 < ra["bpb"]["wiki"] < 8.5 and ra["bpb"]["own"] is not None  # trained, not random bytes
    vs = summary["arms"]["same_b"]["bpb"]["wiki"]["vs_baseline"]
    assert vs["mean"] == 0.0 and vs["p"] is None  # no difference, so no test
    for f in ("ablation.json", "ablation.md", "ablation.png"):
        assert (tmp_path / "ab" / f).stat().st_size > 0

    # killed after step 5 (checkpoint at 3): the rerun resumes from it and gives the same result
    out = tmp_path / "killed"
    monkeypatch.setenv(FAULTS_ENV, json.dumps({"kill_at_step": 5}))
    with pytest.raises(StepFailed):
        ablate([a], _opts(out), [f"wiki={wiki}"], log=lambda m: None)
    monkeypatch.delenv(FAULTS_ENV)
    ablate([a], _opts(out), [f"wiki={wiki}"], log=lambda m: None)
    resumed = json.loads((out / "runs" / "same_a" / "seed-1" / "result.json").read_text())
    assert resumed["bpb"] == ra["bpb"]
    metrics = (out / "runs" / "same_a" / "seed-1" / "train" / "metrics.jsonl").read_text()
    assert '"resume' in metrics or metrics.count('"step": 4,') > 1  # it did resume, not restart
    # a finished run is skipped: a third call trains nothing and changes nothing
    before = (out / "runs" / "same_a" / "seed-1" / "result.json").stat().st_mtime_ns
    ablate([a], _opts(out), [f"wiki={wiki}"], log=lambda m: None)
    assert (out / "runs" / "same_a" / "seed-1" / "result.json").stat().st_mtime_ns == before


def test_summary_pairs_seeds_and_flags_repetition():
    """The difference is taken seed by seed; an arm with fewer unique tokens than the budget is flagged."""
    from mixtures.ablation_table import format_table, summarize

    base = [3.70, 3.80, 3.60]
    better = [3.61, 3.69, 3.52]  # lower by 0.09, 0.11, 0.08: a spread between seeds far above the shift
    results = [
        {"arm": arm, "seed": s, "tokens_seen": 1000, "wall_s": 1.0, "bpb": {"wiki": v[i], "own": 3.0}}
        for arm, v in (("raw", base), ("hq", better))
        for i, s in enumerate((1, 2, 3))
    ]
    arms = {"raw": {"unique_tokens": 5000, "budget": 1000}, "hq": {"unique_tokens": 500, "budget": 1000}}
    summary = summarize(arms, results, "raw", ["wiki", "own"])
    vs = summary["arms"]["hq"]["bpb"]["wiki"]["vs_baseline"]
    assert vs["mean"] == pytest.approx(-(0.09 + 0.11 + 0.08) / 3)
    # unpaired, the two arms' seeds overlap (3.61-3.69 against 3.60-3.80); paired, every seed is lower
    assert vs["p"] < 0.01
    assert "vs_baseline" not in summary["arms"]["hq"]["bpb"]["own"]  # each arm's own set: no pairing
    assert summary["arms"]["hq"]["repeated"] and not summary["arms"]["raw"]["repeated"]
    table = format_table(summary)
    assert "2.00 (repeated)" in table and "p=0.00" in table


def test_an_arm_with_temperature_weights_loads_and_its_run_draws_them(data, tmp_path):
    """Defect 5: `weights: {by: tokens, temperature: T}` crashed load_arms with KeyError: 'sha256' (its
    phases have no weights until the manifests' counts resolve them). The cheapest real path a run takes
    before training: load the arm, write its run's recipe.yaml, and build the trainer's own sampler on it."""
    from mixtures.draw import temperature_weights
    from mixtures.recipe import Recipe
    from mixtures.sampler import MixtureSampler
    from mixtures.validate import read_manifest
    from workflows.ablate import _write_recipe, steps_for

    root, shards, _ = data
    src = {"web": shards["web"], "multi": shards["multi"]}
    path = root / "temp.yaml"
    path.write_text(yaml.safe_dump({
        "name": "temp", "total_tokens": BUDGET, "max_epochs": 50,
        "weights": {"by": "tokens", "temperature": 0.3},
        "sources": {k: {"shards": str(v)} for k, v in src.items()},
        "phases": [{"name": "main", "share": 1.0}],
    }))  # fmt: skip
    (arm_,) = load_arms([str(path)])
    manifests = {k: read_manifest(v) for k, v in src.items()}
    assert arm_.tokenizer["sha256"] == manifests["web"]["tokenizer"]["sha256"]
    assert arm_.unique_tokens == sum(int(m["tokens"]) for m in manifests.values())
    expected = temperature_weights({k: int(m["tokens"]) for k, m in manifests.items()}, 0.3)
    assert arm_.recipe.phases[0].weights == expected and len(expected) == 2
    run = tmp_path / "run"
    run.mkdir()
    written = _write_recipe(arm_, 1, run)
    sampler = MixtureSampler(Recipe.load(written), SEQ + 1, 0, 1, allow_over_cap=True)
    assert sampler.recipe.phases[0].weights == expected  # what the trainer draws is what was checked
    rows = [
        s.source for _, s in zip(range(steps_for(BUDGET, _opts(tmp_path)) * BATCH), sampler, strict=False)
    ]
    assert set(rows) == {"web", "multi"}
    sampler.close()


HOSTILE = ["../../escape", "/tmp/escape-abs", "..", ".hidden", "a/b", "x%2F..%2Fescape", "nul\x00", "sp ace"]


@pytest.mark.parametrize("name", HOSTILE, ids=repr)
def test_a_hostile_arm_name_is_refused_before_anything_is_written(data, tmp_path, capsys, name):
    """Defect 2: `name: ../../../../tmp/x` wrote run.json and recipe.yaml outside --output. Now every
    name from a file is one plain component, refused on load with the file and key (exit 2)."""
    _root, shards, wiki = data
    a = arm(tmp_path, "a", {"web": shards["web"]})
    data_ = yaml.safe_load(Path(a).read_text())
    data_["name"] = name
    Path(a).write_text(yaml.safe_dump(data_))
    out = tmp_path / "work" / "out"
    assert main(["ablate", a, "--output", str(out), "--eval", f"wiki={wiki}"]) == 2
    err = capsys.readouterr().err
    assert "a.yaml" in err and "name must be a file name" in err, err
    assert not out.exists() and not (tmp_path / "escape").exists() and not Path("/tmp/escape-abs").exists()


@pytest.mark.parametrize("stem", ["..", "sp ace", "-dash"])
def test_an_arm_named_by_its_file_is_held_to_the_same_rule(data, tmp_path, stem):
    _root, shards, _ = data
    path = tmp_path / f"{stem}.yaml"
    recipe = yaml.safe_load(Path(arm(tmp_path, "x", {"web": shards["web"]})).read_text())
    recipe.pop("name")  # the arm takes the file's name
    path.write_text(yaml.safe_dump(recipe))
    with pytest.raises(InputError, match=r"its name \(the file's name without \.yaml\) must be a file name"):
        load_arms([str(path)])


@pytest.mark.parametrize(
    "train",
    [{"logging.dir": "/tmp/escape"}, {"checkpoint.dir": "../../escape"}, {"checkpoint.staging": "/tmp/s"},
     {"data.shard_cache_dir": "/tmp/c"}, {"logging": {"dir": "/tmp/escape"}}, {"logging": {}},
     {" checkpoint.dir ": "/tmp/escape"}, {"model": {"size": "124m"}}],
    ids=repr,
)  # fmt: skip
def test_an_arm_train_mapping_does_not_choose_where_a_run_writes(data, tmp_path, train):
    """The trainer's log and checkpoint folders were the arm's to set, written flat or nested."""
    _root, shards, _ = data
    a = arm(tmp_path, "a", {"web": shards["web"]}, train=train)
    with pytest.raises(InputError, match=r"names a folder or file|would make it another model"):
        load_arms([a])


def test_an_eval_set_that_is_not_text_is_refused(data, tmp_path):
    """Random bytes read as plain text were accepted as held-out text and scored."""
    import random

    from workflows.ablate import load_eval_sets

    _, _, wiki = data
    junk = tmp_path / "junk.txt"
    rnd = random.Random(0)
    junk.write_bytes(b"\n".join(rnd.randbytes(400) for _ in range(20)))
    with pytest.raises(InputError, match=r"--eval junk: .*junk\.txt is not text: 5\d\.\d% of its"):
        load_eval_sets([f"junk={junk}"], 200)
    # one document of binary among real text is refused too, and named
    lines = wiki.read_text().splitlines()
    mixed = tmp_path / "mixed.jsonl"
    bad = json.dumps({"text": "".join(chr(rnd.randrange(0, 32)) for _ in range(300))})
    mixed.write_text("\n".join([*lines[:3], bad]) + "\n")
    with pytest.raises(InputError, match=r"document 4 of .*mixed\.jsonl is not text"):
        load_eval_sets([f"m={mixed}"], 200)
    assert len(load_eval_sets([f"wiki={wiki}"], 200)["wiki"]) == 4  # real text passes
