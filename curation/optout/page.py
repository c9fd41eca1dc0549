"""Page-level reservations, read in `extract` from what the WARC record already holds: the `optout_page` stage.

Signals (../shared/research/optout-2026.md §2.3-2.4):

| signal           | where                                                        | meaning                          |
|------------------|--------------------------------------------------------------|----------------------------------|
| `tdm:header`     | HTTP `tdm-reservation: 1` (W3C TDMRep)                       | TDM rights reserved (CDSM Art. 4) |
| `tdm:meta`       | `<meta name="tdm-reservation" content="1">`                  | the same; overrides the header   |
| `noai:header`    | `X-Robots-Tag: noai`                                         | no AI use of the page            |
| `noai:meta`      | `<meta name="robots" content="noai">`                        | the same                         |
| `noimageai:*`    | `noimageai` in either                                        | images only: counted, text kept  |

TDMRep's rules, as its spec (w3c/tdm-reservation-protocol @1a547b5) gives them: `1` reserves, `0`
does not, any other value is a protocol error and leaves the property unset (counted
`optout_page:tdm_invalid`); HTML meta overrides the header, and an absent or invalid value never
resets one found at the level below. `tdm-policy` (a URL to an ODRL licence offer) is kept as the
`tdm_policy` column (meta over header), never a reason by itself. `noai` is honoured in an
X-Robots-Tag addressed to one crawler (`otherbot: noai`) too: it states no AI use, whoever reads it.

Cost: the reader keeps only the three header names (curation/warc/warcio_reader.py `optout_headers`),
and the meta scan looks at the head only: the first `MAX_HEAD_BYTES` of the payload, cut at `</head`,
lower-cased once, and searched for `tdm-` / `noai` / `noimageai` (bytes.find, C speed); only a page
that has one of them has its `<meta` tags read, each within `MAX_TAG_BYTES`. No HTML parse, no
regular expression over the page, so a hostile head costs one linear pass
(tests/curation/test_optout_page.py measures the scan on the shared WARCs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa

from core.stage import Document, DocumentStage, Drop
from curation.config import OptoutConfig

__all__ = ["MAX_HEAD_BYTES", "PageSignalStage", "PageSignals", "read_signals"]

MAX_HEAD_BYTES = 64 * 1024
"""The head is read up to here (research §5.1): a meta tag later than 64 KiB into the page is not seen."""
MAX_TAG_BYTES = 4096
"""A `<meta` not closed within this is skipped, so an unclosed tag cannot make the scan quadratic."""
MAX_POLICY_CHARS = 1024
_NEEDLES = (b"tdm-reservation", b"tdm-policy", b"noai", b"noimageai")
"""A head naming none of these has no signal. Not `tdm-` alone: WordPress's Newspaper theme names its
CSS classes `.tdm-menu-...`, 14 of the shared WARCs' 1,220 pages."""
_TAG_NEEDLES = (b"tdm-", b"robots")
_ATTR = re.compile(rb"""([a-z_:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
_WORDS = re.compile(r"[\s,]+")
TDM_VALUES = {"1": True, "0": False}


@dataclass(slots=True)
class PageSignals:
    """What one page says: the effective TDM reservation (and where from), noai/noimageai sources,
    the policy URL, and what was malformed."""

    tdm: bool | None = None
    """True: reserved; False: explicitly not; None: unset."""
    tdm_source: str | None = None
    """`header` or `meta`: where the effective value came from."""
    tdm_policy: str | None = None
    noai: list[str] = field(default_factory=list)
    """`header` and/or `meta`."""
    noimageai: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    """`tdm_invalid:header|meta`: a tdm-reservation value other than 0 or 1."""

    def signals(self) -> list[str]:
        """The reservations found, in the order they are checked: `tdm:<src>`, `noai:<src>`, `noimageai:<src>`."""
        out = [f"tdm:{self.tdm_source}"] if self.tdm else []
        out += [f"noai:{s}" for s in self.noai]
        return out + [f"noimageai:{s}" for s in self.noimageai]


def read_signals(headers: tuple[tuple[str, str], ...], payload: bytes | None) -> PageSignals:
    """The page's signals from its opt-out headers (lower-cased names) and the head of its HTML."""
    out = PageSignals()
    for name, value in headers:
        if name == "tdm-reservation":
            _tdm(out, value, "header")
        elif name == "tdm-policy" and out.tdm_policy is None:
            out.tdm_policy = value.strip()[:MAX_POLICY_CHARS] or None
        elif name == "x-robots-tag":
            _robots_words(out, value, "header")
    meta_policy = False
    for name, content in _head_metas(payload or b""):
        if name == "tdm-reservation":
            _tdm(out, content, "meta")
        elif name == "tdm-policy" and content.strip() and not meta_policy:
            out.tdm_policy, meta_policy = content.strip()[:MAX_POLICY_CHARS], True  # meta over header
        elif name == "robots":
            _robots_words(out, content, "meta")
    return out


def _tdm(out: PageSignals, value: str, source: str) -> None:
    """A TDMRep value at `source`: a valid one overrides what the level below said (the meta is read
    after the header); the first valid one per level counts."""
    parsed = TDM_VALUES.get(value.strip())
    if parsed is None:
        out.invalid.append(f"tdm_invalid:{source}")
        return
    if out.tdm_source != source:
        out.tdm, out.tdm_source = parsed, source


def _robots_words(out: PageSignals, value: str, source: str) -> None:
    words = set(_WORDS.split(value.lower()))
    if "noai" in words and source not in out.noai:
        out.noai.append(source)
    if "noimageai" in words and source not in out.noimageai:
        out.noimageai.append(source)


def _head_metas(payload: bytes) -> list[tuple[str, str]]:
    """(name, content) of the `<meta>` tags in the head that may carry a signal; [] (after one
    lower-casing and three finds) for the pages that name none, nearly all of them."""
    # The head's end found on the raw bytes first (no copy), so only the head is lower-cased: 12 KB
    # at the median of the shared WARCs' pages, where lower-casing 64 KiB cost 45 us a page.
    end = payload.find(b"</head", 0, MAX_HEAD_BYTES)
    if end < 0:
        end = payload.find(b"</HEAD", 0, MAX_HEAD_BYTES)
    if end >= 0:
        low = payload[:end].lower()
    else:  # no head end, or one in mixed case (`</Head>`)
        low = payload[:MAX_HEAD_BYTES].lower()
        if (end := low.find(b"</head")) >= 0:
            low = low[:end]
    if not any(n in low for n in _NEEDLES):
        return []
    out = []
    pos = low.find(b"<meta")
    while pos >= 0:
        close = low.find(b">", pos, pos + MAX_TAG_BYTES)
        if close < 0:
            pos = low.find(b"<meta", pos + MAX_TAG_BYTES)
            continue
        if not any(low.find(n, pos, close) >= 0 for n in _TAG_NEEDLES):
            pos = low.find(b"<meta", close)  # a charset, viewport, og: tag: not read
            continue
        attrs = {}
        for m in _ATTR.finditer(low, pos + 5, close):
            name = m[1].decode("ascii")
            if name not in attrs:
                # values from the page as written (a policy URL keeps its case): lower() kept offsets
                g = next(i for i in (2, 3, 4) if m[i] is not None)
                attrs[name] = payload[m.start(g) : m.end(g)].decode("utf-8", "replace")
        name = attrs.get("name", "").strip().lower()
        if name in ("tdm-reservation", "tdm-policy", "robots") and "content" in attrs:
            out.append((name, attrs["content"]))
        pos = low.find(b"<meta", close)
    return out


class PageSignalStage(DocumentStage):
    """`optout_page`: the signals into `optout_signals` and `tdm_policy`; in `remove` mode a page with
    an honoured reservation is dropped, reason `optout_page:<signal>` (the first in `PageSignals.signals`
    order). Every signal seen is counted as `optout_signal:<signal>`, so the counts are inclusive
    while the drop reason is the first one."""

    name = "optout_page"
    columns = {"optout_signals": pa.list_(pa.string()), "tdm_policy": pa.string()}  # noqa: RUF012

    def __init__(self, cfg: OptoutConfig, annotate: bool = False) -> None:
        self.cfg = cfg
        self.remove = cfg.mode == "remove" and not annotate
        honoured = (["tdm:"] if cfg.tdm_reservation else []) + (["noai:"] if cfg.noai else [])
        self.honoured = tuple(honoured)

    def process(self, doc: Document) -> Document | Drop:
        meta = doc.metadata
        if meta.get("source_format") == "wet":
            return doc  # WET text has no headers nor HTML: nothing to read (docs/optout.md says so)
        found = read_signals(meta.get("optout_headers") or (), doc.payload)
        signals = found.signals()
        for s in (*signals, *found.invalid):
            self.count(f"optout_signal:{s}")
        meta["optout_signals"] = signals or None
        meta["tdm_policy"] = found.tdm_policy
        reason = next((s for s in signals if s.startswith(self.honoured)), None) if self.honoured else None
        if reason is not None and self.remove:
            return Drop(f"optout_page:{reason}", _detail(meta.get("optout_headers") or (), signals))
        return doc


def _detail(headers: tuple[tuple[str, str], ...], signals: list[str]) -> str:
    shown = "; ".join(f"{k}: {v}" for k, v in headers)
    return f"{', '.join(signals)}" + (f" (headers {shown})" if shown else "")[:500]
