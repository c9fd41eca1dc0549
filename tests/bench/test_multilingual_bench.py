"""The machinery of bench/curation/multilingual.py without running a pipeline: datatrove's language
codes, the family sum, the per-language blocks and LID on real datatrove Documents, the agreement."""

from __future__ import annotations

from collections import Counter

from datatrove.data import Document

from bench.curation import multilingual as ml
from curation.filters.langid import default_model_path
from curation.languages.schema import FOLDER
from testkit.shared_data import shared_data_dir

RUSSIAN = (
    "Москва является столицей России и крупнейшим городом страны. В городе находится много музеев, "
    "театров и парков, которые каждый год посещают миллионы туристов из разных стран мира.\n"
) * 3


def test_datatrove_language_takes_canonical_codes_and_falls_back_to_whitespace():
    assert ml.datatrove_language("rus_Cyrl", "rus_Cyrl") == "rus_Cyrl"
    assert ml.datatrove_language("cmn_Hani", "cmn_Hani") == "cmn_Hani"
    ws = ml.datatrove_language("qqq_Latn", "default")
    assert type(ws).__name__ == "WhitespaceTokenizer"
    assert ml.datatrove_language("qqa_Latn", "default") is ws  # one per process


def test_family_sum_adds_members_of_the_macrolanguage_in_the_script():
    text = "Ovo je rečenica na latinici."
    assert abs(ml.family_sum("hrv_Latn", {"hr": 0.46, "bs": 0.3, "sr": 0.1, "sl": 0.1}, text) - 0.86) < 1e-9
    assert ml.family_sum("rus_Cyrl", {"ru": 0.5, "uk": 0.4}, "Привет") == 0.0  # no macrolanguage


def test_per_language_lid_labels_and_judges_with_the_language_threshold():
    lid = ml.PerLanguageLID(default_model_path(), str(FOLDER))
    doc = Document(text=RUSSIAN, id="1")
    assert lid.filter(doc) is True
    assert doc.metadata["lang"] == "rus_Cyrl"
    assert not any(k.startswith("top_language_") for k in doc.metadata)
    assert lid.stats["lang:rus_Cyrl"].total == 1


def test_per_language_block_builds_datatrove_filters_with_the_files_kwargs():
    c4 = ml.PerLanguageBlock("c4_quality", {"filter_no_terminal_punct": False}, str(FOLDER))
    assert c4.block_for("rus_Cyrl") is None  # C4: English only
    assert c4.block_for("eng_Latn") is not None
    gq = ml.PerLanguageBlock("gopher_quality", {}, str(FOLDER))
    block = gq.block_for("rus_Cyrl")
    assert "в" in block.stop_words and block.max_avg_word_length == 11.0
    short = Document(text="Короткий текст.", id="2", metadata={"lang": "rus_Cyrl"})
    assert gq.filter(short) == (False, "gopher_short_doc")


def test_agreement_per_language():
    ours = {"a": "rus_Cyrl", "b": "rus_Cyrl", "c": "deu_Latn"}
    theirs = {"a": "rus_Cyrl", "d": "rus_Cyrl"}
    pages = Counter({"rus_Cyrl": 30, "deu_Latn": 20, "fra_Latn": 25, "x": 1})
    rows = ml.agreement(ours, theirs, pages, 20, both_read={"a", "b", "c", "d"})
    by = {r["lang"]: r for r in rows}
    assert set(by) == {"rus_Cyrl", "deu_Latn", "fra_Latn"}
    assert (by["rus_Cyrl"]["both"], by["rus_Cyrl"]["ours_only"], by["rus_Cyrl"]["datatrove_only"]) == (
        1,
        1,
        1,
    )
    assert abs(by["rus_Cyrl"]["agreement"] - 1 / 3) < 1e-9
    assert by["deu_Latn"]["agreement"] == 0.0
    assert by["fra_Latn"]["agreement"] is None  # neither side kept one

    # a page only one reader takes is left out: it says nothing about curation
    by = {r["lang"]: r for r in ml.agreement(ours, theirs, pages, 20, both_read={"a", "c"})}
    assert (by["rus_Cyrl"]["both"], by["rus_Cyrl"]["ours_only"], by["rus_Cyrl"]["datatrove_only"]) == (
        1,
        0,
        0,
    )


def test_read_by_both_on_a_real_warc():
    """The readers' page sets on a real WARC: ours takes HTTP 200 HTML responses; every id is a real
    WARC-Record-ID of the file, and the counts add up to each reader's own page count."""
    from datatrove.pipeline.readers.warc import process_record
    from warcio.archiveiterator import ArchiveIterator

    from curation.config import ExtractJobConfig
    from curation.warc.records import iter_records

    warc = str(shared_data_dir() / "warc" / "cc-main-2020-34-sample.warc.gz")
    cfg = ExtractJobConfig()
    both, alone = ml.read_by_both([warc], cfg)
    ours = sum(1 for it in iter_records(warc, cfg.reader) if getattr(it, "kind", None))
    with open(warc, "rb") as fh:
        theirs = sum(process_record(rec) is not None for rec in ArchiveIterator(fh))
    assert both and len(both) + alone["ours"] == ours and len(both) + alone["datatrove"] == theirs


def test_ceiling_is_our_extraction_alone_against_datatrove():
    """Ours at 10 pages per extraction-second, datatrove at 2 pages/s/core: trafilatura alone would
    allow 5x; a run without an extract stage time has no ceiling."""
    from bench.curation.sides import Run as run
    from bench.curation.sides import StageRow as row

    def one(name, wall, extract_s):  # a 2-core run over 200 pages, its extraction taking extract_s
        stages = {"extract": row(docs_in=200, seconds=extract_s)}
        return run(name, wall=wall, cpu=2 * wall, cores=2, stages=stages, tasks=[(0, wall)])

    dt, ours = one("dt", 50.0, 60.0), one("ours", 20.0, 20.0)
    assert abs(dt.per_core() - 2.0) < 1e-9 and ours.pages_in == 200  # the bench's own definitions
    assert abs(ml.ceiling(dt, ours) - 5.0) < 1e-9
    assert ml.ceiling(dt, run("x", 20.0, 40.0, 2, {}, [(0, 20)])) is None
    assert "5.00x" in ml.ceiling_line(dt, ours)
