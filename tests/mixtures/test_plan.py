"""The plan's estimate for sources that are not tokenized yet: UTF-8 bytes of the selected documents /
bytes_per_token, counted by hand here; documents are listed by core.files' one rule."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from mixtures.plan import make_plan
from mixtures.recipe import Recipe


def _docs(folder, rows):
    folder.mkdir(parents=True, exist_ok=True)
    return pa.table({k: [r[k] for r in rows] for k in ("text", "lang", "quality")})


def test_estimate_from_selected_documents(tmp_path):
    rows_a = [
        {"text": "héllo wörld", "lang": "en", "quality": 0.9},  # 13 bytes (two 2-byte letters)
        {"text": "bonjour", "lang": "fr", "quality": 0.9},  # wrong language
        {"text": "low", "lang": "en", "quality": 0.1},  # below the threshold
    ]
    rows_b = [{"text": "ok " * 5, "lang": "en", "quality": 0.5}, {"text": "x", "lang": "en", "quality": None}]
    docs = tmp_path / "scored" / "docs"
    pq.write_table(_docs(docs, rows_a), docs / "part-0.parquet")
    pq.write_table(_docs(docs / "lang=en", rows_b), docs / "lang=en" / "part-1.parquet")
    # a running job's temporary file is not part of the dataset
    pq.write_table(_docs(docs, rows_a), docs / "_tmp-part-2.parquet")
    recipe = Recipe.from_dict(
        {
            "total_tokens": 100,
            "bytes_per_token": 2.0,
            "sources": {
                "web": {"docs": "scored", "select": {"lang": "en", "quality": ">= 0.5"}},
                "later": {"docs": "not-extracted-yet"},
            },
            "phases": [{"name": "main", "share": 1, "weights": {"web": 1, "later": 1}}],
        },
        source="t",
        base=tmp_path,
    )
    plan = make_plan(recipe)
    selected_bytes = len("héllo wörld".encode()) + len(("ok " * 5).encode())
    assert selected_bytes == 28
    assert (plan.sources["web"].available, plan.sources["web"].exact) == (round(selected_bytes / 2.0), False)
    assert plan.sources["later"].available is None
    assert any(w.startswith("later: tokens available unknown") for w in plan.warnings)
