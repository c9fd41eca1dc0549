"""`minhash.per_language`: near-duplicate clusters never span two languages (FineWeb-2 dedups each
language alone), on real Leipzig text (../shared/data) in one shared input.

The corpus (`corpus`): per language, documents of 10 real sentences, the first half each with a
copy that has 1% of its words edited (tests/support/minhash_planted.py). Each pair's two documents
get the `lang` labels of PLAN: the same code; two forms of one language (`en` / `eng_Latn`, `zh` /
`cmn_Hani`, both null); or two languages (a mixed German page whose LID flips to English across
captures; `cmn_Hani` / `yue_Hani`, two FineWeb-2 subsets; null / `eng_Latn`). The shared index
clusters every kind of pair; with per_language on, the pairs of two languages must not be.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.errors import InputError
from dedup.config import DedupJobConfig
from dedup.job import resolve_input
from dedup.minhash import NO_LANGUAGE, MinHashConfig, hash_strings, language_group, language_hashes
from dedup.normalize import normalize_bytes
from dedup.stages.base import DocBatch
from dedup.stages.minhash import _signer
from tests.support.minhash_planted import FW2_BANDS, dedup_removed, found_pairs, planted

# iso: (the segmenter's code for the edits, [(lang of the original, lang of the copy, same language?)]
# given to its pairs in turn; the unpaired documents get the segmenter's code)
PLAN = {
    "ru": ("rus_Cyrl", [("rus_Cyrl", "rus_Cyrl", True)]),
    "ar": ("arb_Arab", [("arb_Arab", "arb_Arab", True)]),
    "de": ("deu_Latn", [("deu_Latn", "deu_Latn", True), ("deu_Latn", "eng_Latn", False)]),
    "zh": (
        "cmn_Hani",
        [("cmn_Hani", "cmn_Hani", True), ("zh", "cmn_Hani", True), ("cmn_Hani", "yue_Hani", False)],
    ),
    "en": ("eng_Latn", [("en", "eng_Latn", True), (None, None, True), (None, "eng_Latn", False)]),
}
DEFAULT_FINGERPRINT = "8f605731e6875dcd"  # DedupJobConfig().fingerprint() before the key existed


def corpus(
    data_dir, limit: int = 40, plan: dict = PLAN
) -> tuple[list[dict], list[tuple[str, int, int, bool]]]:
    """(rows: id, url, text, lang; pairs: (iso, row of the original, row of the copy, same language?))."""
    rows: list[dict] = []
    pairs: list[tuple[str, int, int, bool]] = []
    for iso, (code, labels) in plan.items():
        texts, planted_pairs = planted(iso, code, data_dir, limit)
        langs: list[str | None] = [code] * len(texts)
        base = len(rows)
        for k, (a, b) in enumerate(planted_pairs):
            langs[a], langs[b], same = labels[k % len(labels)]
            pairs.append((iso, base + a, base + b, same))
        rows += [
            {"id": f"{iso}-{i:03d}", "url": f"https://{iso}.example.org/{i}", "text": t, "lang": lang}
            for i, (t, lang) in enumerate(zip(texts, langs))
        ]
    return rows, pairs


@pytest.fixture(scope="module")
def labelled(data_dir):
    return corpus(data_dir)


def _found(docs: list[dict], per_language: bool, **lsh) -> set[tuple[int, int]]:
    return found_pairs([d["text"] for d in docs], [d["lang"] for d in docs], per_language=per_language, **lsh)


def test_language_groups_are_iso_639_3_languages():
    """Older outputs' lid.176 codes join the canonical form; macrolanguage members, macrolanguage
    codes and unreadable labels stay groups of their own; the script is not part of the group."""
    langs = ["en", "eng_Latn", "eng", "zh", "cmn_Hani", "yue_Hani", "zho_Hani", "sr", "srp_Latn", "x y"]
    expected = ["eng", "eng", "eng", "cmn", "cmn", "yue", "zho", "srp", "srp", "?x y"]
    assert [language_group(c) for c in langs] == expected
    hashes = language_hashes([*langs, None, ""])
    assert hashes[:-2].tolist() == hash_strings(expected).tolist()
    assert (hashes[-2:] == NO_LANGUAGE).all()  # null and empty: the group "no language"
    assert len(set(hash_strings(["eng", "cmn", "yue", "zho", "srp", "?x y"]).tolist()) | {0}) == 7
    # the same values from an Arrow column, plain or dictionary-encoded (as Parquet stores it)
    column = pa.array([*langs, None, ""], pa.string())
    assert np.array_equal(language_hashes(column), hashes)
    assert np.array_equal(language_hashes(column.dictionary_encode()), hashes)
    assert language_hashes(pa.nulls(3)).tolist() == [NO_LANGUAGE] * 3


def test_the_group_hash_is_fixed():
    """Not Python's salted hash(): the value is the same in every process, so reruns and executors agree."""
    assert language_hashes(["eng_Latn", "cmn_Hani"]).tolist() == [14201907855786211261, 3951115146258619883]


