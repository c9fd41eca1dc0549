"""normalize_bytes against the implementation before its fast path (normalize._normalize_bytes_slow),
byte for byte: on the real text in ../shared/data, on seeded random strings built from every kind of
character that NFKC, str.lower or the tables treat specially, on every code point in context, and
under each of the thresholds that pick a path. Also: the fast path's composition test covers CPython's
own quick-check data, and a deliberately broken fast path is caught."""

from __future__ import annotations

import contextlib
import random
import unicodedata

import pytest

from dedup import normalize as N
from testkit.neardup import real_documents

# --- characters that NFKC, lower or the tables treat specially -------------------------------------

COMBINING = [
    *map(chr, range(0x0300, 0x0370, 3)),  # Latin combining marks (ccc 230, 220, ...)
    "\u0344",  # combining Greek dialytika tonos: decomposes to two marks
    "\u0345",  # ypogegrammeni: ccc 240, upper/lower specials
    "\u0591",  # Hebrew accent
    "\u05b4",  # Hebrew point (in composition exclusions)
    "\u0651",  # Arabic shadda
    "\u093c",  # Devanagari nukta
    "\u094d",  # Devanagari virama
    "\u0e48",  # Thai tone mark
    "\u0f71",
    "\u0f72",
    "\u0f73",  # Tibetan: ccc 0 but decomposes to two non-starters
    "\u3099",
    "\u309a",  # kana voiced sound marks (compose with kana)
    "\u1d165",  # musical symbol combining stem
]
# starters that compose onto the character before them (NFC_QC=Maybe, ccc 0), and those before them
COMPOSE_SECOND = ["\u09be", "\u09d7", "\u0b3e", "\u0b56", "\u0b57", "\u0bbe", "\u0bd7", "\u0cc2"]
COMPOSE_SECOND += ["\u0cd5", "\u0d3e", "\u0d57", "\u0dcf", "\u0ddf", "\u102e", "\u1b35", "\U0001133e"]
COMPOSE_FIRST = ["\u09c7", "\u0b47", "\u0bc6", "\u0bc7", "\u0bd2", "\u0cbf", "\u0cc6", "\u0cca", "\u0d46"]
COMPOSE_FIRST += ["\u0d47", "\u0dd9", "\u1025", "\u1b05", "\U00011347", "e", "E", "a", "o", "u", "n"]
HANGUL = [
    *map(chr, range(0x1100, 0x1113, 3)),  # leading consonants (L)
    *map(chr, range(0x1161, 0x1176, 2)),  # vowels (V): compose onto L
    *map(chr, range(0x11A8, 0x11C3, 3)),  # trailing consonants (T): compose onto LV
    "\uac00",  # LV syllable
    "\uac01",  # LVT syllable
    "\ud55c",
    *map(chr, range(0x3131, 0x318F, 5)),  # compatibility jamo: NFKC gives conjoining jamo
    "\uffa1",
    "\uffc2",  # halfwidth jamo
]
GREEK = ["\u03a3", "\u03a3\u0391\u03a3", "\u03c2", "\u03c3", "\u03f9", "\U0001d6ba", "\U0001d6f4"]
GREEK += ["\u038c\u03a3", "\u1fbc", "\u0390", "\u03a9", "\u2126"]
CASE = ["\u0130", "\u0131", "I", "\u212a", "\u212b", "\u1e9e", "\u00df", "\u0149", "\u1e9b"]
CASE += ["\u01c4", "\u01c5", "\u01c6", "\u0132", "\u13a0", "\U00010400", "\U0001e900", "\u00c9", "\u00e9"]
FULLWIDTH = [
    *map(chr, range(0xFF01, 0xFF5F, 3)),  # fullwidth ASCII: letters, digits, punctuation
    "\uff76",
    "\uff9e",  # halfwidth katakana + halfwidth voiced mark: NFKC composes them
]
LIGATURES = [*map(chr, range(0xFB00, 0xFB07)), "\ufb13", "\ufdfa", "\ufefb", "\ufe8d", "\ufb2a", "\ufb1d"]
SUPER = [*map(chr, range(0x2070, 0x209D, 2)), "\u00b2", "\u00b3", "\u00b9", "\u00aa", "\u00ba"]
SUPER += ["\u00bd", "\u00bc", "\u2153", "\u2044", "\u2460", "\u2122", "\u2103", "\u2026", "\u2025"]
SPACES = ["\u00a0", "\u1680", *map(chr, range(0x2000, 0x200B)), "\u2028", "\u2029", "\u202f", "\u205f"]
SPACES += ["\u3000", "\u0085", "\x1c", "\x1d", "\x1e", "\x1f", "\t", "\n", "\r", "\x0b", "\x0c", " "]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\ufeff", "\u00ad", "\ufe0f", "\U000e0001", "\u034f"]
SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d\ude00", "\ude00\ud83d"]
NO_SPACE = ["\u4e2d", "\u6587", "\u3400", "\U00020000", "\U0002f800", "\uf900", "\u3042", "\u304b"]
NO_SPACE += ["\u30ab", "\u31f0", "\u0e01", "\u0e31", "\u0e33", "\u0eb3", "\u1000", "\u1780", "\u17b6"]
DIGITS = ["\u0663", "\u0969", "\u09e9", "\u0e53", "\uff13", "\U0001d7cf", "\u2463", "\u00b9", "7"]
PUNCT = ["\u2019", "\u201c", "\u201d", "\u2013", "\u2014", "\u2022", "\u20ac", "\u00a3", "\u00a9"]
PUNCT += ["\u2116", "\u00b0", "\U0001f600", "\U0001f1fa\U0001f1f8", "\u2010", "\u00bf", "\u061f"]
SCRIPTS = ["\u0627", "\u0644", "\u05d0", "\u0915", "\u0958", "\u0929", "\u0962", "\u0416", "\u0436"]
SCRIPTS += ["\u0401", "\u10d0", "\u0531", "\u0561", "\ua7ae", "\u0100", "\u0101"]
ASCII_BITS = [*"abcXYZ019.,;:!?'\"()[]-_/\\@#$%^&*+=<>|~`", "the", "Word", "A1", "e", "E", "i", "I"]
CLASSES = [
    COMBINING,
    COMPOSE_SECOND,
    COMPOSE_FIRST,
    HANGUL,
    GREEK,
    CASE,
    FULLWIDTH,
    LIGATURES,
    SUPER,
    SPACES,
    INVISIBLE,
    SURROGATES,
    NO_SPACE,
    DIGITS,
    PUNCT,
    SCRIPTS,
]
INTERESTING = sorted({c for cls in CLASSES for c in cls})

