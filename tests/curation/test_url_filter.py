"""curation/filters/url_filter.py: FineWeb's URL filter and domain blocklists, checked against datatrove's own URLFilter.

Parity: datatrove 0.10.1's URLFilter (testkit/url_filter_reference.py, offline) and ours
decide on every distinct URL of the shared WARCs, on URLs written here, and on URLs made from the
shipped lists themselves. Every disagreement must have one of the causes the stage documents
(`_cause`); an unexplained one fails the test, and all are printed (`pytest -s`).
"""

from __future__ import annotations

import ipaddress
import json
import tarfile
from collections import Counter

import pyarrow.parquet as pq
import pytest

from core.errors import ConfigError
from core.stage import Document, Drop
from core.stats import Stats
from curation.config import ExtractJobConfig, UrlFilterConfig
from curation.filters.url_filter import UrlFilter
from curation.filters.urls import UT1_CATEGORIES, datatrove_asset, normalize_host
from curation.pipeline import build_stages, process_file, stage_order
from testkit.url_filter_reference import (
    REASONS,
    datatrove_decision,
    datatrove_url_filter,
    shared_warc_urls,
)

NO_LISTS = {"ut1_categories": [], "banned_words": False, "soft_banned_words": False, "banned_subwords": False}


@pytest.fixture(scope="module")
def ours() -> UrlFilter:
    stage = UrlFilter(UrlFilterConfig())
    stage.warm_up()
    return stage


@pytest.fixture(scope="module")
def theirs():
    return datatrove_url_filter()


@pytest.fixture(scope="module")
def tld():
    from tldextract import TLDExtract

    return TLDExtract(suffix_list_urls=())


def _reason(stage: UrlFilter, url: str) -> str | None:
    drop = stage.check(url)
    return None if drop is None else drop.reason


# -- reasons ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason", "detail"),
    [
        (
            "http://www.0-1sex.com/",
            "url_filter:domain:adult",
            "host www.0-1sex.com: 0-1sex.com listed in UT1 adult",
        ),
        ("https://WWW.0-1SEX.COM./x", "url_filter:domain:adult", "0-1sex.com listed"),
        ("http://anything.xxx/", "url_filter:domain:adult", "host anything.xxx: xxx listed"),  # a listed TLD
        (
            "http://1.0.218.19/",
            "url_filter:domain:adult",
            "host 1.0.218.19: 1.0.218.19 listed",
        ),  # a listed IP
        ("http://0b1-bofa.org/bofa/", "url_filter:url:adult", "URL listed in UT1 adult"),
        ("https://example.com/free-porn-videos", "url_filter:banned_word", "word 'porn'"),
        (
            "https://example.com/sexy-webcam",
            "url_filter:soft_banned_words",
            "2 soft-banned words: 'sexy', 'webcam'",
        ),
        ("https://example.com/2Girls-1Cup/", "url_filter:banned_subword", "subword '2girls1cup'"),
        ("https://example.com/sexy-shoes", None, ""),  # one soft-banned word is under the threshold 2
        ("https://example.com/sexy/Sexy/sexy", None, ""),  # distinct words count: 'Sexy' is not 'sexy'
        ("https://example.com/PORN", None, ""),  # words keep their case, as in datatrove
        ("https://news.example.org/science/2024/05/article.html", None, ""),
    ],
)
def test_fineweb_reasons_and_details(ours, url, reason, detail):
    drop = ours.check(url)
    assert (drop.reason if drop else None) == reason
    if drop:
        assert detail in drop.detail


