"""`python -m curation index`: a Common Crawl columnar index (cc-index-table Parquet) of local WARCs.

Common Crawl publishes, for every crawl, a Parquet table with one row per capture
(`s3://commoncrawl/cc-index/table/cc-main/warc/crawl=.../subset=.../*.parquet`, schema in
commoncrawl/cc-index-table `src/main/resources/schema/cc-index-schema-flat.json`). Its rows say
where each record lies (`warc_filename`, `warc_record_offset`, `warc_record_length`: the bounds of
the record's gzip member, so one HTTP Range request returns exactly that record) and what it holds
(`url_host_name`, `fetch_status`, `content_mime_detected`, `content_languages`, ...), so a SQL
condition picks records without reading any WARC. This module writes the same table for a user's
own WARCs, with the published column names and types, so that `extract --index ... --where ...`
(curation/index/job.py) runs on either unchanged. It also reads a CDXJ index into the same columns
(`read_cdxj`: the CDX field names map to columns as the schema's `fromCDX` says).

Rows: one per `response` record (Common Crawl's table also lists revisits; the extractor skips
those anyway). Columns written, and how they are filled:
    url, url_surtkey           WARC-Target-URI; its SURT key by `surt` (the library cdxj-indexer
                               uses; Common Crawl's is webarchive-commons' Java SURT: same form)
    url_host_*, url_protocol,  parsed from the URL; the registry/private suffix and registered/private
    url_port, url_path, ...    domain from the Public Suffix List snapshot shipped in tldextract
                               (never fetched), as cc-index-table does with its own PSL copy
    fetch_time, fetch_status,  WARC-Date; the HTTP status line; the Location header of a redirect
    fetch_redirect
    content_digest             WARC-Payload-Digest without its `sha1:` prefix
    content_mime_type          the HTTP Content-Type without parameters
    content_mime_detected      WARC-Identified-Payload-Type (Common Crawl's Tika detection), else null
    content_charset            HTML 200 pages only: the codec our decoder used (curation/extract/charset.py);
                               Common Crawl's comes from its own detector, so the names may differ
    content_languages          HTML 200 pages only: lid.176's top language (ISO 639-3) on resiliparse's
                               main-content text (cut at max_tag_depth). Common Crawl fills it
                               with CLD2 (up to three languages, comma separated): the same codes
                               (`eng`, `deu`, ...), but another model, and one language here
    content_truncated          WARC-Truncated
    warc_filename              the WARC's path relative to `root` (the folder to serve or upload as
                               --warc-base), as Common Crawl's is relative to s3://commoncrawl/
    warc_record_offset/length  the record's gzip member bounds (int32, as published: a WARC past
                               2 GiB cannot be described and is refused)
    warc_segment               the `segments/<id>/` part of the path, null when it has none
    crawl, subset              the crawl the reader sees (warcinfo or file name, as curation/warc/records.py),
                               and `warc`, `crawldiagnostics` (non-200) or `robotstxt`, as published;
                               plain columns here, partition folders in Common Crawl's table
Not written: `url_host_5th...` beyond what the host has (null), `warc_record_id` (new, binary).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa

from core.errors import InputError
from curation.filters.urls import is_ip_host, registered_domain, tld_extractor

log = logging.getLogger(__name__)

__all__ = ["INDEX_SCHEMA", "IndexReport", "build_index", "read_cdxj", "url_columns"]

_STR = pa.string()
INDEX_SCHEMA = pa.schema(
    [
        ("url_surtkey", _STR),
        ("url", _STR),
        ("url_host_name", _STR),
        ("url_host_tld", _STR),
        ("url_host_2nd_last_part", _STR),
        ("url_host_3rd_last_part", _STR),
        ("url_host_4th_last_part", _STR),
        ("url_host_5th_last_part", _STR),
        ("url_host_registry_suffix", _STR),
        ("url_host_registered_domain", _STR),
        ("url_host_private_suffix", _STR),
        ("url_host_private_domain", _STR),
        ("url_host_name_reversed", _STR),
        ("url_protocol", _STR),
        ("url_port", pa.int32()),
        ("url_path", _STR),
        ("url_query", _STR),
        ("fetch_time", pa.timestamp("us", tz="UTC")),
        ("fetch_status", pa.int16()),
        ("fetch_redirect", _STR),
        ("content_digest", _STR),
        ("content_mime_type", _STR),
        ("content_mime_detected", _STR),
        ("content_charset", _STR),
        ("content_languages", _STR),
        ("content_truncated", _STR),
        ("warc_filename", _STR),
        ("warc_record_offset", pa.int32()),
        ("warc_record_length", pa.int32()),
        ("warc_segment", _STR),
        ("crawl", _STR),
        ("subset", _STR),
    ]
)
LOCATION_COLUMNS = ("warc_filename", "warc_record_offset", "warc_record_length")
"""What `extract --index` needs of any index; the rest is for the user's condition."""

