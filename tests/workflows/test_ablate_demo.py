"""`python -m workflows ablate-demo`'s own steps (workflows/ablate_demo.py): the evaluation text is held out from the classifier's positives, and
arms moved under another output folder read and write there, and the decontamination step is dedup's
decontaminate stage alone, against exactly the sets the arms are scored on."""

from __future__ import annotations

import json

from dedup.config import DedupJobConfig
from dedup.stages import job_stages
from mixtures.recipe import Recipe
from testkit.shared_data import shared_data_dir
from workflows.ablate_demo import ARMS, EVAL_SETS, arm_recipes, write_decontaminate_config, write_eval_sets


def _texts(path):
    return [json.loads(x)["text"] for x in path.read_text().splitlines() if x.strip()]


def test_eval_sets_are_disjoint_from_the_positives_and_split_by_label(tmp_path):
    shared = shared_data_dir()
    write_eval_sets(shared, tmp_path)
    held, train = (
        _texts(tmp_path / "eval" / "wiki_heldout.jsonl"),
        _texts(tmp_path / "eval" / "wiki_train.jsonl"),
    )
    wiki = _texts(shared / "quality" / "enwiki_sample_articles.jsonl")
    assert held and train and not set(held) & set(train)  # the classifier never sees a held-out article
    assert sorted(held + train) == sorted(wiki)
    labelled = [
        json.loads(x) for x in (shared / "quality" / "dclm_human_labels_dev.jsonl").read_text().splitlines()
    ]
    assert _texts(tmp_path / "eval" / "dclm_hq.jsonl") == [r["text"] for r in labelled if r["label"] == 1]
    assert _texts(tmp_path / "eval" / "dclm_lq.jsonl") == [r["text"] for r in labelled if r["label"] == 0]


def test_arms_under_another_output_folder(tmp_path):
    paths = arm_recipes(tmp_path, "50K")
    assert [p.stem for p in paths] == list(ARMS)
    for p in paths:
        r = Recipe.load(p)
        assert r.total_tokens == 50_000
        for src in r.sources.values():
            assert src.shards.is_relative_to(tmp_path) and src.docs.is_relative_to(tmp_path)
            assert src.shards == tmp_path / "tokens" / r.name / "shards" / src.name


def test_decontamination_runs_only_that_stage_against_the_scored_sets(tmp_path):
    write_eval_sets(shared_data_dir(), tmp_path)
    cfg = DedupJobConfig.load(str(write_decontaminate_config(tmp_path)), [])
    assert [s.name for s in job_stages(cfg) if s.enabled(cfg)] == [
        "prepare",
        "ids",
        "decontaminate",
        "output",
    ]
    dc = cfg.decontaminate
    assert dc.mode == "drop" and dc.ngram == 13
    assert {st.name: st.files() for st in dc.sets} == {
        n: [str(tmp_path / "eval" / f"{n}.jsonl")] for n in EVAL_SETS
    }
    # every arm reads the decontaminated pages, directly or through kept/, dedup/ and scored/
    for p in arm_recipes(tmp_path, "50K"):
        for src in Recipe.load(p).sources.values():
            assert src.docs.name in ("decontaminated", "dedup", "scored"), src.docs
