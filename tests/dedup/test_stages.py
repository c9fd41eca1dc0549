"""The stage contract without Spark: the resume rule, and the funnel built from the stages' infos."""

from __future__ import annotations

import json

from dedup.config import DedupJobConfig
from dedup.job import funnel_stats
from dedup.stages import STAGES, Stage, StageContext, StageStore


class _Counting(Stage):
    name = "counting"
    removes = True
    calls = 0

    def run(self, ctx: StageContext) -> dict:
        type(self).calls += 1
        return {"removed": {"r": {"docs": 2, "bytes": 20}}, "things": 5}


def _ctx(root, cfg=None) -> StageContext:
    return StageContext(None, cfg or DedupJobConfig(), root, StageStore(root), [], 2, lambda msg: None)


def test_a_stage_with_a_marker_is_not_run_again(tmp_path):
    stage = _Counting()
    first = _ctx(tmp_path)
    info = first.run(stage)
    assert _Counting.calls == 1 and first.done == ["counting"] and first.resumed == []
    marker = json.loads((tmp_path / "stages" / "counting.json").read_text())
    assert marker == info and marker["things"] == 5 and "seconds" in marker
    again = _ctx(tmp_path)
    assert again.run(stage) == marker
    assert _Counting.calls == 1 and again.resumed == ["counting"] and again.done == ["counting"]
    assert again.infos == {"counting": marker}


def test_enabled_stages_follow_the_config():
    def names(data):
        cfg = DedupJobConfig.from_dict(data)
        return [s.name for s in STAGES if s.enabled(cfg)]

    every = ["prepare", "ids", "exact", "url", "minhash", "cluster", "lines", "output"]
    assert names({}) == every
    assert names({"url": {"enabled": False}, "lines": {"enabled": False}}) == [
        "prepare", "ids", "exact", "minhash", "cluster", "output"
    ]  # fmt: skip
    # no cluster, no components to make: minhash goes with it
    assert names({"cluster": {"enabled": False}, "exact": {"enabled": False}}) == [
        "prepare", "ids", "url", "lines", "output"
    ]  # fmt: skip


def test_funnel_comes_from_the_stages_that_ran(tmp_path):
    """url did not run: no row for it; each row starts where the one before ended; counters are the
    keys each stage declares (lines_removed from `lines`, which has no row of its own)."""
    ctx = _ctx(tmp_path)
    ctx.infos = {
        "prepare": {"docs": 100, "bytes": 10_000, "minhash_too_short": 3, "columns": ["id", "text"]},
        "ids": {"removed": {"empty_text": {"docs": 2, "bytes": 0}, "duplicate_id": {"docs": 1, "bytes": 50}}},
        "exact": {"removed": {"exact_duplicate": {"docs": 10, "bytes": 1_000}}, "seconds": 1.5},
        "minhash": {"edges": 7, "candidate_edges": 9, "nodes": 80},
        "cluster": {"removed": {"near_duplicate": {"docs": 5, "bytes": 700}}, "clusters": 2, "detached": 0},
        "lines": {"frequent_lines": 4, "lines_removed": 12, "docs_touched": 6},
        "output": {"removed": {"lines_too_short": {"docs": 1, "bytes": 30}}, "docs": 81, "bytes": 8_000},
    }
    d = funnel_stats(ctx).to_dict()
    rows = {s["stage"]: s for s in d["stages"]}
    assert [s["stage"] for s in d["stages"]] == ["ids", "exact", "cluster", "lines"]
    assert (rows["ids"]["docs_in"], rows["ids"]["docs_out"], rows["ids"]["bytes_out"]) == (100, 97, 9_950)
    assert (rows["exact"]["docs_in"], rows["exact"]["docs_out"], rows["exact"]["seconds"]) == (97, 87, 1.5)
    assert (rows["cluster"]["docs_out"], rows["cluster"]["bytes_out"]) == (82, 8_250)
    assert (rows["lines"]["docs_in"], rows["lines"]["docs_out"]) == (82, 81)
    assert rows["lines"]["drops"] == {"lines_too_short": 1}
    assert d["counters"] == {
        "minhash_too_short": 3,
        "edges": 7,
        "candidate_edges": 9,
        "clusters": 2,
        "detached": 0,
        "frequent_lines": 4,
        "lines_removed": 12,
    }
