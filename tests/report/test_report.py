"""The run report shows exactly the numbers of the stats files it was made from.

Real outputs are made once (tests/report/conftest.py's `report_run`: the reduced demo's `extract` over
real WARCs, `dedup`, quality model, `score` and report). The report's JSON must carry the stats files'
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
    # the demo ran every stage: every section has its chart
    from report.render import CHARTS

    for chart in CHARTS:
        png = report_run / f"{chart}.png"
        assert png.read_bytes()[:8] == PNG_MAGIC, chart
        assert f'src="{chart}.png"' in html
    assert "no data for this section" not in html


def test_a_run_stopped_before_tokenizing_still_gets_its_report(report_run, tmp_path):
    """Curation outputs only (extract, dedup, scored), no tokens or training yet: those three sections
    say so instead of failing, and the others have their charts."""
    run = tmp_path / "run"
    run.mkdir()
    for part in ("extract", "dedup", "scored"):
        (run / part).symlink_to(report_run / part)
    assert report_main(["--demo-dir", str(run)]) == 0
    html = (run / "report.html").read_text()
    for chart in ("funnel", "languages", "quality", "scores", "dup_clusters"):
        assert (run / f"{chart}.png").read_bytes()[:8] == PNG_MAGIC, chart
    assert html.count("no data for this section") == 3  # tokens, loss, throughput


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


def _strict_json(text: str):
    """JSON as the standard has it: NaN and Infinity are not numbers of it."""

    def refuse(name):
        raise ValueError(f"{name} in the report's JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.spark
def test_every_histogram_is_finite_for_any_score_column(report_run, tmp_path):
    """report_run's scored documents with hostile float columns beside their real scores: one over
    ±1e308, one pinned at the float limit, one of a single value, one of NaN and ±inf only, and NaN /
    inf in `quality` and `perplexity`. `python -m report` exits 0; report.json and browse.html hold
    only finite numbers; every histogram's edges are finite and ascending, and counts plus the
    non-finite count are every non-null value."""
    import math
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from report.browse import embedded_data

    run = tmp_path / "run"
    (run / "scored" / "docs").mkdir(parents=True)
    shutil.copy(report_run / "scored" / "stats.json", run / "scored" / "stats.json")
    table = pa.concat_tables(
        pq.read_table(f) for f in sorted((report_run / "scored" / "docs").rglob("*.parquet"))
    )
    n = table.num_rows
    big = 1.7976931348623157e308
    hostile = {
        "span": [(-1e308, 1e308, 0.5, None)[i % 4] for i in range(n)],
        "limit": [(big, -big)[i % 2] for i in range(n)],
        "one": [1e308] * n,
        "bad": [(math.nan, math.inf, -math.inf)[i % 3] for i in range(n)],
    }
    # a perplexity column spanning decades (log bins), from the real language scores
    hostile["perplexity"] = [10 ** (5 * (1 - (v or 0.0))) for v in table.column("lang_score").to_pylist()]
    for name, vals in hostile.items():
        column = pa.array(vals, pa.float64())
        i = table.schema.get_field_index(name)  # the demo scored a perplexity column: replaced
        table = table.set_column(i, name, column) if i >= 0 else table.append_column(name, column)
    for name, poison in (("quality", math.nan), ("perplexity", math.inf)):
        col = table.column(name).to_pylist()
        col[0], col[1] = poison, math.nan
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(col, pa.float64()))
    pq.write_table(table, run / "scored" / "docs" / "part-0.parquet")
    assert report_main(["--demo-dir", str(run)]) == 0
    report = _strict_json((run / "report.json").read_text())
    assert report["quality"]["nonfinite"] == 2 and sum(report["quality"]["log_bins"]["counts"]) == n - 2
    assert report["scores"]["perplexity"]["nonfinite"] == 2
    assert all(math.isfinite(v) for v in report["quality"]["quantiles"].values())
    page = embedded_data((run / "browse.html").read_text())
    scores = page["scores"]
    assert "bad" not in scores  # no finite value: nothing to bin
    for col in ("span", "limit", "one", "quality", "perplexity"):
        h = scores[col]
        e = h["edges"]
        assert all(math.isfinite(x) for x in e) and e == sorted(e) and len(e) == len(h["counts"]) + 1, col
        present = sum(v is not None for v in table.column(col).to_pylist())
        assert sum(h["counts"]) + h["nonfinite"] == present, col
    assert scores["span"]["edges"][0] == -1e308 and scores["span"]["edges"][-1] == 1e308
    assert scores["span"]["counts"][0] > 0 and scores["span"]["counts"][-1] > 0
