"""One file through every stage without Spark: outputs, funnel arithmetic, determinism, quirks."""

from __future__ import annotations

import gzip
import itertools
import json

import pyarrow.parquet as pq
import pytest

from core.output import OutputDir
from core.stats import Stats
from curation.config import ExtractJobConfig
from curation.pipeline import process_file
from curation.schema import DOC_SCHEMA

CFG = ExtractJobConfig()


def _run(uri, root, cfg=CFG):
    out = OutputDir(root)
    out.prepare("extract", cfg.to_dict(), cfg.fingerprint())
    return process_file(str(uri), cfg, str(root)), out


def _check_funnel(stats: dict) -> None:
    """Every stage: in = out + dropped; and each stage's output is the next stage's input."""
    stages = Stats.from_dict(stats).stages
    names = list(stages)
    assert names[0] == "read" and names[-1] == "write"
    for name, st in stages.items():
        assert st.docs_in == st.docs_out + sum(st.drops.values()), name
    for a, b in itertools.pairwise(names):
        assert stages[a].docs_out == stages[b].docs_in, (a, b)
        assert stages[a].bytes_out == stages[b].bytes_in, (a, b)


def test_cc_sample_end_to_end(tmp_path, warc_dir):
    res, out = _run(warc_dir / "crawl-2024-sample-0000.warc.gz", tmp_path / "o")
    assert res["status"] == "done"
    unit = res["unit"]
    assert out.is_done(unit)
    stats = json.loads((tmp_path / "o" / "stats" / f"{unit}.json").read_text())
    _check_funnel(stats)
    table = pq.read_table(tmp_path / "o" / "docs" / f"{unit}.parquet")
    assert table.schema.remove_metadata().equals(DOC_SCHEMA)
    meta = json.loads(table.schema.metadata[b"refinery"])
    assert meta["config_fingerprint"] == CFG.fingerprint()
    docs = table.to_pylist()
    assert len(docs) == res["docs"] == stats["docs_written"]
    assert docs, "the 2024 crawl sample has English pages that pass FineWeb's filters"
    assert len({d["id"] for d in docs}) == len(docs)
    for d in docs:
        assert d["lang"] == "eng_Latn" and d["lang_score"] >= 0.65 and d["text"].strip()
        assert d["warc_file"] == "crawl-2024-sample-0000.warc.gz"
    # Every drop reason is sampled, at most rejected_per_reason per (stage, reason, language) cell
    # (tests/curation/test_evidence.py checks the cells against the per-language counts).
    rej = pq.read_table(tmp_path / "o" / "rejected" / f"{unit}.parquet").to_pylist()
    cap = CFG.output.rejected_per_reason
    by_reason: dict[str, int] = {}
    by_cell: dict[tuple, int] = {}
    for r in rej:
        by_reason[r["reason"]] = by_reason.get(r["reason"], 0) + 1
        cell = (r["stage"], r["reason"], r["lang"])
        by_cell[cell] = by_cell.get(cell, 0) + 1
    assert max(by_cell.values()) <= cap
    for st in stats["stages"]:
        for reason, n in st["drops"].items():
            assert min(n, cap) <= by_reason.get(reason, 0) <= n, reason


def test_deterministic_across_runs(tmp_path, warc_dir):
    f = warc_dir / "cc-main-2020-34-sample.warc.gz"
    a, _ = _run(f, tmp_path / "a")
    b, _ = _run(f, tmp_path / "b")
    ta = pq.read_table(tmp_path / "a" / "docs" / f"{a['unit']}.parquet").to_pylist()
    tb = pq.read_table(tmp_path / "b" / "docs" / f"{b['unit']}.parquet").to_pylist()
    assert ta == tb


@pytest.mark.parametrize(
    "rel",
    [
        "quirks/ccnet-wet-no-version-line.warc.txt",
        "quirks/IAH-20080430204825-00000-blackbook-truncated.warc.gz",
        "wet-cc-main-2016-50/fragment2_no_header.wet.gz",
        "wet-cc-main-2016-50/11_bytes.txt.gz",
        "wet-cc-main-2016-50/filter_test_1.wet.gz",
    ],
)
def test_quirks_complete_with_counted_reasons(tmp_path, warc_dir, rel):
    res, _out = _run(warc_dir / rel, tmp_path / "o")
    assert res["status"] == "done", res
    stats = json.loads((tmp_path / "o" / "stats" / f"{res['unit']}.json").read_text())
    _check_funnel(stats)


def test_wet_conversions_become_documents(tmp_path, warc_dir):
    cfg = ExtractJobConfig.from_dict({"langid": {"languages": []}, "filters": {}})
    res, _ = _run(warc_dir / "wet-cc-main-2016-50" / "filter_test_1.wet.gz", tmp_path / "o", cfg)
    docs = pq.read_table(tmp_path / "o" / "docs" / f"{res['unit']}.parquet").to_pylist()
    assert docs and all(d["source_format"] == "wet" for d in docs)


def test_missing_local_file_is_a_counted_skip(tmp_path):
    res, _ = _run(tmp_path / "gone.warc.gz", tmp_path / "o")
    assert res["status"] == "done"
    stats = json.loads((tmp_path / "o" / "stats" / f"{res['unit']}.json").read_text())
    assert stats["stages"][0]["drops"] == {"file_unreadable": 1}