_INT32_MAX = 2**31 - 1
_SEGMENT_RE = re.compile(r"(?:^|/)segments/([^/]+)/")

# lid.176's labels (ISO 639-1 where one exists, else Wikipedia codes) -> ISO 639-3, the codes
# cc-index-table's content_languages uses (macrolanguage codes: zho, ara, fas, msa, ...). Labels
# that are already three letters are kept, except Wikipedia's own: als (Alemannic: gsw, where
# 639-3 `als` is Tosk Albanian), bh (Bihari: bih, a collective code), sh (Serbo-Croatian: hbs).
LID_TO_ISO639_3 = {
    "af": "afr", "am": "amh", "an": "arg", "ar": "ara", "as": "asm", "av": "ava", "az": "aze",
    "ba": "bak", "be": "bel", "bg": "bul", "bn": "ben", "bo": "bod", "br": "bre", "bs": "bos",
    "ca": "cat", "ce": "che", "co": "cos", "cs": "ces", "cv": "chv", "cy": "cym", "da": "dan",
    "de": "deu", "dv": "div", "el": "ell", "en": "eng", "eo": "epo", "es": "spa", "et": "est",
    "eu": "eus", "fa": "fas", "fi": "fin", "fr": "fra", "fy": "fry", "ga": "gle", "gd": "gla",
    "gl": "glg", "gn": "grn", "gu": "guj", "gv": "glv", "he": "heb", "hi": "hin", "hr": "hrv",
    "ht": "hat", "hu": "hun", "hy": "hye", "ia": "ina", "id": "ind", "ie": "ile", "io": "ido",
    "is": "isl", "it": "ita", "ja": "jpn", "jv": "jav", "ka": "kat", "kk": "kaz", "km": "khm",
    "kn": "kan", "ko": "kor", "ku": "kur", "kv": "kom", "kw": "cor", "ky": "kir", "la": "lat",
    "lb": "ltz", "li": "lim", "lo": "lao", "lt": "lit", "lv": "lav", "mg": "mlg", "mk": "mkd",
    "ml": "mal", "mn": "mon", "mr": "mar", "ms": "msa", "mt": "mlt", "my": "mya", "ne": "nep",
    "nl": "nld", "nn": "nno", "no": "nor", "oc": "oci", "or": "ori", "os": "oss", "pa": "pan",
    "pl": "pol", "ps": "pus", "pt": "por", "qu": "que", "rm": "roh", "ro": "ron", "ru": "rus",
    "sa": "san", "sc": "srd", "sd": "snd", "si": "sin", "sk": "slk", "sl": "slv", "so": "som",
    "sq": "sqi", "sr": "srp", "su": "sun", "sv": "swe", "sw": "swa", "ta": "tam", "te": "tel",
    "tg": "tgk", "th": "tha", "tk": "tuk", "tl": "tgl", "tr": "tur", "tt": "tat", "ug": "uig",
    "uk": "ukr", "ur": "urd", "uz": "uzb", "vi": "vie", "vo": "vol", "wa": "wln", "yi": "yid",
    "yo": "yor", "zh": "zho", "als": "gsw", "bh": "bih", "sh": "hbs",
}  # fmt: skip


@dataclass
class IndexReport:
    """What `build_index` did, per input: rows written, and the error that ended a file early."""

    rows: int = 0
    files: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


# -- URL columns -------------------------------------------------------------------------------


def url_columns(url: str | None) -> dict[str, Any]:
    """The url_* columns of one URL (nulls where the URL has no such part or does not parse)."""
    out: dict[str, Any] = {"url": url}
    if not url:
        return out
    import surt

    with contextlib.suppress(Exception):  # a URL surt cannot fold keeps a null key, as others do
        out["url_surtkey"] = surt.surt(url)
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".").lower()
        port = parts.port
    except ValueError:  # an invalid port or bracket: the URL string alone is kept
        return out
    out.update(
        url_protocol=parts.scheme.lower() or None,
        url_port=port,
        url_path=parts.path or "/",
        url_query=parts.query or None,
        url_host_name=host or None,
    )
    if not host:
        return out
    labels = host.split(".")
    for i, name in enumerate(("tld", "2nd_last_part", "3rd_last_part", "4th_last_part", "5th_last_part")):
        out[f"url_host_{name}"] = labels[-1 - i] if len(labels) > i else None
    if is_ip_host(host):  # IP addresses have no suffix, domain or reversed name
        return out
    out["url_host_name_reversed"] = ".".join(reversed(labels))
    ext = tld_extractor()(host)
    icann = tld_extractor()(host, include_psl_private_domains=False)
    out["url_host_registry_suffix"] = icann.suffix or None
    out["url_host_registered_domain"] = registered_domain(host)
    out["url_host_private_suffix"] = ext.suffix or None
    out["url_host_private_domain"] = ext.top_domain_under_public_suffix or None
    return out


