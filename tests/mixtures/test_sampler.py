"""Sampler: exact per-source counts, determinism, exact resume (mid-phase and across the phase switch),
world size 1 vs 2, and the plan's numbers against a hand computation.

Two real sources tokenized from testkit/corpus.py: `web` (a real WARC through the extract
pipeline, plus the edge rows) and `multi` (Leipzig sentences in eight languages).
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from mixtures.draw import largest_remainder
from mixtures.plan import compute_budget, make_plan
from mixtures.recipe import Recipe, RecipeError
from mixtures.sampler import MixtureSampler
from testkit.corpus import build_corpus, build_source, two_source_recipe
from tokens.shards import IndexedShard
from tokens.tokenizer import TokenizerConfig, train_tokenizer

SEQ = 64


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def sources(tmp_path_factory, corpus):
    root = tmp_path_factory.mktemp("mix")
    tok = train_tokenizer(corpus, root / "tok", TokenizerConfig(vocab_size=512))
    docs = sorted((corpus / "docs").glob("*.parquet"))
    multi = [d for d in docs if d.name == "multi.parquet"]
    web = [d for d in docs if d.name != "multi.parquet"]
    out = {
        "web": build_source(root / "tokens", tok, "web", web),
        "multi": build_source(root / "tokens", tok, "multi", multi),
    }
    return root, out


@pytest.fixture(scope="module")
def lang_sources(sources, corpus):
    """One source per language (`select: {lang: xx}`) of the real Leipzig documents, with the web
    source beside them: the use temperature weights are for (mT5's languages)."""
    root, srcs = sources
    multi = [corpus / "docs" / "multi.parquet"]
    out = {
        lang: build_source(root / "langs", root / "tok" / "tokenizer.json", lang, multi, {"lang": lang})
        for lang in ("zh", "ru", "ar", "de")
    }
    return root, {**out, "web": srcs["web"]}


def _temperature_recipe(root, srcs, temperature, total=12_800, caps=None, anneal=None):
    data = {
        "name": "t",
        "seed": 5,
        "total_tokens": total,
        "max_epochs": 1000,
        "weights": {"by": "tokens", "temperature": temperature},
        "sources": {
            k: {"shards": str(v), **({"max_epochs": caps[k]} if caps else {})} for k, v in srcs.items()
        },
        "phases": [{"name": "main", "share": 0.8 if anneal else 1.0}],
    }
    if anneal:  # a phase with its own weights keeps them beside the temperature phase
        data["phases"].append({"name": "anneal", "share": 0.2, "weights": anneal})
    return Recipe.from_dict(data, source="test", base=root)


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
    r2 = Recipe.from_dict({**two_source_recipe(srcs), "seed": 12}, source="t", base=root)
    assert _stream(MixtureSampler(r2, SEQ)) != a


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
    with pytest.raises(RecipeError, match=r"repetition cap exceeded:\n  web: .* over max_epochs 1 ") as e:
        MixtureSampler(big, SEQ)
    # the same lines the plan warns with (one function counts for both: mixtures/draw.py)
    assert str(e.value).split(":\n  ", 1)[1].split("\n  ") == make_plan(big, SEQ).warnings
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
    assert any(w.startswith("web:") and "over max_epochs 1 " in w for w in over.warnings)
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


def _docs_of(tokens: np.ndarray, eod: int) -> list[tuple[int, ...]]:
    """Split a token stream after each EOD; the pieces that end in EOD are whole documents."""
    ends = np.flatnonzero(tokens == eod)
    return [
        tuple(tokens[a + 1 if i else 0 : b + 1].tolist()) for i, (a, b) in enumerate(zip([-1, *ends], ends))
    ]


@pytest.mark.parametrize("world", [1, 2])
def test_heldout_documents_never_reach_the_training_stream(sources, world):
    root, srcs = sources
    k = 3
    # 160,000 tokens: web draws 90,000 of its 32,778 and multi 70,000 of its 47,195, so each training
    # stream runs through every training document at least once
    r = _recipe(root, srcs, total=160_000, cap=50)
    ranks = [MixtureSampler(r, SEQ, rank=i, world_size=world, heldout_sequences=k) for i in range(world)]
    held = ranks[0].heldout()
    for other in ranks[1:]:  # the same split on every rank
        assert all(np.array_equal(held[s], other.heldout()[s]) for s in held)
    train = sorted((x for s in ranks for x in s), key=lambda x: x.index)
    assert [x.index for x in train] == list(range(len(train)))
    # quotas do not depend on the split: the stream without one has the same sources at the same indices
    plain = list(MixtureSampler(r, SEQ))
    assert [x.source for x in train] == [x.source for x in plain[: len(train)]]
    for name, path in srcs.items():
        eod = json.loads((path / "manifest.json").read_text())["tokenizer"]["eod_id"]
        shards = [IndexedShard(p.with_suffix("")) for p in sorted(path.glob("part-*.bin"))]
        all_docs = [tuple(sh[i].tolist()) for sh in shards for i in range(len(sh))]
        assert len(set(all_docs)) == len(
            all_docs
        )  # distinct contents, so documents are told apart by content
        assert held[name].shape == (k, SEQ)
        # the held-out rows are whole documents, each ending in EOD, and the start of one more (cut)
        pieces = _docs_of(held[name].reshape(-1), eod)
        tail = held[name].reshape(-1)[sum(map(len, pieces)) :].tolist()
        held_docs = set(pieces) | {d for d in all_docs if tail and list(d[: len(tail)]) == tail}
        assert len(held_docs) == len(pieces) + (1 if tail else 0) and held_docs <= set(all_docs)
        stream = np.concatenate([x.tokens for x in train if x.source == name])
        trained = set(_docs_of(stream, eod))  # the stream starts at a document; its cut end is left out
        assert trained <= set(all_docs)
        assert not held_docs & trained
        # every other document is trained on: the split removes the held-out ones and nothing else
        assert trained | held_docs == set(all_docs)
        # no held-out row's 32-token window appears anywhere in the training rows of this source
        windows = {stream[i : i + 32].tobytes() for i in range(len(stream) - 31)}
        assert not any(row[j : j + 32].tobytes() in windows for row in held[name] for j in range(0, SEQ - 31))


def test_heldout_split_resume_and_checks(sources):
    root, srcs = sources
    r = _recipe(root, srcs)
    full = _stream(MixtureSampler(r, SEQ, heldout_sequences=2))
    assert full != _stream(MixtureSampler(r, SEQ))  # the held-out documents left the stream
    assert {k: v.shape for k, v in MixtureSampler(r, SEQ).heldout().items()} == {
        "web": (0, SEQ),
        "multi": (0, SEQ),
    }
    s1 = MixtureSampler(r, SEQ, heldout_sequences=2)
    head = [next(s1) for _ in range(77)]
    s2 = MixtureSampler(r, SEQ, heldout_sequences=2)
    s2.load_state_dict(json.loads(json.dumps(s1.state_dict())))
    assert _stream(iter(head)) + _stream(s2) == full
    # a state from another split is another stream: refused, naming the key
    with pytest.raises(ValueError, match="heldout_sequences"):
        MixtureSampler(r, SEQ).load_state_dict(s1.state_dict())
    # a split larger than a source fails at construction, naming the source
    web = json.loads((srcs["web"] / "manifest.json").read_text())
    n = sum(f["tokens"] for f in web["files"]) // SEQ + 1  # one sequence more than web holds
    with pytest.raises(
        RecipeError, match=rf"source web: holds \d+ tokens, fewer than the {n * SEQ} held out"
    ):
        MixtureSampler(r, SEQ, heldout_sequences=n)


@pytest.mark.parametrize("select", [{"lang": "en"}, {"no_such_column": ">= 1"}])
def test_plan_refuses_what_the_sampler_refuses(sources, select, capsys):
    """A `select` unlike the one the shards were made with (here: none), or one naming a column the
    documents lack, is refused by `mixtures plan` (exit 2, naming the source and key) as by the sampler."""
    from mixtures.__main__ import main

    root, srcs = sources
    data = {
        "name": "t",
        "total_tokens": 1000,
        "sources": {"web": {"shards": str(srcs["web"]), "select": select}},
        "phases": [{"name": "main", "share": 1, "weights": {"web": 1}}],
    }
    path = root / f"recipe-{next(iter(select))}.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    with pytest.raises(RecipeError) as sampler_err:
        MixtureSampler(Recipe.load(path), SEQ)
    with pytest.raises(RecipeError) as plan_err:
        make_plan(Recipe.load(path), SEQ)
    assert str(plan_err.value) == str(sampler_err.value)
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"sources.web.select is {select}" in err and str(srcs["web"]) in err


def _one_source_recipe(root, shards, select=None):
    src = {"shards": str(shards), **({"select": select} if select else {})}
    data = {"name": "t", "seed": 11, "total_tokens": 1_280, "sources": {"web": src},
            "phases": [{"name": "main", "share": 1.0, "weights": {"web": 1}}]}  # fmt: skip
    return Recipe.from_dict(data, source="test", base=root)


def test_select_other_than_the_shards_is_refused_by_plan_sampler_and_trainer_check(sources):
    """One validator (mixtures/validate.py) for the three: plan used to pass what the sampler refused."""
    from mixtures.validate import check_sources

    root, srcs = sources
    r = _one_source_recipe(root, srcs["web"], select={"lang": "en"})  # the shards were made without one
    msgs = []
    for call in (lambda: check_sources(r), lambda: make_plan(r, SEQ), lambda: MixtureSampler(r, SEQ)):
        with pytest.raises(
            RecipeError, match=r"sources\.web\.select is \{'lang': 'en'\} but .* tokenized with"
        ) as e:
            call()
        msgs.append(str(e.value))
    assert len(set(msgs)) == 1  # the same message from each
    assert set(check_sources(_one_source_recipe(root, srcs["web"]))) == {"web"}


@pytest.mark.parametrize("damage", ["truncate_bin", "delete_idx"])
def test_damaged_shard_is_found_from_the_manifest_before_reading(sources, tmp_path, damage):
    import shutil

    from mixtures.validate import check_sources

    root, srcs = sources
    shards = tmp_path / "web"
    shutil.copytree(srcs["web"], shards)
    entry = json.loads((shards / "manifest.json").read_text())["files"][0]
    if damage == "truncate_bin":
        p = shards / entry["bin"]
        p.write_bytes(p.read_bytes()[:-2])
        want = (
            rf"{entry['bin']} has {entry['bin_bytes'] - 2} bytes, manifest.json records {entry['bin_bytes']}"
        )
    else:
        (shards / entry["idx"]).unlink()
        want = rf"{entry['idx']} is listed in manifest.json but missing"
    r = _one_source_recipe(root, shards)
    for call in (lambda: check_sources(r), lambda: make_plan(r, SEQ), lambda: MixtureSampler(r, SEQ)):
        with pytest.raises(RecipeError, match=r"sources\.web\.shards: .*" + want):
            call()


def _consumed(sampler: MixtureSampler, name: str) -> int:
    """Tokens the sampler's stream of `name` has read, from its cursor alone (not from the quotas):
    whole epochs of the training pool, the documents before the cursor in this epoch, and the offset."""
    st = sampler.streams[name]
    epoch, pos, offset = sampler.cursors[name]
    return epoch * st.n_train_tokens + int(st.lengths[st.permutation(epoch)[:pos]].sum()) + offset


def _plan_and_sampler(rt, seq, held):
    """The plan of `rt` and its sampler, or None where the sampler refuses: it refuses exactly when the
    plan warns, with the plan's lines."""
    p = make_plan(rt, seq, held)
    try:
        sampler = MixtureSampler(rt, seq, heldout_sequences=held)
    except RecipeError as e:
        assert p.warnings, f"plan passed, sampler refused: {e}"
        assert str(e).split(":\n  ", 1)[1].split("\n  ") == p.warnings
        return p, None
    assert not p.warnings
    return p, sampler


@pytest.mark.parametrize("case", range(24))
def test_plan_counts_exactly_what_the_sampler_draws(sources, case):
    """Issue 44 item 6: on 4 small WARCs the plan said 2.33 epochs and passed, the sampler refused 3.65.

    Over seeded random recipes (budget, shares, weights, caps, row length, held-out split), at random
    budgets and at the edge of the caps (the budget `fit_total_tokens` finds, and one row more): the
    plan warns exactly when the sampler refuses, with the same lines; where it passes, the tokens the
    sampler's cursors actually advanced per source equal the plan's drawn tokens, and their ratio to
    the training pool the plan's epochs, exactly (the same integers divided), within the cap."""
    import random

    root, srcs = sources
    rnd = random.Random(case)
    seq = rnd.choice([8, 33, 64, 65, 257])
    held = rnd.choice([0, 0, 1, 3, 16])
    share = rnd.choice([0.9, 0.8, 0.5, 0.25])
    w = (rnd.choice([1, 2, 3, 0.5]), rnd.choice([1, 1.5, 4]))
    r = _recipe(root, srcs, total=rnd.randrange(2_000, 200_000), main_share=share, w=w, cap=4)
    caps = {"web": rnd.choice([0.5, 1, 1.5, 2, 3]), "multi": rnd.choice([0.5, 1, 2, 2.5])}
    r = dataclasses.replace(
        r, sources={n: dataclasses.replace(s, max_epochs=caps[n]) for n, s in r.sources.items()}
    )
    plan = make_plan(r, seq, held)
    fit = plan.fit_total_tokens()
    budgets = [r.total_tokens] + ([fit, fit + seq] if fit and fit < r.total_tokens else [])
    for total in budgets:
        rt = r.with_total_tokens(total)
        p, sampler = _plan_and_sampler(rt, seq, held)
        if sampler is None:
            assert total != fit  # the budget fit_total_tokens finds always passes
            continue
        for _ in sampler:  # the whole stream, tokens not copied (world size 1: every row is ours)
            pass
        for name, sp in p.sources.items():
            assert sp.draw.pool == sampler.streams[name].n_train_tokens
            assert _consumed(sampler, name) == sp.total_drawn
            assert _consumed(sampler, name) / sampler.streams[name].n_train_tokens == sp.epochs
            assert sp.epochs <= caps[name]


@pytest.mark.parametrize("case", range(8))
def test_plan_counts_exactly_what_the_sampler_draws_by_temperature(lang_sources, case):
    """The same property over weights by tokens: the plan's resolved weights are the sampler's (one
    function, draw.resolve_weights), and so are the draws, the caps and the refusals."""
    import random

    root, srcs = lang_sources
    rnd = random.Random(100 + case)
    seq = rnd.choice([8, 33, 64, 65])
    held = rnd.choice([0, 1, 3])
    temperature = rnd.choice([1.0, 0.7, 0.3, 0.05])
    caps = {n: rnd.choice([1, 2, 3, 8]) for n in srcs}
    anneal = rnd.choice([None, {"web": 1, "de": 2}])
    r = _temperature_recipe(root, srcs, temperature, rnd.randrange(2_000, 60_000), caps, anneal)
    for total in (r.total_tokens, *(t for t in [make_plan(r, seq, held).fit_total_tokens()] if t)):
        rt = r.with_total_tokens(total)
        p, sampler = _plan_and_sampler(rt, seq, held)
        if sampler is None:
            continue
        assert [ph.weights for ph in sampler.recipe.phases] == [ph.weights for ph in p.recipe.phases]
        for _ in sampler:
            pass
        for name, sp in p.sources.items():
            assert _consumed(sampler, name) == sp.total_drawn
            assert sp.epochs <= caps[name]


def test_fit_total_tokens_is_the_budget_the_caps_allow(sources):
    """The fitted budget passes the sampler; 10% more does not; the refusal names it."""
    root, srcs = sources
    r = _recipe(root, srcs, total=2_000_000, cap=2)
    fit = make_plan(r, SEQ, 3).fit_total_tokens()
    assert fit is not None and fit < r.total_tokens
    MixtureSampler(r.with_total_tokens(fit), SEQ, heldout_sequences=3)
    with pytest.raises(RecipeError, match="repetition cap exceeded"):
        MixtureSampler(r.with_total_tokens(int(fit * 1.1)), SEQ, heldout_sequences=3)
    with pytest.raises(RecipeError, match=f"total_tokens to at most {fit:,} "):
        MixtureSampler(r, SEQ, heldout_sequences=3)


def _manifest_tokens(srcs) -> dict[str, int]:
    """Each source's tokens read straight from its manifest.json (not through the planner)."""
    return {n: json.loads((p / "manifest.json").read_text())["tokens"] for n, p in srcs.items()}


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.3, 0.01])
def test_temperature_weights_are_n_to_the_t(lang_sources, temperature):
    """p_i = n_i^T / sum n_j^T from the manifests' counts, in the plan and in the sampler's quotas."""
    root, srcs = lang_sources
    n = _manifest_tokens(srcs)
    expected = {k: v**temperature / sum(x**temperature for x in n.values()) for k, v in n.items()}
    r = _temperature_recipe(root, srcs, temperature, anneal={"web": 1})
    plan = make_plan(r, SEQ)
    main_w = plan.recipe.phases[0].weights
    assert main_w == pytest.approx(expected, rel=1e-12, abs=0)
    assert plan.recipe.phases[1].weights == {"web": 1}  # a phase's own weights are kept
    sampler = MixtureSampler(r, SEQ)
    assert sampler.recipe.phases[0].weights == main_w  # the same floats, not merely close
    assert sampler.quotas[0] == largest_remainder(r.phases[0].tokens // SEQ, expected)
    if temperature == 1.0:  # natural: each source as much as it has
        total = sum(n.values())
        assert main_w == pytest.approx({k: v / total for k, v in n.items()}, rel=1e-12, abs=0)


def test_small_temperature_approaches_uniform(lang_sources):
    root, srcs = lang_sources
    n = _manifest_tokens(srcs)
    assert max(n.values()) > 5 * min(n.values())  # the web source dwarfs each language: not uniform
    gaps = []
    for t in (1.0, 0.3, 0.1, 0.01):
        w = make_plan(_temperature_recipe(root, srcs, t), SEQ).recipe.phases[0].weights
        gaps.append(max(w.values()) - min(w.values()))
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 0.01 * gaps[0]
    assert max(w.values()) / min(w.values()) < 1.05  # T = 0.01: within 5% of 1/5 each


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (
            {"by": "tokens", "temperature": 0},
            "weights.temperature: must be greater than or equal to 0.001 and less than or equal to 1",
        ),
        (
            {"by": "tokens", "temperature": 1.5},
            "weights.temperature: must be greater than or equal to 0.001 and less than or equal to 1",
        ),
        (
            {"by": "tokens", "temperature": -0.3},
            "weights.temperature: must be greater than or equal to 0.001 and less than or equal to 1",
        ),
        ({"by": "tokens", "temperature": True}, "weights.temperature"),
        ({"by": "tokens", "temperature": "warm"}, "weights.temperature"),
        ({"by": "tokens"}, "weights.temperature"),
        ({"by": "bytes", "temperature": 0.3}, "weights.by"),
        ({"by": "tokens", "temperature": 0.3, "alpha": 0.3}, "weights.alpha"),
    ],
)
def test_invalid_temperature_is_refused_on_load_naming_the_key(sources, tmp_path, weights, message):
    from mixtures.__main__ import main

    _root, srcs = sources
    data = {**two_source_recipe(srcs), "weights": weights}
    data["phases"] = [{"name": "main", "share": 1.0}]
    path = tmp_path / "r.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    with pytest.raises(RecipeError, match=re.escape(message)) as e:
        Recipe.load(path)
    assert str(path) in str(e.value)
    assert main(["plan", str(path)]) == 2


