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
