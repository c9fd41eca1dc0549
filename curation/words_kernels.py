"""numba kernel for GopherRepetition's n-gram statistics (see curation/words.py for the why).

datatrove's definitions (gopher_repetition_filter.py), which the kernel reproduces:
- top n-gram chars (n in top_n_grams): n-grams are `" ".join(words[i:i+n])`; the most frequent one,
  ties going to the one seen first (Counter.most_common(1)), gives `len(ngram) * count`;
- duplicated n-gram chars (n in dup_n_grams): n-grams are `"".join(words[i:i+n])`; a left-to-right
  scan adds `len(ngram)` and jumps n words ahead when it has seen the n-gram before, else adds it
  to the seen set and moves one word.

An n-gram is a substring of `" ".join(words)` (top) or `"".join(words)` (duplicated), named by two
polynomial hashes of its code points modulo primes below 2**31 plus its length, so every
product fits an int64 and equal strings always get equal names.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_M1, _B1 = 2147483647, 131_071
_M2, _B2 = 2147483629, 65_599


@njit(cache=True)
def _prefix(cps, mod, base):
    n = cps.shape[0]
    h = np.zeros(n + 1, dtype=np.int64)
    pw = np.ones(n + 1, dtype=np.int64)
    for i in range(n):
        h[i + 1] = (h[i] * base + cps[i] + 1) % mod
        pw[i + 1] = (pw[i] * base) % mod
    return h, pw


@njit(cache=True)
def _sub(h, pw, mod, a, b):
    return (h[b] - h[a] * pw[b - a] % mod + mod) % mod


@njit(cache=True)
def _slot(keys1, keys2, lens, stamp, gen, mask, k1, k2, length):
    """The table slot of (k1, k2, length) and whether it was there already (else it is claimed)."""
    s = (k1 * 0x9E3779B1 + k2 * 0x85EBCA77 + length) & mask
    while stamp[s] == gen:
        if keys1[s] == k1 and keys2[s] == k2 and lens[s] == length:
            return s, True
        s = (s + 1) & mask
    stamp[s] = gen
    keys1[s], keys2[s], lens[s] = k1, k2, length
    return s, False


@njit(cache=True)
def _ngram_kernel(spaced, joined, lens, top_ns, dup_ns):
    n_words = lens.shape[0]
    size = 1
    while size < 2 * n_words + 2:
        size *= 2
    mask = size - 1
    keys1 = np.zeros(size, dtype=np.int64)
    keys2 = np.zeros(size, dtype=np.int64)
    klen = np.zeros(size, dtype=np.int64)
    stamp = np.zeros(size, dtype=np.int64)
    count = np.zeros(size, dtype=np.int64)
    first = np.zeros(size, dtype=np.int64)
    # word k starts at st[k] in "".join(words) and at st[k] + k in " ".join(words)
    st = np.zeros(n_words + 1, dtype=np.int64)
    for k in range(n_words):
        st[k + 1] = st[k] + lens[k]
    gen = 0

    top = np.full(top_ns.shape[0], -1, dtype=np.int64)  # -1: fewer than n words (datatrove skips)
    h1, p1 = _prefix(spaced, _M1, _B1)
    h2, p2 = _prefix(spaced, _M2, _B2)
    for j in range(top_ns.shape[0]):
        n = top_ns[j]
        gen += 1
        best_count, best_first, best_len = 0, 0, 0
        for i in range(n_words - n + 1):
            a, b = st[i] + i, st[i + n] + i + n - 1
            s, seen = _slot(
                keys1, keys2, klen, stamp, gen, mask, _sub(h1, p1, _M1, a, b), _sub(h2, p2, _M2, a, b), b - a
            )
            if not seen:
                count[s], first[s] = 0, i
            count[s] += 1
            c = count[s]
            if c > best_count or (c == best_count and first[s] < best_first):
                best_count, best_first, best_len = c, first[s], b - a
        if n_words - n + 1 > 0:
            top[j] = best_count * best_len

    dup = np.zeros(dup_ns.shape[0], dtype=np.int64)
    h1, p1 = _prefix(joined, _M1, _B1)
    h2, p2 = _prefix(joined, _M2, _B2)
    for j in range(dup_ns.shape[0]):
        n = dup_ns[j]
        gen += 1
        idx, rep = 0, 0
        while idx < n_words - n + 1:
            a, b = st[idx], st[idx + n]
            s, seen = _slot(
                keys1, keys2, klen, stamp, gen, mask, _sub(h1, p1, _M1, a, b), _sub(h2, p2, _M2, a, b), b - a
            )
            if seen:
                rep += b - a
                idx += n
            else:
                idx += 1
        dup[j] = rep
    return top, dup


def _code_points(s: str) -> np.ndarray:
    # surrogatepass: a lone surrogate (from a lenient decode) is a code point like any other here
    return np.frombuffer(s.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int64)


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
