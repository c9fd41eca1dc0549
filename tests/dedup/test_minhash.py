"""MinHash signatures, shingles and band parameters, checked against datasketch and exact Jaccard."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from datasketch import MinHash
from datasketch.lsh import _optimal_param

from core.errors import ConfigError
from dedup.minhash import (
    MinHashConfig,
    MinHasher,
    estimate_jaccard,
    exact_jaccard,
    hash_strings,
    optimal_bands,
    shingle_hashes,
    shingle_strings,
)
from dedup.normalize import normalize_text
from testkit.neardup import edit, real_documents, vocabulary


@pytest.fixture(scope="module")
def docs(data_dir):
    return real_documents(data_dir)


@pytest.fixture(scope="module")
def pairs(docs):
    """(a, b) real documents and edited copies spanning true Jaccard from ~0.2 to 1."""
    rng = random.Random(7)
    vocab = vocabulary(docs)
    out = []
    for i, t in enumerate(docs[:80]):
        frac = [0.0, 0.005, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3][i % 8]
        out.append((t, edit(t, frac, rng, vocab)))
    return out


def test_shingle_hash_equals_string_hash(docs):
    for t in docs[:50]:
        norm = normalize_text(t)
        assert np.array_equal(shingle_hashes(norm, 5), hash_strings(shingle_strings(norm, 5)))


def test_distinct_shingles_get_distinct_hashes(docs):
    strings = sorted({s for t in docs[:200] for s in shingle_strings(normalize_text(t), 5)})
    hashes = hash_strings(strings)
    # 64-bit hashes of ~10^5 distinct strings: a collision would have probability ~1e-9.
    assert len(strings) > 50_000
    assert np.unique(hashes).size == len(strings)


def test_signature_estimates_agree_with_datasketch_within_sampling_error(pairs):
    """Both estimators are unbiased with variance J(1-J)/num_perm: compare each to the truth."""
    num_perm = 128
    hasher = MinHasher(MinHashConfig(num_perm=num_perm, seed=1))
    ours_err, ds_err = [], []
    for a, b in pairs:
        na, nb = normalize_text(a), normalize_text(b)
        sa, sb = shingle_strings(na, 5), shingle_strings(nb, 5)
        true_j = exact_jaccard(hash_strings(sa), hash_strings(sb))
        ours = estimate_jaccard(hasher.text_signature(na), hasher.text_signature(nb))
        ma, mb = MinHash(num_perm=num_perm, seed=1), MinHash(num_perm=num_perm, seed=1)
        ma.update_batch([s.encode() for s in sa])
        mb.update_batch([s.encode() for s in sb])
        ds = ma.jaccard(mb)
        sigma = math.sqrt(max(true_j * (1 - true_j), 0.01) / num_perm)
        # 4.5 sigma per pair: with 80 pairs the chance of any false alarm is ~5e-4.
        assert abs(ours - true_j) <= 4.5 * sigma, (true_j, ours)
        ours_err.append((ours - true_j) ** 2)
        ds_err.append((ds - true_j) ** 2)
    # Same estimator quality: mean squared errors within a factor of 2 of each other (the ratio of
    # two chi-square-like sums over 80 pairs stays well inside that unless one estimator is biased).
    assert np.mean(ours_err) <= 2.0 * np.mean(ds_err) + 1e-4
    assert np.mean(ds_err) <= 2.0 * np.mean(ours_err) + 1e-4


@pytest.mark.parametrize(
    ("ngram", "num_perm", "bands", "rows"), [(5, 128, 9, 13), (1, 7, 3, 2), (3, 256, 32, 8)]
)
def test_compiled_kernels_equal_numpy_reference(data_dir, docs, ngram, num_perm, bands, rows):
    """dedup.kernels (numba) gives bit-identical signatures, counts and band keys to the numpy code,
    on real pages in many scripts, plus empty, one-token and exactly-one-shingle texts."""
    tatoeba = (data_dir / "langid" / "tatoeba_long.tsv").read_text().splitlines()[1:400]
    texts = (
        docs[:300]
        + [line.split("\t")[3] for line in tatoeba]
        + ["", "word", "a b c d e f g"[: 2 * ngram - 1]]
    )
    norms = [normalize_text(t).encode("utf-8", "surrogatepass") for t in texts]
    h = MinHasher(MinHashConfig(ngram=ngram, num_perm=num_perm, bands=bands, rows=rows, seed=3))
    sigs, counts = h.sign_batch(norms)
    keys = h.band_keys_batch(sigs)
    assert counts.min() == 0 and (counts == 1).any() and counts.max() > 500  # the edge cases are there
    for norm, sig, count, key in zip(norms, sigs, counts, keys):
        hashes = shingle_hashes(norm, ngram)
        assert count == hashes.size
        ref = h.signature(hashes)
        assert np.array_equal(sig, ref)
        assert np.array_equal(key, h.band_keys(ref))


def test_identical_and_disjoint(docs):
    """A page and a copy that differs only in spacing agree on every minimum and every band key, even
    signed by another MinHasher of the same config (its permutations come from the seed alone, so
    executors agree); another seed gives other minima; an unrelated page shares no band."""
    cfg = MinHashConfig()
    h, other_instance = MinHasher(cfg), MinHasher(cfg)
    respaced = "  " + docs[0].replace(" ", " \t ").replace("\n", " \n\n ") + "\n"
    a, a_copy, b = normalize_text(docs[0]), normalize_text(respaced), normalize_text(docs[1])
    sig_a, sig_copy, sig_b = h.text_signature(a), other_instance.text_signature(a_copy), h.text_signature(b)
    assert estimate_jaccard(sig_a, sig_copy) == 1.0
    assert np.array_equal(h.band_keys(sig_a), other_instance.band_keys(sig_copy))
    assert estimate_jaccard(sig_a, MinHasher(MinHashConfig(seed=cfg.seed + 1)).text_signature(a)) < 0.05
    assert estimate_jaccard(sig_a, sig_b) < 0.05
    assert not set(h.band_keys(sig_a).tolist()) & set(h.band_keys(sig_b).tolist())


def test_band_keys_depend_on_band_position():
    h = MinHasher(MinHashConfig(bands=4, rows=2, num_perm=8))
    sig = np.array([5, 5, 5, 5, 5, 5, 5, 5], dtype=np.uint32)  # every band holds the same values
    keys = h.band_keys(sig)
    assert len(set(keys.tolist())) == 4


@pytest.mark.parametrize(
    ("threshold", "num_perm"), [(0.8, 128), (0.8, 112), (0.7, 256), (0.5, 64), (0.9, 128)]
)
def test_optimal_bands_match_datasketch(threshold, num_perm):
    assert optimal_bands(threshold, num_perm) == _optimal_param(threshold, num_perm, 0.5, 0.5)


@pytest.mark.parametrize("lang", ["zh", "zh-Hant", "ja", "th", "lo", "km", "my"])
def test_scripts_without_spaces_still_shingle(data_dir, lang):
    """Real Tatoeba sentences in scripts written without spaces give (many) distinct shingles."""
    rows = [
        line.split("\t") for line in (data_dir / "langid" / "tatoeba_long.tsv").read_text().splitlines()[1:]
    ]
    texts = [r[3] for r in rows if r[0] == lang]
    assert texts
    for text in texts:
        hashes = shingle_hashes(normalize_text(text), 5)
        # Character tokens: a 30+ character sentence has well over 10 shingles, nearly all distinct.
        assert hashes.size >= 10, text
        assert np.unique(hashes).size >= 0.8 * hashes.size


def test_too_short_has_no_signature():
    h = MinHasher(MinHashConfig(ngram=5))
    assert h.text_signature(normalize_text("only four words here")) is None
    assert h.text_signature(normalize_text("exactly five words are here")) is not None


def test_normalization_makes_trivial_variants_equal():
    a = "The  Quick, brown fox — jumped over 12 lazy dogs!"
    b = "the quick brown fox jumped over 99 lazy dogs"
    assert normalize_text(a) == normalize_text(b)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threshold": 1.5}, "minhash.threshold"),
        ({"bands": 4}, "together"),
        ({"bands": 20, "rows": 10, "num_perm": 128}, "exceeds num_perm"),
        ({"verify": "maybe"}, "minhash.verify"),
        ({"ngram": 0}, "minhash.ngram"),
    ],
)
def test_config_errors_name_the_key(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        MinHashConfig(**kwargs)


def test_config_string_names_the_parameters():
    s = str(MinHashConfig(ngram=5, num_perm=112, bands=14, rows=8, seed=1))
    assert s.startswith("5ng_112p_14x8_")
    assert str(MinHashConfig()) != str(MinHashConfig(seed=2))


def test_fast_normalization_equals_the_plain_one(docs, data_dir):
    from dedup.normalize import normalize_text_reference

    tatoeba = [
        line.split("\t")[3]
        for line in (data_dir / "langid" / "tatoeba_long.tsv").read_text().splitlines()[1:]
    ]
    tricky = [
        "a\u2028b\x1fc\u00a0d\u3000e",
        "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
        "İstanbul ǅ ß ﬁ",
        "\ud800 lone surrogate",
    ]
    for text in [*docs[:300], *tatoeba, *tricky]:
        assert normalize_text(text) == normalize_text_reference(text), text[:80]
