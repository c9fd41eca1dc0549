"""Page-level reservations in `extract` (curation/optout/page.py): TDMRep headers and meta, `noai`, `noimageai`.

The pages are the real records of the shared crawl-2024-sample-0000.warc.gz (22 HTML pages of 13 hosts),
rewritten with warcio with headers added or a meta tag put in their head (`reserved_warc`, also the
input of tests/curation/test_optout_stage.py). One extract per mode (no Spark) is shared by the module.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from core.output import OutputDir
from core.stage import Document, Drop
from core.stats import Stats
from curation.config import ExtractJobConfig, OptoutConfig
from curation.optout.page import MAX_HEAD_BYTES, PageSignalStage, read_signals
from testkit.shared_data import shared_data_dir

SOURCE = "crawl-2024-sample-0000.warc.gz"
POLICY_URL = "https://kyleclo.com/tdm-policy.json"

# URL -> (headers added, meta tags put first in <head>)
RESERVATIONS: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    "https://soldaini.net/": ([("tdm-reservation", "1")], []),
    "https://kyleclo.com/research/": (
        [("TDM-Reservation", "0")],
        ['<meta name="tdm-reservation" content="1">', f"<meta content='{POLICY_URL}' name=tdm-policy>"],
    ),
    "https://joe.cat/": ([("tdm-reservation", "1")], ['<META NAME="tdm-reservation" CONTENT="0">']),
    "https://talaugust.github.io/": ([("tdm-reservation", "yes")], []),
    "https://maria-antoniak.github.io/2020/03/25/pip.html": ([("X-Robots-Tag", "noindex, noai")], []),
    "https://tomhoper.github.io/": ([], ['<meta name="robots" content="noai, noimageai">']),
    "https://www.cs.cmu.edu/~anaik/": ([("X-Robots-Tag", "noimageai")], []),
}
REMOVED = {
    "https://soldaini.net/": "tdm:header",
    "https://kyleclo.com/research/": "tdm:meta",
    "https://maria-antoniak.github.io/2020/03/25/pip.html": "noai:header",
    "https://tomhoper.github.io/": "noai:meta",
}


def reserved_warc(path: Path) -> Path:
    """The shared WARC's HTML responses, rewritten with the reservations of RESERVATIONS (warcio)."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    src = shared_data_dir() / "warc" / SOURCE
    with open(src, "rb") as f, open(path, "wb") as out:
        w = WARCWriter(out, gzip=True)
        for rec in ArchiveIterator(f):
            if rec.rec_type != "response" or rec.http_headers is None:
                continue
            url = rec.rec_headers.get_header("WARC-Target-URI")
            body = rec.content_stream().read()  # decoded: the encoding headers go
            keep = {"content-length", "transfer-encoding", "content-encoding"}
            headers = [(k, v) for k, v in rec.http_headers.headers if k.lower() not in keep]
            extra, metas = RESERVATIONS.get(url, ([], []))
            if metas:
                tags = "".join(metas).encode()
                body = re.sub(rb"(<head[^>]*>)", lambda m, t=tags: m[1] + t, body, count=1)
            http = StatusAndHeaders(rec.http_headers.statusline, headers + extra, protocol="HTTP/1.1")
            warc = {"WARC-Date": rec.rec_headers.get_header("WARC-Date")}
            w.write_record(
                w.create_warc_record(
                    url, "response", payload=io.BytesIO(body), http_headers=http, warc_headers_dict=warc
                )
            )
    return path


def run_extract(warc: Path, root: Path, *sets: str):
    from curation.pipeline import process_file

    cfg = ExtractJobConfig.load(None, ["optout.enabled=true", *sets])
    OutputDir(root).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    summary = process_file(str(warc), cfg, str(root))
    assert summary["status"] == "done", summary
    return summary


@pytest.fixture(scope="module")
def warc(tmp_path_factory) -> Path:
    return reserved_warc(tmp_path_factory.mktemp("optout_page") / "CC-MAIN-2024-10-reserved.warc.gz")


