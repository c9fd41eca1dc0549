"""The multilingual preset end to end, from WARC bytes: real prose in every Leipzig language, each
page in its own HTML, some in the legacy charset its web still uses (declared in the HTTP header, in a
<meta> only, or not at all), through the reader, the charset decoding, trafilatura, language ID and
the per-language filters (`process_file`, the job's per-file function).

The pages are built here from the shared Leipzig sentences (langid/leipzig/sentences): a headline
and eight paragraphs of five sentences, the first 40 sentences as in tests/curation/test_multilingual.py,
which judges the same text after extraction. What this adds: the bytes. A page of Russian in
windows-1251 or Japanese in Shift_JIS must come out as the same text, labelled with the same code, and
kept or dropped as its plain text is.
"""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from core.config import load_config
from core.files import doc_parquet_files
from core.output import OutputDir
from curation.config import ExtractJobConfig
from curation.pipeline import process_file

PRESET = Path(__file__).resolve().parents[2] / "configs" / "extract-multilingual.yaml"
NO_SPACES = {"ja", "zh", "th"}

# (charset, where it is declared): the encodings these languages' web pages still come in
LEGACY = {
    "ru": ("windows-1251", "header"),
    "uk": ("koi8-u", "meta"),
    "bg": ("windows-1251", "none"),
    "ja": ("shift_jis", "meta"),
    "zh": ("gb18030", "header"),
    "ko": ("euc-kr", "meta"),
    "ar": ("windows-1256", "header"),
    "fa": ("windows-1256", "meta"),
    "he": ("windows-1255", "meta"),
    "el": ("iso-8859-7", "header"),
    "th": ("tis-620", "meta"),
    "tr": ("windows-1254", "meta"),
    "pl": ("iso-8859-2", "header"),
    "de": ("windows-1252", "none"),
}


def _sentences(data_dir: Path, iso: str) -> list[str]:
    path = data_dir / "langid" / "leipzig" / "sentences" / f"{iso}.txt"
    return [s.strip() for s in path.read_text(encoding="utf-8").splitlines() if s.strip()][:41]


def _page(iso: str, sentences: list[str], charset: str, where: str) -> tuple[bytes, str]:
    """(HTML bytes, Content-Type): the first sentence is the headline, the next 40 the paragraphs."""
    from html import escape

    sep = "" if iso in NO_SPACES else " "
    body = sentences[1:41]
    paras = "".join(f"<p>{escape(sep.join(body[i : i + 5]))}</p>\n" for i in range(0, 40, 5))
    meta = f'<meta charset="{charset}">' if where == "meta" else ""
    html = (
        f"<!DOCTYPE html>\n<html><head>{meta}<title>{escape(sentences[0][:80])}</title></head>\n"
        f"<body><nav><a href='/'>{escape(sentences[0][:20])}</a></nav>\n<article><h1>{escape(sentences[0])}</h1>\n"
        f"{paras}</article></body></html>\n"
    )
    content_type = f"text/html; charset={charset}" if where == "header" else "text/html"
    # a character the charset lacks is written as a numeric reference, as the CMSs of such sites do
    return html.encode(charset, errors="xmlcharrefreplace"), content_type


