"""The run report shows exactly the numbers of the stats files it was made from.

Real outputs are made once (tests/report/conftest.py's `report_run`): `extract` over two real WARCs,
`dedup`, a small quality model and `score`, all on the shared local Spark session (the `spark` tier). The report's JSON must carry the stats files'
numbers unchanged, its HTML must print them, and each chart must exist as a PNG. The training part of
the report (loss, tokens/s) is checked by the reduced demo, tests/workflows/test_demo.py.
"""

from __future__ import annotations

import json

import pytest

from report.__main__ import main as report_main
from report.collect import ReportError, collect

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_empty_folder_is_refused(tmp_path, capsys):
    with pytest.raises(ReportError, match="no extract/"):
        collect(tmp_path)
    assert report_main(["--demo-dir", str(tmp_path / "missing")]) == 2
    assert "not a folder" in capsys.readouterr().err


@pytest.mark.spark
def test_report_numbers_equal_stats_files(report_run):
    report = json.loads((report_run / "report.json").read_text())
    for job in ("extract", "dedup"):
        stats = json.loads((report_run / job / "stats.json").read_text())
        rows = [r for r in report["funnel"] if r["job"] == job]
        assert [r["stage"] for r in rows] == [s["stage"] for s in stats["stages"]]
        for r, s in zip(rows, stats["stages"]):
            for key in ("docs_in", "docs_out", "bytes_in", "bytes_out", "seconds", "drops"):
                assert r[key] == s[key], (job, s["stage"], key)
    extract = json.loads((report_run / "extract" / "stats.json").read_text())
    assert extract["stages"][0]["docs_in"] > 0 and extract["docs_written"] > 5

    scored = json.loads((report_run / "scored" / "stats.json").read_text())
    bins = {
        k.removeprefix("quality_bin_"): v
        for k, v in scored["counters"].items()
        if k.startswith("quality_bin_")
    }
    assert report["quality"]["bins"] == bins
    dedup_out = report["funnel"][-1]["docs_out"]
    # One kept document per duplicate cluster, each carrying its cluster's size.
    assert sum(report["dup_clusters"]["kept_docs_by_cluster_size"].values()) == dedup_out
    assert sum(bins.values()) == dedup_out
    assert sum(report["languages"]["kept"].values()) == extract["docs_written"]


@pytest.mark.spark
def test_report_html_prints_the_numbers_and_charts(report_run):
    html = (report_run / "report.html").read_text()
    stats = json.loads((report_run / "extract" / "stats.json").read_text())
    for s in stats["stages"]:
        row = f"<td>extract</td><td>{s['stage']}</td><td>{s['docs_in']:,}</td><td>{s['docs_out']:,}</td>"
        assert row in html, s["stage"]
    for chart in ("funnel", "languages", "quality", "dup_clusters"):
        png = report_run / f"{chart}.png"
        assert png.read_bytes()[:8] == PNG_MAGIC, chart
        assert f'src="{chart}.png"' in html
    # No tokens or training yet: those sections say so instead of failing.
    # (perplexity and toxicity: this run scored quality only)
    assert html.count("no data for this section") == 4


def test_languages_use_extract_counters_when_present(tmp_path):
    """Exact per-language counts come from `lang:<code>` counters of extract's stats, when it writes them."""
    from report.collect import languages

    (tmp_path / "extract").mkdir()
    stats = {"stages": [], "counters": {"lang:en": 7, "lang:de": 3, "charset_http": 10}}
    (tmp_path / "extract" / "stats.json").write_text(json.dumps(stats))
    got = languages(tmp_path)
    assert got["seen"] == {"en": 7, "de": 3}
    assert got["kept"] == {} and got["rejected_sample"] == {}


