"""A reduced `make demo` that covers every stage: 3 real WARCs, 20 training steps, a 40K-token recipe.

The full demo (all WARCs, 300 steps) takes several minutes on 2 cores; this variant
(tests/support/demo.py, run once per session by the `demo_run` fixture) runs the same workflow
(`python -m workflows demo`) and so the same commands, WARC to report, with only the sizes changed. It checks that each stage ran, that the report's numbers are those of the stats files and the trainer's
metrics, and that a rerun skips every finished stage (the demo is idempotent).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.demo import STEPS, run_demo

pytestmark = pytest.mark.slow

STAGES = ["extract", "dedup", "train-quality", "train-lm", "score", "train-tokenizer", "tokenize:web", "tokenize:web_hq",
          "plan", "train", "report"]  # fmt: skip


@pytest.fixture(scope="module")
def demo(demo_run) -> Path:
    return demo_run


def test_every_stage_ran(demo):
    timings = json.loads((demo / "timings.json").read_text())
    assert list(timings) == STAGES
    assert all(t["seconds"] is not None and not t["skipped_last_run"] for t in timings.values())
    for chart in ("funnel", "languages", "quality", "dup_clusters", "tokens", "loss", "throughput"):
        assert (demo / f"{chart}.png").stat().st_size > 1000, chart


def test_report_matches_stats_and_metrics(demo):
    report = json.loads((demo / "report.json").read_text())
    for job in ("extract", "dedup"):
        stages = json.loads((demo / job / "stats.json").read_text())["stages"]
        got = [
            (r["stage"], r["docs_in"], r["docs_out"], r["drops"]) for r in report["funnel"] if r["job"] == job
        ]
        assert got == [(s["stage"], s["docs_in"], s["docs_out"], s["drops"]) for s in stages], job
    for src in ("web", "web_hq"):
        man = json.loads((demo / "tokens" / "shards" / src / "manifest.json").read_text())
        assert report["tokens"]["manifests"][src]["tokens"] == man["tokens"] > 0
    records = [json.loads(line) for line in (demo / "train" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "event" not in r and "loss" in r]
    assert report["training"]["step"] == list(range(1, STEPS + 1))
    assert report["training"]["loss"] == [r["loss"] for r in steps]
    assert report["training"]["tokens_per_s"] == [r["tokens_per_s"] for r in steps]
    evals = [r for r in records if r.get("event") == "eval"]  # held-out loss per source
    assert (
        sorted(report["training"]["eval"]) == sorted(evals[-1]["eval"])
        if evals
        else not report["training"]["eval"]
    )
    for src, ev in report["training"]["eval"].items():
        assert ev["loss"] == [e["eval"][src]["loss"] for e in evals], src
    end = [r for r in records if r.get("event") == "end"][-1]
    trained = report["training"]["trained_tokens_by_phase"]
    assert {k: sum(p.get(k, 0) for p in trained.values()) for k in end["per_source_tokens"]} == end[
        "per_source_tokens"
    ]


def test_demo_ends_with_the_browser(demo):
    """browse.html beside report.html (issue 46): its selector view cuts web_hq where tokenize's manifest
    says the recipe's percentile resolved, and it holds the drops the extract sampled."""
    from report.browse import embedded_data

    data = embedded_data((demo / "browse.html").read_text())
    man = json.loads((demo / "tokens" / "shards" / "web_hq" / "manifest.json").read_text())
    src = next(s for s in data["selectors"]["sources"] if s["source"] == "web_hq")
    assert src["resolved_by"] == "the shards' manifest"
    cut = next(c for c in src["cuts"] if c["column"] == "perplexity_bpb")
    assert cut["threshold"] == float(man["resolved_select"]["perplexity_bpb"].split()[-1])
    assert cut["inside"] and cut["outside"]
    assert data["dropped"]["rows"] and set(data["dropped"]["counts"]) >= {
        r["stage"] for r in data["dropped"]["rows"]
    }


def test_rerun_skips_finished_stages(demo, warc_dir, data_dir):
    res = run_demo(demo, warc_dir, data_dir)
    assert res.returncode == 0, res.stderr[-3000:]
    for stage in [*STAGES[:7], "train"]:
        assert f"==> {stage}: already done, skipped" in res.stdout, stage


