"""What tests/workflows/test_search.py and test_search_validate.py share: the two-source recipe they search
over, a short Wikipedia eval set, and the small proxy settings (`--set` strings)."""

from __future__ import annotations

from pathlib import Path

import yaml

from testkit.corpus import build_two_sources, two_source_recipe
from testkit.shared_data import shared_data_dir


def two_source_inputs(root: Path) -> tuple[Path, Path, Path]:
    """(root, recipe.yaml over two real-text sources, wiki.jsonl of 4 articles) under `root`."""
    srcs = build_two_sources(root)
    recipe = root / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(two_source_recipe(srcs)))
    wiki = root / "wiki.jsonl"
    lines = (shared_data_dir() / "quality" / "enwiki_sample_articles.jsonl").read_text().splitlines()
    wiki.write_text("\n".join(lines[:4]) + "\n")
    return root, recipe, wiki


def small_sets(**over) -> list[str]:
    """`--set` strings for proxies of a few steps: 2,064 tokens, 64-token sequences, 2 eval documents."""
    base = {"proxy.tokens": 2064, "target.seq_len": 64, "target.heldout_sequences": 2, "proxy.eval_docs": 2}
    return [f"{k}={v}" for k, v in {**base, **over}.items()]