ENGLISH = (
    "The quick brown Fox jumps over the lazy dog, 3 times; then (again) it RUNS: 42.5% faster! "
    'Meanwhile, the committee\'s report - dated 12/03/2021 - said "no" to every proposal.\n'
    "Second paragraph:\tdata, more data... and an e-mail address: someone@example.org. "
)


# --- comparison helpers -----------------------------------------------------------------------------


def difference(text: str) -> str | None:
    """None when the new and old normalize_bytes agree on `text`, else a description."""
    new, old = N.normalize_bytes(text), N._normalize_bytes_slow(text)
    if new == old:
        return None
    i = next((k for k, (a, b) in enumerate(zip(new, old, strict=False)) if a != b), min(len(new), len(old)))
    return (
        f"input {text[:300]!r}{'...' if len(text) > 300 else ''} (length {len(text)}): first difference "
        f"at byte {i}: new {new[max(0, i - 30) : i + 30]!r} vs old {old[max(0, i - 30) : i + 30]!r}"
    )


def first_difference(texts) -> str | None:
    return next((d for t in texts if (d := difference(t)) is not None), None)


def assert_same(texts) -> None:
    d = first_difference(texts)
    assert d is None, d


@contextlib.contextmanager
def count_paths():
    """Counts normalize_bytes calls that reached the general path (general["calls"])."""
    general = N._normalize_bytes_general
    counts = {"calls": 0}

    def counting(*args):
        counts["calls"] += 1
        return general(*args)

    N._normalize_bytes_general = counting
    try:
        yield counts
    finally:
        N._normalize_bytes_general = general


def fast_share(texts: list[str]) -> float:
    with count_paths() as counts:
        for t in texts:
            N.normalize_bytes(t)
    return 1 - counts["calls"] / len(texts)


