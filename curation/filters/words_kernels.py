"""numba kernel for GopherRepetition's n-gram statistics (see curation/filters/words.py for the why).

datatrove's definitions (gopher_repetition_filter.py), which the kernel reproduces:
- top n-gram chars (n in top_n_grams): n-grams are `" ".join(words[i:i+n])`; the most frequent one,
  ties going to the one seen first (Counter.most_common(1)), gives `len(ngram) * count`;
- duplicated n-gram chars (n in dup_n_grams): n-grams are `"".join(words[i:i+n])`; a left-to-right
  scan adds `len(ngram)` and jumps n words ahead when it has seen the n-gram before, else adds it
  to the seen set and moves one word.

An n-gram is a substring of `" ".join(words)` (top) or `"".join(words)` (duplicated): it is looked
up in an open-addressing table by a polynomial hash of its code points (from prefix hashes, O(1)
per n-gram) and confirmed by comparing the code points, so the counts are exact.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_BASE = np.uint64(0x100000001B3)  # FNV-1a's 64-bit prime, an odd multiplier
_ONE = np.uint64(1)


@njit(cache=True)
def _prefix(cps):
    """Polynomial prefix hashes of `cps` (wrapping uint64) and the powers of the base."""
    n = cps.shape[0]
    h = np.zeros(n + 1, dtype=np.uint64)
    pw = np.ones(n + 1, dtype=np.uint64)
    for i in range(n):
        h[i + 1] = h[i] * _BASE + cps[i] + _ONE
        pw[i + 1] = pw[i] * _BASE
    return h, pw


@njit(cache=True)
def _same(cps, a, b, length):
    for k in range(length):  # noqa: SIM110  (a loop numba compiles; all() over a generator it does not)
        if cps[a + k] != cps[b + k]:
            return False
    return True


@njit(cache=True)
def _slot(cps, table_hash, table_at, table_len, stamp, gen, mask, hv, a, length):
    """The table slot of the substring cps[a:a+length] (hash hv) and whether it was there already.

    A hash match is confirmed by comparing the code points, so the answer is exact whatever
    the hash; the hash only has to spread the slots.
    """
    s = np.int64(hv & mask)
    while stamp[s] == gen:
        if table_hash[s] == hv and table_len[s] == length and _same(cps, table_at[s], a, length):
            return s, True
        s = (s + 1) & np.int64(mask)
    stamp[s] = gen
    table_hash[s], table_at[s], table_len[s] = hv, a, length
    return s, False


@njit(cache=True)
def _top_ngrams(cps, h, pw, st, n, table, gen):
    """len(ngram) * count of the most frequent " ".join n-gram, the first seen winning ties; -1 if none."""
    table_hash, table_at, table_len, stamp, count, first, mask = table
    n_words = st.shape[0] - 1
    best_count, best_first, best_len = 0, 0, 0
    for i in range(n_words - n + 1):
        a, b = st[i] + i, st[i + n] + i + n - 1  # word k starts at st[k] + k in " ".join(words)
        s, seen = _slot(
            cps, table_hash, table_at, table_len, stamp, gen, mask, h[b] - h[a] * pw[b - a], a, b - a
        )
        if not seen:
            count[s], first[s] = 0, i
        count[s] += 1
        c = count[s]
        if c > best_count or (c == best_count and first[s] < best_first):
            best_count, best_first, best_len = c, first[s], b - a
    return best_count * best_len if n_words - n + 1 > 0 else -1


@njit(cache=True)
def _dup_ngrams(cps, h, pw, st, n, table, gen):
    """Characters of the "".join n-grams seen before, in datatrove's left-to-right jumping scan."""
    table_hash, table_at, table_len, stamp, _count, _first, mask = table
    n_words = st.shape[0] - 1
    idx, rep = 0, 0
    while idx < n_words - n + 1:
        a, b = st[idx], st[idx + n]
        _s, seen = _slot(
            cps, table_hash, table_at, table_len, stamp, gen, mask, h[b] - h[a] * pw[b - a], a, b - a
        )
        if seen:
            rep += b - a
            idx += n
        else:
            idx += 1
    return rep


@njit(cache=True)
def _ngram_kernel(spaced, joined, lens, top_ns, dup_ns):
    n_words = lens.shape[0]
    size = 1
    while size < 2 * n_words + 2:
        size *= 2
    table = (
        np.zeros(size, dtype=np.uint64),  # hash
        np.zeros(size, dtype=np.int64),  # where the first occurrence starts
        np.zeros(size, dtype=np.int64),  # length
        np.zeros(size, dtype=np.int64),  # generation that owns the slot (one per n: no clearing)
        np.zeros(size, dtype=np.int64),  # count
        np.zeros(size, dtype=np.int64),  # first n-gram index
        np.uint64(size - 1),
    )
    st = np.zeros(n_words + 1, dtype=np.int64)  # word k starts at st[k] in "".join(words)
    for k in range(n_words):
        st[k + 1] = st[k] + lens[k]
    top = np.empty(top_ns.shape[0], dtype=np.int64)
    h, pw = _prefix(spaced)
    for j in range(top_ns.shape[0]):
        top[j] = _top_ngrams(spaced, h, pw, st, top_ns[j], table, j + 1)
    dup = np.empty(dup_ns.shape[0], dtype=np.int64)
    h, pw = _prefix(joined)
    for j in range(dup_ns.shape[0]):
        dup[j] = _dup_ngrams(joined, h, pw, st, dup_ns[j], table, top_ns.shape[0] + j + 1)
    return top, dup


def _code_points(s: str) -> np.ndarray:
    # surrogatepass: a lone surrogate (from a lenient decode) is a code point like any other here
    return np.frombuffer(s.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)


def ngram_chars(
    words: list[str], top_ns: tuple[int, ...], dup_ns: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """(top n-gram chars per n of top_ns, -1 where there is no n-gram; duplicated n-gram chars per n of dup_ns)."""
    lens = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    return _ngram_kernel(
        _code_points(" ".join(words)),
        _code_points("".join(words)),
        lens,
        np.asarray(top_ns, dtype=np.int64),
        np.asarray(dup_ns, dtype=np.int64),
    )