def test_language_drops_of_the_cascade_are_in_the_rejected_sample(tmp_path):
    """The cascade's `prelid` row drops pages for their language before extraction: the report's
    rejected-sample languages count them with langid's, and no other stage's rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curation.schema import REJECTED_SCHEMA
    from report.collect import languages

    (tmp_path / "extract" / "rejected").mkdir(parents=True)
    rows = [
        {"stage": "prelid", "reason": "lang_not_kept", "lang": "de"},
        {"stage": "prelid", "reason": "lang_not_kept", "lang": "de"},
        {"stage": "langid", "reason": "lang_not_kept", "lang": "fr"},
        {"stage": "filter:c4_quality", "reason": "c4_quality:lorem_ipsum", "lang": "en"},
    ]
    pq.write_table(
        pa.Table.from_pylist(rows, schema=REJECTED_SCHEMA), tmp_path / "extract" / "rejected" / "u.parquet"
    )
    assert languages(tmp_path)["rejected_sample"] == {"de": 2, "fr": 1}


def test_score_histograms_show_the_recipe_band(tmp_path):
    """Perplexity/toxicity columns of scored/ become histograms with the recipe's bounds on them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from report.render import render

    run = tmp_path / "run"
    (run / "scored" / "docs").mkdir(parents=True)
    (run / "scored" / "stats.json").write_text(json.dumps({"counters": {}}))
    ppl = [3.0, 12.0, 150.0, 150.0, 2_000.0, 5e6, None]  # 5e6 is past the last edge (1e5)
    tox = [0.01, 0.02, 0.9, None, 0.3, 0.0, 0.5]
    pq.write_table(
        pa.table({"text": ["x"] * 7, "perplexity": pa.array(ppl, pa.float32()), "toxicity": tox}),
        run / "scored" / "docs" / "part-0.parquet",
    )
    (run / "recipe.yaml").write_text(
        "name: t\ntotal_tokens: 1000\nsources:\n"
        "  hq: {shards: s, select: {perplexity: '> 10 and < 1000', toxicity: '< 0.5'}}\n"
        "phases:\n  - {name: main, share: 1.0, weights: {hq: 1}}\n"
    )
    r = collect(run)["scores"]
    p, t = r["perplexity"], r["toxicity"]
    assert sum(p["counts"]) == 6 and p["null"] == 1 and p["counts"][-1] == 1  # clipped into the last bin
    # bin i covers [edges[i], edges[i+1]), 4 bins per decade: the two 150s share a bin, 3 is in 1–10
    i150 = max(i for i, e in enumerate(p["edges"][:-1]) if e <= 150)
    assert p["counts"][i150] == 2 and sum(p["counts"][:4]) == 1
    assert [(b["op"], b["value"]) for b in p["recipe"]] == [(">", 10.0), ("<", 1000.0)]
    assert (
        sum(t["counts"]) == 6
        and t["null"] == 1
        and t["recipe"] == [{"source": "hq", "op": "<", "value": 0.5}]
    )
    html = render({**collect(run), "training": {}}, run / "report").read_text()
    assert "Perplexity and toxicity" in html and "hq" in html and "&lt; 1000" in html
    assert (run / "report" / "scores.png").read_bytes().startswith(PNG_MAGIC)


def test_ablation_folder_gives_its_table_and_chart(tmp_path):
    """`--ablation DIR`: a section with one row per arm and the chart; a folder without ablation.json is refused."""
    from mixtures.ablation_table import summarize

    results = [
        {
            "arm": arm,
            "seed": s,
            "tokens_seen": 4096,
            "wall_s": 10.0,
            "bpb": {"wiki": 3.0 + d + 0.01 * s, "own": 3.1},
        }
        for arm, d in (("raw", 0.2), ("filters", 0.0))
        for s in (1, 2, 3)
    ]
    arms = {
        "raw": {"unique_tokens": 9000, "budget": 4096},
        "filters": {"unique_tokens": 2000, "budget": 4096},
    }
    ab = tmp_path / "ablation"
    ab.mkdir()
    (ab / "ablation.json").write_text(json.dumps(summarize(arms, results, "raw", ["wiki", "own"])))
    assert report_main(["--ablation", str(ab)]) == 0
    page = (ab / "report.html").read_text()
    assert "<td>raw</td>" in page and "<td>filters</td>" in page and "2.05 (repeated)" in page
    assert (ab / "ablation.png").stat().st_size > 0
    assert report_main(["--ablation", str(tmp_path)]) == 2  # no ablation.json there
    assert report_main([]) == 2  # neither folder given
