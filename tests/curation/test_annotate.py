"""`filters.mode: annotate`: every document a filter would drop is written with its reason, and
selecting `drop_reason: null` gives back exactly what drop mode writes (same ids, same texts)."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from core.output import OutputDir
from core.selectors import parse_selectors, selection_mask
from curation.config import ExtractJobConfig
from curation.pipeline import process_file
from curation.schema import DOC_SCHEMA

# Annotate mode runs no cascade (it writes the pages langid would drop, so every page is extracted):
# its funnel is compared with drop mode's full path. The default (cascaded) drop mode keeps the same
# documents on this file too (measured by bench/curation/cascade_agreement.py at 2d562b9, docs/extract.md: identical kept sets on every shared WARC).
DROP = ExtractJobConfig.load(None, ["extract.cascade=false"])
CASCADED = ExtractJobConfig()
ANNOTATE = ExtractJobConfig.load(None, ["filters.mode=annotate"])


def _run(uri, root, cfg):
    OutputDir(root).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    res = process_file(str(uri), cfg, str(root))
    assert res["status"] == "done", res
    unit = res["unit"]
    docs = pq.read_table(root / "docs" / f"{unit}.parquet")
    stats = json.loads((root / "stats" / f"{unit}.json").read_text())
    rejected = pq.read_table(root / "rejected" / f"{unit}.parquet").to_pylist()
    return docs, stats, rejected


def test_annotate_keeps_every_filtered_document_and_selects_back_to_drop_mode(tmp_path, warc_dir):
    # a real crawl sample: language ID drops most pages, the filters some of the rest
    uri = warc_dir / "crawl-2024-sample-0000.warc.gz"
    dropped, d_stats, d_rej = _run(uri, tmp_path / "drop", DROP)
    annotated, a_stats, a_rej = _run(uri, tmp_path / "annotate", ANNOTATE)

    # drop mode's row is unchanged; annotate mode adds the two columns and the evidence map
    assert dropped.schema.remove_metadata().equals(DOC_SCHEMA)
    assert annotated.schema.names == [*DOC_SCHEMA.names, "drop_stage", "drop_reason", "evidence"]

    mask, _ = selection_mask(annotated, parse_selectors({"drop_reason": None}))
    kept = annotated.filter(mask)
    assert kept.column("id").to_pylist() == dropped.column("id").to_pylist()
    assert kept.column("text").to_pylist() == dropped.column("text").to_pylist()
    assert kept.drop(["drop_stage", "drop_reason", "evidence"]).to_pylist() == dropped.to_pylist()
    cascaded, c_stats, _ = _run(uri, tmp_path / "cascaded", CASCADED)
    assert "prelid" in [st["stage"] for st in c_stats["stages"]]
    assert cascaded.column("text").to_pylist() == dropped.column("text").to_pylist()

    # the funnel and the rejected sample say exactly what drop mode says
    def counts(stats):  # everything but the seconds, which are measured
        return [{k: v for k, v in st.items() if k != "seconds"} for st in stats["stages"]]

    assert counts(a_stats) == counts(d_stats)
    assert a_rej == d_rej
    would_drop = {(st["stage"], reason): n for st in d_stats["stages"] for reason, n in st["drops"].items()}
    rows = annotated.filter(pc.invert(mask)).to_pylist()
    got: dict[tuple[str, str], int] = {}
    for r in rows:
        got[(r["drop_stage"], r["drop_reason"])] = got.get((r["drop_stage"], r["drop_reason"]), 0) + 1
    # every drop by language ID or a filter is a written row; reading, URL filter, extraction still drop
    annotatable = {k: n for k, n in would_drop.items() if k[0] == "langid" or k[0].startswith("filter:")}
    assert annotatable, "the sample has pages that language ID and the filters drop"
    assert got == annotatable
    assert a_stats["counters"]["annotated_written"] == len(rows)
    # the would-be-dropped pages are written as every page is: language set, PII scrubbed
    for r in rows:
        assert r["lang"] is not None and r["pii_counts"] is not None and r["text"].strip()

    # evidence (issue 46): a kept document carries the value of every rule it passed, language ID's
    # probability among them; one annotated as dropped carries the failing rule's value, the same
    # value its rejected row shows against the threshold
    for d in kept.to_pylist():
        ev = dict(d["evidence"])
        assert ev["langid/lang_score"] == pytest.approx(d["lang_score"], abs=1e-6)
        assert (
            ev["filter:gopher_quality/stop_words"] >= 2
            and ev["filter:fineweb_quality/line_punct_ratio"] >= 0.12
        )
    sampled = {r["id"]: r for r in a_rej}
    checked = 0
    for r in rows:
        row = sampled.get(r["id"])
        if row is not None and row["metric"] is not None:
            assert dict(r["evidence"])[f"{r['drop_stage']}/{row['metric']}"] == row["value"]
            checked += 1
    assert checked


def test_annotate_mode_is_refused_unless_known_and_drop_keeps_its_fingerprint():

    from core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"filters\.mode"):
        ExtractJobConfig.load(None, ["filters.mode=mark"])
    # the default mode is not part of the fingerprint: folders made before it existed still resume
    assert "mode" not in DROP.to_dict()["filters"]
    assert ANNOTATE.fingerprint() != DROP.fingerprint()