# --- corpora ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_corpus(data_dir) -> dict[str, list[str]]:
    """Real text: the dedup test documents, Tatoeba, and the Leipzig sentences of 75 languages (each
    sentence, word pairs, ~1,700-character documents, and as a paragraph inside an English document)."""
    rng = random.Random(11)
    docs = real_documents(data_dir)
    tatoeba = [
        line.split("\t")[3]
        for line in (data_dir / "langid" / "tatoeba_long.tsv").read_text(encoding="utf-8").splitlines()[1:]
    ]
    leipzig = data_dir / "langid" / "leipzig"
    sentences, pairs, pure, mixed = [], [], [], []
    english = [d for d in docs if d.isascii()][:200]
    for f in sorted((leipzig / "sentences").glob("*.txt")):
        sents = [s for s in f.read_text(encoding="utf-8").splitlines() if s.strip()]
        sentences += sents
        for i in range(0, len(sents), 12):
            pure.append(" ".join(sents[i : i + 12]))
        for _ in range(6):
            paras = rng.choice(english).split("\n")
            paras.insert(rng.randrange(len(paras) + 1), " ".join(rng.sample(sents, rng.randint(1, 4))))
            mixed.append("\n".join(paras))
    for f in sorted((leipzig / "word-pairs").glob("*.txt")):
        pairs += f.read_text(encoding="utf-8").splitlines()
    return {
        "documents": docs,
        "tatoeba": tatoeba,
        "leipzig sentences": sentences,
        "leipzig word pairs": pairs,
        "leipzig documents": pure,
        "leipzig paragraph in English": mixed,
    }