def test_clusters_keep_to_one_language_in_a_shared_index(labelled):
    """Band-key pairs over every language at once, FineWeb-2's 14 x 8 bands, signed by the stage."""
    rows, pairs = labelled
    on, off = _found(rows, True, **FW2_BANDS), _found(rows, False, **FW2_BANDS)
    planted_pairs = {(a, b) for _, a, b, _ in pairs}
    assert off <= planted_pairs and on <= planted_pairs  # no two unrelated pages, either way
    cross = {(a, b) for _, a, b, same in pairs if not same}
    assert len(cross) >= 15
    assert cross <= off  # the shared index clusters every pair of two languages (so this test can fail)
    assert not cross & on  # per language: none of them
    for iso in PLAN:
        same = {(a, b) for lang, a, b, s in pairs if s and lang == iso}
        recall = len(same & on) / len(same)
        assert recall >= 0.95, (iso, recall)
        assert same & on == same & off  # per language finds within a language what the shared index does


def test_default_config_keeps_its_name_and_fingerprint():
    default, on = MinHashConfig(), MinHashConfig(per_language=True)
    assert str(default) == "5ng_128p_9x13_t0.8_s42_poly64_vnone"
    assert str(on) == f"{default}_plang"
    assert str(MinHashConfig(per_language=True, words="language")) == f"{default}_wlanguage_plang"
    assert "per_language" not in default.to_dict() and on.to_dict()["per_language"] is True
    assert DedupJobConfig().fingerprint() == DEFAULT_FINGERPRINT
    assert DedupJobConfig.from_dict({"minhash": {"per_language": True}}).fingerprint() != DEFAULT_FINGERPRINT


def test_input_without_lang_is_refused_before_spark(tmp_path):
    """per_language is not quietly run over one shared index: the footer check names the key."""
    pq.write_table(pa.table({"id": ["a"], "text": ["some words"]}), tmp_path / "part-0.parquet")
    assert resolve_input(str(tmp_path)) == [str(tmp_path / "part-0.parquet")]
    with pytest.raises(InputError, match=r"no `lang` column, which minhash\.per_language needs"):
        resolve_input(str(tmp_path), "minhash.per_language")
    pq.write_table(pa.table({"id": ["a"], "text": ["some words"], "lang": [3]}), tmp_path / "part-0.parquet")
    with pytest.raises(InputError, match=r"column `lang` is int64"):
        resolve_input(str(tmp_path), "minhash.per_language")


def test_the_stage_refuses_a_batch_without_lang():
    docs = ["one two three four five six"]
    batch = pa.RecordBatch.from_pydict({"text": docs})
    sign = _signer(MinHashConfig(per_language=True), False)
    with pytest.raises(ValueError, match="per_language needs a `lang` column"):
        sign(DocBatch(batch, docs, [None], [normalize_bytes(docs[0])]))


# Pages of the scripts without spaces that PLAN lacks: the job test's per_language run also shingles
# each language's own words (words=language), which for these is the segmenter's words.
UNSPACED = {"ja": "jpn_Jpan", "th": "tha_Thai"}


@pytest.mark.spark
@pytest.mark.slow  # two dedup jobs: ~70 s on 2 cores
def test_the_job_keeps_clusters_within_a_language(spark, tmp_path, data_dir):
    """The real job (prepare -> minhash -> cluster) over all languages at once, per_language on and off.

    The run with per_language on has words=language too, over PLAN's languages and Japanese and Thai
    pages: the job passes both keys and each row's `lang` to the signer, and every language's planted
    pairs are still found. One run for the two keys (each one's effect is checked alone, in process,
    here and in tests/dedup/test_minhash_languages.py); words=language had a job run of its own there."""
    rows, pairs = corpus(data_dir, plan={**PLAN, **{iso: (c, [(c, c, True)]) for iso, c in UNSPACED.items()}})
    ids = [r["id"] for r in rows]
    on = dedup_removed(rows, tmp_path / "on", {"per_language": True, "words": "language", **FW2_BANDS})
    off = dedup_removed(rows, tmp_path / "off", FW2_BANDS)
    # the signatures the job made are named by the MinHash config they were made with
    made = [p.name for p in (tmp_path / "on" / "out" / "stages" / "minhash").iterdir()]
    assert made == [str(MinHashConfig(per_language=True, words="language", **FW2_BANDS))]
    members = {ids[i] for _, a, b, _ in pairs for i in (a, b)}
    assert set(off) <= members and set(on) <= members  # no unrelated page removed
    assert set(on.values()) == set(off.values()) == {"near_duplicate"}

    def caught(removed: dict[str, str], same: bool, iso: str | None = None) -> float:
        chosen = [(ids[a], ids[b]) for lang, a, b, s in pairs if s == same and iso in (None, lang)]
        return sum((a in removed) != (b in removed) for a, b in chosen) / len(chosen)  # one of the two goes

    assert caught(off, same=False) == 1.0  # the shared index clusters every pair of two languages
    assert not {ids[i] for _, a, b, s in pairs if not s for i in (a, b)} & set(on)  # per language: none
    for iso in [*PLAN, *UNSPACED]:
        assert caught(on, same=True, iso=iso) >= 0.95, iso
