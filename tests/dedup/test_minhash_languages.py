"""MinHash per language (issue 43 item 5): near-duplicates planted in real Chinese, Japanese, Thai,
Arabic and Russian text (Leipzig sentences, ../shared/data) are found, unrelated pages are not.

Each language: documents of 10 consecutive real sentences; the first half get a copy with 1% of
the language's own words deleted, inserted (words of the other half) or replaced
(testkit.neardup.edit_segmented). Measured (band-key candidate pairs, seed 7):

| lang | words=normalized 9x13 | words=language 9x13 | normalized 14x8 | language 14x8 | false pairs |
|------|-----------------------|---------------------|-----------------|---------------|-------------|
| zh   | 36/36 = 1.00          | 30/36 = 0.83        | 1.00            | 1.00          | 0           |
| ja   | 20/20 = 1.00          | 19/20 = 0.95        | 1.00            | 1.00          | 0           |
| th   | 50/50 = 1.00          | 48/50 = 0.96        | 1.00            | 1.00          | 0           |
| ar   | 45/50 = 0.90          | the same            | 1.00            | 1.00          | 0           |
| ru   | 44/50 = 0.88          | the same            | 1.00            | 1.00          | 0           |

So the normalized path does not miss Chinese, Japanese or Thai near-duplicates: dedup.normalize
already makes every letter of those scripts a token. Word 5-grams (FineWeb-2's) span about 1.7x
more text than letter 5-grams (zh: 241 words vs 419 letters per document), so the same edit
lowers Jaccard more (median 0.90 vs 0.93 in zh) and recall at the default 9x13 bands (S-curve
~0.84) drops; FineWeb-2's 14 bands x 8 rows (S-curve ~0.72) finds every planted pair either way.
Arabic and Russian get the same tokens in both modes (dedup/words.py says why). The tests use
14x8 and assert recall >= 0.95 and no pair of unrelated pages. The dedup job with words=language over
these languages at once is tests/dedup/test_minhash_per_language.py's job test (its per_language run).
"""

from __future__ import annotations

import pytest

from curation.filters.segment import segmenter_for
from dedup.config import DedupJobConfig
from dedup.minhash import MinHashConfig
from dedup.normalize import normalize_bytes
from dedup.words import segmenter_of, shingle_texts
from testkit.neardup import leipzig_documents
from tests.support.minhash_planted import FW2_BANDS, found_pairs, planted

LANGS = {"zh": "cmn_Hani", "ja": "jpn_Jpan", "th": "tha_Thai", "ar": "arb_Arab", "ru": "rus_Cyrl"}


@pytest.mark.parametrize("iso", LANGS)
@pytest.mark.parametrize("words", ["normalized", "language"])
def test_planted_near_duplicates_are_found_and_nothing_else(data_dir, iso, words):
    rows, pairs = planted(iso, LANGS[iso], data_dir)
    found = found_pairs(rows, LANGS[iso], words, **FW2_BANDS)
    recall = len(found & set(pairs)) / len(pairs)
    assert recall >= 0.95, (iso, words, recall)
    assert found <= set(pairs), found - set(pairs)  # no two unrelated pages


@pytest.mark.parametrize("iso", ["zh", "ja", "th"])
def test_language_words_are_the_segmenters(data_dir, iso):
    """Scripts without spaces shingle the segmenter's words, each normalized, no space inside one."""
    doc = leipzig_documents(iso, sentences=3, limit=1, data_dir=data_dir)[0]
    seg = segmenter_of(LANGS[iso])
    assert seg is not None and seg is segmenter_for(LANGS[iso])
    out = shingle_texts([normalize_bytes(doc)], [doc], [LANGS[iso]])[0].decode()
    expected = [n.replace(b" ", b"").decode() for w in seg.words(doc) if (n := normalize_bytes(w))]
    assert out.split(" ") == expected
    assert len(expected) < len(normalize_bytes(doc).split(b" "))  # words, not letters


@pytest.mark.parametrize("lang", ["en", "eng_Latn", "arb_Arab", "rus_Cyrl", "kor_Hang", None, "not a code"])
def test_other_documents_keep_the_normalized_bytes(data_dir, lang):
    """Spaced scripts, rows without lang and unreadable codes: byte for byte today's input to the kernels."""
    docs = [d for iso in ("en", "ar", "ru", "ko") for d in leipzig_documents(iso, 5, 3, data_dir)]
    norms = [normalize_bytes(d) for d in docs]
    assert shingle_texts(norms, docs, [lang] * len(docs)) == norms
    assert shingle_texts([None], [None], [lang]) == [b""]  # a null text signs as an empty one
    assert shingle_texts(norms, docs, None) == norms  # no lang column


def test_default_config_keeps_its_name_and_fingerprint():
    """`words` is left out at its default: folders and fingerprints made before it still match."""
    default, lang = MinHashConfig(), MinHashConfig(words="language")
    assert "words" not in default.to_dict() and lang.to_dict()["words"] == "language"
    assert str(lang) == f"{default}_wlanguage"
    assert (
        DedupJobConfig().fingerprint()
        != DedupJobConfig.from_dict({"minhash": {"words": "language"}}).fingerprint()
    )