def test_selector_effect_agrees_with_what_tokenize_kept(demo):
    """`mixtures selector-effect` resolves the recipe's percentile as tokenize did and counts, with the
    run's tokenizer, the documents and tokens tokenize wrote for the selecting source (shards hold one
    EOD per document, the effect counts none)."""
    from mixtures.selector_effect import selector_effect

    result = selector_effect(str(demo / "recipe.yaml"), str(demo / "tokenizer" / "tokenizer.json"))
    assert list(result) == ["web_hq"]  # the only source that selects
    man = json.loads((demo / "tokens" / "shards" / "web_hq" / "manifest.json").read_text())
    r = result["web_hq"]
    assert r["kept_docs"] == man["documents"] > 0
    assert r["kept_tokens"] + r["kept_docs"] == man["tokens"]
    assert {c: row["resolved"] for c, row in r["columns"].items()} == man["resolved_select"]
    removed = r["docs"] - r["kept_docs"]
    assert any("%" in str(row["condition"]) for row in r["columns"].values())  # the demo selects a share
    for row in r["columns"].values():  # a condition removes no more last than alone, nor alone than all do
        assert row["docs_last"] <= row["docs_alone"] <= removed
    # some condition removes documents; a document removed "last" by one condition is kept by every
    # other, so no document counts as last for two of them
    assert max(row["docs_alone"] for row in r["columns"].values()) > 0
    assert sum(row["docs_last"] for row in r["columns"].values()) <= removed


def test_compare_runs_finds_a_changed_output(demo, tmp_path, capsys):
    """`workflows compare-runs`: a demo output against its own copy is the same everywhere (exit 0);
    with one dedup document gone, the copy differs there (exit 1) and only in what depends on it."""
    import shutil

    import pyarrow.parquet as pq

    from workflows.cli import main

    copy = tmp_path / "copy"
    shutil.copytree(demo, copy)
    assert main(["compare-runs", str(demo), str(copy)]) == 0
    assert "DIFFERS" not in capsys.readouterr().out
    part = next(
        p for p in sorted((copy / "dedup" / "docs").glob("*.parquet")) if pq.read_metadata(p).num_rows
    )
    table = pq.read_table(part)
    pq.write_table(table.slice(1), part)
    assert main(["compare-runs", str(demo), str(copy)]) == 1
    differs = [line for line in capsys.readouterr().out.splitlines() if line.startswith("DIFFERS")]
    assert differs == [f"DIFFERS  dedup/docs rows  ({_rows(demo)} vs {_rows(demo) - 1} rows)"]


def _rows(demo: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(p).num_rows for p in (demo / "dedup" / "docs").glob("*.parquet"))


def test_budget_sized_to_the_reduced_demos_data(demo, tmp_path):
    """Issue 44 item 6 on the demo's own shards (3 real WARCs, the percentile-selected web_hq): the demo
    recipe's 600K tokens are refused by the trainer's sampler; the budget the demo sizes them to is
    accepted, and it is no smaller than the 40K this run trained on (which fit), so it is the data's
    size, not a guess."""
    from mixtures.recipe import Recipe, RecipeError
    from mixtures.sampler import MixtureSampler
    from trainer.config import load_config
    from workflows.demo import TRAIN_CONFIG, size_budget
    from workflows.paths import project_path

    cfg = load_config(project_path(TRAIN_CONFIG))
    rows, held = cfg.data.seq_len + 1, cfg.eval.sequences_per_source
    full = tmp_path / "full.yaml"  # this run's recipe (absolute paths to its shards) at the demo's budget
    text = (demo / "recipe.yaml").read_text()
    assert "total_tokens: 40K" in text
    full.write_text(text.replace("total_tokens: 40K", "total_tokens: 600K"))
    with pytest.raises(RecipeError, match="repetition cap exceeded"):
        MixtureSampler(Recipe.load(full), rows, heldout_sequences=held)
    sized = size_budget(full, tmp_path, cfg)
    budget = Recipe.load(sized).total_tokens
    assert 40_000 <= budget < 600_000
    MixtureSampler(Recipe.load(sized), rows, heldout_sequences=held)  # accepted