def test_weights_needed_somewhere(sources):
    root, srcs = sources
    data = {**two_source_recipe(srcs), "phases": [{"name": "main", "share": 1.0}]}
    with pytest.raises(RecipeError, match=r"phases.main.weights: missing"):
        Recipe.from_dict(data, source="t", base=root)
    # a recipe-level `weights:` that no phase uses is a mistake, not a default
    with pytest.raises(RecipeError, match=r"weights: \{by: tokens, \.\.\.\} weights only phases"):
        Recipe.from_dict(
            {**two_source_recipe(srcs), "weights": {"by": "tokens", "temperature": 0.3}},
            source="t",
            base=root,
        )


def test_plan_prints_the_resolved_weights(lang_sources, tmp_path, capsys):
    from mixtures.__main__ import main

    _root, srcs = lang_sources
    n = _manifest_tokens(srcs)
    data = {
        "total_tokens": 10_000,
        "weights": {"by": "tokens", "temperature": 0.3},
        "sources": {k: {"shards": str(v)} for k, v in srcs.items()},
        "phases": [{"name": "main", "share": 1.0}],
    }
    path = tmp_path / "langs.yaml"
    path.write_text(json.dumps(data))
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("weights by tokens"))
    assert "temperature 0.3" in line and "phases main" in line
    total = sum(v**0.3 for v in n.values())
    for k, v in n.items():
        assert f"{k} {v**0.3 / total:.4f} (n=" in line
