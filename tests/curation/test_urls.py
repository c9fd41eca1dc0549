"""curation/filters/urls.py: host normalization, domain-file lines, the hashed domain set, datatrove's shipped lists."""

from __future__ import annotations

import random
import re
import tarfile

import numpy as np
import pytest

from curation.filters.urls import (
    UT1_CATEGORIES,
    DomainSet,
    datatrove_asset,
    load_category,
    load_word_list,
    normalize_host,
    normalize_word,
    parse_domain_file,
    parse_domain_line,
    url_words,
)


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://www.example.com/a?b#c", "www.example.com"),
        ("HTTP://WWW.Example.COM./x", "www.example.com"),  # case, trailing dot
        ("http://example.com..", "example.com"),
        ("http://user:pass@a.b.example.co.uk:8080/x", "a.b.example.co.uk"),  # userinfo, port
        ("http://a@b@c.example.org/", "c.example.org"),  # the last @ ends the userinfo
        ("http://bücher.de/", "xn--bcher-kva.de"),  # IDNA
        ("http://ＢÜCHER。de/", "xn--bcher-kva.de"),  # full-width letters and ideographic dot (nameprep)
        ("http://xn--bcher-kva.de/", "xn--bcher-kva.de"),
        ("http://%65xample.com/", "example.com"),  # percent-escape in the host
        ("http://192.168.0.1:80/", "192.168.0.1"),
        ("http://[2001:DB8:0:0::1]:443/x", "2001:db8::1"),  # IPv6: one spelling
        ("http://[not-an-ip]/", None),
        ("//example.com/path", "example.com"),  # scheme-relative
        ("example.com/path?q", "example.com"),  # UT1 URL-list form, no scheme
        ("http://a.com\\evil.com/", "a.com"),  # a backslash ends the host, as in browsers
        ("http:///path", None),
        ("", None),
    ],
)
def test_normalize_host(url, host):
    assert normalize_host(url) == host


@pytest.mark.parametrize(
    ("line", "domain"),
    [
        ("example.com\n", "example.com"),
        ("  Example.COM.  # a comment\n", "example.com"),
        ("*.example.com", "example.com"),
        (".example.com", "example.com"),
        ("0.0.0.0 ads.example.net", "ads.example.net"),  # hosts-file line
        ("127.0.0.1\tads.example.net", "ads.example.net"),
        ("bücher.de", "xn--bcher-kva.de"),
        ("10.1.2.3", "10.1.2.3"),
        ("2001:db8:0:0::1", "2001:db8::1"),
        ("under_score.example", "under_score.example"),
        ("xxx", "xxx"),
        ("# only a comment", None),
        ("   \n", None),
    ],
)
def test_parse_domain_line(line, domain):
    assert parse_domain_line(line) == domain


@pytest.mark.parametrize(
    "line",
    [
        "http://example.com/",
        "example.com/path",
        "example.com:8080",
        "a.com b.com",
        "user@example.com",
        "exa mple",
    ],
)
def test_parse_domain_line_refuses_what_is_not_one_domain(line):
    with pytest.raises(ValueError, match="domain"):
        parse_domain_line(line)


def test_parse_domain_file_names_the_bad_line(tmp_path):
    p = tmp_path / "list.txt"
    p.write_text("# mine\nok.example\n\nhttp://bad.example/x\n")
    with pytest.raises(ValueError, match=r"line 4: 'http://bad.example/x' is not a domain"):
        parse_domain_file(str(p))
    p.write_text("# mine\nok.example\n\n*.two.example # why\n")
    assert parse_domain_file(str(p)) == ["ok.example", "two.example"]


def test_domain_set_matches_host_and_parent_domains_on_label_boundaries():
    s = DomainSet.from_domains(
        ["example.com", "b.example.org", "xxx", "10.0.0.1", "2001:db8::1", "xn--p1ai9"]
    )
    assert s.match("example.com") == "example.com"
    assert s.match("a.b.example.com") == "example.com"
    assert s.match("a.b.example.org") == "b.example.org"
    assert s.match("b.example.org") == "b.example.org"
    assert s.match("example.org") is None  # a parent of a listed domain is not listed
    assert s.match("notexample.com") is None  # a suffix that is not a whole label
    assert s.match("example.com.evil.net") is None
    assert s.match("anything.xxx") == "xxx"  # a listed TLD
    assert s.match("10.0.0.1") == "10.0.0.1"
    assert s.match("5.10.0.0.1") is None  # an IP has no parent domains
    assert s.match("0.1") is None
    assert s.match("w.xn--p1ai9") == "xn--p1ai9"  # a last label ending in a digit is not an IP
    assert s.match("2001:db8::1") == "2001:db8::1"
    assert DomainSet.from_domains([]).match("example.com") is None
    assert s.match("") is None


