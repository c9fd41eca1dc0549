"""One set of shards under two source names is refused (issue 31, item 13): the plan, the sampler and the
trainer's check (mixtures/validate.py) each used to cap the two names separately, so `max_epochs: 1` let
the same tokens be drawn twice with exit 0.

Variants: the folder spelled with `..` and a trailing slash, through a symlink, relative to the recipe, and
copied to a second folder (same .bin sha256). Sources selecting overlapping documents into shards of their
own (the demo's web / web_hq) still pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mixtures.plan import make_plan
from mixtures.recipe import Recipe, RecipeError
from mixtures.sampler import MixtureSampler
from mixtures.validate import check_sources
from testkit.corpus import build_corpus, build_source
from tokens.tokenizer import TokenizerConfig, train_tokenizer

REPO = Path(__file__).resolve().parents[2]
SEQ = 32


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("same")
    corpus = build_corpus(tmp_path_factory.mktemp("corpus"))
    tok = train_tokenizer(corpus, root / "tok", TokenizerConfig(vocab_size=512))
    files = sorted((corpus / "docs").glob("*.parquet"))
    web = build_source(root / "tokens", tok, "web", files)
    hq = build_source(root / "tokens", tok, "web_hq", files, select={"quality": ">= 0.6"})
    return root, web, hq


def _recipe(root: Path, a: str, b: str, *, weights=(1, 1), cap: float = 1) -> dict:
    return {
        "name": "t",
        "total_tokens": 3_200,
        "max_epochs": cap,
        "sources": {"web": {"shards": a}, "web_again": {"shards": b}},
        "phases": [{"name": "main", "share": 1.0, "weights": dict(zip(["web", "web_again"], weights))}],
    }


def _spellings(root: Path, web: Path) -> dict[str, str]:
    link = root / "link-to-web"
    if not link.exists():
        link.symlink_to(web, target_is_directory=True)
    copy = root / "copy-of-web"
    if not copy.exists():
        shutil.copytree(web, copy)
    return {
        "dotdot_slash": f"{web.parent}/../{web.parent.name}/{web.name}/",
        "symlink": str(link),
        "relative": os.path.relpath(web, root),
        "copy": str(copy),
    }


@pytest.mark.parametrize("spelling", ["dotdot_slash", "symlink", "relative", "copy"])
def test_two_names_for_one_set_of_shards_are_refused_by_plan_sampler_and_trainer_check(shards, spelling):
    root, web, _ = shards
    other = _spellings(root, web)[spelling]
    r = Recipe.from_dict(_recipe(root, str(web), other), source="t.yaml", base=root)
    msgs = set()
    for call in (lambda: check_sources(r), lambda: make_plan(r, SEQ), lambda: MixtureSampler(r, SEQ)):
        with pytest.raises(RecipeError, match=r"sources\.web.* sources\.web_again.*capped twice") as e:
            call()
        msgs.add(str(e.value))
    assert len(msgs) == 1  # one validator, one message
    if spelling == "copy":
        assert "hold the same shards" in msgs.pop()
    else:
        assert f"are the same folder ({os.path.realpath(web)})" in msgs.pop()


def test_plan_cli_exits_2_where_it_printed_two_caps_under_one(shards, tmp_path):
    """The issue's case: each name within its cap of 1 epoch (exit 0 before), the tokens drawn twice over."""
    root, web, _ = shards
    tokens = yaml.safe_load((web / "manifest.json").read_text())["tokens"]
    data = _recipe(root, str(web), str(web) + "/")
    data["total_tokens"] = int(tokens * 1.6)  # 0.8 epochs per name, 1.6 of the one folder
    path = tmp_path / "dup.yaml"
    path.write_text(yaml.safe_dump(data))
    p = subprocess.run([sys.executable, "-m", "mixtures", "plan", str(path)], cwd=REPO, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: sources.web.shards"), p.stderr


def test_overlapping_selections_in_their_own_shards_pass(shards):
    """web_hq's documents are a subset of web's (upsampling them is the point): different files, allowed;
    and a source that no phase draws from may name any folder."""
    root, web, hq = shards
    data = _recipe(root, str(web), str(hq), cap=4)
    data["sources"]["web_again"]["select"] = {"quality": ">= 0.6"}
    data["sources"]["unused"] = {"shards": str(web) + "/"}
    r = Recipe.from_dict(data, source="t.yaml", base=root)
    assert set(check_sources(r)) == {"web", "web_again"}
    assert sum(1 for _ in MixtureSampler(r, SEQ)) == 3_200 // SEQ
