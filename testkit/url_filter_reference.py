"""datatrove's own URLFilter (what FineWeb ran), offline, and the real URLs of the shared WARCs: tests and bench.

tldextract, which datatrove's filter uses for the registered domain, fetches the public suffix list
on its first call unless told not to; here it reads the snapshot in its wheel
(`TLDExtract(suffix_list_urls=())`), so the reference runs with no network, as tests must.
datatrove unpacks its blocklist tarball into the Hugging Face assets cache on first use.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path

from testkit.shared_data import shared_data_dir

# datatrove reason -> ours (curation/filters/url_filter.py), for a page both drop.
REASONS = {
    "domain": ("url_filter:domain:", "url_filter:blocklist:"),
    "subdomain": ("url_filter:domain:", "url_filter:blocklist:"),
    "url": ("url_filter:url:",),
    "hard_blacklisted": ("url_filter:banned_word",),
    "soft_blacklisted": ("url_filter:soft_banned_words",),
    "blacklisted_subword": ("url_filter:banned_subword",),
}


def datatrove_url_filter(extra_domains: Iterable[str] = ()):
    """datatrove's URLFilter with FineWeb's lists (plus `extra_domains`), loaded, offline."""
    from datatrove.pipeline.filters import URLFilter
    from tldextract import TLDExtract

    f = URLFilter(extra_domains=list(extra_domains) or None)
    f.tldextractor = TLDExtract(suffix_list_urls=())  # the wheel's snapshot: no download
    f.download_data()
    return f


def datatrove_decision(block, url: str) -> str | None:
    """datatrove's drop reason for `url`, or None when it keeps the page."""
    from datatrove.data import Document

    with warnings.catch_warnings():
        # tldextract 5.3+ deprecates `registered_domain`, which datatrove 0.10.1 reads.
        warnings.simplefilter("ignore", DeprecationWarning)
        result = block.filter(Document(text="", id="u", metadata={"url": url}))
    return None if result is True else result[1]


def shared_warc_urls() -> tuple[list[str], list[str]]:
    """(every distinct WARC-Target-URI of the shared WARC/WET files warcio reads, the files it cannot)."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    urls: set[str] = set()
    unreadable = []
    root = shared_data_dir() / "warc"
    for path in sorted(p for p in root.rglob("*") if p.is_file() and (".warc" in p.name or ".wet" in p.name)):
        try:
            _add_urls(path, ArchiveIterator, urls)
        except (ArchiveLoadFailed, OSError, EOFError, ValueError):
            # Deliberately corrupt fragments (quirks/, wet-cc-main-2016-50/): the URLs of the
            # records read before the fault are kept.
            unreadable.append(str(path.relative_to(root)))
    return sorted(urls), unreadable


def _add_urls(path: Path, iterator, urls: set[str]) -> None:
    with open(path, "rb") as fh:
        for rec in iterator(fh):
            url = rec.rec_headers.get_header("WARC-Target-URI")
            if url:
                urls.add(url)