def test_user_blocklist_subdomains_ip_and_allowlist(tmp_path):
    (tmp_path / "spam.txt").write_text("# spam hosts\nb.example.net\n*.ads.example\n10.9.8.7\n")
    (tmp_path / "ok.txt").write_text("good.b.example.net  # a false positive\n")
    stage = UrlFilter(UrlFilterConfig(**NO_LISTS, blocklists=[str(tmp_path / "spam.txt")]))
    assert _reason(stage, "http://b.example.net/") == "url_filter:blocklist:spam"
    assert _reason(stage, "https://x.y.B.Example.NET:443/p") == "url_filter:blocklist:spam"
    assert _reason(stage, "http://ads.example/") == "url_filter:blocklist:spam"
    assert _reason(stage, "http://10.9.8.7/x") == "url_filter:blocklist:spam"
    assert _reason(stage, "http://example.net/") is None  # the parent of a listed domain
    assert _reason(stage, "http://notb.example.net/") is None
    assert _reason(stage, "http://5.10.9.8.7/") is None
    assert (
        stage.check("http://a.b.example.net/").detail == "host a.b.example.net: b.example.net listed in spam"
    )

    cfg = UrlFilterConfig(blocklists=[str(tmp_path / "spam.txt")], allowlist=[str(tmp_path / "ok.txt")])
    stage = UrlFilter(cfg)
    assert _reason(stage, "http://good.b.example.net/porn") is None  # allowlisted: no check applies
    assert _reason(stage, "http://www.good.b.example.net/") is None
    assert _reason(stage, "http://bad.b.example.net/") == "url_filter:blocklist:spam"
    assert stage.take_counters() == Counter({"url_filter:allowlisted": 2})


def test_page_without_url_or_readable_host_is_counted():
    stage = UrlFilter(UrlFilterConfig(**{**NO_LISTS, "banned_words": True}))
    doc = Document(id="d", text=None, metadata={})
    assert stage.process(doc) is doc
    bad = "http://" + "ü" * 70 + ".com/porn"  # a label over 63 characters: no IDNA form
    assert normalize_host(bad) is None
    assert stage.check(bad).reason == "url_filter:banned_word"  # the word checks still apply
    assert stage.take_counters() == Counter({"url_filter:no_url": 1, "url_filter:bad_host": 1})


def test_every_check_can_be_turned_off():
    stage = UrlFilter(UrlFilterConfig(**NO_LISTS))
    urls = [
        "http://www.0-1sex.com/",
        "http://0b1-bofa.org/bofa/",
        "https://e.com/porn",
        "https://e.com/sexy-webcam",
    ]
    assert [stage.check(u) for u in urls] == [None] * 4


# -- parity with datatrove ------------------------------------------------------------------------


def _cause(
    stage: UrlFilter, block, tld, url: str, ours_drop: Drop | None, theirs_reason: str | None
) -> str | None:
    """Which documented difference (curation/filters/url_filter.py docstring) explains a disagreement; None: none.

    A page both drop for different reasons is explained when ours matched a list datatrove does
    not match (it then drops the page for a later check: its URL list or a word).
    """
    if ours_drop is None:
        return None  # datatrove drops what we keep: nothing documented explains it
    kind, _, name = ours_drop.reason.removeprefix("url_filter:").partition(":")
    theirs_rank = {"domain": 0, "subdomain": 0, "url": 1}.get(theirs_reason or "", 2)
    if theirs_reason is not None and {"domain": 0, "blocklist": 0, "url": 1}.get(kind, 2) >= theirs_rank:
        return None  # ours did not match an earlier list than datatrove (domains, then URLs, then words)
    if kind == "url":
        urls = stage.categories[name][1]
        return "URL-list entry matched without the URL's scheme" if url not in urls else None
    if kind not in ("domain", "blocklist"):
        return None
    host = normalize_host(url)
    sets = {c: d for c, (d, _) in stage.categories.items()} if kind == "domain" else stage.blocklists
    listed = sets[name].match(host)
    r = tld(url)
    if _is_ip(host):
        return "IP host: tldextract gives it no domain"
    if r.fqdn != host:
        return "host spelled differently (case, IDNA, trailing dot): datatrove matches it as written"
    if listed not in block.block_listed_domains:
        return "list entry spelled differently (IDNA): datatrove matches it as written"
    if listed not in (r.top_domain_under_public_suffix, r.fqdn):
        return "listed domain is neither the registered domain nor the host (a TLD, or one between)"
    return None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _compare(
    stage: UrlFilter, block, tld, urls: list[str]
) -> tuple[int, list[tuple[str, str, str, str | None]]]:
    """(URLs both keep or both drop, [(url, ours, theirs, cause)] for each other decision or drop reason)."""
    agree, diffs = 0, []
    for url in urls:
        mine, other = stage.check(url), datatrove_decision(block, url)
        agree += (mine is None) == (other is None)
        if (mine is None and other is None) or (mine and other and mine.reason.startswith(REASONS[other])):
            continue
        diffs.append(
            (
                url,
                mine.reason if mine else "keep",
                other or "keep",
                _cause(stage, block, tld, url, mine, other),
            )
        )
    return agree, diffs