def test_failed_remote_download_commits_nothing(tmp_path):
    cfg = ExtractJobConfig.from_dict({"reader": {"download_retries": 1}})
    res, out = _run("http://127.0.0.1:9/none.warc.gz", tmp_path / "o", cfg)
    assert res["status"] == "failed"
    assert not out.is_done(res["unit"])
    assert not list((tmp_path / "o" / "docs").iterdir())


def test_pii_stage_scrubs_counts_and_sums_into_stats(tmp_path, warc_dir):
    from curation.pii.scrub import PII_TYPES, find_pii

    res, _ = _run(warc_dir / "crawl-2024-sample-0000.warc.gz", tmp_path / "on")
    docs = pq.read_table(tmp_path / "on" / "docs" / f"{res['unit']}.parquet").to_pylist()
    stats = json.loads((tmp_path / "on" / "stats" / f"{res['unit']}.json").read_text())
    _check_funnel(stats)
    assert [s["stage"] for s in stats["stages"]][-2:] == ["pii", "write"]
    for t in PII_TYPES:
        column_sum = sum(d["pii_counts"][t] for d in docs)
        assert stats["counters"].get(f"pii_{t}", 0) == column_sum, t
    # This capture has e-mail addresses on a kept page (4, counted by hand on the page): they are
    # replaced by the placeholder, and nothing the scrubber would still find is left in the text.
    assert sum(d["pii_counts"]["email"] for d in docs) == 4
    assert sum(d["text"].count("<EMAIL>") for d in docs) >= 4
    assert all(find_pii(d["text"]) == [] for d in docs)
    # Off: text as extracted, pii_counts null, no funnel row.
    cfg = ExtractJobConfig.from_dict({"pii": {"enabled": False}})
    res2, _ = _run(warc_dir / "crawl-2024-sample-0000.warc.gz", tmp_path / "off", cfg)
    off = pq.read_table(tmp_path / "off" / "docs" / f"{res2['unit']}.parquet").to_pylist()
    assert [d["id"] for d in off] == [d["id"] for d in docs]
    assert all(d["pii_counts"] is None for d in off)
    assert sum(d["text"].count("@") for d in off) >= 4


def test_pii_types_and_placeholders_from_config(tmp_path, warc_dir):
    cfg = ExtractJobConfig.from_dict({"pii": {"types": ["email"], "placeholders": {"email": "[mail]"}}})
    res, _ = _run(warc_dir / "crawl-2024-sample-0000.warc.gz", tmp_path / "o", cfg)
    docs = pq.read_table(tmp_path / "o" / "docs" / f"{res['unit']}.parquet").to_pylist()
    assert sum(d["text"].count("[mail]") for d in docs) == 4
    # Types not scanned are null, not 0: "not looked for" differs from "none found".
    assert all(d["pii_counts"]["phone"] is None and d["pii_counts"]["email"] is not None for d in docs)


@pytest.mark.parametrize("content", [b"", gzip.compress(b"")], ids=["zero_bytes", "empty_gzip"])
def test_empty_file_is_a_counted_drop(tmp_path, content):
    """A WARC without a single record was a done unit with no row anywhere in its funnel."""
    path = tmp_path / "x.warc.gz"
    path.write_bytes(content)
    res, _ = _run(path, tmp_path / "o")
    assert res["status"] == "done"
    stats = json.loads((tmp_path / "o" / "stats" / f"{res['unit']}.json").read_text())
    assert stats["stages"][0]["drops"] == {"empty_file": 1}
    _check_funnel(stats)
    rejected = pq.read_table(tmp_path / "o" / "rejected" / f"{res['unit']}.parquet").to_pylist()
    assert [(r["stage"], r["reason"], r["warc_file"]) for r in rejected] == [
        ("read", "empty_file", "x.warc.gz")
    ]
    assert rejected[0]["detail"] == f"{len(content)} bytes, no WARC record"


def test_funnel_per_language_adds_up_on_multilingual_pages(tmp_path, warc_dir):
    """Every language kept (`langid.languages: []`) on the multilingual CC-2020-34 sample: the per-language
    counters say how many documents of each canonical code were written (the docs/ rows agree), and their
    drops after language ID add up to what the funnel's rows after langid dropped."""
    from curation.pipeline import LANG_COUNTER
    from report.collect import language_funnel

    cfg = ExtractJobConfig.from_dict({"langid": {"languages": []}})
    res, _ = _run(warc_dir / "cc-main-2020-34-sample.warc.gz", tmp_path / "o", cfg)
    stats = json.loads((tmp_path / "o" / "stats" / f"{res['unit']}.json").read_text())
    funnel = language_funnel(stats["counters"])
    docs = pq.read_table(tmp_path / "o" / "docs" / f"{res['unit']}.parquet").to_pylist()
    written: dict[str, int] = {}
    for d in docs:
        written[d["lang"]] = written.get(d["lang"], 0) + 1
    assert {k: v["kept"] for k, v in funnel.items() if v["kept"]} == written
    assert len(funnel) >= 3, funnel  # the sample is multilingual (zh, ru, en, ...)
    assert all("_" in k and len(k) == 8 for k in funnel)  # canonical codes
    stages = Stats.from_dict(stats).stages
    after_lid = list(stages)[list(stages).index("langid") :]
    dropped_after_lid = sum(sum(stages[s].drops.values()) for s in after_lid)
    assert sum(sum(v["drops"].values()) for v in funnel.values()) == dropped_after_lid
    assert sum(v["chars"] for v in funnel.values()) == sum(len(d["text"]) for d in docs)
    assert all(k.startswith(LANG_COUNTER + "|") for k in stats["counters"] if "|" in k)
