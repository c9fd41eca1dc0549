"""Sampler: exact per-source counts, determinism, exact resume (mid-phase and across the phase switch),
world size 1 vs 2, and the plan's numbers against a hand computation.

Two real sources tokenized from tests/mixtures/corpus.py: `web` (a real WARC through the extract
pipeline, plus the edge rows) and `multi` (Leipzig sentences in eight languages).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from curation.shards import IndexedShard
from curation.tokenizer import TokenizerConfig, train_tokenizer
from mixtures.plan import compute_budget, make_plan
from mixtures.recipe import Recipe, RecipeError
from mixtures.sampler import MixtureSampler, largest_remainder
from tests.mixtures.corpus import build_corpus, build_source

SEQ = 64


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    corpus = build_corpus(tmp_path_factory.mktemp("corpus"))
    tok = train_tokenizer(corpus, root / "tok", TokenizerConfig(vocab_size=512))
    docs = sorted((corpus / "docs").glob("*.parquet"))
    multi = [d for d in docs if d.name == "multi.parquet"]
    web = [d for d in docs if d.name != "multi.parquet"]
    out = {
        "web": build_source(root / "tokens", tok, "web", web),
        "multi": build_source(root / "tokens", tok, "multi", multi),
    }
    return root, out


def _recipe(root, sources, total=12_800, main_share=0.75, w=(3, 1), cap=4):
    data = {
        "name": "t",
        "seed": 11,
        "total_tokens": total,
        "max_epochs": cap,
        "sources": {k: {"shards": str(v)} for k, v in sources.items()},
        "phases": [
            {"name": "main", "share": main_share, "weights": {"web": w[0], "multi": w[1]}},
            {"name": "anneal", "share": round(1 - main_share, 6), "weights": {"multi": 1}},
        ],
    }
    return Recipe.from_dict(data, source="test", base=root)


def _stream(sampler):
    return [(s.index, s.source, s.phase, s.tokens.tobytes(), s.doc_starts.tobytes()) for s in sampler]


def test_exact_counts_proportions_and_content(sources):
    root, srcs = sources
    r = _recipe(root, srcs)
    samples = list(MixtureSampler(r, SEQ))
    # Hand computation: 12,800 tokens -> main 9,600 = 150 sequences of 64 split 3:1 -> 112.5/37.5,
    # largest remainder (tie -> recipe order) gives web 113, multi 37; anneal 3,200 = 50, all multi.
    counts = {}
    for s in samples:
        counts[(s.phase, s.source)] = counts.get((s.phase, s.source), 0) + 1
    assert counts == {("main", "web"): 113, ("main", "multi"): 37, ("anneal", "multi"): 50}
    assert [s.phase for s in samples] == ["main"] * 150 + ["anneal"] * 50
    # Every prefix of the main phase is within one sequence of the 3:1 target (deficit schedule).
    web = 0
    for k, s in enumerate(samples[:150], start=1):
        web += s.source == "web"
        assert abs(web - k * 113 / 150) <= 1.0
    # Content: the web stream is the shard documents in some order, each followed by EOD, cut in 64s.
    eod = json.loads((srcs["web"] / "manifest.json").read_text())["tokenizer"]["eod_id"]
    shards = [IndexedShard(p.with_suffix("")) for p in sorted(srcs["web"].glob("part-*.bin"))]
    docs = {tuple(sh[i].tolist()) for sh in shards for i in range(len(sh))}
    web_tokens = np.concatenate([s.tokens for s in samples if s.source == "web"])
    web_starts = np.concatenate(
        [s.doc_starts + j * SEQ for j, s in enumerate(x for x in samples if x.source == "web")]
    )
    ends = [*web_starts[1:].tolist(), None]
    seen = set()
    for a, b in zip(web_starts, ends):
        piece = web_tokens[a:b]
        if b is not None:  # a whole document: ends in EOD, and is one of the shard's documents
            assert piece[-1] == eod and tuple(piece.tolist()) in docs
            seen.add(tuple(piece.tolist()))
    assert len(seen) >= 2


def test_deterministic_and_seed_sensitive(sources):
    root, srcs = sources
    a = _stream(MixtureSampler(_recipe(root, srcs), SEQ))
    b = _stream(MixtureSampler(_recipe(root, srcs), SEQ))
    assert a == b
    r2 = Recipe.from_dict({**_recipe_dict(root, srcs), "seed": 12}, source="t", base=root)
    assert _stream(MixtureSampler(r2, SEQ)) != a


def _recipe_dict(root, srcs):
    return {
        "name": "t",
        "seed": 11,
        "total_tokens": 12_800,
        "sources": {k: {"shards": str(v)} for k, v in srcs.items()},
        "phases": [
            {"name": "main", "share": 0.75, "weights": {"web": 3, "multi": 1}},
            {"name": "anneal", "share": 0.25, "weights": {"multi": 1}},
        ],
    }


@pytest.mark.parametrize("cut", [1, 77, 149, 150, 151, 199])
def test_exact_resume(sources, cut):
    """Save after `cut` samples (mid-phase, at and across the phase switch), restore into a fresh sampler."""
    root, srcs = sources
    full = _stream(MixtureSampler(_recipe(root, srcs), SEQ))
    s1 = MixtureSampler(_recipe(root, srcs), SEQ)
    head = [next(s1) for _ in range(cut)]
    state = json.loads(json.dumps(s1.state_dict()))  # survives a JSON checkpoint
    s2 = MixtureSampler(_recipe(root, srcs), SEQ)
    s2.load_state_dict(state)
    tail = _stream(s2)
    assert [x[0] for x in _stream(iter(head))] == list(range(cut))
    assert _stream(iter(head)) + tail == full


def test_world_size_two_covers_world_size_one(sources):
    root, srcs = sources
    full = _stream(MixtureSampler(_recipe(root, srcs), SEQ))
    r0 = _stream(MixtureSampler(_recipe(root, srcs), SEQ, rank=0, world_size=2))
    r1 = _stream(MixtureSampler(_recipe(root, srcs), SEQ, rank=1, world_size=2))
    assert len(r0) == len(r1) == 100
    assert {x[0] for x in r0} & {x[0] for x in r1} == set()
    assert sorted(r0 + r1) == sorted(full)
    # A rank resumed from a checkpoint continues its own share of the stream.
    s = MixtureSampler(_recipe(root, srcs), SEQ, rank=1, world_size=2)
    for _ in range(60):
        next(s)
    t = MixtureSampler(_recipe(root, srcs), SEQ, rank=1, world_size=2)
    t.load_state_dict(s.state_dict())
    assert _stream(t) == r1[60:]


def test_cap_and_state_checks(sources):
    root, srcs = sources
    big = _recipe(root, srcs, total=2_000_000, cap=1)
    with pytest.raises(RecipeError, match=r"repetition cap exceeded: .*epochs > max_epochs 1"):
        MixtureSampler(big, SEQ)
    s = MixtureSampler(_recipe(root, srcs), SEQ)
    with pytest.raises(ValueError, match="seq_len"):
        MixtureSampler(_recipe(root, srcs), 32).load_state_dict(s.state_dict())


def test_plan_against_hand_computation(sources):
    root, srcs = sources
    r = _recipe(root, srcs)
    plan = make_plan(r, SEQ)
    avail = {k: json.loads((v / "manifest.json").read_text())["tokens"] for k, v in srcs.items()}
    assert plan.sources["web"].available == avail["web"] and plan.sources["web"].exact
    assert plan.sources["web"].drawn == {"main": 113 * 64}
    assert plan.sources["multi"].drawn == {"main": 37 * 64, "anneal": 50 * 64}
    assert plan.sources["multi"].epochs == pytest.approx(87 * 64 / avail["multi"], rel=1e-12)
    assert plan.tokens_trained == 200 * 64 == len(list(MixtureSampler(r, SEQ))) * SEQ
    # Over the cap -> a warning naming the source.
    over = make_plan(_recipe(root, srcs, total=2_000_000, cap=1), SEQ)
    assert any(w.startswith("web:") and "exceeds max_epochs 1" in w for w in over.warnings)
    # 6ND for an 8B model on 15T tokens = 7.2e23; Chinchilla 160B; at 40% of 989 TFLOP/s:
    # 7.2e23 / 3.956e14 / 3600 = 505,561.2 GPU-hours.
    b = compute_budget(8e9, 15 * 10**12, mfu=0.4, peak_flops=989e12)
    assert b["flops"] == pytest.approx(7.2e23) and b["chinchilla_tokens"] == 1.6e11
    assert b["gpu_hours"] == pytest.approx(505_561.2, abs=0.1)


def test_largest_remainder_hand_cases():
    assert largest_remainder(10, {"a": 1, "b": 1, "c": 1}) == {"a": 4, "b": 3, "c": 3}
    assert largest_remainder(100, {"g": 50, "m": 25, "c": 17, "x": 8}) == {"g": 50, "m": 25, "c": 17, "x": 8}
    # 3.5 / 1.75 / 1.75 -> floors 3, 1, 1; the 2 units left go to the largest fractions (.75, .75).
    assert largest_remainder(7, {"a": 0.5, "b": 0.25, "c": 0.25}) == {"a": 3, "b": 2, "c": 2}