def _show(title: str, diffs) -> None:
    print(f"\n{title}: {len(diffs)} disagreements")
    for url, mine, other, cause in diffs:
        print(f"  {url}\n    ours {mine}, datatrove {other}: {cause or 'UNEXPLAINED'}")


def test_parity_on_every_shared_warc_url(ours, theirs, tld):
    urls, _unreadable = shared_warc_urls()
    assert len(urls) > 1000
    agree, diffs = _compare(ours, theirs, tld, urls)
    _show("shared WARC URLs", diffs)
    assert agree / len(urls) >= 0.999, diffs
    assert all(cause for *_, cause in diffs), diffs
    dropped = [u for u in urls if datatrove_decision(theirs, u) is not None]
    assert dropped, "the shared WARCs hold pages of hosts on the list (gay.ch, lacuarta.com, ...)"


# URLs written for the test, with a user blocklist given to both filters (datatrove as extra_domains).
WRITTEN_BLOCKLIST = "b.example.net\n10.9.8.7\nbücher.de\n"
WRITTEN = [
    "http://www.0-1sex.com/",
    "http://0-1sex.com/",
    "https://en.wikipedia.org/wiki/Adult",
    "http://b.example.net/x",
    "http://www.b.example.net/x",  # registered domain example.net, host www.b.example.net: ours only
    "http://a.b.example.net/x",
    "http://10.9.8.7/x",  # an IP host: ours only
    "http://1.0.218.19/",  # an IP on the UT1 list: ours only
    "http://www.xn--bcher-kva.de/",  # listed as bücher.de: normalized by ours, as written by datatrove
    "http://WWW.0-1SEX.COM/",  # case: ours only
    "http://anything.adult/",  # a TLD on the UT1 list: ours only
    "http://videos.xxx/",  # also listed, but 'xxx' is a banned word: datatrove drops it too
    "http://0b1-bofa.org/bofa/",  # URL list without scheme: ours only
    "https://example.com/free-porn-videos",
    "https://example.com/PORN",
    "https://example.com/sexy-webcam",
    "https://example.com/sexy-shoes",
    "https://example.com/2Girls-1Cup/",
    "https://example.com/essex-county-news",
    "https://www.nature.com/articles/s41586-024-07421-0",
]
WRITTEN_DISAGREEMENTS = {
    "http://www.b.example.net/x": "listed domain is neither the registered domain nor the host (a TLD, or one between)",
    "http://a.b.example.net/x": "listed domain is neither the registered domain nor the host (a TLD, or one between)",
    "http://10.9.8.7/x": "IP host: tldextract gives it no domain",
    "http://1.0.218.19/": "IP host: tldextract gives it no domain",
    "http://www.xn--bcher-kva.de/": "list entry spelled differently (IDNA): datatrove matches it as written",
    "http://WWW.0-1SEX.COM/": "host spelled differently (case, IDNA, trailing dot): datatrove matches it as written",
    "http://anything.adult/": "listed domain is neither the registered domain nor the host (a TLD, or one between)",
    "http://videos.xxx/": "listed domain is neither the registered domain nor the host (a TLD, or one between)",
    "http://0b1-bofa.org/bofa/": "URL-list entry matched without the URL's scheme",
}