# -- building ----------------------------------------------------------------------------------


class _Languages:
    """content_languages/content_charset of an HTML page: decode, resiliparse text, lid.176 top label."""

    def __init__(self) -> None:
        from curation.config import LangIdConfig
        from curation.filters.langid import LanguageIdentifier

        self.lid = LanguageIdentifier(LangIdConfig())

    def __call__(self, payload: bytes, content_type: str | None) -> tuple[str | None, str | None]:
        from curation.extract.charset import decode_html
        from curation.extract.extractors import main_content

        try:
            html, codec, _source = decode_html(payload, content_type)
            text, _title = main_content(html)
        except Exception:  # a page resiliparse cannot parse: no language, as CLD2 gives none
            return None, None
        if not text.strip():
            return None, codec
        label, _score = self.lid.predict_raw(text)
        return LID_TO_ISO639_3.get(label, label), codec


def _subset(status: int | None, path: str | None) -> str:
    if path == "/robots.txt":
        return "robotstxt"
    return "warc" if status == 200 else "crawldiagnostics"


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise InputError(f"{path} is not under the index root {root} (give --root)") from None


def _rows_of(path: Path, rel: str, languages: _Languages | None) -> Iterator[dict[str, Any]]:
    """One row per response record of the WARC at `path`, in file order; raises on damage."""
    from warcio.archiveiterator import ArchiveIterator

    from curation.warc.warcio_reader import GZIP_MAGIC, crawl_from_name, parse_warc_date

    segment = _SEGMENT_RE.search(rel)
    crawl = crawl_from_name(path.name)
    with open(path, "rb") as f:
        gzipped = f.read(3) == GZIP_MAGIC
        f.seek(0)
        it = ArchiveIterator(f, check_digests=False)
        for rec in it:
            rtype = rec.rec_type
            if rtype == "warcinfo":  # the crawl the reader will see for the records after it
                with contextlib.suppress(Exception):
                    m = re.search(rb"CC-MAIN-\d{4}-\d{2}", rec.content_stream().read(64 * 1024))
                    if m:
                        crawl = m.group(0).decode()
                continue
            if rtype != "response":
                continue
            h = rec.rec_headers
            url = h.get_header("WARC-Target-URI")
            http = rec.http_headers
            status = None
            ctype = redirect = None
            if http is not None:
                with contextlib.suppress(ValueError, TypeError):
                    status = int(http.get_statuscode())
                ctype = http.get_header("Content-Type")
                redirect = http.get_header("Location") if status and 300 <= status < 400 else None
            mime = (ctype.split(";", 1)[0].strip().lower() or None) if ctype else None
            detected = h.get_header("WARC-Identified-Payload-Type")
            charset = langs = None
            if languages is not None and status == 200 and "html" in (ctype or detected or "").lower():
                with contextlib.suppress(Exception):  # a payload that does not decode: no language
                    langs, charset = languages(rec.content_stream().read(), ctype)
            offset, length = it.get_record_offset(), it.get_record_length()
            if offset + length > _INT32_MAX:
                raise InputError(
                    f"{path}: record at offset {offset} lies past 2 GiB, beyond the int32 "
                    "warc_record_offset of the cc-index-table schema"
                )
            if gzipped and offset and not _member_starts(f, offset):
                raise ValueError(f"record at offset {offset} is not a gzip member of its own")
            digest = h.get_header("WARC-Payload-Digest")
            when = parse_warc_date(h.get_header("WARC-Date"))
            cols = url_columns(url)
            yield {
                **cols,
                "fetch_time": when.astimezone(UTC) if when else None,
                "fetch_status": status,
                "fetch_redirect": redirect,
                "content_digest": digest.split(":", 1)[-1] if digest else None,
                "content_mime_type": mime,
                "content_mime_detected": detected,
                "content_charset": charset,
                "content_languages": langs,
                "content_truncated": h.get_header("WARC-Truncated"),
                "warc_filename": rel,
                "warc_record_offset": offset,
                "warc_record_length": length,
                "warc_segment": segment.group(1) if segment else None,
                "crawl": crawl,
                "subset": _subset(status, cols.get("url_path")),
            }