def generated(n: int, seed: int) -> list[str]:
    """Seeded random strings: ASCII text with a few special characters inserted (where the fast path
    applies) and dense mixes of special characters, ASCII and random code points."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 2 == 0:  # light: English with 1-6 insertions, often right after a letter
            text = ENGLISH[: rng.randint(40, len(ENGLISH))]
            for _ in range(rng.randint(1, 6)):
                item = rng.choice(rng.choice(CLASSES))
                pos = rng.randrange(len(text) + 1)
                text = text[:pos] + item + text[pos:]
        else:  # dense: 1-30 items, ASCII between some of them
            parts = []
            for _ in range(rng.randint(1, 30)):
                r = rng.random()
                if r < 0.7:
                    parts.append(rng.choice(rng.choice(CLASSES)))
                elif r < 0.9:
                    parts.append(rng.choice(ASCII_BITS))
                else:
                    parts.append(chr(rng.randrange(0x110000)))
            text = "".join(parts)
            if rng.random() < 0.5:
                text = ENGLISH * rng.randint(1, 4) + text
        out.append(text)
    return out


def pair_strings() -> list[str]:
    """Every ordered pair of the interesting characters, standing between ASCII letters, padded with
    ASCII so that the fast path is tried."""
    pad = " " + ENGLISH[:100]
    return [f"x{a}{b}y{a}{pad}" for a in INTERESTING for b in INTERESTING]


# --- tests ------------------------------------------------------------------------------------------

# The thresholds that pick a path, pushed to each extreme: every document tries the fast path however
# much non-ASCII it has and however many characters it must replace; or every non-ASCII document takes
# the general path, which always translates each run, or always the whole string.
THRESHOLDS = {
    "fast path everywhere": {"_FAST_MAX_SHARE": 0, "_MAX_REPLACED": 10**9},
    "general: runs": {"_FAST_MAX_SHARE": 10**9, "_CHARS_PER_RUN": 0},
    "general: whole string": {"_FAST_MAX_SHARE": 10**9, "_CHARS_PER_RUN": 10**9},
}


def test_real_text_matches_the_old_implementation(real_corpus):
    for name, texts in real_corpus.items():
        d = first_difference(texts)
        assert d is None, f"{name}: {d}"
    # The English documents' non-ASCII characters (quotes, dashes, accents) are the fast path's.
    assert fast_share([t for t in real_corpus["documents"] if not t.isascii()]) > 0.95


@pytest.mark.parametrize("setting", THRESHOLDS)
def test_each_path_matches_the_old_implementation(setting, real_corpus, monkeypatch):
    for attr, value in THRESHOLDS[setting].items():
        monkeypatch.setattr(N, attr, value)
    sample = [t for texts in real_corpus.values() for t in texts[::7]]
    assert_same(sample)
    assert_same(generated(1000, seed=5))
    if setting == "fast path everywhere":
        assert fast_share(sample) > 0.5
    elif setting.startswith("general"):
        assert fast_share(sample) == pytest.approx(
            sum(t.isascii() for t in sample) / len(sample)
        )  # only ASCII skips it


def test_generated_strings_match_the_old_implementation():
    texts = generated(6000, seed=20240601)
    assert_same(texts)
    # both paths were exercised: the light half mostly takes the fast path, the dense half mostly not
    light, dense = texts[0::2], texts[1::2]
    assert fast_share(light) > 0.4
    assert fast_share(dense) < 0.5


def test_adjacent_special_characters_match_the_old_implementation():
    texts = pair_strings()
    assert_same(texts)
    assert fast_share(texts) > 0.3


@pytest.mark.parametrize(
    "text",
    [
        "cafe\u0301 and e\u0301te\u0301",  # e + combining acute -> e-acute under NFKC
        "\u1100\u1161 \u1100\u1161\u11a8 \uac00\u11a8",  # Hangul L+V, L+V+T, LV+T -> syllables
        "\u0b47\u0b3e \u0dd9\u0dcf",  # Oriya and Sinhala two-part vowels (starters that compose)
        "\uff76\uff9e \u304b\u3099",  # halfwidth katakana + voiced mark, kana + voiced mark
        "\u03a3\u0391\u03a3 \u03a3 a\u03a3 \u03a3a \u03f9 a\u03f9",  # final sigma, lunate sigma
        "\u0130stanbul \u212a\u212b \uff26\uff55\uff4c\uff4c \ufb01\ufb03 x\u00b2 \u00bd \u2026",
        "a\u00a0b\u2028c\u3000d\x1ce\x1ff\u0085g \u2460 \u0663\u0969 \ud800\udc00 \udfff",
        "\u4e2d\u6587 \u0e01\u0e48\u0e33 \U00020000 \uf900 \U0002f800",
    ],
)
def test_known_hard_cases(text):
    for t in (text, f"Some plain English words before {text} and after it, enough of them to pad."):
        d = difference(t)
        assert d is None, d
        # and the plain reference agrees
        assert N.normalize_text(t) == N.normalize_text_reference(t), t


def test_every_code_point_in_context(monkeypatch):
    """Every code point, between neighbours that composition could join it to, on the path it takes:
    those the fast path accepts in groups (the group must take the fast path: the thresholds are
    lifted, which changes only which path runs), the rest alone."""
    monkeypatch.setattr(N, "_char_cache", {})
    monkeypatch.setattr(N, "_FAST_MAX_SHARE", 0)
    monkeypatch.setattr(N, "_MAX_REPLACED", 10**9)
    # composition firsts (ASCII, precomposed, Oriya, Sinhala, Hangul L, LV, compatibility jamo -> L)
    neighbours = ["e", "A", "\u00e9", "\u0b47", "\u1100", "\uac00", "\u3131", "\u304b", "o", "\u0dd9"]
    assert all(n.isascii() or N._char_bytes(n) is not None for n in neighbours)
    pad = "The end."
    fast, slow = [], []
    for cp in range(0x110000):
        (fast if N._char_bytes(chr(cp)) is not None else slow).append(chr(cp))
    assert len(slow) < 5000  # combining marks, back-composing starters, sigmas and a few more
    with count_paths() as counts:
        for i in range(0, len(fast), 12):
            group = fast[i : i + 12]
            text = " ".join(
                f"{neighbours[(i + k) % len(neighbours)]}{c}{neighbours[(i + 3 * k + 1) % len(neighbours)]}{c}"
                for k, c in enumerate(group)
            )
            d = difference(f"{text} {pad}")
            assert d is None, d
        assert counts["calls"] == 0, "a group of accepted characters left the fast path"
    for c in slow:
        for text in (f"e{c}A{c}{c}\u1100{c} {pad}", f"{c}\u0b47{c}\u1161"):
            d = difference(text)
            assert d is None, d


def test_composes_backward_covers_the_quick_check_maybe_characters():
    """CPython's unicodedata.normalize returns its argument itself when the quick check says YES
    (an implementation detail, used here only to read the quick-check data): a character that is
    normalized on its own but does not pass the quick check doubled can compose with what precedes
    it (NFC_QC/NFKC_QC=Maybe), and the fast path must refuse it."""
    back = N._composes_backward()
    missing = []
    for cp in range(0x110000):
        c = chr(cp)
        doubled = c + c
        for form in ("NFC", "NFKC"):
            maybe = (
                unicodedata.normalize(form, c) == c and unicodedata.normalize(form, doubled) is not doubled
            )
            if maybe and c not in back:
                missing.append((form, hex(cp)))
        if cp >= N._TABLE_LIMIT:
            assert not unicodedata.decomposition(c), hex(cp)
    assert not missing, missing[:20]
    assert not any(chr(cp) in back for cp in range(128))


def test_a_broken_fast_path_is_caught(monkeypatch):
    """The comparisons can fail: with the composition check removed, the fast path accepts Hangul
    vowels and the like on their own, and the pair strings show the difference."""
    assert first_difference(pair_strings()) is None
    monkeypatch.setattr(N, "_char_cache", {})
    monkeypatch.setattr(N, "_composes_backward", lambda: frozenset())
    d = first_difference(pair_strings())
    assert d is not None
