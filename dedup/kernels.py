"""Compiled (numba) kernels: shingle hashing, MinHash signatures, band keys, and the shingles of a
batch of documents found in a sorted key set (decontamination, dedup.decontam), a batch per call.

They compute exactly what the numpy code in dedup.minhash computes — the same polynomial shingle
hash, fmix64, multiply-add-shift permutations and band hash — bit for bit (a test checks it on real
text), but in one pass per document with no temporaries. Two things make them several times faster
than the numpy path: the shingle hashes never go to memory as a (shingles x permutations) matrix,
and the per-permutation minimum loop is vectorised by LLVM for the host CPU (AVX-512 / AVX2).
One call covers a batch of documents, so Python pays one dispatch per batch, not per document.
`ngram_hits` shares the one token pass (`_token_pass`, `_shingle`), so a decontamination n-gram
hashes exactly as a MinHash shingle of the same length does.

Numba compiles on first use (about a second) and caches the machine code next to this file
(`cache=True`), so Spark's reused Python workers compile at most once per machine.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Compile-time constants for numba; dedup.minhash's numpy reference imports the same ones.
POLY_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd, so invertible mod 2^64
POLY_BASE_INV = np.uint64(pow(0x9E3779B97F4A7C15, -1, 1 << 64))
FMIX_C1 = np.uint64(0xFF51AFD7ED558CCD)
FMIX_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_SPACE = np.uint8(32)
_S33 = np.uint64(33)
_S32 = np.uint64(32)
_S7 = np.uint64(7)
_S6 = np.uint64(6)
_LOW6 = np.uint64(63)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, inline="always")
def _fmix64(h):
    h ^= h >> _S33
    h *= FMIX_C1
    h ^= h >> _S33
    h *= FMIX_C2
    return h ^ (h >> _S33)


@njit(cache=True, inline="always")
def _token_pass(data, lo, hi, tok_start, tok_end, pre_start, inv_start, pre_end):
    """One pass over the bytes data[lo:hi] (normalized UTF-8, one space between tokens): per token,
    its start and end (relative to lo), the prefix sum and inverse power at its start and the prefix
    sum at its end (prefix[i] = sum_{j<i} byte_j * B^j mod 2^64, as minhash._range_hashes).

    The five arrays hold at least (spaces in the range) + 1 entries; returns the number of tokens.
    """
    n = hi - lo
    ntok = 0
    prefix = _ZERO
    pw = _ONE
    ipw = _ONE
    if n > 0:
        tok_start[0] = 0
        pre_start[0] = _ZERO
        inv_start[0] = _ONE
    for i in range(n):
        c = data[lo + i]
        if c == _SPACE:
            tok_end[ntok] = i
            pre_end[ntok] = prefix
            ntok += 1
            tok_start[ntok] = i + 1
            pre_start[ntok] = prefix + np.uint64(c) * pw
            inv_start[ntok] = ipw * POLY_BASE_INV
        prefix += np.uint64(c) * pw
        pw *= POLY_BASE
        ipw *= POLY_BASE_INV
    if n > 0:
        tok_end[ntok] = n
        pre_end[ntok] = prefix
        ntok += 1
    return ntok


@njit(cache=True, inline="always")
def _tokens(data, lo, hi):
    """(number of tokens, and the five arrays of `_token_pass`) of the document data[lo:hi]."""
    m = _spaces(data, lo, hi) + 1
    tok_start = np.empty(m, dtype=np.int64)
    tok_end = np.empty(m, dtype=np.int64)
    pre_start = np.empty(m, dtype=np.uint64)
    inv_start = np.empty(m, dtype=np.uint64)
    pre_end = np.empty(m, dtype=np.uint64)
    ntok = _token_pass(data, lo, hi, tok_start, tok_end, pre_start, inv_start, pre_end)
    return ntok, tok_start, tok_end, pre_start, inv_start, pre_end


@njit(cache=True, inline="always")
def _shingle(tok_start, tok_end, pre_start, inv_start, pre_end, s, e):
    """Hash of the shingle of tokens s..e (inclusive): minhash._range_hashes of its byte range."""
    raw = (pre_end[e] - pre_start[s]) * inv_start[s]
    return _fmix64(raw ^ (np.uint64(tok_end[e] - tok_start[s]) * FMIX_C2))


@njit(cache=True, inline="always")
def _spaces(data, lo, hi):
    spaces = 0
    for i in range(lo, hi):
        spaces += data[i] == _SPACE
    return spaces


@njit(cache=True, nogil=True, boundscheck=False)
def sign_batch(data, offsets, ngram, a, b, sigs, n_shingles):
    """Signatures of documents data[offsets[d]:offsets[d+1]] (normalized UTF-8, one space between tokens).

    sigs: uint32[n_docs, num_perm], written (0xFFFFFFFF everywhere for a document with fewer tokens
    than `ngram`); n_shingles: int64[n_docs], written.
    """
    num_perm = a.shape[0]
    best = np.empty(num_perm, dtype=np.uint64)
    for d in range(offsets.shape[0] - 1):
        lo, hi = offsets[d], offsets[d + 1]
        ntok, tok_start, tok_end, pre_start, inv_start, pre_end = _tokens(data, lo, hi)
        k = ntok - ngram + 1
        best[:] = _MAX
        if k > 0:
            for s in range(k):
                h = _shingle(tok_start, tok_end, pre_start, inv_start, pre_end, s, s + ngram - 1)
                for p in range(num_perm):
                    v = a[p] * h + b[p]
                    if v < best[p]:
                        best[p] = v
            n_shingles[d] = k
        else:
            n_shingles[d] = 0
        for p in range(num_perm):
            sigs[d, p] = np.uint32(best[p] >> _S32)


@njit(cache=True, nogil=True, boundscheck=False)
def band_keys_batch(sigs, bands, rows, seeds, out):
    """out[d, j] = hash of band j of signature d (the same mixing as MinHasher.band_keys)."""
    for d in range(sigs.shape[0]):
        for j in range(bands):
            h = seeds[j]
            for r in range(rows):
                h = _fmix64(h ^ np.uint64(sigs[d, j * rows + r]) ^ (h << _S7))
            out[d, j] = h


@njit(cache=True, nogil=True, boundscheck=False)
def ngram_hits(
    data, offsets, ngram, keys, buckets, shift, bitmap, bitmap_shift, hit_doc, hit_key, hit_start, hit_end
):
    """Every shingle of documents data[offsets[d]:offsets[d+1]] found in the sorted array `keys`.

    The shingle hash is the one `sign_batch` uses. `bitmap` has bit `key >> bitmap_shift` set for
    every key (16 to 32 bits per key, a few MiB: it stays in cache), so most shingles of a clean
    document are turned away by one bit. The others are looked up through `buckets`, which indexes
    `keys` by their top bits: keys[buckets[t]:buckets[t + 1]] are those with `key >> shift == t`,
    about one per bucket. Per hit: the document, the index of the key, and the shingle's byte
    range within its document. Returns the number of hits; only the first len(hit_doc) are
    written, so a caller that gets more than that calls again with room for them all.
    """
    cap = hit_doc.shape[0]
    nh = 0
    for d in range(offsets.shape[0] - 1):
        lo, hi = offsets[d], offsets[d + 1]
        ntok, tok_start, tok_end, pre_start, inv_start, pre_end = _tokens(data, lo, hi)
        for s in range(ntok - ngram + 1):
            e = s + ngram - 1
            h = _shingle(tok_start, tok_end, pre_start, inv_start, pre_end, s, e)
            bit = h >> bitmap_shift
            if (bitmap[bit >> _S6] >> (bit & _LOW6)) & _ONE == _ZERO:
                continue
            t = h >> shift
            for j in range(buckets[t], buckets[t + 1]):
                if keys[j] >= h:
                    if keys[j] == h:
                        if nh < cap:
                            hit_doc[nh] = d
                            hit_key[nh] = j
                            hit_start[nh] = tok_start[s]
                            hit_end[nh] = tok_end[e]
                        nh += 1
                    break
    return nh