def _member_starts(f, offset: int) -> bool:
    """A gzip member begins at `offset` (the file position is restored for warcio)."""
    from curation.warc.warcio_reader import GZIP_MAGIC

    here = f.tell()
    f.seek(offset)
    ok = f.read(3) == GZIP_MAGIC
    f.seek(here)
    return ok


def build_index(
    warcs: list[str],
    output: str,
    root: str | None = None,
    cdxj: str | None = None,
    languages: bool = True,
) -> IndexReport:
    """Index the response records of local `warcs` into the Parquet file `output` (and `cdxj`).

    `root`: the folder `warc_filename` is relative to (default: the inputs' common folder). A file
    that cannot be read to its end keeps the rows before the damage and is reported in `errors`.
    """
    import os

    import pyarrow.parquet as pq

    paths = [Path(w).expanduser().resolve() for w in warcs]
    base = Path(root).expanduser().resolve() if root else Path(os.path.commonpath([p.parent for p in paths]))
    lid = _Languages() if languages else None
    report = IndexReport()
    rows: list[dict[str, Any]] = []
    for p in paths:
        rel = _relative(p, base)
        n = 0
        try:
            for row in _rows_of(p, rel, lid):
                rows.append(row)
                n += 1
        except InputError:
            raise
        except Exception as e:  # damage: the rows before it are right, the rest is not indexed
            report.errors[rel] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
            log.warning("%s: indexing stopped after %d records: %s", p, n, e)
        report.files[rel] = n
    report.rows = len(rows)
    table = pa.Table.from_pylist(rows, schema=INDEX_SCHEMA)
    out = Path(output).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(out)
    if cdxj:
        write_cdxj([str(p) for p in paths], cdxj, str(base))
    return report


def write_cdxj(warcs: list[str], output: str, root: str) -> None:
    """A sorted CDXJ index of the response records, by cdxj-indexer (pinned), paths relative to `root`."""
    from cdxj_indexer.main import CDXJIndexer

    tmp = Path(output).with_name(f".{Path(output).name}.tmp")
    CDXJIndexer(output=str(tmp), inputs=warcs, sort=True, records="response", dir_root=root).process_all()
    tmp.replace(output)


# -- reading a CDXJ index ----------------------------------------------------------------------

# CDX field -> column, as the schema's `fromCDX` metadata says (and `ts`, the line's timestamp).
_CDX_FIELDS = {
    "url": "url",
    "status": "fetch_status",
    "redirect": "fetch_redirect",
    "digest": "content_digest",
    "mime": "content_mime_type",
    "mime-detected": "content_mime_detected",
    "charset": "content_charset",
    "languages": "content_languages",
    "truncated": "content_truncated",
    "filename": "warc_filename",
    "offset": "warc_record_offset",
    "length": "warc_record_length",
}


def read_cdxj(path: str) -> pa.Table:
    """A CDXJ file (`<surt> <14-digit ts> {json}` per line, .gz allowed) as a table of the columns above.

    The url_* columns are derived from `url` as the Parquet index does; columns the CDXJ lacks
    are null. A line that does not parse is an InputError naming it (an index is not guessed at).
    """
    opener = gzip.open if path.endswith(".gz") else open
    rows = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip() or line.startswith("!"):
                    continue
                try:
                    key, ts, blob = line.rstrip("\n").split(" ", 2)
                    fields = json.loads(blob)
                    row: dict[str, Any] = {**url_columns(fields.get("url")), "url_surtkey": key}
                    row["fetch_time"] = datetime.strptime(ts[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
                    for name, col in _CDX_FIELDS.items():
                        if name in fields and col != "url":
                            row[col] = fields[name]
                    for col in ("fetch_status", "warc_record_offset", "warc_record_length"):
                        if row.get(col) is not None:
                            row[col] = int(row[col])
                except (ValueError, TypeError) as e:
                    raise InputError(f"{path} line {n} is not a CDXJ line: {e}") from None
                rows.append(row)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read CDXJ index {path!r}: {e}") from None
    try:
        return pa.Table.from_pylist(rows, schema=INDEX_SCHEMA)
    except (pa.ArrowInvalid, OverflowError) as e:
        raise InputError(f"CDXJ index {path!r} has a value out of the column types: {e}") from None