@pytest.fixture(scope="module")
def run(data_dir, tmp_path_factory):
    """The WARC of every Leipzig language's page through the preset: {iso: (kept doc or None, page sentences)}."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    tmp = tmp_path_factory.mktemp("multilingual-warc")
    isos = sorted(p.stem for p in (data_dir / "langid" / "leipzig" / "sentences").glob("*.txt"))
    pages = {}
    warc = tmp / "leipzig-pages.warc.gz"
    with open(warc, "wb") as f:
        w = WARCWriter(f, gzip=True)
        for iso in isos:
            sentences = _sentences(data_dir, iso)
            charset, where = LEGACY.get(iso, ("utf-8", "header"))
            payload, content_type = _page(iso, sentences, charset, where)
            pages[iso] = sentences
            headers = StatusAndHeaders("200 OK", [("Content-Type", content_type)], "HTTP/1.1")
            record = w.create_warc_record(
                f"https://news.example/{iso}/article.html",
                "response",
                payload=io.BytesIO(payload),
                http_headers=headers,
            )
            w.write_record(record)
    cfg = load_config(ExtractJobConfig, PRESET)
    out = tmp / "out"
    OutputDir(out).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    assert process_file(str(warc), cfg, str(out))["status"] == "done"
    docs = {r["url"]: r for f in doc_parquet_files(out) for r in pq.read_table(f).to_pylist()}
    rejected = {
        r["url"]: r for f in (out / "rejected").rglob("*.parquet") for r in pq.read_table(f).to_pylist()
    }
    return {
        iso: (
            docs.get(f"https://news.example/{iso}/article.html"),
            rejected.get(f"https://news.example/{iso}/article.html"),
            pages[iso],
        )
        for iso in isos
    }


@pytest.fixture(scope="module")
def text_level(data_dir):
    """The same languages judged from their plain text by the preset's stages after extraction
    (test_multilingual's `_judge`): {iso: (kept?, lang)}."""
    from tests.curation.test_multilingual import _document, _judge, _judges

    judges = _judges(load_config(ExtractJobConfig, PRESET))
    out = {}
    for f in sorted((data_dir / "langid" / "leipzig" / "sentences").glob("*.txt")):
        doc, _why, lang = _judge(judges, _document(f))
        out[f.stem] = (doc is not None, lang)
    return out


def test_every_page_is_read_and_accounted_for(run):
    """75 pages in, each either written to docs/ or sampled in rejected/ with its reason: none lost."""
    assert len(run) == 75
    lost = [iso for iso, (doc, rej, _) in run.items() if doc is None and rej is None]
    assert not lost, lost


def test_pages_in_legacy_charsets_come_out_as_their_text(run):
    """Each legacy-charset page, declared in the header, in a <meta> only or not at all, is decoded to
    the very sentences it was written from (no mojibake, no replacement character), whether kept or
    dropped later."""
    for iso, (charset, where) in LEGACY.items():
        doc, rej, sentences = run[iso]
        row = doc or rej
        assert row is not None, iso
        text = row["text"]
        assert "\ufffd" not in text, (iso, charset, where)
        found = sum(s in text for s in (" ".join(sentences[1:6]), sentences[1], sentences[6]))
        assert found >= 2, (iso, charset, where, text[:300])


def test_kept_as_its_plain_text_is_with_the_same_code(run, text_level):
    """The WARC path decides as the text-level test does: the same languages kept, with the same
    canonical code. A page may differ where trafilatura's text differs from the joined sentences (it
    keeps the headline, it may join or drop a paragraph), so at most 3 of the 75 may disagree; every
    kept page is labelled with the code its plain text got."""
    agree = disagree = 0
    wrong_code = []
    for iso, (doc, _rej, _) in run.items():
        kept_text, lang_text = text_level[iso]
        if (doc is not None) == kept_text:
            agree += 1
        else:
            disagree += 1
        if doc is not None and kept_text and doc["lang"] != lang_text:
            wrong_code.append((iso, doc["lang"], lang_text))
    assert disagree <= 3, {iso: (run[iso][0] is not None, text_level[iso]) for iso in run}
    assert not wrong_code, wrong_code
    kept = [doc for doc, _, _ in run.values() if doc is not None]
    scripts = {d["lang"].split("_")[1] for d in kept}
    assert len(kept) >= 50 and len(scripts) >= 12, (len(kept), sorted(scripts))
    # partitioned by language: every kept document sits in its own language's folder
    assert all(len(d["lang"]) == 8 for d in kept)


# Leipzig languages whose sentences carry joiners (Persian's half-space ZWNJ; ZWJ in Hindi and Marathi
# conjuncts; ZWNJ in Telugu), and the share of the 40 page sentences that have one
JOINED = ("fa", "hi", "mr", "te")


def test_the_preset_keeps_the_joiners_trafilatura_deletes(run, data_dir):
    """Under the preset (`extract.keep_joiners: true`) a page's text holds its sentences as written,
    zero-width (non-)joiners included: every page sentence with one is found verbatim in the kept
    text. trafilatura's own filter (the default, datatrove's and FineWeb-2's text) deletes them all: the
    same page through the default extractor has none, and the sentence is found only without them."""
    from curation.config import ExtractConfig
    from curation.extract.extractors import JOINERS, Extractor

    default = Extractor(ExtractConfig())
    joined_total = 0
    for iso in JOINED:
        doc, rej, sentences = run[iso]
        row = doc or rej
        joined = [s for s in sentences[1:41] if JOINERS & set(s)]
        joined_total += len(joined)
        missing = [s for s in joined if s not in row["text"]]
        assert not missing, (iso, missing[:2])
        charset, where = LEGACY.get(iso, ("utf-8", "header"))
        html = _page(iso, sentences, charset, where)[0].decode(charset)
        plain = default(html).text
        assert not JOINERS & set(plain), iso
        strip = str.maketrans("", "", "".join(JOINERS))
        assert all(s.translate(strip) in plain for s in joined), iso
    assert joined_total >= 20  # enough sentences with a joiner for the check to mean something
