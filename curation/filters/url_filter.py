"""The first stage of `extract`: FineWeb's URL filter plus the user's domain blocklists, before extraction.

A page is judged on its URL alone, so a blocked page is never decoded or extracted (the funnel's
`extract` row receives only what this stage kept). It re-implements datatrove 0.10.1's `URLFilter`
(datatrove/pipeline/filters/url_filter.py, the filter FineWeb ran) with the lists read from the
installed datatrove package (curation/filters/urls.py), and extends it with domain files of the user's.
Checks, first match wins:

    allowlist        a host on an allowlist file (or under a listed domain) is kept: no check below
    domain:<cat>     the host or a parent domain is on the UT1 category's domain list
    blocklist:<stem> the host or a parent domain is on the user's file <stem>.txt
    url:<cat>        the URL is on the category's URL list
    banned_word      a word of the URL is a FineWeb hard-banned word ("porn")
    soft_banned_words  at least `soft_word_threshold` (2) distinct soft-banned words ("sexy", "webcam")
    banned_subword   a banned phrase is a substring of the URL squeezed to lowercase alphanumerics
                     ("2 girls 1 cup" matches ".../2Girls-1Cup/"); Aho-Corasick, as datatrove

Drop reasons are `url_filter:<check>` as above; the detail names what matched (the listed domain,
the words). Only soft_banned_words compares a count with a threshold: its Drop carries metric
`soft_banned_words`, value, op `>=` and threshold (a kept URL records its count); the list matches
carry none. A page without a URL is kept and counted (`url_filter:no_url`), one whose host cannot
be read (`http://%ff/`) has only the word checks applied and is counted (`url_filter:bad_host`).

Where it differs from datatrove, on purpose (tests/curation/test_url_filter.py lists each
difference with its cause, and checks that every real URL of the shared WARCs gets the same
decision):
- domains are matched on the normalized host (curation/filters/urls.py: lowercase, IDNA, no port or
  trailing dot) and on every parent domain. datatrove matches tldextract's registered domain and
  the full host as written, so it misses `Example.COM`, `bücher.de` listed as `xn--bcher-kva.de`,
  IP hosts (tldextract gives them no domain: 6,390 IPs of the list never match), TLDs on the list
  (`xxx`, `porn`, `sex`, `adult`) and a listed domain between the two (`b.example.com` for host
  `a.b.example.com`).
- a URL-list entry is also matched without the URL's scheme: the shipped list has no scheme
  (`host/path`), so datatrove's exact check of the whole URL never matches a crawled one.
Kept as datatrove does it: word checks see the URL's words with their case (`/PORN/` is not the
banned word `porn`; only the subword check lowercases).
"""

from __future__ import annotations

from pathlib import Path

from core.stage import Document, DocumentStage, Drop
from curation.config import UrlFilterConfig
from curation.filters.urls import (
    DomainSet,
    load_category,
    load_word_list,
    normalize_host,
    normalize_word,
    parse_domain_file,
    url_words,
)

__all__ = ["UrlFilter"]


class UrlFilter(DocumentStage):
    """FineWeb's URL filter and the user's domain lists: one decision per URL (`check`)."""

    name = "url_filter"

    def __init__(self, cfg: UrlFilterConfig) -> None:
        self.cfg = cfg
        self._loaded = False

    def warm_up(self) -> None:
        """Load the lists once per worker process (the UT1 list: ~2 s, 67 MB, shared by configs)."""
        if self._loaded:
            return
        import ahocorasick

        cfg = self.cfg
        self.allow = _file_sets(cfg.allowlist)
        self.categories = {c: load_category(c) for c in cfg.ut1_categories}
        self.blocklists = _file_sets(cfg.blocklists)
        self.banned = load_word_list("banned_words") if cfg.banned_words else frozenset()
        self.soft = load_word_list("soft_banned_words") if cfg.soft_banned_words else frozenset()
        self.subwords = None
        if cfg.banned_subwords:
            self.subwords = ahocorasick.Automaton(ahocorasick.STORE_ANY)
            for w in map(bytes.decode, load_word_list("banned_subwords")):
                self.subwords.add_word(w, w)
            self.subwords.make_automaton()
        self._loaded = True

    def process(self, doc: Document) -> Document | Drop:
        url = doc.metadata.get("url")
        if not url:
            self.count("url_filter:no_url")
            return doc
        drop = self.check(url)
        return doc if drop is None else drop

    def check(self, url: str) -> Drop | None:
        """The drop `url` gets, or None when it is kept."""
        self.warm_up()
        host = normalize_host(url)
        if host is None:
            self.count("url_filter:bad_host")
        else:
            drop = self._check_host(host)
            if drop is not None:
                return None if drop is _ALLOWED else drop
        for cat, (_, urls) in self.categories.items():
            if url in urls or url.partition("://")[2] in urls:
                return Drop(f"url_filter:url:{cat}", f"URL listed in UT1 {cat}")
        return self._check_words(url)

    def _check_host(self, host: str) -> Drop | None:
        for domains in self.allow.values():
            if domains.match(host) is not None:
                self.count("url_filter:allowlisted")
                return _ALLOWED
        for cat, (domains, _) in self.categories.items():
            hit = domains.match(host)
            if hit is not None:
                return Drop(f"url_filter:domain:{cat}", f"host {host}: {hit} listed in UT1 {cat}")
        for stem, domains in self.blocklists.items():
            hit = domains.match(host)
            if hit is not None:
                return Drop(f"url_filter:blocklist:{stem}", f"host {host}: {hit} listed in {stem}")
        return None

    def _check_words(self, url: str) -> Drop | None:
        raw = url.encode("utf-8", "surrogatepass")
        words = url_words(raw)
        if not self.banned.isdisjoint(words):
            return Drop("url_filter:banned_word", f"word {min(self.banned & words).decode()!r}")
        if self.soft:
            soft = self.soft & words
            if len(soft) >= self.cfg.soft_word_threshold:
                shown = ", ".join(repr(w.decode()) for w in sorted(soft))
                return Drop(
                    "url_filter:soft_banned_words",
                    f"{len(soft)} soft-banned words: {shown}",
                    metric="soft_banned_words",
                    value=len(soft),
                    threshold=self.cfg.soft_word_threshold,
                    op=">=",
                )
            self.measure("soft_banned_words", len(soft))
        if self.subwords is not None:
            hit = next(self.subwords.iter(normalize_word(raw).decode("ascii")), None)
            if hit is not None:
                return Drop("url_filter:banned_subword", f"subword {hit[1]!r}")
        return None


_ALLOWED = Drop("url_filter:allowlisted")
"""Sentinel of `_check_host`: the host is allowlisted (never returned from `check`)."""


def _file_sets(paths: tuple[str, ...]) -> dict[str, DomainSet]:
    """File stem -> its domains (stems are unique: the config refuses two files with one stem)."""
    return {Path(p).stem: DomainSet.from_domains(parse_domain_file(p)) for p in paths}