def test_domain_set_agrees_with_a_python_set_on_200k_random_domains():
    """The bitmap and the sorted hashes answer members and non-members as a plain set does."""
    rng = random.Random(7)
    names = [
        "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789-", k=rng.randint(1, 12)))
        for _ in range(200_000)
    ]
    tlds = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 4))) for _ in range(200_000)]
    members = {f"{a}.{b}" for a, b in zip(names, tlds)}
    s = DomainSet.from_domains(members)
    assert len(s) == len(members)
    assert all(s.match(d) == d for d in members)
    assert all(s.match(f"w.{d}") == d for d in list(members)[:20_000])
    others = {f"{a}.{b}" for a, b in zip(names[::-1], tlds)} - members
    assert all(s.match(d) is None or d.split(".", 1)[1] in members for d in others)


def test_shipped_ut1_list_is_already_normalized_and_loads_whole():
    """load_category hashes the shipped lines as they are: that is right only if each is a normalized host."""
    with (
        datatrove_asset(UT1_CATEGORIES["adult"]).open("rb") as raw,
        tarfile.open(fileobj=raw, mode="r:gz") as tar,
    ):
        assert sorted(tar.getnames()) == ["domains", "urls"]
        domains = tar.extractfile("domains").read()  # type: ignore[union-attr]
        urls = tar.extractfile("urls").read().decode()  # type: ignore[union-attr]
    lines = domains.split(b"\n")
    assert re.fullmatch(rb"[a-z0-9._\-\n]*", domains)  # lowercase ASCII (punycode), no space/comment
    assert not any(d.endswith(b".") or d.startswith(b".") for d in lines)
    loaded_domains, loaded_urls = load_category("adult")
    assert len(loaded_domains) == len({d for d in lines if d})
    assert loaded_domains.match("0-1sex.com") == "0-1sex.com"  # the first line of the file
    assert len(loaded_urls) == len({u.strip() for u in urls.split("\n") if u.strip()})


def test_ut1_cache_gives_the_built_set_and_survives_a_corrupt_file(tmp_path, monkeypatch, caplog):
    """The per-user cache of the built UT1 set (one per worker start-up saved) holds the same set:
    same hashes, bitmap and URLs as a build from the tarball; a corrupt cache file is rebuilt."""
    monkeypatch.setenv("REFINERY_CACHE_DIR", str(tmp_path))
    build = load_category.__wrapped__  # the per-process @cache bypassed: each call loads
    built_domains, built_urls = build("adult")
    (cached,) = (tmp_path / "url_filter").glob("ut1-adult-*.npz")
    read_domains, read_urls = build("adult")
    for k, v in built_domains.arrays().items():
        assert np.array_equal(read_domains.arrays()[k], v), k
    assert read_urls == built_urls and len(read_domains) == len(built_domains)
    assert read_domains.match("www.0-1sex.com") == "0-1sex.com" and read_domains.match("example.org") is None
    cached.write_bytes(cached.read_bytes()[:1000])  # truncated, as by a full disk
    with caplog.at_level("WARNING"):
        again, _ = build("adult")
    assert "unreadable" in caplog.text
    assert np.array_equal(again.arrays()["sorted"], built_domains.arrays()["sorted"])
    assert cached.stat().st_size > 1000  # rewritten whole


def test_word_lists_as_datatrove_normalizes_them():
    assert b"porn" in load_word_list("banned_words")
    assert b"ass" not in load_word_list("banned_words")  # '#ass' is a disabled entry of the file
    assert b"2girls1cup" in load_word_list("banned_subwords")  # "2 girls 1 cup"
    assert b"webcam" in load_word_list("soft_banned_words")
    assert normalize_word(b"Hot-Chat/2 Girls") == b"hotchat2girls"
    assert url_words(b"http://Ex.com/a-PORN_b?x=1") == {
        b"http",
        b"Ex",
        b"com",
        b"a",
        b"PORN",
        b"b",
        b"x",
        b"1",
    }


def test_words_on_bytes_equal_datatroves_regex_on_str(warc_dir):
    """The bytes fast path against datatrove's own `normalize` and `normalizer.split` (its reference)."""
    from datatrove.pipeline.filters.url_filter import normalize, normalizer

    from testkit.url_filter_reference import shared_warc_urls

    urls = shared_warc_urls()[0] + [
        "http://bücher.de/Straße/ÆØÅ-sex_Cam/",  # non-ASCII letters are separators in both
        "https://例え.jp/パス?q=日本語&x=PORN",
        "http://x.com/%F0%9F%98%80/😀-emoji",
        "",
        "/-/",
    ]
    for url in urls:
        raw = url.encode("utf-8")
        assert {w.decode() for w in url_words(raw)} == set(normalizer.split(url)) - {""}, url
        assert normalize_word(raw).decode() == normalize(url), url