def _docs(root: Path) -> dict[str, dict]:
    rows = [r for f in sorted((root / "docs").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    return {r["url"]: r for r in rows}


def _stats(root: Path, summary) -> Stats:
    return Stats.from_dict(json.loads((root / "stats" / f"{summary['unit']}.json").read_text()))


def test_remove_mode_drops_each_reservation_before_extraction(warc, tmp_path):
    summary = run_extract(warc, tmp_path / "remove")
    stats = _stats(tmp_path / "remove", summary)
    row = stats.stages["optout_page"]
    assert dict(row.drops) == {f"optout_page:{s}": 1 for s in REMOVED.values()}
    assert row.docs_in == 22 and row.docs_out == 18
    assert stats.stages["extract"].docs_in == 18  # a reserved page is never extracted
    assert list(stats.stages)[:3] == ["read", "url_filter", "optout_page"]
    counters = {k: v for k, v in stats.counters.items() if k.startswith("optout_signal:")}
    assert counters == {
        "optout_signal:tdm:header": 1,
        "optout_signal:tdm:meta": 1,
        "optout_signal:noai:header": 1,
        "optout_signal:noai:meta": 1,
        "optout_signal:noimageai:meta": 1,
        "optout_signal:noimageai:header": 1,
        "optout_signal:tdm_invalid:header": 1,
    }
    docs = _docs(tmp_path / "remove")
    assert not set(REMOVED) & set(docs)
    # noimageai reserves images only: the text is kept, the signal is a column
    assert docs["https://www.cs.cmu.edu/~anaik/"]["optout_signals"] == ["noimageai:header"]
    # meta 0 overrides header 1; an invalid value is unset: both kept with no signal
    assert docs["https://joe.cat/"]["optout_signals"] is None
    assert docs["https://talaugust.github.io/"]["optout_signals"] is None
    rejected = pq.read_table(next((tmp_path / "remove" / "rejected").glob("*.parquet"))).to_pylist()
    sampled = {r["url"]: r for r in rejected if r["stage"] == "optout_page"}
    assert {u: r["reason"] for u, r in sampled.items()} == {u: f"optout_page:{s}" for u, s in REMOVED.items()}
    assert "tdm-reservation: 1" in sampled["https://soldaini.net/"]["detail"]
    assert summary["docs"] == len(docs)


def test_annotate_mode_keeps_the_pages_with_their_signals(warc, tmp_path):
    run_extract(warc, tmp_path / "annotate", "optout.mode=annotate")
    docs = _docs(tmp_path / "annotate")
    for url, signal in REMOVED.items():
        if url in docs:  # (a later filter may still drop a page; the ones kept carry their signal)
            assert signal in docs[url]["optout_signals"], url
    assert docs["https://kyleclo.com/research/"]["tdm_policy"] == POLICY_URL
    assert docs["https://tomhoper.github.io/"]["optout_signals"] == ["noai:meta", "noimageai:meta"]
    assert sum(1 for d in docs.values() if d["optout_signals"]) >= 4


def test_off_by_default_and_the_fingerprint_stays():
    cfg = ExtractJobConfig()
    assert not cfg.optout.enabled and "optout" not in cfg.to_dict()
    on = ExtractJobConfig.load(None, ["optout.enabled=true"])
    assert on.fingerprint() != cfg.fingerprint()
    from curation.pipeline import stage_order

    assert "optout_page" not in stage_order(cfg) and "optout_page" in stage_order(on)


def test_bad_optout_config_names_the_key():
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"optout\.mode"):
        ExtractJobConfig.load(None, ["optout.mode=delete"])


# -- the reading rules, without extraction -----------------------------------------------------------


def _html(head: str) -> bytes:
    return f"<!doctype html><html><head><title>t</title>{head}</head><body><p>x</p></body></html>".encode()


@pytest.mark.parametrize(
    ("headers", "head", "signals", "tdm"),
    [
        ((("tdm-reservation", "1"),), "", ["tdm:header"], True),
        ((("tdm-reservation", " 1 "),), "", ["tdm:header"], True),
        ((("tdm-reservation", "yes"),), "", [], None),  # protocol error: unset
        ((("tdm-reservation", "0"),), '<meta name="tdm-reservation" content="1">', ["tdm:meta"], True),
        ((("tdm-reservation", "1"),), '<meta name="tdm-reservation" content="0">', [], False),
        ((("tdm-reservation", "1"),), '<meta name="tdm-reservation" content="maybe">', ["tdm:header"], True),
        ((), "<meta name='TDM-Reservation' content=1>", ["tdm:meta"], True),
        ((("x-robots-tag", "otherbot: noai"),), "", ["noai:header"], None),
        ((("x-robots-tag", "noindex,noimageai"),), "", ["noimageai:header"], None),
        ((), '<meta content="NOAI" name="Robots">', ["noai:meta"], None),
        ((), '<meta name="googlebot" content="noai">', [], None),  # only name=robots is read
        ((), '<meta name="description" content="we say noai here">', [], None),
    ],
)
def test_read_signals(headers, head, signals, tdm):
    found = read_signals(headers, _html(head))
    assert found.signals() == signals
    assert found.tdm is tdm


def test_a_meta_after_the_head_or_past_64_kib_is_not_read():
    late = b"<html><head></head><body>" + b'<meta name="robots" content="noai">' + b"</body>"
    assert read_signals((), late).signals() == []
    far = b"<html><head>" + b" " * MAX_HEAD_BYTES + b'<meta name="robots" content="noai"></head>'
    assert read_signals((), far).signals() == []


def test_the_policy_url_keeps_its_case_and_meta_wins():
    found = read_signals(
        (("tdm-policy", "https://a.example/Header"),),
        _html('<meta name="tdm-policy" content="https://a.example/Meta.JSON">'),
    )
    assert found.tdm_policy == "https://a.example/Meta.JSON"


@pytest.mark.timeout(
    60
)  # a hang guard (~1000x the scan), not a speed claim: bench/curation/robots.py times it
def test_hostile_heads_cost_one_pass():
    unclosed = b"<html><head>" + b"<meta noai " * 6000  # 66 KB of tags that never close
    for _ in range(20):
        read_signals((), unclosed)


@pytest.mark.parametrize(
    ("noai", "tdm", "reason"), [(True, True, "tdm:header"), (True, False, "noai:meta"), (False, False, None)]
)
def test_the_config_chooses_what_is_honoured(noai, tdm, reason):
    stage = PageSignalStage(OptoutConfig(enabled=True, noai=noai, tdm_reservation=tdm))
    doc = Document(
        id="x",
        text=None,
        payload=_html('<meta name="robots" content="noai">'),
        metadata={"optout_headers": (("tdm-reservation", "1"),), "source_format": "warc"},
    )
    out = stage.process(doc)
    if reason is None:
        assert out is doc and doc.metadata["optout_signals"] == ["tdm:header", "noai:meta"]
    else:
        assert isinstance(out, Drop) and out.reason == f"optout_page:{reason}"
    annotating = PageSignalStage(OptoutConfig(enabled=True), annotate=True)
    assert annotating.process(doc) is doc  # filters.mode: annotate never drops here


def test_no_real_page_carries_a_signal():
    """The head scan over the HTML pages of two shared WARCs finds no signal (none carries one; WordPress
    themes' `.tdm-*` classes are no TDMRep). Its cost a page is bench/curation/robots.py's."""
    from curation.config import ReaderConfig
    from curation.warc.records import Page, iter_records

    pages = []
    for name in (SOURCE, "pages-aeb-181.warc.gz"):
        path = shared_data_dir() / "warc" / name
        pages += [p for p in iter_records(str(path), ReaderConfig()) if isinstance(p, Page)]
    hits = sum(bool(read_signals(p.optout_headers, p.payload).signals()) for p in pages)
    assert hits == 0 and len(pages) > 150


def test_both_readers_keep_the_same_opt_out_headers(warc):
    from curation.config import ReaderConfig
    from curation.warc.records import Page, iter_records

    def headers(engine: str) -> dict:
        items = iter_records(str(warc), ReaderConfig(engine=engine))
        return {p.url: p.optout_headers for p in items if isinstance(p, Page)}

    slow, fast = headers("warcio"), headers("fastwarc")
    assert slow == fast
    assert slow["https://kyleclo.com/research/"] == (("tdm-reservation", "0"),)
    assert slow["https://maria-antoniak.github.io/2020/03/25/pip.html"] == (
        ("x-robots-tag", "noindex, noai"),
    )