def test_parity_on_written_urls_with_a_user_blocklist(tld, tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text(WRITTEN_BLOCKLIST, encoding="utf-8")
    stage = UrlFilter(UrlFilterConfig(blocklists=[str(path)]))
    block = datatrove_url_filter(extra_domains=WRITTEN_BLOCKLIST.split())
    agree, diffs = _compare(stage, block, tld, WRITTEN)
    _show("written URLs", diffs)
    assert {url: cause for url, _, _, cause in diffs} == WRITTEN_DISAGREEMENTS
    assert agree == len(WRITTEN) - len(WRITTEN_DISAGREEMENTS) + 1  # videos.xxx: both drop, another reason


def test_parity_on_urls_made_from_the_shipped_lists(ours, theirs, tld):
    """Every UT1 URL entry behind http://, and every 500th listed domain with and without `www.`:
    pages both filters should drop, where the documented differences show up at scale."""
    with (
        datatrove_asset(UT1_CATEGORIES["adult"]).open("rb") as raw,
        tarfile.open(fileobj=raw, mode="r:gz") as tar,
    ):
        domains = tar.extractfile("domains").read().decode().split()[::500]  # type: ignore[union-attr]
        entries = tar.extractfile("urls").read().decode().split()  # type: ignore[union-attr]
    www = [f"http://www.{d}/" for d in domains if not _is_ip(d)]  # `www.1.2.3.4` is no host
    urls = [f"http://{e}" for e in entries] + [f"http://{d}/" for d in domains] + www
    agree, diffs = _compare(ours, theirs, tld, urls)
    causes = Counter(cause for *_, cause in diffs)
    print(f"\nshipped-list URLs: {len(urls)}, agree {agree}, disagreements by cause: {dict(causes)}")
    assert None not in causes, [d for d in diffs if d[3] is None][:20]
    assert all(_reason(ours, u) for u in urls)  # ours drops every one of them


# -- config, fingerprint, pipeline ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"ut1_categories": ["gambling"]},
            r"url_filter\.ut1_categories: unknown category 'gambling'; .* ships: adult",
        ),
        ({"ut1_categories": ["adult", "adult"]}, r"url_filter\.ut1_categories: a category is named twice"),
        ({"blocklists": ["missing.txt"]}, r"url_filter\.blocklists\[0\]: no such file 'missing.txt'"),
        (
            {"blocklists": ["BAD"]},
            r"url_filter\.blocklists\[0\]: .*bad.txt: line 2: 'http://x.example/a' is not a domain",
        ),
        ({"blocklists": ["A", "A2"]}, r"url_filter\.blocklists\[1\]: .* have one name 'a'"),
        ({"allowlist": ["missing.txt"]}, r"url_filter\.allowlist\[0\]: no such file"),
        ({"soft_word_threshold": 0}, r"url_filter\.soft_word_threshold must be > 0"),
        ({"blocklist": []}, r"unknown key url_filter\.blocklist"),
    ],
)
def test_config_errors_name_the_key_at_load(tmp_path, monkeypatch, section, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("ok.example\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("ok.example\n")
    (tmp_path / "bad.txt").write_text("ok.example\nhttp://x.example/a\n")
    paths = {"BAD": "bad.txt", "A": "a.txt", "A2": "sub/a.txt"}
    for key in ("blocklists", "allowlist"):
        if key in section:
            section = {**section, key: [paths.get(p, p) for p in section[key]]}
    cfg = tmp_path / "extract.yaml"
    cfg.write_text(json.dumps({"url_filter": section}))
    with pytest.raises(ConfigError, match=message) as e:
        ExtractJobConfig.load(cfg)
    assert str(e.value).startswith(f"{cfg}: ")


def test_fingerprint_names_the_blocklist_content(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("a.example\n")
    cfg = ExtractJobConfig.from_dict({"url_filter": {"blocklists": [str(path)]}})
    before = cfg.fingerprint()
    path.write_text("a.example\nb.example\n")
    assert cfg.fingerprint() != before
    assert ExtractJobConfig().fingerprint() not in (before, cfg.fingerprint())


def test_url_filter_is_the_first_stage_and_can_be_disabled():
    cfg = ExtractJobConfig.from_dict({"url_filter": NO_LISTS, "pii": {"enabled": False}})
    first_on_html = "prelid" if cfg.extract.cascade else "extract"  # the cascade's check precedes extraction
    assert stage_order(cfg)[:3] == ["read", "url_filter", first_on_html]
    assert [s.name for s in build_stages(cfg)][:2] == ["url_filter", first_on_html]
    off = ExtractJobConfig.from_dict({"url_filter": {"enabled": False}})
    assert "url_filter" not in stage_order(off)


def _blocked_pages_run(tmp_path, warc_dir, run) -> tuple[dict, list[dict], list[dict]]:
    """A blocklist naming github.io (4 hosts of the 2024 crawl sample): (funnel rows, docs, rejected)."""
    lst = tmp_path / "academic.txt"
    lst.write_text("# every GitHub Pages site\ngithub.io\n")
    cfg = tmp_path / "extract.yaml"
    cfg.write_text(json.dumps({"url_filter": {"blocklists": [str(lst)]}}))
    out = tmp_path / "out"
    run(str(warc_dir / "crawl-2024-sample-0000.warc.gz"), str(out), cfg)
    (unit_stats,) = (out / "stats").glob("*.json")  # one input file: one unit
    rows = dict(Stats.from_dict(json.loads(unit_stats.read_text())).stages)
    return rows, pq.read_table(out / "docs").to_pylist(), pq.read_table(out / "rejected").to_pylist()


def _check_blocked(rows, docs, rejected, warc_dir) -> None:
    from curation.config import ReaderConfig
    from curation.warc.records import Page, iter_records

    pages = [
        p
        for p in iter_records(warc_dir / "crawl-2024-sample-0000.warc.gz", ReaderConfig())
        if isinstance(p, Page)
    ]
    github = {p.url for p in pages if normalize_host(p.url).endswith(".github.io")}
    assert len(github) >= 2, "the sample has pages of several github.io hosts"
    reason = "url_filter:blocklist:academic"
    after = list(rows)[2]  # `prelid` with the cascade (extract.cascade), else `extract`
    assert list(rows)[:2] == ["read", "url_filter"] and after in ("prelid", "extract")
    assert rows["url_filter"].drops == Counter({reason: len(github)})
    assert rows[after].docs_in == rows["read"].docs_out - len(github)  # blocked pages were not extracted
    assert not github & {d["url"] for d in docs}
    blocked = [r for r in rejected if r["reason"] == reason]
    assert {r["url"] for r in blocked} == github
    assert all(r["stage"] == "url_filter" and "github.io listed in academic" in r["detail"] for r in blocked)


def test_blocked_pages_skip_extraction_without_spark(tmp_path, warc_dir):
    from core.output import OutputDir

    def run(uri, out, cfg_path):
        cfg = ExtractJobConfig.load(cfg_path)
        OutputDir(out).prepare("extract", cfg.to_dict(), cfg.fingerprint())
        assert process_file(uri, cfg, out)["status"] == "done"

    _check_blocked(*_blocked_pages_run(tmp_path, warc_dir, run), warc_dir)


@pytest.mark.spark
def test_extract_cli_with_a_user_blocklist(tmp_path, warc_dir, monkeypatch):
    """`python -m curation extract --config` on Spark: blocked pages in rejected/ with the reason, not in docs/."""
    import sys

    from curation.cli import main

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)

    def run(uri, out, cfg_path):
        args = ["extract", "--input", uri, "--output", out, "--config", str(cfg_path), "--master", "local[1]"]
        assert main([*args, "--no-progress"]) == 0

    _check_blocked(*_blocked_pages_run(tmp_path, warc_dir, run), warc_dir)
